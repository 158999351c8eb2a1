//! Jobs (requests and fork children) in a slab: slots are reused, and each slot keeps the
//! capacity of its `held` vector, so a long run allocates only while the population grows.

use crate::model::{Pc, StationId};

/// No parent: a top-level request.
pub const NO_PARENT: u32 = u32::MAX;

/// One job in flight.
#[derive(Clone, Debug, Default)]
pub struct Job {
    pub pc: Pc,
    pub source: u16,
    pub client: u32,
    /// When the request was issued (for a child: when it was forked).
    pub born: f64,
    /// Stations whose server (FCFS) or presence (PS, delay) the job holds, with the time it
    /// arrived there: a stack, because a call holds its caller's server around the callee.
    pub held: Vec<(StationId, f64)>,
    pub parent: u32,
    /// Fork children still running.
    pub pending: u32,
    /// A part of the request was dropped: it ends as an error, not as a response time.
    pub failed: bool,
    in_use: bool,
}

impl Job {
    pub fn is_top_level(&self) -> bool {
        self.parent == NO_PARENT
    }
}

#[derive(Default)]
pub struct Jobs {
    slots: Vec<Job>,
    free: Vec<u32>,
}

impl Jobs {
    pub fn alloc(&mut self, pc: Pc, source: u16, client: u32, born: f64, parent: u32) -> u32 {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.slots.push(Job::default());
                self.slots.len() as u32 - 1
            }
        };
        let job = &mut self.slots[id as usize];
        job.pc = pc;
        job.source = source;
        job.client = client;
        job.born = born;
        job.held.clear();
        job.parent = parent;
        job.pending = 0;
        job.failed = false;
        job.in_use = true;
        id
    }

    pub fn free(&mut self, id: u32) {
        debug_assert!(self.slots[id as usize].in_use);
        self.slots[id as usize].in_use = false;
        self.free.push(id);
    }

    #[inline]
    pub fn get(&self, id: u32) -> &Job {
        &self.slots[id as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, id: u32) -> &mut Job {
        &mut self.slots[id as usize]
    }

    /// Jobs in flight.
    pub fn live(&self) -> impl Iterator<Item = &Job> {
        self.slots.iter().filter(|j| j.in_use)
    }
}
