//! The backends of a proxy as every thread shares them: address and weight, health, the count
//! of open connections and requests in flight, and the per-backend counters reported on SIGUSR1.
//!
//! Everything here is atomics (the latency histogram a short mutex), so a thread forwarding a
//! request never waits for another except on that histogram's lock, held for one increment.
//! Health is passive and active at once: [`Backend::failed`] counts consecutive failures and
//! ejects the backend at the K-th (`eject_after`), [`Backend::succeeded`] resets the count; an
//! ejected backend stays out until the health thread (`health.rs`) readmits it. In-flight
//! requests are counted by an [`InFlight`] guard, so that a request that ends in any way,
//! including a dropped connection, leaves the count right.

use archlab_metrics::hdr::{self, LatencyHistogram, LatencySummaryUs};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why an exchange with a backend failed: the error classes counted per backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The backend refused the connection (or it failed before it was established).
    Refused,
    /// The backend did not accept the connection within `connect_timeout_ms` (504).
    ConnectTimeout,
    /// The backend closed or reset the connection before any byte of its response.
    ClosedBeforeResponse,
    /// The backend sent nothing for `backend_timeout_ms` (504).
    Timeout,
    /// The backend answered something that is not an HTTP/1.x response (502).
    BadResponse,
    /// The backend closed or reset the connection in the middle of its response.
    ClosedMidResponse,
}

impl Failure {
    pub const ALL: [Failure; 6] = [
        Failure::Refused,
        Failure::ConnectTimeout,
        Failure::ClosedBeforeResponse,
        Failure::Timeout,
        Failure::BadResponse,
        Failure::ClosedMidResponse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::ConnectTimeout => "connect_timeout",
            Failure::ClosedBeforeResponse => "closed_before_response",
            Failure::Timeout => "timeout",
            Failure::BadResponse => "bad_response",
            Failure::ClosedMidResponse => "closed_mid_response",
        }
    }
}

/// Health of a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Up,
    /// Out after `eject_after` consecutive failures, or a failed active check.
    Ejected,
}

pub struct Backend {
    pub addr: SocketAddr,
    pub weight: u32,
    /// Position in the proxy's list.
    pub index: usize,
    ejected: AtomicBool,
    consecutive_failures: AtomicU32,
    in_flight: AtomicUsize,
    /// Connections open to it (pooled and in use), bounded by `max_conns`.
    open: AtomicUsize,
    /// Signalled when a connection to this backend closes or returns to a pool, for threads
    /// waiting for the connection limit.
    released: (Mutex<()>, Condvar),
    released_count: AtomicU64,
    /// Threads in `wait_released`.
    waiting: AtomicUsize,
    requests: AtomicU64,
    /// Responses by status class, 1xx to 5xx.
    responses: [AtomicU64; 5],
    errors: [AtomicU64; Failure::ALL.len()],
    retries: AtomicU64,
    ejections: AtomicU64,
    latency: Mutex<LatencyHistogram>,
}

impl Backend {
    pub fn new(addr: SocketAddr, weight: u32, index: usize) -> Backend {
        Backend {
            addr,
            weight,
            index,
            ejected: AtomicBool::new(false),
            consecutive_failures: AtomicU32::new(0),
            in_flight: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            released: (Mutex::new(()), Condvar::new()),
            released_count: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            responses: Default::default(),
            errors: Default::default(),
            retries: AtomicU64::new(0),
            ejections: AtomicU64::new(0),
            latency: Mutex::new(hdr::new_latency_histogram()),
        }
    }

