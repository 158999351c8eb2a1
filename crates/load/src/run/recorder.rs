//! Per-thread accounting of a load thread. Everything is attributed by its own timestamp:
//! before the window to the warm-up tally, inside it to the window tally and to the
//! histogram of the current second, at or after the end to nothing. Seconds are handed to the
//! coordinator as they end (one message per second), so a thread never holds more than one
//! interval histogram.
//!
//! Every completed request yields two times: the response time, from its planned send time,
//! and the service time, from the moment it was written; both are kept whole-window. The
//! headline histogram (per second, the interval log, `latency_us`) holds the response time
//! when the model corrects coordinated omission (open, partly-open). In the closed model it
//! holds the service time (planned and sent differ by the think timer's wake-up lag, which is
//! the generator's, not the server's), except for a request that had to wait for a
//! connection (the server closed the previous one, or `requests_per_connection` replaced it):
//! its user was kept from sending by the connection set-up, so its headline time runs from its
//! planned time and includes the connect, as the user's cycle does (X (R + Z) = N holds).
//! The schedule lag (sent - planned) is recorded when a request is written.
//!
//! With a request mix, the window's requests are also counted per class (sent, responses,
//! 2xx, errors of requests in flight) with both times of each 2xx response, so that the
//! classes add up to the totals; errors with no request in flight (a failed connect) belong
//! to no class.

use super::aggregate::Interval;
use super::{Msg, WorkerSummary, SECOND_NS};
use crate::config::LoadConfig;
use crate::records::{Record, RecordSink};
use crate::report::ClassTotals;
use crate::stats::{ErrorClass, McCounts, Outcome, Tally};
use archlab_metrics::hdr::{self, LatencyHistogram};
use archlab_metrics::rusage::{thread_usage, ResourceUsage};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::mpsc::Sender;

/// Per-thread accounting: tallies by phase, the histogram of the current second, and the
/// hand-over of finished seconds to the coordinator.
pub(super) struct Recorder {
    tx: Sender<Msg>,
    pub(super) warmup_end: u64,
    /// End of the window as last read from [`Shared::end_ns`]; nothing at or after it counts.
    pub(super) end: u64,
    /// Start of the next second (the window start while in the warm-up).
    pub(super) next_roll: u64,
    in_window: bool,
    /// Seconds handed over so far = index of the current one.
    flushed: u32,
    interval: LatencyHistogram,
    sec_requests: u64,
    sec_errors: u64,
    sec_arrivals: u64,
    sec_lag: LatencyHistogram,
    warmup: Tally,
    window: Tally,
    non2xx: LatencyHistogram,
    /// Whole-window histograms of the response time (from the planned time) and of the
    /// service time (from the send).
    response: LatencyHistogram,
    service: LatencyHistogram,
    lag: LatencyHistogram,
    /// Headline = response time from the planned time (else service time from the send).
    corrected: bool,
    late_after_ns: u64,
    cpu_start: ResourceUsage,
    horizon: u64,
    examples: BTreeMap<ErrorClass, String>,
    /// Raw per-request records, when the run writes them.
    pub(super) records: Option<RecordSink>,
    /// Window counts per mix class (empty without a mix).
    classes: Vec<ClassTotals>,
}

impl Recorder {
    pub(super) fn new(tx: Sender<Msg>, cfg: &LoadConfig, records: Option<std::fs::File>) -> Self {
        Recorder {
            tx,
            warmup_end: u64::MAX,
            end: u64::MAX,
            next_roll: u64::MAX,
            in_window: false,
            flushed: 0,
            interval: hdr::new_latency_histogram(),
            sec_requests: 0,
            sec_errors: 0,
            sec_arrivals: 0,
            sec_lag: hdr::new_latency_histogram(),
            warmup: Tally::default(),
            window: Tally::default(),
            non2xx: hdr::new_latency_histogram(),
            response: hdr::new_latency_histogram(),
            service: hdr::new_latency_histogram(),
            lag: hdr::new_latency_histogram(),
            corrected: cfg.pacing().corrects_coordinated_omission(),
            late_after_ns: cfg.late_after().as_nanos() as u64,
            cpu_start: ResourceUsage::default(),
            horizon: 0,
            examples: BTreeMap::new(),
            records: records.map(|f| RecordSink::new(f, 0)),
            classes: (0..cfg.mix().map_or(0, |m| m.classes().len())).map(|_| ClassTotals::new()).collect(),
        }
    }

