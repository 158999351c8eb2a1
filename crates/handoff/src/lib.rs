//! The message-passing axis of server architectures: how a unit of work (a connection, a
//! request) passes from the thread that found it to the K handler threads that process it.
//!
//! Seed 000 (§5.2) crosses four front-ends with three mechanisms, each written once here:
//!
//! * [`queue`]: a FIFO (bounded or unbounded) in front of a pool of K threads; handlers take up
//!   to `batch` items per dequeue (SEDA's batching factor). Requests queue in the FIFO; idle
//!   handlers block on a condition variable; the bottleneck is the lock shared by producers and
//!   consumers.
//! * [`ring`]: an LMAX-Disruptor ring buffer written here (power-of-two slots, a claim cursor,
//!   per-slot publication marks, per-handler sequences), with the Java default blocking wait
//!   strategy plus yielding and busy-spin ones, and modulo or work-pool dispatch to K handlers.
//!   Requests queue in the slots; idle handlers block (or yield, or spin) on the next sequence;
//!   producers wait when the slowest handler is a whole ring behind.
//! * [`actor`]: K actors, each with a bounded mailbox and its own state, run by a dispatcher
//!   pool that processes up to `batch` messages of one actor before moving on (Akka's
//!   "throughput"); an actor never runs on two threads at once. Requests queue in mailboxes;
//!   senders block on a full mailbox; idle dispatchers block on the ready-actor queue.
//!
//! [`start`] builds any of them from a [`HandOffSpec`] and returns a [`Sender`]. Every
//! [`Sender::send`] counts one hand-off in `archlab_metrics::counters` (the structural metric
//! of seed 001) and keeps a backlog count (items sent, not yet taken by a handler), which a
//! blocking front-end uses to decide whether keep-alive connections must yield their handler.

pub mod actor;
pub mod queue;
pub mod ring;

pub use actor::ActorConfig;
pub use queue::{Queue, QueueConfig};
pub use ring::{Dispatch, RingConfig, WaitStrategy};

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Which mechanism, with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandOffSpec {
    Queue(QueueConfig),
    Ring(RingConfig),
    Actor(ActorConfig),
}

impl HandOffSpec {
    /// Number of handler threads (queue, ring) or dispatcher threads (actor) it starts.
    pub fn threads(&self) -> usize {
        match self {
            HandOffSpec::Queue(c) => c.handlers,
            HandOffSpec::Ring(c) => c.handlers,
            HandOffSpec::Actor(c) => c.dispatchers,
        }
    }
}

/// The producer side of a started hand-off. Cheap to clone; every clone feeds the same handlers.
pub struct Sender<T> {
    channel: Arc<dyn Channel<T>>,
    backlog: Arc<AtomicUsize>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender { channel: self.channel.clone(), backlog: self.backlog.clone() }
    }
}

impl<T> Sender<T> {
    /// Hand `item` to the handlers; blocks while a bounded queue, ring or mailbox is full.
    pub fn send(&self, item: T) {
        archlab_metrics::counters::count_handoff();
        self.backlog.fetch_add(1, Ordering::AcqRel);
        self.channel.push(item);
    }

    /// Items sent and not yet taken by a handler.
    pub fn backlog(&self) -> usize {
        self.backlog.load(Ordering::Acquire)
    }
}

/// What each mechanism implements: accept one item (blocking while full).
pub(crate) trait Channel<T>: Send + Sync {
    fn push(&self, item: T);
}

/// Start the handlers of `spec` and return the sender feeding them. `make(i)` builds the
/// handler of handler thread (or actor) `i`; it runs once per item, on one thread at a time.
/// Threads are named `{name}-{i}` and run until the process ends.
pub fn start<T, F, H>(spec: &HandOffSpec, name: &str, make: F) -> io::Result<Sender<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> H,
    H: FnMut(T) + Send + 'static,
{
    let backlog = Arc::new(AtomicUsize::new(0));
    let wrap = |i: usize| {
        let mut h = make(i);
        let backlog = backlog.clone();
        move |item: T| {
            backlog.fetch_sub(1, Ordering::AcqRel);
            h(item)
        }
    };
    let channel: Arc<dyn Channel<T>> = match spec {
        HandOffSpec::Queue(c) => queue::start(c, name, wrap)?,
        HandOffSpec::Ring(c) => ring::start(c, name, wrap)?,
        HandOffSpec::Actor(c) => actor::start(c, name, wrap)?,
    };
    Ok(Sender { channel, backlog })
}

/// A configuration value out of its allowed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub parameter: &'static str,
    pub allowed: &'static str,
    pub value: usize,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: expected {}, got {}", self.parameter, self.allowed, self.value)
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn check(parameter: &'static str, value: usize, ok: bool, allowed: &'static str) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError { parameter, allowed, value })
    }
}

pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new().name(name).spawn(f).map(|_| ())
}
