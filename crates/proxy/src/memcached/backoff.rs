//! When to try a failed memcached server again: after a failure the server is left alone for
//! a delay that starts at [`FIRST_DELAY`] and doubles with every further failure up to
//! [`MAX_DELAY`]; a normal reply resets it. Resetting on a reply rather than on a successful
//! connect matters for a stalled server: the kernel still accepts its connections, and each
//! attempt costs a request the whole server timeout.

use std::time::{Duration, Instant};

pub const FIRST_DELAY: Duration = Duration::from_millis(10);
pub const MAX_DELAY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    retry_at: Option<Instant>,
    delay: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { retry_at: None, delay: FIRST_DELAY }
    }
}

impl Backoff {
    /// None when a connection may be attempted now, else how long until it may.
    pub fn wait_left(&self, now: Instant) -> Option<Duration> {
        self.retry_at.filter(|&at| at > now).map(|at| at - now)
    }

    pub fn failed(&mut self, now: Instant) {
        self.retry_at = Some(now + self.delay);
        self.delay = (self.delay * 2).min(MAX_DELAY);
    }

    pub fn succeeded(&mut self) {
        self.retry_at = None;
        self.delay = FIRST_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_on_success() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert_eq!(b.wait_left(t0), None);
        let mut delays = Vec::new();
        for _ in 0..9 {
            b.failed(t0);
            delays.push(b.wait_left(t0).unwrap().as_millis());
        }
        assert_eq!(delays, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(b.wait_left(t0 + MAX_DELAY), None);
        b.succeeded();
        b.failed(t0);
        assert_eq!(b.wait_left(t0), Some(FIRST_DELAY));
    }
}
