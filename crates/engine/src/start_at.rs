//! `load --start-at UNIX_TIME`: hold the load back until an absolute wall-clock instant, so
//! that several generators (the shards of one cell, on one host or several) open their
//! connections together. The coordinator starts every shard's process early and hands each the
//! same instant; the process does all its slow set-up (argument checks, pinning, signal thread)
//! first and then blocks in `clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME)`, which wakes it at
//! the instant itself instead of after a relative delay computed from a clock read that may be
//! stale by the time the sleep starts. The wait is cut into slices of at most
//! [`SLICE_NS`] so that SIGTERM (handled on the signal thread, which only sets the stop flag)
//! ends it promptly; the last slice still ends on the absolute instant. An instant already past
//! starts at once. After the wait the engine prints `phase start NS` on stdout, NS being its
//! wall clock in integer nanoseconds since the epoch when it woke, so the coordinator learns
//! each shard's true start without the delay of reading a pipe.

use crate::CliError;
use archlab_load::StopHandle;
use std::io::Write;

/// The longest single sleep: the bound on how late a stop request during the wait is seen.
const SLICE_NS: i128 = 50_000_000;
const NS_PER_S: i128 = 1_000_000_000;
/// Instants further ahead than this are refused: a typo (milliseconds for seconds) would
/// otherwise leave a process waiting for years.
const MAX_AHEAD_S: i128 = 24 * 3600;

/// An absolute wall-clock instant in nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnixInstantNs(pub i128);

/// Parse `SECONDS[.FRACTION]` since the epoch (up to nanosecond digits) exactly, without a
/// float's rounding: `1764115896.25` is 1764115896250000000 ns.
pub fn parse_unix_time(text: &str) -> Result<UnixInstantNs, String> {
    let expected = "seconds since the Unix epoch as SECONDS[.FRACTION], at most 9 fraction digits, e.g. 1764115896.250";
    let bad = || format!("invalid --start-at {text:?} (allowed: {expected})");
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || (text.contains('.') && !digits(fraction)) || fraction.len() > 9 || whole.len() > 12 {
        return Err(bad());
    }
    let seconds: i128 = whole.parse().map_err(|_| bad())?;
    let nanos: i128 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().map_err(|_| bad())? };
    Ok(UnixInstantNs(seconds * NS_PER_S + nanos))
}

/// The wall clock now (CLOCK_REALTIME) in nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    // SAFETY: ts is plain data filled in by the kernel.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * NS_PER_S + ts.tv_nsec as i128
}

/// Refuse an instant too far ahead to be meant (checked before any set-up).
pub fn check_ahead(at: UnixInstantNs) -> Result<(), CliError> {
    let ahead_s = (at.0 - now_ns()) / NS_PER_S;
    if ahead_s > MAX_AHEAD_S {
        return Err(CliError::usage(format!(
            "invalid --start-at {}.{:09}: {ahead_s} s from now (allowed: an instant at most {MAX_AHEAD_S} s ahead)",
            at.0 / NS_PER_S,
            at.0 % NS_PER_S
        )));
    }
    Ok(())
}

/// Block until `at` on the wall clock (or until `stop` is set), then print `phase start NS`.
pub fn wait_until(at: UnixInstantNs, stop: &StopHandle) -> Result<(), CliError> {
    while !stop.is_stopped() {
        let now = now_ns();
        if now >= at.0 {
            break;
        }
        let until = at.0.min(now + SLICE_NS);
        let ts =
            libc::timespec { tv_sec: (until / NS_PER_S) as libc::time_t, tv_nsec: (until % NS_PER_S) as libc::c_long };
        // SAFETY: ts is a valid absolute time; no remainder is needed with TIMER_ABSTIME.
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_REALTIME, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if rc != 0 && rc != libc::EINTR {
            return Err(CliError::runtime(format!(
                "cannot wait for --start-at: clock_nanosleep: {}",
                std::io::Error::from_raw_os_error(rc)
            )));
        }
    }
    let woke = now_ns();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "phase start {woke}");
    let _ = out.flush();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seconds_and_fractions_exactly() {
        assert_eq!(parse_unix_time("1764115896").unwrap(), UnixInstantNs(1_764_115_896_000_000_000));
        assert_eq!(parse_unix_time("1764115896.25").unwrap(), UnixInstantNs(1_764_115_896_250_000_000));
        assert_eq!(parse_unix_time("1.000000001").unwrap(), UnixInstantNs(1_000_000_001));
    }

    #[test]
    fn refuses_what_is_not_a_unix_time() {
        for bad in ["", ".5", "1.", "-1", "1e9", "1.0000000001", "12:00", "1.5s", "9999999999999"] {
            let e = parse_unix_time(bad).unwrap_err();
            assert!(e.contains("--start-at") && e.contains("SECONDS[.FRACTION]"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_past_instant_starts_at_once_and_a_near_one_is_not_left_early() {
        let stop = StopHandle::new();
        let before = now_ns();
        wait_until(UnixInstantNs(before - NS_PER_S), &stop).unwrap();
        let target = now_ns() + 20_000_000;
        wait_until(UnixInstantNs(target), &stop).unwrap();
        // An absolute sleep never returns before its instant (it may return later).
        assert!(now_ns() >= target);
    }

    #[test]
    fn a_stop_request_ends_the_wait() {
        let stop = StopHandle::new();
        stop.stop();
        let far = UnixInstantNs(now_ns() + 3600 * NS_PER_S);
        wait_until(far, &stop).unwrap();
        assert!(now_ns() < far.0);
    }
}
