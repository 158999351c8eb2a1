//! The result of a run ([`LoadReport`]: histograms, counters, timeline, interval log) and its
//! versioned JSON form ([`Summary`], schema `archlab/load-summary` version 1).
//!
//! Schema rules: fields are only ever added, never removed or renamed; units are in the names
//! (`_s`, `_us`, `_rps`); latency statistics come from the HDR histogram (3 significant
//! digits) and are `null` when there is no sample; `requests` and `latency_us` cover 2xx
//! responses completed inside the measurement window only. Non-2xx responses are counted by
//! status and error class, and their latency goes to a separate histogram
//! (`latency_non2xx_us`) so that fast error responses never flatter the latency of real work.

use crate::config::ClosedConfig;
use crate::stats::{ErrorClass, ErrorCounts, Tally};
use archlab_metrics::hdr::{LatencyHistogram, LatencySummaryUs};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub const SCHEMA: &str = "archlab/load-summary";
pub const SCHEMA_VERSION: u32 = 1;

/// One second (the last one possibly shorter) of the measurement window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// Index of the second, 0 = first second of the window.
    pub second: u32,
    /// Length of this interval (1.0 except for a shorter last one).
    pub length_s: f64,
    /// 2xx responses completed in the interval.
    pub requests: u64,
    pub throughput_rps: f64,
    /// p99 latency of the interval's 2xx responses; null without any.
    pub p99_us: Option<f64>,
    /// Errors of every class in the interval.
    pub errors: u64,
}

/// Everything a closed-model run measured.
pub struct LoadReport {
    pub config: ClosedConfig,
    /// The run was stopped early; the window ends at the stop.
    pub interrupted: bool,
    /// Length of the measurement window actually covered.
    pub window: Duration,
    /// Latency of 2xx responses completed in the window, nanoseconds.
    pub latency: LatencyHistogram,
    /// Latency of other responses completed in the window, nanoseconds.
    pub latency_non2xx: LatencyHistogram,
    /// Counters of the measurement window.
    pub totals: Tally,
    /// Counters of the warm-up (including the initial connects).
    pub warmup_totals: Tally,
    pub timeline: Vec<TimelineEntry>,
    /// The HDR interval log (one interval per second of the window), ready to write to a file.
    pub interval_log: Vec<u8>,
    /// CPU time of the load threads during the window.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Connections established before the run started (out of `config.connections()`).
    pub connections_established: usize,
    /// Requests in flight when the window closed: abandoned, counted neither as requests nor
    /// as errors (at most one per connection).
    pub in_flight_at_end: usize,
    /// The first error message seen for each class that has one.
    pub error_examples: BTreeMap<ErrorClass, String>,
}

impl LoadReport {
    pub fn window_s(&self) -> f64 {
        self.window.as_secs_f64()
    }

    /// 2xx responses per second of the window.
    pub fn throughput_rps(&self) -> f64 {
        rate(self.totals.requests, self.window_s())
    }