    pub(super) fn start(&mut self, t0: u64, warmup_end: u64, end: u64) {
        if let Some(sink) = self.records.as_mut() {
            sink.t0 = t0;
        }
        self.warmup_end = warmup_end;
        self.next_roll = warmup_end;
        self.end = end;
    }

    /// Move the clock of the recorder to `now`, closing the seconds that ended before it.
    #[inline]
    pub(super) fn advance(&mut self, now: u64) {
        self.horizon = self.horizon.max(now);
        if now >= self.next_roll {
            self.roll(now);
        }
    }

    #[cold]
    fn roll(&mut self, now: u64) {
        while now >= self.next_roll {
            if self.in_window {
                self.flush(false);
            } else {
                self.in_window = true;
                self.cpu_start = thread_usage();
            }
            self.next_roll = self.warmup_end + (u64::from(self.flushed) + 1) * SECOND_NS;
        }
    }

    fn flush(&mut self, last: bool) {
        let interval = Interval {
            histogram: std::mem::replace(&mut self.interval, hdr::new_latency_histogram()),
            lag: std::mem::replace(&mut self.sec_lag, hdr::new_latency_histogram()),
            requests: std::mem::take(&mut self.sec_requests),
            errors: std::mem::take(&mut self.sec_errors),
            arrivals: std::mem::take(&mut self.sec_arrivals),
        };
        let _ = self.tx.send(Msg::Interval { index: self.flushed, interval, last });
        self.flushed += 1;
    }

    fn tally(&mut self, t: u64) -> &mut Tally {
        if t >= self.warmup_end {
            &mut self.window
        } else {
            &mut self.warmup
        }
    }

    /// A response completed at `t` for the request of class `mix_class` planned at `planned` and
    /// written at `sent`; `waited_for_connection`: it could not be sent at `planned` because its
    /// connection was still being set up.
    #[inline]
    pub(super) fn response(
        &mut self,
        t: u64,
        outcome: Outcome,
        planned: u64,
        sent: u64,
        mix_class: u8,
        waited_for_connection: bool,
    ) {
        if t >= self.end {
            return;
        }
        self.advance(t);
        let class = self.tally(t).outcome(outcome);
        if t < self.warmup_end {
            return;
        }
        let (response, service) = (t.saturating_sub(planned), t.saturating_sub(sent));
        if let Some(c) = self.classes.get_mut(usize::from(mix_class)) {
            c.response(outcome, response, service);
        }
        let headline = if self.corrected || waited_for_connection { response } else { service };
        let success = match outcome {
            Outcome::Status(status) => (200..300).contains(&status),
            Outcome::Ok => true,
            Outcome::Failed(_) => false,
        };
        if success {
            self.sec_requests += 1;
            hdr::record_ns(&mut self.interval, headline);
            hdr::record_ns(&mut self.response, response);
            hdr::record_ns(&mut self.service, service);
        } else {
            hdr::record_ns(&mut self.non2xx, headline);
            self.sec_errors += u64::from(class.is_some());
        }
    }

    /// A request planned at `planned` was written at `t`.
    #[inline]
    pub(super) fn sent(&mut self, t: u64, planned: u64, mix_class: u8) {
        if t >= self.end || t < self.warmup_end {
            return;
        }
        if let Some(c) = self.classes.get_mut(usize::from(mix_class)) {
            c.sent += 1;
        }
        let lag = t.saturating_sub(planned);
        hdr::record_ns(&mut self.lag, lag);
        hdr::record_ns(&mut self.sec_lag, lag);
        self.window.flow.sent += 1;
        self.window.flow.sent_late += u64::from(lag > self.late_after_ns);
    }

    /// An arrival planned at `planned` was taken up by the generator at `t`.
    pub(super) fn arrival(&mut self, planned: u64, t: u64) {
        if planned >= self.warmup_end && planned < self.end {
            self.window.flow.arrivals += 1;
            self.sec_arrivals += 1;
            self.window.flow.arrivals_taken_up_late += u64::from(t.saturating_sub(planned) > self.late_after_ns);
        }
    }

