//! Whether a memcached server is worth a request, as every thread of the middleware sees it.
//!
//! A failure seen by any thread (a timeout, a closed connection, garbage, a refused connect)
//! marks the server down for a delay that starts at [`FIRST_DELAY`] and doubles with every
//! outage up to [`MAX_DELAY`] (failures seen while it is already down do not double it again:
//! several workers usually see one outage at once); a normal reply resets the delay. While a
//! server is down, retrievals go to the others and sets fail at once; after the delay the next
//! request that needs it tries it again. Resetting on a reply rather than on a successful
//! connect matters for a stalled server, whose kernel still accepts connections. A connection
//! opened before the last failure is not trusted (the server may have died with it open) and
//! is reopened before use. Lock-free: a few atomics read on every request, written on failures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub const FIRST_DELAY: Duration = Duration::from_millis(10);
pub const MAX_DELAY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct Health {
    down_until_ns: AtomicU64,
    last_failure_ns: AtomicU64,
    delay_ns: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            down_until_ns: AtomicU64::new(0),
            last_failure_ns: AtomicU64::new(0),
            delay_ns: AtomicU64::new(FIRST_DELAY.as_nanos() as u64),
        }
    }
}

impl Health {
    /// None when the server may be tried at `now_ns`, else how long until it may.
    pub fn wait_left(&self, now_ns: u64) -> Option<Duration> {
        let until = self.down_until_ns.load(Ordering::Acquire);
        (until > now_ns).then(|| Duration::from_nanos(until - now_ns))
    }

    pub fn is_up(&self, now_ns: u64) -> bool {
        self.wait_left(now_ns).is_none()
    }

    pub fn failed(&self, now_ns: u64) {
        self.last_failure_ns.fetch_max(now_ns, Ordering::AcqRel);
        if !self.is_up(now_ns) {
            return;
        }
        let delay = self.delay_ns.load(Ordering::Acquire);
        self.down_until_ns.store(now_ns + delay, Ordering::Release);
        self.delay_ns.store((delay * 2).min(MAX_DELAY.as_nanos() as u64), Ordering::Release);
    }

    pub fn succeeded(&self) {
        let first = FIRST_DELAY.as_nanos() as u64;
        // Read first: a reply per request must not write a line every thread reads.
        if self.delay_ns.load(Ordering::Relaxed) != first {
            self.delay_ns.store(first, Ordering::Release);
        }
    }

    /// Whether a connection opened at `opened_ns` predates the last failure.
    pub fn outdated(&self, opened_ns: u64) -> bool {
        opened_ns < self.last_failure_ns.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn delays_double_per_outage_up_to_the_cap_and_reset_on_a_reply() {
        let h = Health::default();
        assert!(h.is_up(0));
        let mut t = 1_000 * MS;
        let mut delays = Vec::new();
        for _ in 0..9 {
            h.failed(t);
            // A second failure of the same outage does not double the delay.
            h.failed(t + 1);
            let d = h.wait_left(t).unwrap();
            delays.push(d.as_millis());
            t += d.as_nanos() as u64;
            assert!(h.is_up(t));
        }
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        h.succeeded();
        h.failed(t);
        assert_eq!(h.wait_left(t), Some(FIRST_DELAY));
        assert!(h.outdated(t - 1) && !h.outdated(t + 1));
    }
}
