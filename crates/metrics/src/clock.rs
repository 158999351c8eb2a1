//! The one clock of the data plane: CLOCK_MONOTONIC read in integer nanoseconds.
//!
//! Latency is a difference of two readings of this clock, so it must never jump (wall-clock
//! steps from NTP would corrupt samples, which is why wrk's `gettimeofday` is avoided) and it
//! must be cheap: on Linux `clock_gettime(CLOCK_MONOTONIC)` is served by the vDSO without a
//! system call (about 20 ns). [`ClockAnchor`] pairs one reading with the wall clock so that a
//! monotonic instant can be written into logs as seconds since the epoch.

use std::time::{Duration, SystemTime};

/// Nanoseconds since an arbitrary fixed point (boot), monotonic across threads.
#[inline]
pub fn now_ns() -> u64 {
    // SAFETY: ts is plain data filled in by the kernel; CLOCK_MONOTONIC is always available.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A monotonic reading and the wall-clock time taken at (almost) the same moment.
#[derive(Clone, Copy, Debug)]
pub struct ClockAnchor {
    pub mono_ns: u64,
    pub wall: SystemTime,
}

impl ClockAnchor {
    pub fn now() -> Self {
        ClockAnchor { mono_ns: now_ns(), wall: SystemTime::now() }
    }

    /// The wall-clock time of a monotonic instant (saturating at the anchor for earlier ones).
    pub fn wall_of(&self, mono_ns: u64) -> SystemTime {
        self.wall + Duration::from_nanos(mono_ns.saturating_sub(self.mono_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_in_nanoseconds() {
        let a = now_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = now_ns();
        assert!(b - a >= 2_000_000, "{a} {b}");
        assert!(b - a < 2_000_000_000);
    }

    #[test]
    fn anchor_maps_to_wall_time() {
        let anchor = ClockAnchor::now();
        let later = anchor.wall_of(anchor.mono_ns + 1_500_000_000);
        assert_eq!(later.duration_since(anchor.wall).unwrap(), Duration::from_millis(1500));
        assert_eq!(anchor.wall_of(0), anchor.wall);
    }
}