    /// An arrival planned at `planned` never started; `counted` if it was taken up (and so
    /// counted as an arrival) already.
    pub(super) fn never_started(&mut self, planned: u64, counted: bool) {
        if planned >= self.warmup_end && planned < self.end {
            self.window.flow.arrivals += u64::from(!counted);
            self.window.flow.never_started += 1;
        }
    }

    pub(super) fn session_started(&mut self, t: u64) {
        if t < self.end {
            self.tally(t).flow.sessions_started += 1;
        }
    }

    pub(super) fn session_completed(&mut self, t: u64, requests: u32) {
        if t < self.end {
            let flow = &mut self.tally(t).flow;
            flow.sessions_completed += 1;
            flow.session_requests += u64::from(requests);
        }
    }

    pub(super) fn session_aborted(&mut self, t: u64) {
        if t < self.end {
            self.tally(t).flow.sessions_aborted += 1;
        }
    }

    pub(super) fn error(&mut self, t: u64, class: ErrorClass, detail: &dyn Display) {
        if t >= self.end {
            return;
        }
        self.advance(t);
        self.tally(t).errors.bump(class);
        if t >= self.warmup_end {
            self.sec_errors += 1;
        }
        self.examples.entry(class).or_insert_with(|| detail.to_string());
    }

    /// The request of mix class `mix_class` in flight failed at `t` (after [`Recorder::error`]).
    pub(super) fn class_error(&mut self, t: u64, mix_class: u8, error: ErrorClass) {
        if t >= self.warmup_end && t < self.end {
            if let Some(c) = self.classes.get_mut(usize::from(mix_class)) {
                c.errors.bump(error);
            }
        }
    }

    /// Keep the raw record of a request that ended (completed or failed) at `r.done_ns`.
    #[inline]
    pub(super) fn record(&mut self, r: Record) {
        if let Some(sink) = self.records.as_mut() {
            if r.done_ns >= self.warmup_end && r.done_ns < self.end {
                sink.push(r);
            }
        }
    }

    /// memcached counts of a reply completed at `t` (after [`Recorder::response`]).
    pub(super) fn memcached(&mut self, t: u64, counts: &McCounts) {
        if t < self.end {
            self.tally(t).memcached.add(counts);
        }
    }

    #[inline]
    pub(super) fn bytes(&mut self, t: u64, n: usize) {
        if t < self.end {
            self.tally(t).bytes_received += n as u64;
        }
    }

    pub(super) fn opened(&mut self, t: u64) {
        if t < self.end {
            self.tally(t).connections_opened += 1;
        }
    }

    /// Close the last second (possibly shorter) and hand back everything else.
    pub(super) fn finish(&mut self) -> WorkerSummary {
        let horizon = self.horizon.max(self.end);
        self.advance(horizon - 1);
        let mut cpu = ResourceUsage::default();
        if self.in_window {
            self.flush(true);
            let now = thread_usage();
            cpu.user_cpu_s = now.user_cpu_s - self.cpu_start.user_cpu_s;
            cpu.system_cpu_s = now.system_cpu_s - self.cpu_start.system_cpu_s;
            cpu.voluntary_context_switches =
                now.voluntary_context_switches.saturating_sub(self.cpu_start.voluntary_context_switches);
        }
        WorkerSummary {
            warmup: std::mem::take(&mut self.warmup),
            window: std::mem::take(&mut self.window),
            non2xx: std::mem::replace(&mut self.non2xx, hdr::new_latency_histogram()),
            response: std::mem::replace(&mut self.response, hdr::new_latency_histogram()),
            service: std::mem::replace(&mut self.service, hdr::new_latency_histogram()),
            lag: std::mem::replace(&mut self.lag, hdr::new_latency_histogram()),
            cpu,
            horizon_ns: horizon,
            in_flight: 0,
            sessions_in_progress: 0,
            thread: 0,
            examples: std::mem::take(&mut self.examples),
            classes: std::mem::take(&mut self.classes),
            rcvbuf_applied: None,
            cycle_edges: None,
            records_written: self.records.as_ref().map_or(0, |s| s.written),
            records_error: self.records.as_mut().and_then(|s| {
                s.flush();
                s.error.as_ref().map(|e| format!("cannot write the records file: {e}"))
            }),
        }
    }
}
