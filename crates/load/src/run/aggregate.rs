//! The coordinator's side of the per-second hand-over: merges the threads' histograms of each
//! second, and once every thread has reported a second, appends it to the timeline, the
//! whole-window histogram and the HDR interval log. Seconds are closed strictly in order; a
//! thread's last (possibly shorter) second is closed only at the end, when the length of the
//! window is known. Each closed second is also described in a [`LiveSecond`] for the live
//! line of the command line (offered vs achieved rate, p50/p99, errors, schedule lag).

use super::SECOND_NS;
use crate::config::{LoadConfig, Pacing};
use crate::error::LoadError;
use crate::report::{rate, LiveSecond, TimelineEntry};
use crate::schedule::{mean_users, user_changes, Profile, Segment};
use archlab_metrics::hdr::{self, LatencyHistogram};
use archlab_metrics::interval_log::IntervalLog;
use std::collections::VecDeque;
use std::time::Duration;

/// One thread's second, as handed over.
pub(super) struct Interval {
    pub(super) histogram: LatencyHistogram,
    /// Schedule lag (sent - planned) of the requests written in the second.
    pub(super) lag: LatencyHistogram,
    pub(super) requests: u64,
    pub(super) errors: u64,
    /// Arrivals taken up in the second (open and partly-open models).
    pub(super) arrivals: u64,
}

/// Merges the threads' seconds in order: timeline, whole-window histogram, interval log.
pub(super) struct Aggregator {
    threads: usize,
    warmup_end: u64,
    /// Seconds received from some threads but not yet from all (front = `first_pending`).
    pending: VecDeque<PendingSecond>,
    first_pending: u32,
    total: LatencyHistogram,
    timeline: Vec<TimelineEntry>,
    log: IntervalLog<Vec<u8>>,
    /// Seconds closed since the coordinator last took them.
    live: Vec<LiveSecond>,
    plan: Plan,
}

#[derive(Default)]
struct PendingSecond {
    histogram: Option<LatencyHistogram>,
    lag: Option<LatencyHistogram>,
    requests: u64,
    errors: u64,
    arrivals: u64,
    reports: usize,
    /// Some thread's last interval: its length is known only at the end.
    last: bool,
}

impl Aggregator {
    pub(super) fn new(threads: usize, warmup_end: u64, log: IntervalLog<Vec<u8>>, plan: Plan) -> Self {
        Aggregator {
            threads,
            warmup_end,
            pending: VecDeque::new(),
            first_pending: 0,
            total: hdr::new_latency_histogram(),
            timeline: Vec::new(),
            log,
            live: Vec::new(),
            plan,
        }
    }

    /// The seconds closed since the last call.
    pub(super) fn take_live(&mut self) -> std::vec::Drain<'_, LiveSecond> {
        self.live.drain(..)
    }

    pub(super) fn add(&mut self, index: u32, i: Interval, last: bool) -> Result<(), LoadError> {
        let pos = index
            .checked_sub(self.first_pending)
            .ok_or_else(|| LoadError::Internal(format!("second {index} reported after it was closed")))?
            as usize;
        if self.pending.len() <= pos {
            self.pending.resize_with(pos + 1, PendingSecond::default);
        }
        let p = &mut self.pending[pos];
        for (acc, h) in [(&mut p.histogram, i.histogram), (&mut p.lag, i.lag)] {
            match acc {
                Some(acc) => hdr::merge(acc, &h),
                None => *acc = Some(h),
            }
        }
        p.requests += i.requests;
        p.errors += i.errors;
        p.arrivals += i.arrivals;
        p.reports += 1;
        p.last |= last;
        // Whole seconds that every thread has reported can be closed now.
        while self.pending.front().is_some_and(|p| p.reports == self.threads && !p.last) {
            self.close_front(SECOND_NS)?;
        }
        Ok(())
    }

    fn close_front(&mut self, length_ns: u64) -> Result<(), LoadError> {
        let p = self.pending.pop_front().expect("a pending second");
        let index = self.first_pending;
        self.first_pending += 1;
        let h = p.histogram.unwrap_or_else(hdr::new_latency_histogram);
        hdr::merge(&mut self.total, &h);
        let length_s = length_ns as f64 / 1e9;
        let start_s = f64::from(index);
        let planned_rps = self.plan.rate(start_s, start_s + length_s);
        let planned_users = self.plan.users(start_s, start_s + length_s);
        self.timeline.push(TimelineEntry {
            arrivals: planned_rps.map(|_| p.arrivals),
            planned_rps,
            planned_users,
            second: index,
            length_s,
            requests: p.requests,
            throughput_rps: rate(p.requests, length_s),
            p99_us: hdr::quantile_us(&h, 0.99),
            errors: p.errors,
        });
        let lag = p.lag.unwrap_or_else(hdr::new_latency_histogram);
        self.live.push(LiveSecond {
            second: index,
            planned_rps,
            planned_users,
            offered_rps: rate(p.arrivals, length_s),
            throughput_rps: rate(p.requests, length_s),
            p50_us: hdr::quantile_us(&h, 0.5),
            p99_us: hdr::quantile_us(&h, 0.99),
            errors: p.errors,
            lag_p99_us: hdr::quantile_us(&lag, 0.99),
        });
        self.log
            .append(&h, Duration::from_nanos(u64::from(index) * SECOND_NS), Duration::from_nanos(length_ns))
            .map_err(|e| LoadError::Internal(e.to_string()))
    }

    /// Close the remaining seconds against the end of the window.
    pub(super) fn finish(
        mut self,
        window_end: u64,
    ) -> Result<(LatencyHistogram, Vec<TimelineEntry>, Vec<u8>), LoadError> {
        while !self.pending.is_empty() {
            let start = self.warmup_end + u64::from(self.first_pending) * SECOND_NS;
            let length = window_end.min(start + SECOND_NS).saturating_sub(start);
            self.close_front(length)?;
        }
        let log = self.log.finish().map_err(|e| LoadError::Internal(e.to_string()))?;
        Ok((self.total, self.timeline, log))
    }
}

/// What a run planned, second by second of its window: the arrival rate (open, partly-open)
/// and the users (closed), fixed or scheduled. Shown on the live line and in the timeline.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    rate: Option<Profile>,
    users: Option<Vec<(u64, usize)>>,
    warmup_s: f64,
}

impl Plan {
    pub(super) fn of(cfg: &LoadConfig) -> Plan {
        let p = cfg.pacing();
        let constant = |v: f64| Profile::new(vec![Segment { from: v, to: v, duration: cfg.duration() }]);
        let rate = p.arrivals().map(|a| p.rate_schedule().cloned().unwrap_or_else(|| constant(a.rate_per_s())));
        let users = matches!(p, Pacing::Closed { .. }).then(|| {
            let profile = p.users_schedule().cloned().unwrap_or_else(|| constant(p.max_connections() as f64));
            user_changes(cfg.warmup(), &profile)
        });
        Plan { rate, users, warmup_s: cfg.warmup().as_secs_f64() }
    }

    /// Mean planned arrival rate over [a, b] seconds of the window.
    pub(super) fn rate(&self, a: f64, b: f64) -> Option<f64> {
        self.rate.as_ref().map(|r| r.mean_over(a, b))
    }

    /// Mean planned users over [a, b] seconds of the window.
    pub(super) fn users(&self, a: f64, b: f64) -> Option<f64> {
        self.users.as_ref().map(|c| mean_users(c, self.warmup_s + a, self.warmup_s + b))
    }
}
