//! `hybrid`: seed 001's HybridNetty (§5.2). Netty's structure (an acceptor + N event loops,
//! `frontend::multi_reactor`) with a per-loop [`Router`] that picks, per request class (path
//! and query), one of two write paths: the Netty path (stop at `EAGAIN` and wait for
//! writability, at most `write_spin` calls per round) for classes whose responses write-spin,
//! and the single-thread path (write inline and spin through `EAGAIN`, no bookkeeping) for the
//! others.
//!
//! Mechanism: a class seen for the first time is profiled (the warm-up of the paper, which
//! "passively profile[s] each incoming request"): its response goes the safe Netty way and
//! the first flush tells whether it fits the send buffer (one `write` call, no `EAGAIN`) or
//! write-spins (several calls, or `EAGAIN`). Later requests of the class take the path of its
//! class. Every first flush of a response is also an observation, so a misclassified class is
//! corrected at run time, as the paper's map object is "updated once HybridNetty detects a
//! request has been categorized into a wrong class": a non-spin class whose response spun on
//! the single-thread path becomes write-spin, and a write-spin class whose response went out
//! in one call on the Netty path becomes non-spin. With pipelined requests the class of the
//! last request answered in a turn decides for the responses flushed together. Requests queue
//! in socket buffers and briefly in the loops' inboxes; loops block in `epoll_wait`. Expected
//! bottleneck: the loops' cores, with Netty's robustness to large responses and the single
//! thread's low overhead on small ones. The map is per loop (no lock, no sharing) and bounded
//! by [`MAX_CLASSES`] (beyond it new classes are profiled on every request rather than stored).

use crate::conn::{FlushReport, Flushed, WritePolicy};
use crate::frontend::reactor::WritePath;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Classes remembered per loop; a workload with unbounded distinct targets must not grow the
/// map without bound.
pub const MAX_CLASSES: usize = 4096;

/// The path a response takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Path {
    /// Unknown class: the Netty path, and the first flush classifies it.
    #[default]
    Profile,
    /// Known write-spin class: the Netty path.
    Netty,
    /// Known non-spin class: the single-thread path.
    Inline,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    WriteSpin,
    NonSpin,
}

/// Process-wide counts of routing decisions (for tests and diagnosis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouteStats {
    pub profiled: u64,
    pub netty: u64,
    pub inline: u64,
    /// Classes whose class changed after an observation contradicted it.
    pub corrected: u64,
}

static PROFILED: AtomicU64 = AtomicU64::new(0);
static NETTY: AtomicU64 = AtomicU64::new(0);
static INLINE: AtomicU64 = AtomicU64::new(0);
static CORRECTED: AtomicU64 = AtomicU64::new(0);

pub fn stats() -> RouteStats {
    RouteStats {
        profiled: PROFILED.load(Ordering::Relaxed),
        netty: NETTY.load(Ordering::Relaxed),
        inline: INLINE.load(Ordering::Relaxed),
        corrected: CORRECTED.load(Ordering::Relaxed),
    }
}

/// Process-wide write calls per path and the direction of each correction: which path the
/// write calls of a run went to, and whether the class map flips back and forth (a class that
/// is corrected to non-spin, spins on the single-thread path, is corrected back, ...), which
/// the routing counts alone cannot tell. Reported in the engine's `rusage` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PathWrites {
    /// Write calls of responses on each path (every flush, not only the first).
    pub profile_calls: u64,
    pub netty_calls: u64,
    pub inline_calls: u64,
    /// Responses whose first flush on the single-thread path hit `EAGAIN` (they then spin
    /// until the client has read enough: the cost the router exists to avoid).
    pub inline_spun: u64,
    /// Corrections to write-spin and to non-spin.
    pub to_write_spin: u64,
    pub to_non_spin: u64,
}

static PROFILE_CALLS: AtomicU64 = AtomicU64::new(0);
static NETTY_CALLS: AtomicU64 = AtomicU64::new(0);
static INLINE_CALLS: AtomicU64 = AtomicU64::new(0);
static INLINE_SPUN: AtomicU64 = AtomicU64::new(0);
static TO_WRITE_SPIN: AtomicU64 = AtomicU64::new(0);
static TO_NON_SPIN: AtomicU64 = AtomicU64::new(0);

pub fn path_writes() -> PathWrites {
    PathWrites {
        profile_calls: PROFILE_CALLS.load(Ordering::Relaxed),
        netty_calls: NETTY_CALLS.load(Ordering::Relaxed),
        inline_calls: INLINE_CALLS.load(Ordering::Relaxed),
        inline_spun: INLINE_SPUN.load(Ordering::Relaxed),
        to_write_spin: TO_WRITE_SPIN.load(Ordering::Relaxed),
        to_non_spin: TO_NON_SPIN.load(Ordering::Relaxed),
    }
}

/// One loop's request-class map and write paths.
pub struct Router {
    write_spin: usize,
    classes: HashMap<String, Class>,
}

impl Router {
    pub fn new(write_spin: usize) -> Router {
        Router { write_spin, classes: HashMap::new() }
    }

