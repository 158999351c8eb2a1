//! The actor hand-off: K actors with bounded mailboxes, run by a dispatcher pool (written here
//! rather than taken from ractor/kameo/actix, which would put tokio's scheduler under the result).
//!
//! Mechanism: `tell` routes each message to one of K actors (seed 000: "four handler actors"):
//! the one with the least load (messages queued plus the one running), ties broken round-robin
//! (Akka's `SmallestMailboxRoutingLogic`, which sends to an idle actor first, so that a
//! long-running message (a blocking front-end's connection) does not hold up the next one while
//! other actors are idle), and appends it to that actor's mailbox, blocking while it is full;
//! an actor that was idle is put on the ready queue. D dispatcher threads take ready actors,
//! run up to `batch` messages of one actor (Akka's dispatcher "throughput", default 5), and put
//! the actor back at the end of the ready queue if mail remains. An actor runs on one thread at
//! a time, so its state needs no lock of its own. Requests queue in mailboxes; senders block on
//! full mailboxes; idle dispatchers block on the ready queue. Expected bottleneck: a busy actor
//! serialises its share of the messages (1/K) however many dispatchers are idle.

use crate::queue::Queue;
use crate::{check, spawn, Channel, ConfigError};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorConfig {
    pub actors: usize,
    /// Mailbox capacity per actor.
    pub mailbox: usize,
    pub dispatchers: usize,
    /// Messages of one actor a dispatcher runs before moving to the next ready actor.
    pub batch: usize,
}

impl ActorConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("handlers", self.actors, (1..=4096).contains(&self.actors), "an integer in 1..=4096")?;
        check("mailbox", self.mailbox, (1..=1 << 24).contains(&self.mailbox), "an integer in 1..=16777216")?;
        check("dispatchers", self.dispatchers, (1..=4096).contains(&self.dispatchers), "an integer in 1..=4096")?;
        check("batch", self.batch, (1..=65_536).contains(&self.batch), "an integer in 1..=65536")
    }
}

struct MailState<T> {
    items: VecDeque<T>,
    /// On the ready queue or running: only one dispatcher may hold the actor.
    scheduled: bool,
}

struct Mailbox<T> {
    state: Mutex<MailState<T>>,
    not_full: Condvar,
}

struct System<T, H> {
    mailboxes: Box<[Mailbox<T>]>,
    behaviours: Box<[Mutex<H>]>,
    ready: Queue<usize>,
    /// Per actor: messages queued plus the one running.
    loads: Box<[AtomicUsize]>,
    next: AtomicUsize,
    capacity: usize,
    batch: usize,
}

impl<T: Send, H: FnMut(T) + Send> System<T, H> {
    fn tell(&self, item: T) {
        let k = self.mailboxes.len();
        let first = self.next.fetch_add(1, Ordering::Relaxed) % k;
        let a = (0..k)
            .map(|i| (first + i) % k)
            .min_by_key(|&a| self.loads[a].load(Ordering::Relaxed))
            .expect("at least one actor");
        self.loads[a].fetch_add(1, Ordering::Relaxed);
        let mb = &self.mailboxes[a];
        let mut st = mb.state.lock().unwrap();
        while st.items.len() >= self.capacity {
            st = mb.not_full.wait(st).unwrap();
        }
        st.items.push_back(item);
        if !st.scheduled {
            st.scheduled = true;
            drop(st);
            self.ready.push(a);
        }
    }

    fn dispatch_forever(&self) {
        let mut taken = Vec::with_capacity(self.batch);
        loop {
            let a = self.ready.pop();
            let mb = &self.mailboxes[a];
            {
                let mut st = mb.state.lock().unwrap();
                let n = self.batch.min(st.items.len());
                taken.extend(st.items.drain(..n));
            }
            mb.not_full.notify_all();
            {
                // Uncontended: `scheduled` keeps every other dispatcher away from this actor.
                let mut behaviour = self.behaviours[a].lock().unwrap();
                for item in taken.drain(..) {
                    (*behaviour)(item);
                    self.loads[a].fetch_sub(1, Ordering::Relaxed);
                }
            }
            let mut st = mb.state.lock().unwrap();
            if st.items.is_empty() {
                st.scheduled = false;
            } else {
                drop(st);
                self.ready.push(a);
            }
        }
    }
}

impl<T: Send, H: FnMut(T) + Send> Channel<T> for System<T, H> {
    fn push(&self, item: T) {
        self.tell(item)
    }
}

pub(crate) fn start<T, H>(c: &ActorConfig, name: &str, make: impl Fn(usize) -> H) -> io::Result<Arc<dyn Channel<T>>>
where
    T: Send + 'static,
    H: FnMut(T) + Send + 'static,
{
    assert!(c.validate().is_ok(), "invalid actor configuration {c:?}");
    let system = Arc::new(System {
        mailboxes: (0..c.actors)
            .map(|_| Mailbox {
                state: Mutex::new(MailState { items: VecDeque::new(), scheduled: false }),
                not_full: Condvar::new(),
            })
            .collect(),
        behaviours: (0..c.actors).map(|i| Mutex::new(make(i))).collect(),
        ready: Queue::new(None),
        loads: (0..c.actors).map(|_| AtomicUsize::new(0)).collect(),
        next: AtomicUsize::new(0),
        capacity: c.mailbox,
        batch: c.batch,
    });
    for i in 0..c.dispatchers {
        let system = system.clone();
        spawn(format!("{name}-{i}"), move || system.dispatch_forever())?;
    }
    Ok(system)
}
