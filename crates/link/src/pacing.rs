//! Leaving on time: how a forwarding thread waits for the next departure.
//!
//! It sleeps in `ppoll` (so that an arriving packet or a stop wakes it too) with a nanosecond
//! timeout and a timer slack of 1 ns (the default 50 us slack would let the kernel coalesce the
//! wake-up that much later). A sleeping thread still wakes late: on this class of VM the
//! hrtimer wake-up lands 15-30 us after the requested time (median about 20 us, measured with
//! `ppoll` and a 1 ns slack), far beyond the 5 % of a 1 ms delay that emulation may miss by.
//! So the thread asks to wake a margin early and spins on the clock for the rest. The margin
//! follows the lateness actually observed (an exponentially weighted mean, 1/8 per wake-up,
//! capped at 100 us), so that on a quiet machine it spins a few microseconds per departure and
//! on a loaded one it still leaves on time in the median. Pure spinning was rejected: it would
//! take a whole CPU per direction from the two the server and the client are measured on.
//!
//! A precise timer does not help a thread that is not scheduled, and how the threads are
//! scheduled ([`Scheduling`]) was measured on this 2-CPU VM, shared with other builds (load
//! average 11-18), with `single-thread` pinned to one CPU and the client pinned to the other:
//! - `normal` (nice 0): threads were sometimes woken milliseconds late (p90 lateness 1.2-3.7 ms
//!   in bulk transfers), a rate-limited transfer lost 5-22 % of its rate, and wrk's `/echo` at 64
//!   connections ran at 6.9 k req/s.
//! - `high` (nice -20): mostly on time, milliseconds late when the machine was overloaded; wrk's
//!   `/echo` at 8.6 k req/s.
//! - `realtime` (SCHED_FIFO 10, the default): departures within 10 us at p90 and 15-40 us at
//!   p99, rates exact, wrk's `/echo` at 15.0 k req/s (the three interleaved, same load), at or
//!   above a veth pair's rate. It preempts ordinary threads the way a NIC's interrupt does, for
//!   the few microseconds a packet costs; the kernel's real-time throttling (95 % of each
//!   second) bounds what it can take. Its cost, seen at moderate load: a one-connection
//!   ping-pong showed p99 stalls of 15-20 ms where `normal` showed 0.1 ms.
//!
//! A short EEVDF slice for `high` (`sched_setattr`, 0.1 ms) was tried and dropped: it brought
//! the stalls without the precision.

use std::io;

/// How the forwarding threads are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheduling {
    /// SCHED_FIFO at priority [`REALTIME_PRIORITY`] (needs CAP_SYS_NICE).
    #[default]
    Realtime,
    /// SCHED_OTHER at nice -20 (needs CAP_SYS_NICE).
    High,
    /// Ordinary threads at nice 0, competing with everything else for the CPU.
    Normal,
}

/// The nice value of [`Scheduling::High`]: the largest weight an ordinary thread can have.
pub const HIGH_NICE: i32 = -20;

/// A low SCHED_FIFO priority: above every ordinary thread, below the kernel's own real-time
/// threads (threaded interrupts run at 50, migration and watchdog at 99).
pub const REALTIME_PRIORITY: i32 = 10;

impl Scheduling {
    pub fn parse(s: &str) -> Option<Scheduling> {
        match s {
            "high" => Some(Scheduling::High),
            "realtime" => Some(Scheduling::Realtime),
            "normal" => Some(Scheduling::Normal),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scheduling::High => "high",
            Scheduling::Realtime => "realtime",
            Scheduling::Normal => "normal",
        }
    }

    /// Whether it needs CAP_SYS_NICE.
    pub fn needs_cap_sys_nice(self) -> bool {
        self != Scheduling::Normal
    }

    /// Apply to the calling thread.
    pub(crate) fn apply(self) -> io::Result<()> {
        match self {
            Scheduling::Normal => Ok(()),
            Scheduling::High => {
                // SAFETY: plain syscalls on the calling thread (with a thread id, setpriority
                // sets that thread's nice value on Linux).
                let tid = unsafe { libc::gettid() };
                if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, HIGH_NICE) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            }
            Scheduling::Realtime => {
                let param = libc::sched_param { sched_priority: REALTIME_PRIORITY };
                // SAFETY: a valid sched_param; pid 0 is the calling thread.
                if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            }
        }
    }
}

/// The margin before the first wake-up has been observed.
const MARGIN_START_NS: u64 = 30_000;
/// The most a thread spins before a departure: a wake-up later than this (the thread was
/// descheduled) says nothing about the timer and is not worth a CPU.
const MARGIN_MAX_NS: u64 = 100_000;

/// Ask the kernel to fire this thread's timers without slack.
pub(crate) fn set_fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value in ns and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// The early-wake margin, learnt from the lateness of past wake-ups.
#[derive(Debug)]
pub(crate) struct WakeMargin {
    ns: u64,
}

impl WakeMargin {
    pub(crate) fn new() -> Self {
        WakeMargin { ns: MARGIN_START_NS }
    }

    /// When to wake for a departure at `depart_ns`.
    pub(crate) fn wake_time(&self, depart_ns: u64) -> u64 {
        depart_ns.saturating_sub(self.ns)
    }

    /// A timed sleep that asked for `requested_ns` ended at `woke_ns`.
    pub(crate) fn observe(&mut self, requested_ns: u64, woke_ns: u64) {
        let late = woke_ns.saturating_sub(requested_ns).min(MARGIN_MAX_NS) as i64;
        let ns = self.ns as i64;
        self.ns = (ns + (late - ns) / 8).clamp(0, MARGIN_MAX_NS as i64) as u64;
    }

    pub(crate) fn ns(&self) -> u64 {
        self.ns
    }
}

/// Sleep until one of `fds` is readable or until the CLOCK_MONOTONIC time `deadline_ns` (never,
/// for `None`). Returns whether the deadline passed with nothing readable.
pub(crate) fn sleep_until(fds: &mut [libc::pollfd], deadline_ns: Option<u64>, now_ns: u64) -> io::Result<bool> {
    let ts;
    let timeout = match deadline_ns {
        Some(d) => {
            let left = d.saturating_sub(now_ns);
            ts =
                libc::timespec { tv_sec: (left / 1_000_000_000) as libc::time_t, tv_nsec: (left % 1_000_000_000) as _ };
            &ts as *const libc::timespec
        }
        None => std::ptr::null(),
    };
    // SAFETY: fds is a valid slice of pollfd; timeout is null or points to a live timespec.
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(n == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_follows_observed_lateness_within_its_cap() {
        let mut m = WakeMargin::new();
        for _ in 0..200 {
            m.observe(1_000_000, 1_010_000);
        }
        assert!((10_000..10_008).contains(&m.ns()), "{}", m.ns());
        assert_eq!(m.wake_time(1_000_000), 1_000_000 - m.ns());
        // A thread descheduled for 5 ms counts as the cap, not as 5 ms.
        for _ in 0..200 {
            m.observe(0, 5_000_000);
        }
        assert!(m.ns() <= MARGIN_MAX_NS && m.ns() > 90_000, "{}", m.ns());
        assert_eq!(m.wake_time(50), 0);
    }
}