    /// The path for the responses of `class` (a request's path and query).
    pub fn route(&self, class: &str) -> Path {
        let path = match self.classes.get(class) {
            None => Path::Profile,
            Some(Class::WriteSpin) => Path::Netty,
            Some(Class::NonSpin) => Path::Inline,
        };
        let counter = match path {
            Path::Profile => &PROFILED,
            Path::Netty => &NETTY,
            Path::Inline => &INLINE,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        path
    }

    /// How the responses of a path are written.
    pub fn policy(&self, path: Path) -> WritePolicy {
        match path {
            Path::Profile | Path::Netty => WritePolicy::SpinLimit(self.write_spin),
            Path::Inline => WritePolicy::Spin,
        }
    }

    /// Learn from the first flush of a response of `class` sent on `path`.
    /// Learn from the first flush of a response of `class` (whatever its path): it spun when
    /// it hit `EAGAIN`, needed several calls, or stopped at the spin limit.
    pub fn observe(&mut self, class: &str, outcome: Flushed, report: FlushReport) {
        let spun = outcome != Flushed::Done || report.would_block || report.calls > 1;
        let seen = if spun { Class::WriteSpin } else { Class::NonSpin };
        let full = self.classes.len() >= MAX_CLASSES;
        match self.classes.get_mut(class) {
            Some(known) if *known != seen => {
                *known = seen;
                CORRECTED.fetch_add(1, Ordering::Relaxed);
                let direction = if spun { &TO_WRITE_SPIN } else { &TO_NON_SPIN };
                direction.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {}
            None if !full => {
                self.classes.insert(class.to_owned(), seen);
            }
            None => {}
        }
    }

    /// The class currently recorded (tests).
    pub fn is_write_spin(&self, class: &str) -> Option<bool> {
        self.classes.get(class).map(|c| *c == Class::WriteSpin)
    }
}

/// Per connection: the class and path of the responses being written, and whether their
/// first flush (the observation) is still to come.
#[derive(Default)]
pub struct Writing {
    class: String,
    path: Path,
    unobserved: bool,
}

impl WritePath for Router {
    type State = Writing;

    fn responded(&mut self, w: &mut Writing, class: &str) {
        w.class.clear();
        w.class.push_str(class);
        w.path = self.route(&w.class);
        w.unobserved = true;
    }

    fn policy(&self, w: &Writing) -> WritePolicy {
        Router::policy(self, w.path)
    }

    fn flushed(&mut self, w: &mut Writing, outcome: Flushed, report: FlushReport) {
        let calls = match w.path {
            Path::Profile => &PROFILE_CALLS,
            Path::Netty => &NETTY_CALLS,
            Path::Inline => &INLINE_CALLS,
        };
        calls.fetch_add(report.calls as u64, Ordering::Relaxed);
        if std::mem::take(&mut w.unobserved) {
            if w.path == Path::Inline && report.would_block {
                INLINE_SPUN.fetch_add(1, Ordering::Relaxed);
            }
            self.observe(&w.class, outcome, report);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIT: FlushReport = FlushReport { calls: 1, would_block: false };
    const SPUN: FlushReport = FlushReport { calls: 40, would_block: true };

    #[test]
    fn learns_each_class_then_routes_it_and_corrects_a_misclassification() {
        let mut r = Router::new(16);
        // Warm-up: unknown classes are profiled on the Netty path.
        assert_eq!(r.route("/echo?size=100"), Path::Profile);
        assert_eq!(r.policy(Path::Profile), WritePolicy::SpinLimit(16));
        r.observe("/echo?size=100", Flushed::Done, FIT);
        r.observe("/echo?size=102400", Flushed::Blocked, FlushReport { calls: 2, would_block: true });
        assert_eq!(r.route("/echo?size=100"), Path::Inline);
        assert_eq!(r.policy(Path::Inline), WritePolicy::Spin);
        assert_eq!(r.route("/echo?size=102400"), Path::Netty);
        // A small class that spun on the inline path (the client's window shrank, the data
        // grew) is corrected to the Netty path...
        r.observe("/echo?size=100", Flushed::Done, SPUN);
        assert_eq!(r.route("/echo?size=100"), Path::Netty);
        // ...and a large class that went out in one call comes back to the inline path.
        r.observe("/echo?size=102400", Flushed::Done, FIT);
        assert_eq!(r.route("/echo?size=102400"), Path::Inline);
        // Several calls without EAGAIN or a spin limit reached also count as write-spin.
        r.observe("/x", Flushed::SpinLimit, FlushReport { calls: 16, would_block: false });
        assert_eq!(r.is_write_spin("/x"), Some(true));
    }

    #[test]
    fn the_map_is_bounded() {
        let mut r = Router::new(16);
        for i in 0..MAX_CLASSES + 10 {
            r.observe(&format!("/c{i}"), Flushed::Done, FIT);
        }
        assert_eq!(r.classes.len(), MAX_CLASSES);
        assert_eq!(r.route(&format!("/c{}", MAX_CLASSES + 5)), Path::Profile);
    }
}
