//! Per-thread timers for the closed model's think times and reconnect back-offs: a min-heap of
//! wake-up times and one timerfd armed for the earliest of them, registered in the thread's
//! epoll set.
//!
//! epoll's own timeout has millisecond granularity (and `Poller::wait` rounds up), which would
//! turn a 2 ms think time into 2-3 ms and bias X = N/(R+Z); the timerfd is armed with an
//! absolute CLOCK_MONOTONIC time in nanoseconds. It is re-armed only when the earliest entry
//! changes, so a burst of wake-ups costs one `timerfd_settime`. Entries are never removed
//! early: each carries the connection's epoch, and the owner ignores entries whose epoch has
//! passed (the connection was closed or reopened since).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) struct Timers {
    fd: OwnedFd,
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Absolute time the timerfd is armed for; 0 = not armed.
    armed_ns: u64,
}

impl Timers {
    pub(crate) fn new(capacity: usize) -> io::Result<Timers> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Timers { fd: unsafe { OwnedFd::from_raw_fd(fd) }, heap: BinaryHeap::with_capacity(capacity), armed_ns: 0 })
    }

    /// Wake up at `at_ns` (CLOCK_MONOTONIC) for connection `idx` in epoch `epoch`.
    pub(crate) fn push(&mut self, at_ns: u64, idx: u32, epoch: u32) {
        self.heap.push(Reverse((at_ns, idx, epoch)));
    }

    /// The next entry due at `now_ns`, if any.
    pub(crate) fn pop_due(&mut self, now_ns: u64) -> Option<(u32, u32)> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now_ns => self.heap.pop().map(|Reverse((_, i, e))| (i, e)),
            _ => None,
        }
    }

    /// The timerfd fired: consume its counter so that level-triggered epoll stops reporting it.
    pub(crate) fn acknowledge(&mut self) {
        let mut expirations: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; WouldBlock (a spurious wake) is harmless.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut expirations as *mut u64 as *mut libc::c_void, 8) };
        self.armed_ns = 0;
    }

    /// Arm the timerfd for the earliest entry if it is not armed for it already.
    pub(crate) fn rearm(&mut self) -> io::Result<()> {
        let Some(Reverse((at, _, _))) = self.heap.peek() else { return Ok(()) };
        if *at == self.armed_ns {
            return Ok(());
        }
        let at = (*at).max(1); // 0 would disarm
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as i64, tv_nsec: (at % 1_000_000_000) as i64 },
        };
        // SAFETY: spec is a valid itimerspec; a null old-value pointer is allowed.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_ns = at;
        Ok(())
    }
}

impl AsRawFd for Timers {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archlab_metrics::clock::now_ns;
    use archlab_netio::{Interest, Poller, Trigger};
    use std::time::Duration;

    #[test]
    fn fires_in_order_with_sub_millisecond_precision() {
        let mut t = Timers::new(4).unwrap();
        let mut p = Poller::new(4).unwrap();
        p.register(t.as_raw_fd(), 9, Interest::READABLE, Trigger::Level).unwrap();
        let start = now_ns();
        // Far enough apart that a preempted test thread (2 shared cores) cannot find both due.
        t.push(start + 100_000_000, 2, 0);
        t.push(start + 500_000, 1, 7);
        t.rearm().unwrap();
        let mut evs = Vec::new();
        p.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        let woke = now_ns();
        assert_eq!(evs.len(), 1);
        assert!(woke >= start + 500_000);
        t.acknowledge();
        assert_eq!(t.pop_due(woke), Some((1, 7)));
        assert_eq!(t.pop_due(woke), None, "the second entry is not due yet");
        t.rearm().unwrap();
        p.wait(&mut evs, Some(Duration::from_secs(2))).unwrap();
        assert!(now_ns() >= start + 100_000_000);
        t.acknowledge();
        assert_eq!(t.pop_due(now_ns()), Some((2, 0)));
        // Acknowledged and nothing armed: no further event.
        p.wait(&mut evs, Some(Duration::from_millis(5))).unwrap();
        assert!(evs.is_empty());
    }
}
