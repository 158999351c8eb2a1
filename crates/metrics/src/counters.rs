//! Structural counters a server keeps about itself: socket read and write calls, and hand-offs
//! (a unit of work - a connection, a request, a write - passed from one thread to another: a
//! queue push, a ring publish, an actor `tell`, a return to the poller), summed over every
//! thread that ever ran, exited ones included. Hand-offs per request are seed 001's structural
//! invariant (Table 3: 0 for SingleT-Async, 2 for sTomcat-Async-Fix, 4 for sTomcat-Async).
//!
//! The kernel does not count them for us: `/proc/<pid>/io`'s `syscr`/`syscw` count
//! `read`/`write` on files but not `recv`/`send` on sockets, which is what Rust's `TcpStream`
//! uses. Each thread increments its own cache-line-aligned block with relaxed atomics (no
//! contention, no lock on the hot path); the blocks are registered once per thread in a global
//! list, and a thread that exits folds its counts into the list's retired totals, so a report
//! sums them all while a thread-per-connection server does not grow the list without bound.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// One thread's counters, on a cache line of its own so threads never share one.
#[repr(align(64))]
#[derive(Default)]
pub struct ThreadCounters {
    reads: AtomicU64,
    writes: AtomicU64,
    handoffs: AtomicU64,
}

/// The sums over all threads.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Totals {
    pub read_syscalls: u64,
    pub write_syscalls: u64,
    pub handoffs: u64,
}

/// Live threads' counters and the totals of threads that have exited.
#[derive(Default)]
struct Registry {
    live: Vec<Arc<ThreadCounters>>,
    retired: Totals,
}

fn registry() -> &'static Mutex<Registry> {
    static ALL: OnceLock<Mutex<Registry>> = OnceLock::new();
    ALL.get_or_init(Mutex::default)
}

impl ThreadCounters {
    fn add_to(&self, t: &mut Totals) {
        t.read_syscalls += self.reads.load(Ordering::Relaxed);
        t.write_syscalls += self.writes.load(Ordering::Relaxed);
        t.handoffs += self.handoffs.load(Ordering::Relaxed);
    }
}

/// The calling thread's registration; dropping it (at thread exit) retires its counts.
struct Local(Arc<ThreadCounters>);

impl Local {
    fn register() -> Local {
        let c = Arc::new(ThreadCounters::default());
        registry().lock().unwrap().live.push(c.clone());
        Local(c)
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Under the lock, so that `totals` never sees the counts twice or not at all.
        let mut r = registry().lock().unwrap();
        let Registry { live, retired } = &mut *r;
        self.0.add_to(retired);
        live.retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

thread_local! {
    static MINE: Local = Local::register();
}

/// Count one read-like call on a socket (`read`, `recv`), whatever it returned.
#[inline]
pub fn count_read() {
    MINE.with(|c| c.0.reads.fetch_add(1, Ordering::Relaxed));
}

/// Count one write-like call on a socket (`write`, `send`), whatever it returned.
#[inline]
pub fn count_write() {
    MINE.with(|c| c.0.writes.fetch_add(1, Ordering::Relaxed));
}

/// Count one hand-off of work from the calling thread to another thread.
#[inline]
pub fn count_handoff() {
    MINE.with(|c| c.0.handoffs.fetch_add(1, Ordering::Relaxed));
}

/// Sums over every thread of the process that counted anything, live or exited.
pub fn totals() -> Totals {
    let r = registry().lock().unwrap();
    let mut t = r.retired;
    for c in &r.live {
        c.add_to(&mut t);
    }
    t
}

/// Rare events at a server's limits, counted process-wide (one shared atomic each: they are
/// off the hot path). Reported beside the socket calls so that a run shows what was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitEvent {
    /// A connection accepted only to be closed at once because the process had run out of file
    /// descriptors (EMFILE/ENFILE): the acceptor freed its reserve descriptor to take it.
    ClosedOutOfDescriptors,
    /// An accept that failed for lack of descriptors with no reserve left to make room: the
    /// acceptor stopped accepting for a while instead of retrying at once.
    AcceptPaused,
    /// A request that had not fully arrived within the request timeout: answered 408, closed.
    RequestTimedOut,
    /// A connection closed after the idle timeout with no request in progress.
    IdleClosed,
    /// An acceptor stopped accepting because the server held `max_connections` connections
    /// (once per stop: it resumes when one closes).
    AcceptCapped,
    /// A response whose body was larger than `max_output_bytes`, produced in parts.
    ResponseStreamed,
    /// A connection that stopped answering its further requests because its unsent output was
    /// over `max_output_bytes` (once per stop: it resumes when the output has drained).
    OutputWaited,
}

const LIMIT_EVENTS: usize = 7;
static LIMITS: [AtomicU64; LIMIT_EVENTS] = [const { AtomicU64::new(0) }; LIMIT_EVENTS];

/// The counts of every [`LimitEvent`], as reported in the `rusage` line.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct LimitTotals {
    pub closed_out_of_descriptors: u64,
    pub accept_paused: u64,
    pub request_timeouts: u64,
    pub idle_closed: u64,
    pub accept_capped: u64,
    pub responses_streamed: u64,
    pub output_waits: u64,
}

/// Count one event at a limit.
pub fn count_limit(event: LimitEvent) {
    LIMITS[event as usize].fetch_add(1, Ordering::Relaxed);
}

/// Counts of the events at limits since the process started.
pub fn limit_totals() -> LimitTotals {
    let get = |e: LimitEvent| LIMITS[e as usize].load(Ordering::Relaxed);
    LimitTotals {
        closed_out_of_descriptors: get(LimitEvent::ClosedOutOfDescriptors),
        accept_paused: get(LimitEvent::AcceptPaused),
        request_timeouts: get(LimitEvent::RequestTimedOut),
        idle_closed: get(LimitEvent::IdleClosed),
        accept_capped: get(LimitEvent::AcceptCapped),
        responses_streamed: get(LimitEvent::ResponseStreamed),
        output_waits: get(LimitEvent::OutputWaited),
    }
}

/// Number of threads currently registered (for tests of the retirement).
pub fn live_threads() -> usize {
    registry().lock().unwrap().live.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_include_exited_threads() {
        let before = totals();
        let live_before = live_threads();
        let handles: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1000 {
                        count_read();
                    }
                    count_write();
                    count_handoff();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let after = totals();
        // Other tests of this binary may count concurrently: at least ours are there.
        assert!(after.read_syscalls - before.read_syscalls >= 4000);
        assert!(after.write_syscalls - before.write_syscalls >= 4);
        assert!(after.handoffs - before.handoffs >= 4);
        // The exited threads left the live list (thread-local destructors run before join
        // returns; no other test of this crate counts).
        assert_eq!(live_threads(), live_before);
    }
}
