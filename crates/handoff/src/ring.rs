//! The ring hand-off: an LMAX-Disruptor-style ring buffer written here (the `disruptor` crate
//! has no blocking wait strategy and no work pool; see the field notes).
//!
//! Mechanism: `slots` (a power of two) pre-allocated cells. A producer claims the next
//! sequence with one `fetch_add` on the claim cursor (multi-producer), waits until the slowest
//! handler is less than a ring behind (LMAX parks 1 ns per try; here: spin, yield, then 50 µs
//! sleeps), writes the slot and marks it published with its sequence (LMAX's availability
//! buffer), then signals the wait strategy. K handlers each keep their own sequence:
//! with [`Dispatch::Modulo`] every handler walks every sequence and processes those with
//! `seq % K == id` (the idiom of the Java code the seeds used); with [`Dispatch::WorkPool`]
//! handlers claim sequences from a shared work cursor, so each item goes to the first free
//! handler (LMAX's `WorkerPool`). Requests queue in the slots; idle handlers wait on the next
//! sequence with the [`WaitStrategy`] - [`WaitStrategy::Blocking`] (a mutex and condition
//! variable, the Java default, so one wake-up per publish while handlers sleep),
//! [`WaitStrategy::Yielding`] or [`WaitStrategy::BusySpin`] (a core per handler: never the
//! default on a 2-core machine). Expected bottleneck: with blocking waits, the futex wake-up per
//! publish (it behaves like a queue); with spinning, the cores the handlers burn.

use crate::{check, spawn, Channel, ConfigError};
use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    /// Lock + condition variable (LMAX `BlockingWaitStrategy`, the Java default).
    Blocking,
    /// Spin briefly, then `sched_yield` (LMAX `YieldingWaitStrategy`).
    Yielding,
    /// Spin on the sequence (LMAX `BusySpinWaitStrategy`): burns a core per idle handler.
    BusySpin,
}

impl WaitStrategy {
    pub const ALL: [WaitStrategy; 3] = [WaitStrategy::Blocking, WaitStrategy::Yielding, WaitStrategy::BusySpin];

    pub fn as_str(self) -> &'static str {
        match self {
            WaitStrategy::Blocking => "blocking",
            WaitStrategy::Yielding => "yielding",
            WaitStrategy::BusySpin => "busy-spin",
        }
    }

    pub fn parse(s: &str) -> Option<WaitStrategy> {
        Self::ALL.into_iter().find(|w| w.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Every handler sees every sequence and takes `seq % K == id`.
    Modulo,
    /// Handlers claim sequences from a shared cursor: the first free handler takes the next item.
    WorkPool,
}

impl Dispatch {
    pub const ALL: [Dispatch; 2] = [Dispatch::Modulo, Dispatch::WorkPool];

    pub fn as_str(self) -> &'static str {
        match self {
            Dispatch::Modulo => "modulo",
            Dispatch::WorkPool => "work-pool",
        }
    }

    pub fn parse(s: &str) -> Option<Dispatch> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Number of slots, a power of two.
    pub slots: usize,
    pub handlers: usize,
    pub wait: WaitStrategy,
    pub dispatch: Dispatch,
}

impl RingConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check(
            "ring_size",
            self.slots,
            self.slots.is_power_of_two() && (2..=1 << 24).contains(&self.slots),
            "a power of two in 2..=16777216",
        )?;
        check("handlers", self.handlers, (1..=4096).contains(&self.handlers), "an integer in 1..=4096")
    }
}

/// One cache line per hot counter, so producers and handlers do not share lines.
#[repr(align(64))]
struct Padded(AtomicI64);

struct Ring<T> {
    mask: i64,
    size: i64,
    values: Box<[UnsafeCell<Option<T>>]>,
    /// `published[i]` holds the sequence last published into slot i (-1: none yet).
    published: Box<[AtomicI64]>,
    /// Last sequence claimed by a producer.
    claim: Padded,
    /// Per handler: every sequence up to this one is done with (its slot may be reused).
    done: Box<[Padded]>,
    /// Work pool: last sequence claimed by a handler.
    work: Padded,
    handlers: usize,
    dispatch: Dispatch,
    wait: WaitStrategy,
    /// Blocking strategy: handlers sleeping (or about to) on `signal`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    signal: Condvar,
}

