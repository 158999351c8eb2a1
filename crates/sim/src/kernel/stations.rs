//! Run-time state of stations. FCFS: busy servers and one FIFO queue of jobs waiting for a
//! server. Processor sharing: every job present is served at rate min(1, servers / n); the
//! station keeps a virtual clock that advances at that rate, and a job with work w arriving at
//! virtual time v leaves when the virtual clock reaches v + w, so only the smallest finishing
//! virtual time matters and one heap holds them. Each change reschedules the next departure with
//! a new generation number; events of older generations are ignored when they fire. Delay
//! stations need no state beyond their counters.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::recorder::{StationRecorder, TimeAverage};
use crate::model::Station;
use crate::spec::Discipline;

pub struct Fcfs {
    pub busy: u32,
    pub queue: VecDeque<u32>,
}

#[derive(Clone, Copy)]
struct Finish {
    virtual_time: f64,
    seq: u64,
    job: u32,
}

impl Ord for Finish {
    fn cmp(&self, other: &Self) -> Ordering {
        other.virtual_time.total_cmp(&self.virtual_time).then(other.seq.cmp(&self.seq))
    }
}
impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Finish {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Finish {}

pub struct Ps {
    servers: f64,
    finishes: BinaryHeap<Finish>,
    virtual_time: f64,
    last: f64,
    seq: u64,
    pub generation: u32,
}

impl Ps {
    /// Service rate each job present receives.
    fn rate(&self) -> f64 {
        let n = self.finishes.len() as f64;
        if n <= self.servers {
            1.0
        } else {
            self.servers / n
        }
    }

    fn advance(&mut self, now: f64) {
        if !self.finishes.is_empty() {
            self.virtual_time += (now - self.last) * self.rate();
        }
        self.last = now;
    }

    /// A job with `work` arrives; returns the (time, generation) of the next departure.
    pub fn join(&mut self, now: f64, job: u32, work: f64) -> (f64, u32) {
        self.advance(now);
        self.seq += 1;
        self.finishes.push(Finish { virtual_time: self.virtual_time + work, seq: self.seq, job });
        self.next(now).expect("a job was just added")
    }

    /// The departure scheduled for `generation` is due: the job that leaves, and the next
    /// departure if any job remains. `None` when the generation is stale.
    pub fn depart(&mut self, now: f64, generation: u32) -> Option<(u32, Option<(f64, u32)>)> {
        if generation != self.generation {
            return None;
        }
        self.advance(now);
        let first = self.finishes.pop().expect("a current departure has a job");
        // Snap the clock to the departing job's finish, so rounding cannot accumulate.
        self.virtual_time = first.virtual_time;
        Some((first.job, self.next(now)))
    }

    fn next(&mut self, now: f64) -> Option<(f64, u32)> {
        self.generation = self.generation.wrapping_add(1);
        let first = self.finishes.peek()?;
        let remaining = (first.virtual_time - self.virtual_time).max(0.0);
        Some((now + remaining / self.rate(), self.generation))
    }
}

pub enum Kind {
    Fcfs(Fcfs),
    Ps(Ps),
    Delay,
}

/// One station at run time.
pub struct StationState {
    pub servers: u32,
    pub capacity: u32,
    pub present: u32,
    /// Jobs present per class (source).
    pub present_by_class: Vec<u32>,
    /// FCFS: servers held per class (a caller holds its server through the callee).
    pub busy_by_class: Vec<u32>,
    pub kind: Kind,
    pub rec: StationRecorder,
    /// One class at an FCFS or delay station: the class's jobs present and servers busy are
    /// the station's, set at the same instants to the same levels, so their time averages are
    /// the station's bit for bit and are not kept twice (see [`StationState::class_levels`]).
    /// Under PS a class's busy level is present x (busy / present), which rounds differently.
    mirrored: bool,
}

impl StationState {
    pub fn new(s: &Station, classes: usize) -> Self {
        let kind = match s.discipline {
            Discipline::Fcfs => Kind::Fcfs(Fcfs { busy: 0, queue: VecDeque::new() }),
            Discipline::Ps => Kind::Ps(Ps {
                servers: s.servers as f64,
                finishes: BinaryHeap::new(),
                virtual_time: 0.0,
                last: 0.0,
                seq: 0,
                generation: 0,
            }),
            Discipline::Delay => Kind::Delay,
        };
        StationState {
            servers: s.servers,
            capacity: s.capacity,
            present: 0,
            present_by_class: vec![0; classes],
            busy_by_class: vec![0; classes],
            mirrored: classes == 1 && !matches!(kind, Kind::Ps(_)),
            kind,
            rec: StationRecorder::new(classes),
        }
    }

    pub fn is_full(&self) -> bool {
        self.present >= self.capacity
    }

    /// Jobs in service (busy servers) given `present` jobs.
    pub fn in_service(&self) -> u32 {
        match &self.kind {
            Kind::Fcfs(f) => f.busy,
            Kind::Ps(_) => self.present.min(self.servers),
            Kind::Delay => self.present,
        }
    }

    /// Re-read an FCFS class's server count after it took a server from the queue.
    pub fn refresh_class_busy(&mut self, now: f64, class: usize) {
        if !self.mirrored {
            self.rec.classes[class].busy.set(now, self.busy_by_class[class] as f64);
        }
    }

    /// A class's (jobs present, servers busy) time averages.
    pub fn class_levels(&self, class: usize) -> (&TimeAverage, &TimeAverage) {
        if self.mirrored {
            (&self.rec.present, &self.rec.busy)
        } else {
            (&self.rec.classes[class].present, &self.rec.classes[class].busy)
        }
    }

    /// Account for one more (`+1`) or one fewer (`-1`) job of `class` present at `now`. FCFS
    /// callers update `busy_by_class` first.
    pub fn change_present(&mut self, now: f64, delta: i32, class: usize) {
        self.present = (self.present as i32 + delta) as u32;
        self.present_by_class[class] = (self.present_by_class[class] as i32 + delta) as u32;
        self.rec.present.set(now, self.present as f64);
        let busy = self.in_service() as f64;
        self.rec.busy.set(now, busy);
        // A class's servers: FCFS counts them; under PS each job present gets rate
        // min(1, servers / present), so a class holds its jobs times that share; at a delay
        // station every job is in service. The PS share changes for every class at once.
        match &self.kind {
            _ if self.mirrored => {}
            Kind::Fcfs(_) => {
                let c = &mut self.rec.classes[class];
                c.present.set(now, self.present_by_class[class] as f64);
                c.busy.set(now, self.busy_by_class[class] as f64);
            }
            Kind::Ps(_) => {
                let share = if self.present == 0 { 0.0 } else { busy / self.present as f64 };
                for (c, &n) in self.rec.classes.iter_mut().zip(&self.present_by_class) {
                    c.present.set(now, n as f64);
                    c.busy.set(now, n as f64 * share);
                }
            }
            Kind::Delay => {
                let c = &mut self.rec.classes[class];
                c.present.set(now, self.present_by_class[class] as f64);
                c.busy.set(now, self.present_by_class[class] as f64);
            }
        }
    }
}