    pub fn healthy(&self) -> bool {
        !self.ejected.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// A request is sent to this backend: counted until the guard drops.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// A response came back whole: the backend is fine.
    pub fn succeeded(&self, status: u16, latency: Duration) {
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        hdr::record_ns(&mut self.latency.lock().unwrap(), ns);
    }

    /// An exchange failed. `health` says whether it counts against the backend's health (a
    /// pooled connection the backend closed while idle does not: that is the keep-alive race,
    /// not a sick backend). Returns true when this failure ejected the backend.
    pub fn failed(&self, failure: Failure, health: bool, eject_after: u32) -> bool {
        self.errors[failure as usize].fetch_add(1, Ordering::Relaxed);
        if !health {
            return false;
        }
        let n = self.consecutive_failures.fetch_add(1, Ordering::Relaxed) + 1;
        n >= eject_after && self.eject()
    }

    /// Take the backend out (true if it was in).
    pub fn eject(&self) -> bool {
        let was_in = !self.ejected.swap(true, Ordering::Relaxed);
        if was_in {
            self.ejections.fetch_add(1, Ordering::Relaxed);
        }
        was_in
    }

    /// Put the backend back (a probe or a health check succeeded).
    pub fn readmit(&self) {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        self.ejected.store(false, Ordering::Relaxed);
    }

    /// A request first sent elsewhere is sent to this backend.
    pub fn count_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Reserve one connection under `limit`; false when the backend has `limit` open.
    pub fn try_open(&self, limit: usize) -> bool {
        self.open.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| (n < limit).then_some(n + 1)).is_ok()
    }

    /// How many times a connection of this backend has closed or returned to a pool: read it
    /// before looking for a free connection, then [`Backend::wait_released`] for a change.
    pub fn released_count(&self) -> u64 {
        self.released_count.load(Ordering::SeqCst)
    }

    /// Wait until a connection closes or returns to a pool after the count `seen` was read, or
    /// until `until`; false when the time is up.
    pub fn wait_released(&self, seen: u64, until: Instant) -> bool {
        let mut guard = self.released.0.lock().unwrap();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut released = true;
        while self.released_count.load(Ordering::SeqCst) == seen {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                released = false;
                break;
            }
            guard = self.released.1.wait_timeout(guard, left).unwrap().0;
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        released
    }

    /// One reserved connection closed.
    pub fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        self.notify_released();
    }

    /// A connection came back to a pool or closed: wake a thread waiting at the limit.
    pub fn notify_released(&self) {
        // The lock only when someone waits: a waiter registers (under the lock) before it checks
        // the count, so either it sees this increment or this sees it and wakes it.
        self.released_count.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _g = self.released.0.lock().unwrap();
            self.released.1.notify_all();
        }
    }

    /// The counters as the `stats` part of the rusage line reports them.
    pub fn report(&self) -> BackendReport {
        let by_class = |i: usize| self.responses[i].load(Ordering::Relaxed);
        BackendReport {
            addr: self.addr.to_string(),
            weight: self.weight,
            health: if self.healthy() { Health::Up } else { Health::Ejected },
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight() as u64,
            open_connections: self.open_connections() as u64,
            retries: self.retries.load(Ordering::Relaxed),
            ejections: self.ejections.load(Ordering::Relaxed),
            responses: StatusClasses {
                s1xx: by_class(0),
                s2xx: by_class(1),
                s3xx: by_class(2),
                s4xx: by_class(3),
                s5xx: by_class(4),
            },
            errors: Failure::ALL
                .iter()
                .map(|&f| (f.as_str(), self.errors[f as usize].load(Ordering::Relaxed)))
                .collect(),
            latency_us: LatencySummaryUs::of(&self.latency.lock().unwrap()),
        }
    }
}

/// Counts a request in flight at its backend until dropped.
pub struct InFlight(Arc<Backend>);

impl InFlight {
    pub fn backend(&self) -> &Arc<Backend> {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Responses by status class.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct StatusClasses {
    #[serde(rename = "1xx")]
    pub s1xx: u64,
    #[serde(rename = "2xx")]
    pub s2xx: u64,
    #[serde(rename = "3xx")]
    pub s3xx: u64,
    #[serde(rename = "4xx")]
    pub s4xx: u64,
    #[serde(rename = "5xx")]
    pub s5xx: u64,
}

/// One backend's counters at one moment.
#[derive(Clone, Debug, Serialize)]
pub struct BackendReport {
    pub addr: String,
    pub weight: u32,
    pub health: Health,
    /// Requests sent to it (a retried request counts at both backends).
    pub requests: u64,
    pub in_flight: u64,
    pub open_connections: u64,
    /// Requests it received as the second attempt, after another backend failed them.
    pub retries: u64,
    pub ejections: u64,
    /// Whole responses relayed, by status class.
    pub responses: StatusClasses,
    /// Failed exchanges by cause.
    pub errors: std::collections::BTreeMap<&'static str, u64>,
    /// Time from sending the request to the last byte of the response, of whole responses.
    pub latency_us: LatencySummaryUs,
}
