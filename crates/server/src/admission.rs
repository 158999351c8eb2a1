//! The cap on the connections a server holds at once, shared by all its acceptors.
//!
//! The cap on connections (`max_connections`): at the cap a
//! server stops accepting, as nginx (`worker_connections`), HAProxy (`maxconn`) and Tomcat
//! (`maxConnections`) do, rather than accept and close. New connections wait in the listen
//! backlog (the kernel completes their handshake; beyond the backlog it drops SYNs and
//! clients retry), so a closed-loop client sees a longer response time, not an error. Every
//! acceptor takes a place ([`Admitted`]) before it accepts and the connection keeps it until it
//! is closed: a blocking acceptor parks on a condition variable until a place is free, a
//! reactor stops watching its listener and is woken (through its inbox) when one is, and
//! io_uring rings post one accept at a time, each holding its place, and post the next when one
//! of their connections closes. Each stop counts `LimitEvent::AcceptCapped`.
//! (Out of descriptors, the acceptors shed connections instead: see `acceptor.rs`.)

use archlab_metrics::counters::{count_limit, LimitEvent};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The cap on connections a server holds at once, shared by all its acceptors (see the module
/// comment). Without a cap (`max_connections = 0`) nothing is counted.
pub struct Admission {
    max: usize,
    open: AtomicUsize,
    /// An acceptor stopped at the cap and waits to hear that a place is free.
    stopped: AtomicBool,
    lock: Mutex<()>,
    freed: Condvar,
    /// How to wake the reactors that stopped watching their listener.
    wakers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// A connection's place under the cap, given back when it is dropped (with the connection).
pub struct Admitted(Option<Arc<Admission>>);

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(admission) = self.0.take() {
            admission.release();
        }
    }
}

impl Admission {
    /// The cap of a server with `max_connections` (0: none).
    pub fn new(max_connections: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max: max_connections,
            open: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            lock: Mutex::new(()),
            freed: Condvar::new(),
            wakers: Mutex::new(Vec::new()),
        })
    }

    /// Whether there is a cap at all.
    pub fn capped(&self) -> bool {
        self.max > 0
    }

    /// Whether a place is free now.
    pub fn has_room(&self) -> bool {
        self.max == 0 || self.open.load(Ordering::SeqCst) < self.max
    }

    /// Connections holding a place.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Take a place for one connection, or None at the cap (then whoever frees a place next
    /// tells the stopped acceptors: [`Admission::on_free`], the condition variable).
    pub fn try_admit(self: &Arc<Self>) -> Option<Admitted> {
        if self.max == 0 {
            return Some(Admitted(None));
        }
        let mut n = self.open.load(Ordering::SeqCst);
        loop {
            if n >= self.max {
                self.stopped.store(true, Ordering::SeqCst);
                // A place freed before `stopped` was seen set would tell nobody: look again.
                n = self.open.load(Ordering::SeqCst);
                if n >= self.max {
                    return None;
                }
            }
            match self.open.compare_exchange_weak(n, n + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some(Admitted(Some(self.clone()))),
                Err(now) => n = now,
            }
        }
    }

    /// Take a place, waiting until one is free (blocking acceptors).
    pub fn admit_blocking(self: &Arc<Self>) -> Admitted {
        if let Some(a) = self.try_admit() {
            return a;
        }
        count_limit(LimitEvent::AcceptCapped);
        let mut guard = self.lock.lock().unwrap();
        loop {
            if let Some(a) = self.try_admit() {
                return a;
            }
            guard = self.freed.wait(guard).unwrap();
        }
    }

    /// Call `wake` whenever a place frees after an acceptor stopped at the cap.
    pub fn on_free(&self, wake: impl Fn() + Send + Sync + 'static) {
        if self.max > 0 {
            self.wakers.lock().unwrap().push(Box::new(wake));
        }
    }

    fn release(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        if self.stopped.swap(false, Ordering::SeqCst) {
            // Under the lock, so that a blocking acceptor between its failed try and its wait
            // cannot miss the notification.
            drop(self.lock.lock().unwrap());
            self.freed.notify_all();
            for wake in self.wakers.lock().unwrap().iter() {
                wake();
            }
        }
    }
}