    /// The JSON summary; `hdr_log` is the file name of the interval log as it should be
    /// referenced from the summary (relative to the summary's directory when it is there).
    pub fn summary(&self, hdr_log: Option<&str>) -> Summary {
        let c = &self.config;
        Summary {
            schema: SCHEMA,
            schema_version: SCHEMA_VERSION,
            generator: Generator {
                name: "archlab-engine",
                version: env!("CARGO_PKG_VERSION"),
                threads: c.threads(),
                cpus: c.cpus().map(|l| {
                    let used: std::collections::BTreeSet<usize> = (0..c.threads()).map(|i| l.nth(i)).collect();
                    used.into_iter().collect()
                }),
                cpu_user_s: self.cpu_user_s,
                cpu_sys_s: self.cpu_sys_s,
            },
            model: "closed",
            coordinated_omission_corrected: false,
            target: c.target().to_string(),
            host: c.host().to_string(),
            path: c.path().to_string(),
            connections: c.connections(),
            connections_established: self.connections_established,
            think_time_s: c.think_time().as_secs_f64(),
            warmup_s: c.warmup().as_secs_f64(),
            duration_s: self.window_s(),
            duration_requested_s: c.duration().as_secs_f64(),
            request_timeout_s: c.request_timeout().as_secs_f64(),
            connect_timeout_s: c.connect_timeout().as_secs_f64(),
            interrupted: self.interrupted,
            requests: self.totals.requests,
            responses: self.totals.responses,
            throughput_rps: self.throughput_rps(),
            bytes_received: self.totals.bytes_received,
            connections_opened: self.totals.connections_opened,
            requests_in_flight_at_end: self.in_flight_at_end,
            latency_us: LatencySummaryUs::of(&self.latency),
            latency_non2xx_us: CountedLatency {
                count: self.latency_non2xx.len(),
                summary: LatencySummaryUs::of(&self.latency_non2xx),
            },
            errors: Errors { total: self.totals.errors.total(), by_class: self.totals.errors },
            error_examples: self.error_examples.iter().map(|(c, m)| (c.name(), m.clone())).collect(),
            status_codes: self.totals.status_codes().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            timeline: self.timeline.clone(),
            warmup: WarmupCounts {
                requests: self.warmup_totals.requests,
                responses: self.warmup_totals.responses,
                errors: Errors { total: self.warmup_totals.errors.total(), by_class: self.warmup_totals.errors },
            },
            hdr_log: hdr_log.map(str::to_string),
        }
    }
}

impl fmt::Debug for LoadReport {
    // Histograms and the log are summarised: their full contents would drown a test failure.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadReport")
            .field("interrupted", &self.interrupted)
            .field("window", &self.window)
            .field("latency", &LatencySummaryUs::of(&self.latency))
            .field("latency_non2xx_count", &self.latency_non2xx.len())
            .field("totals", &self.totals)
            .field("warmup_totals", &self.warmup_totals)
            .field("timeline", &self.timeline)
            .field("interval_log_bytes", &self.interval_log.len())
            .field("connections_established", &self.connections_established)
            .field("in_flight_at_end", &self.in_flight_at_end)
            .field("error_examples", &self.error_examples)
            .finish_non_exhaustive()
    }
}

pub(crate) fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// The JSON summary, field order as written.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub schema: &'static str,
    pub schema_version: u32,
    pub generator: Generator,
    pub model: &'static str,
    pub coordinated_omission_corrected: bool,
    pub target: String,
    pub host: String,
    pub path: String,
    pub connections: usize,
    pub connections_established: usize,
    pub think_time_s: f64,
    pub warmup_s: f64,
    /// Measured window length (shorter than requested when interrupted).
    pub duration_s: f64,
    pub duration_requested_s: f64,
    pub request_timeout_s: f64,
    pub connect_timeout_s: f64,
    pub interrupted: bool,
    pub requests: u64,
    pub responses: u64,
    pub throughput_rps: f64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub requests_in_flight_at_end: usize,
    pub latency_us: LatencySummaryUs,
    pub latency_non2xx_us: CountedLatency,
    pub errors: Errors,
    pub error_examples: BTreeMap<&'static str, String>,
    pub status_codes: BTreeMap<String, u64>,
    pub timeline: Vec<TimelineEntry>,
    pub warmup: WarmupCounts,
    pub hdr_log: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Generator {
    pub name: &'static str,
    pub version: &'static str,
    pub threads: usize,
    /// CPUs the load threads are pinned to (sorted, each once), or null when not pinned.
    pub cpus: Option<Vec<usize>>,
    /// CPU time of the load threads during the measurement window.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CountedLatency {
    pub count: u64,
    #[serde(flatten)]
    pub summary: LatencySummaryUs,
}

#[derive(Clone, Debug, Serialize)]
pub struct Errors {
    pub total: u64,
    pub by_class: ErrorCounts,
}

#[derive(Clone, Debug, Serialize)]
pub struct WarmupCounts {
    pub requests: u64,
    pub responses: u64,
    pub errors: Errors,
}