// SAFETY: a slot's value is written only by the producer that claimed its sequence, after every
// handler has moved past the slot's previous sequence (gating), and taken only by the one handler
// the dispatch assigns that sequence to, after the Release/Acquire pair on `published`. No two
// threads access one value at the same time.
unsafe impl<T: Send> Sync for Ring<T> {}
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    fn new(c: &RingConfig) -> Self {
        Ring {
            mask: c.slots as i64 - 1,
            size: c.slots as i64,
            values: (0..c.slots).map(|_| UnsafeCell::new(None)).collect(),
            published: (0..c.slots).map(|_| AtomicI64::new(-1)).collect(),
            claim: Padded(AtomicI64::new(-1)),
            done: (0..c.handlers).map(|_| Padded(AtomicI64::new(-1))).collect(),
            work: Padded(AtomicI64::new(-1)),
            handlers: c.handlers,
            dispatch: c.dispatch,
            wait: c.wait,
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            signal: Condvar::new(),
        }
    }

    fn slot(&self, seq: i64) -> usize {
        (seq & self.mask) as usize
    }

    fn slowest(&self) -> i64 {
        self.done.iter().map(|d| d.0.load(Ordering::Acquire)).min().unwrap_or(i64::MAX)
    }

    fn is_published(&self, seq: i64) -> bool {
        self.published[self.slot(seq)].load(Ordering::SeqCst) == seq
    }

    fn publish(&self, item: T) {
        let seq = self.claim.0.fetch_add(1, Ordering::AcqRel) + 1;
        // Wait until every handler is done with the slot's previous sequence.
        let wrap = seq - self.size;
        let mut tries = 0u32;
        while wrap > self.slowest() {
            backoff(&mut tries);
        }
        // SAFETY: see `impl Sync`: this producer owns sequence `seq` and the slot is free.
        unsafe { *self.values[self.slot(seq)].get() = Some(item) };
        self.published[self.slot(seq)].store(seq, Ordering::SeqCst);
        if self.wait == WaitStrategy::Blocking && self.sleepers.load(Ordering::SeqCst) > 0 {
            // LMAX signals all waiters: with modulo dispatch every handler wakes to look.
            let _guard = self.lock.lock().unwrap();
            self.signal.notify_all();
        }
    }

    /// Wait until `seq` is published, with the configured strategy.
    fn wait_for(&self, seq: i64) {
        let mut spins = 0u32;
        while !self.is_published(seq) {
            match self.wait {
                WaitStrategy::BusySpin => std::hint::spin_loop(),
                WaitStrategy::Yielding => {
                    if spins < 100 {
                        spins += 1;
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                WaitStrategy::Blocking => {
                    let mut guard = self.lock.lock().unwrap();
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    while !self.is_published(seq) {
                        guard = self.signal.wait(guard).unwrap();
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// Take the value of a published sequence assigned to the caller.
    fn take(&self, seq: i64) -> T {
        // SAFETY: see `impl Sync`: the caller is the one handler assigned `seq`, now published.
        unsafe { (*self.values[self.slot(seq)].get()).take().expect("a published slot holds a value") }
    }

    fn run_handler(&self, id: usize, mut handler: impl FnMut(T)) {
        let done = &self.done[id].0;
        match self.dispatch {
            Dispatch::Modulo => {
                let k = self.handlers as i64;
                let mut next = 0i64;
                loop {
                    self.wait_for(next);
                    if next % k == id as i64 {
                        let item = self.take(next);
                        handler(item);
                    }
                    done.store(next, Ordering::Release);
                    next += 1;
                }
            }
            Dispatch::WorkPool => loop {
                let seq = self.work.0.fetch_add(1, Ordering::AcqRel) + 1;
                // Everything before the claimed sequence is done with, as far as this handler goes.
                done.store(seq - 1, Ordering::Release);
                self.wait_for(seq);
                let item = self.take(seq);
                handler(item);
            },
        }
    }
}

/// A producer waiting for space: spin, then yield, then sleep (LMAX parks the thread 1 ns per
/// try, which Linux rounds up to tens of microseconds).
fn backoff(tries: &mut u32) {
    *tries += 1;
    if *tries < 64 {
        std::hint::spin_loop();
    } else if *tries < 128 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

impl<T: Send> Channel<T> for Ring<T> {
    fn push(&self, item: T) {
        self.publish(item)
    }
}

pub(crate) fn start<T, H>(c: &RingConfig, name: &str, make: impl Fn(usize) -> H) -> io::Result<Arc<dyn Channel<T>>>
where
    T: Send + 'static,
    H: FnMut(T) + Send + 'static,
{
    assert!(c.validate().is_ok(), "invalid ring configuration {c:?}");
    let ring = Arc::new(Ring::new(c));
    for i in 0..c.handlers {
        let (ring, handler) = (ring.clone(), make(i));
        spawn(format!("{name}-{i}"), move || ring.run_handler(i, handler))?;
    }
    Ok(ring)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in WaitStrategy::ALL {
            assert_eq!(WaitStrategy::parse(w.as_str()), Some(w));
        }
        for d in Dispatch::ALL {
            assert_eq!(Dispatch::parse(d.as_str()), Some(d));
        }
        assert_eq!(WaitStrategy::parse("sleep"), None);
    }

    #[test]
    fn validation_requires_a_power_of_two() {
        let c = RingConfig { slots: 1000, handlers: 4, wait: WaitStrategy::Blocking, dispatch: Dispatch::Modulo };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "ring_size: expected a power of two in 2..=16777216, got 1000"
        );
    }
}
