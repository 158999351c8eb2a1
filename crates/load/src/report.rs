//! The result of a run ([`LoadReport`]: histograms, counters, timeline, interval log) and its
//! versioned JSON form ([`Summary`], schema `archlab/load-summary` version 2, published as
//! `crates/load/schema/load-summary.schema.json`).
//!
//! Schema rules: fields are only ever added, never removed or renamed (version 2 keeps every
//! field of version 1 with its meaning); units are in the names (`_s`, `_us`, `_rps`);
//! latency statistics come from the HDR histogram (3 significant digits) and are `null` when
//! there is no sample; `requests` and `latency_us` cover 2xx responses completed inside the
//! measurement window only. `latency_us` is the headline: the response time from the planned
//! send time when `coordinated_omission_corrected` (open and partly-open models), the service
//! time from the actual send otherwise (closed), except that a closed-model request that had
//! to wait for a connection (set up after its planned time) counts from its planned time, so
//! that the connect is in it; `response_time_us` and `service_time_us` are always both there. Non-2xx responses are counted by
//! status and error class, and their latency goes to a separate histogram
//! (`latency_non2xx_us`) so that fast error responses never flatter the latency of real work.
//! A run with a request mix adds `mix`, one entry per class with its counts and both times
//! (added within version 2; absent without a mix): the classes' `sent`, `responses` and
//! `requests` add up to the run's, their errors to the run's less the errors with no request
//! in flight (failed connects).

use crate::config::{IoBackend, LoadConfig, Pacing};
use crate::dist::{SessionLength, ThinkTime};
use crate::stats::{ErrorClass, ErrorCounts, FlowCounts, McCounts, Outcome, Tally};
use archlab_metrics::hdr::{self, LatencyHistogram, LatencySummaryUs};
use archlab_wire::memcached::Retrieval;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub const SCHEMA: &str = "archlab/load-summary";
pub const SCHEMA_VERSION: u32 = 2;
/// The JSON Schema of [`Summary`], as published in the crate.
pub const JSON_SCHEMA: &str = include_str!("../schema/load-summary.schema.json");
/// A thread busier than this share of the window is taken as the bottleneck of the run.
const BUSY_BOUND: f64 = 0.9;
/// More arrivals than this share taken up late by the generator itself marks it as too slow.
const LATE_TAKE_UP_BOUND: f64 = 0.01;

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
    /// Open and partly-open: arrivals taken up by the generator in the interval (added
    /// within version 2, like the two fields below).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<u64>,
    /// Open and partly-open: mean planned arrival rate over the interval (the schedule's
    /// intensity; the fixed rate without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_rps: Option<f64>,
    /// Closed: mean planned number of users over the interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planned_users: Option<f64>,
}

/// CPU time one load thread used during the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadCpu {
    pub thread: usize,
    /// CPU it was pinned to, if any.
    pub cpu: Option<usize>,
    pub user_s: f64,
    pub sys_s: f64,
    /// Times the thread blocked (slept in epoll, waited on a lock) during the window: about one
    /// per batch of responses for a sleeping thread, about none for a busy-polling one. Not in
    /// the summary (the schema's `thread_cpu` is CPU time); for tests and diagnostics.
    #[serde(skip)]
    pub voluntary_switches: u64,
}

/// What the window counted for one class of a request mix.
#[derive(Clone)]
pub struct ClassTotals {
    /// Requests written in the window.
    pub sent: u64,
    /// Completed responses with any status / with a 2xx status.
    pub responses: u64,
    pub requests: u64,
    /// Errors of the class's requests (statuses and failures with the request in flight).
    pub errors: ErrorCounts,
    /// Of 2xx responses, ns: from the planned send time, and from the actual send.
    pub response_time: LatencyHistogram,
    pub service_time: LatencyHistogram,
}

impl ClassTotals {
    pub(crate) fn new() -> ClassTotals {
        ClassTotals {
            sent: 0,
            responses: 0,
            requests: 0,
            errors: ErrorCounts::default(),
            response_time: hdr::new_latency_histogram(),
            service_time: hdr::new_latency_histogram(),
        }
    }

    /// A response of the class completed inside the window.
    #[inline]
    pub(crate) fn response(&mut self, outcome: Outcome, response_ns: u64, service_ns: u64) {
        self.responses += 1;
        let (success, error) = match outcome {
            Outcome::Status(s) => ((200..300).contains(&s), ErrorClass::of_status(s)),
            Outcome::Ok => (true, None),
            Outcome::Failed(c) => (false, Some(c)),
        };
        if let Some(c) = error {
            self.errors.bump(c);
        }
        if success {
            self.requests += 1;
            hdr::record_ns(&mut self.response_time, response_ns);
            hdr::record_ns(&mut self.service_time, service_ns);
        }
    }

    pub(crate) fn add(&mut self, o: &ClassTotals) {
        self.sent += o.sent;
        self.responses += o.responses;
        self.requests += o.requests;
        self.errors.add(&o.errors);
        hdr::merge(&mut self.response_time, &o.response_time);
        hdr::merge(&mut self.service_time, &o.service_time);
    }
}

/// Everything a run measured.
pub struct LoadReport {
    pub config: LoadConfig,
    /// The run was stopped early; the window ends at the stop.
    pub interrupted: bool,
    /// Length of the measurement window actually covered.
    pub window: Duration,
    /// Headline latency of 2xx responses completed in the window, nanoseconds: response time
    /// from the planned time when the model corrects coordinated omission, else service time
    /// (response time for a request that waited for its connection to be set up).
    pub latency: LatencyHistogram,
    /// Response time (from the planned send time) of the same responses, nanoseconds.
    pub latency_response: LatencyHistogram,
    /// Service time (from the actual send) of the same responses, nanoseconds.
    pub latency_service: LatencyHistogram,
    /// Headline latency of other responses completed in the window, nanoseconds.
    pub latency_non2xx: LatencyHistogram,
    /// Send time - planned time of requests written in the window, nanoseconds.
    pub schedule_lag: LatencyHistogram,
    /// Counters of the measurement window.
    pub totals: Tally,
    /// Counters of the warm-up (including the initial connects).
    pub warmup_totals: Tally,
    pub timeline: Vec<TimelineEntry>,
    /// The HDR interval log (one interval per second of the window), ready to write to a file.
    pub interval_log: Vec<u8>,
    /// CPU time of the load threads during the window (sums and per thread).
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub thread_cpu: Vec<ThreadCpu>,
    /// Connections established before the run started (out of `config.connections()`).
    pub connections_established: usize,
    /// Requests in flight when the window closed: abandoned, counted neither as requests nor
    /// as errors (at most one per connection, the pipeline depth with pipelining).
    pub in_flight_at_end: usize,
    /// Partly-open sessions running when the window closed.
    pub sessions_in_progress_at_end: u64,
    /// Closed model with a fixed population and no pipelining: the boundary term B of Little's
    /// law in seconds, the time the users spent in the cycles in progress at the window's end
    /// less the time before its start in the first cycles that ended in it (a cycle runs from
    /// one completion or failure of a user to the next). The cycles completed in the window sum
    /// to exactly N D - B, so X (R + Z) / N + B / (N D) = 1 when R accounts for all of them.
    pub closed_boundary_s: Option<f64>,
    /// The first error message seen for each class that has one.
    pub error_examples: BTreeMap<ErrorClass, String>,
    /// Raw records written to the records file (0 without one).
    pub records_written: u64,
    /// Why writing raw records stopped, if it did (the file then ends early).
    pub records_error: Option<String>,
    /// The window per mix class, in the mix's order (empty without a mix).
    pub classes: Vec<ClassTotals>,
    /// SO_RCVBUF the kernel applied to the connections (Linux doubles what was asked), when
    /// `rcvbuf` was given and a connection opened.
    pub rcvbuf_applied: Option<usize>,
    /// How the load threads waited on their sockets.
    pub backend: IoBackend,
    /// Why `backend = "auto"` ran on epoll rather than io_uring (`None`: it did not fall back).
    pub backend_fallback: Option<String>,
}

impl LoadReport {
    /// A report with nothing measured, to be filled in.
    pub(crate) fn empty(cfg: &LoadConfig) -> LoadReport {
        LoadReport {
            config: cfg.clone(),
            interrupted: false,
            window: Duration::ZERO,
            latency: hdr::new_latency_histogram(),
            latency_response: hdr::new_latency_histogram(),
            latency_service: hdr::new_latency_histogram(),
            latency_non2xx: hdr::new_latency_histogram(),
            schedule_lag: hdr::new_latency_histogram(),
            totals: Tally::default(),
            warmup_totals: Tally::default(),
            timeline: Vec::new(),
            interval_log: Vec::new(),
            cpu_user_s: 0.0,
            cpu_sys_s: 0.0,
            thread_cpu: Vec::new(),
            connections_established: 0,
            in_flight_at_end: 0,
            sessions_in_progress_at_end: 0,
            closed_boundary_s: None,
            error_examples: BTreeMap::new(),
            records_written: 0,
            records_error: None,
            classes: (0..cfg.mix().map_or(0, |m| m.classes().len())).map(|_| ClassTotals::new()).collect(),
            rcvbuf_applied: None,
            backend: IoBackend::Epoll,
            backend_fallback: None,
        }
    }

    /// Response time (from the planned send time) of 2xx responses, ns.
    pub fn response_time(&self) -> &LatencyHistogram {
        &self.latency_response
    }

    /// Service time (from the actual send) of 2xx responses, ns.
    pub fn service_time(&self) -> &LatencyHistogram {
        &self.latency_service
    }

    /// Why the run measured nothing, when no request succeeded in the window (`None` when one
    /// did): the responses and the errors by class, with an example of the first class.
    pub fn nothing_succeeded(&self) -> Option<String> {
        if self.totals.requests > 0 {
            return None;
        }
        let errors = &self.totals.errors;
        let classes: Vec<String> = ErrorClass::ALL
            .into_iter()
            .filter(|&c| errors.get(c) > 0)
            .map(|c| format!("{} {}", c.name(), errors.get(c)))
            .collect();
        let example = self.error_examples.values().next().map(|e| format!("; e.g. {e}")).unwrap_or_default();
        Some(format!(
            "no request succeeded in the {:.2} s measurement window ({} responses, {} errors{}{example})",
            self.window_s(),
            self.totals.responses,
            errors.total(),
            if classes.is_empty() { String::new() } else { format!(": {}", classes.join(", ")) },
        ))
    }

    /// Why the generator, not the server, may have limited this run (empty: it did not).
    pub fn generator_bound_reasons(&self) -> Vec<String> {
        let mut why = Vec::new();
        let window = self.window_s();
        // A busy-polling thread uses its whole CPU by design: its CPU says nothing then.
        for t in self.thread_cpu.iter().filter(|_| !self.config.busy_poll()) {
            let busy = if window > 0.0 { (t.user_s + t.sys_s) / window } else { 0.0 };
            if busy >= BUSY_BOUND {
                why.push(format!("load thread {} was busy {:.0}% of the window", t.thread, busy * 100.0));
            }
        }
        let f = &self.totals.flow;
        if f.arrivals > 0 && f.arrivals_taken_up_late as f64 > LATE_TAKE_UP_BOUND * f.arrivals as f64 {
            why.push(format!(
                "{} of {} arrivals were taken up by the generator more than {:?} late",
                f.arrivals_taken_up_late,
                f.arrivals,
                self.config.late_after()
            ));
        }
        why
    }

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
        let pacing = c.pacing();
        let bound_reasons = self.generator_bound_reasons();
        let flow = self.totals.flow;
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
                thread_cpu: self.thread_cpu.clone(),
                busy_poll: c.busy_poll(),
                backend: self.backend.name(),
                backend_fallback: self.backend_fallback.clone(),
                bound: !bound_reasons.is_empty(),
                bound_reasons,
            },
            model: pacing.model().name(),
            coordinated_omission_corrected: pacing.corrects_coordinated_omission(),
            latency_basis: if pacing.corrects_coordinated_omission() { "planned" } else { "sent" },
            pacing: PacingSummary::of(pacing),
            seed: c.seed(),
            late_after_us: c.late_after().as_secs_f64() * 1e6,
            target: c.target().to_string(),
            host: c.host().to_string(),
            path: c.mix().map_or_else(|| c.path().to_string(), |m| m.to_string()),
            connections: c.connections(),
            max_connections: c.max_connections(),
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
            offered_rps: pacing.arrivals().map(|_| rate(flow.arrivals, self.window_s())),
            bytes_received: self.totals.bytes_received,
            connections_opened: self.totals.connections_opened,
            requests_in_flight_at_end: self.in_flight_at_end,
            closed_boundary_s: self.closed_boundary_s,
            latency_us: LatencySummaryUs::of(&self.latency),
            response_time_us: LatencySummaryUs::of(self.response_time()),
            service_time_us: LatencySummaryUs::of(self.service_time()),
            schedule_lag_us: LatencySummaryUs::of(&self.schedule_lag),
            latency_non2xx_us: CountedLatency {
                count: self.latency_non2xx.len(),
                summary: LatencySummaryUs::of(&self.latency_non2xx),
            },
            flow,
            protocol: if c.memcached().is_some() { "memcached" } else { "http" },
            pipeline: c.pipeline(),
            rcvbuf: c
                .rcvbuf()
                .map(|requested| Rcvbuf { requested_bytes: requested, applied_bytes: self.rcvbuf_applied }),
            mix: c.mix().map(|m| {
                m.classes()
                    .iter()
                    .zip(&self.classes)
                    .enumerate()
                    .map(|(i, (class, t))| ClassSummary {
                        class: i,
                        path: class.path.clone(),
                        weight: class.weight,
                        share: m.share(i),
                        sent: t.sent,
                        responses: t.responses,
                        requests: t.requests,
                        throughput_rps: rate(t.requests, self.window_s()),
                        errors: Errors { total: t.errors.total(), by_class: t.errors },
                        response_time_us: LatencySummaryUs::of(&t.response_time),
                        service_time_us: LatencySummaryUs::of(&t.service_time),
                    })
                    .collect()
            }),
            memcached: c.memcached().map(|w| MemcachedSummary {
                retrieval: match w.retrieval {
                    Retrieval::Get => "get",
                    Retrieval::Gets => "gets",
                },
                multi_get: w.multi_get,
                ratio: w.ratio.to_string(),
                key_pattern: w.keys.to_string(),
                key_prefix: w.key_prefix.clone(),
                key_min: w.key_min,
                key_max: w.key_max,
                key_zipf_exp: [w.keys.set, w.keys.get]
                    .contains(&crate::config::memcached::KeyPattern::Zipf)
                    .then_some(w.key_zipf_exp),
                value_size: w.value_size.to_string(),
                verify: w.verify,
                counts: self.totals.memcached,
            }),
            sessions: matches!(pacing, Pacing::PartlyOpen { .. }).then(|| Sessions {
                started: flow.sessions_started,
                completed: flow.sessions_completed,
                aborted: flow.sessions_aborted,
                in_progress_at_end: self.sessions_in_progress_at_end,
                never_started: flow.never_started,
                mean_requests_per_completed_session: (flow.sessions_completed > 0)
                    .then(|| flow.session_requests as f64 / flow.sessions_completed as f64),
            }),
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
            .field("response_time", &LatencySummaryUs::of(&self.latency_response))
            .field("service_time", &LatencySummaryUs::of(&self.latency_service))
            .field("schedule_lag", &LatencySummaryUs::of(&self.schedule_lag))
            .field("latency_non2xx_count", &self.latency_non2xx.len())
            .field("totals", &self.totals)
            .field("warmup_totals", &self.warmup_totals)
            .field("timeline", &self.timeline)
            .field("interval_log_bytes", &self.interval_log.len())
            .field("connections_established", &self.connections_established)
            .field("in_flight_at_end", &self.in_flight_at_end)
            .field("closed_boundary_s", &self.closed_boundary_s)
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
    /// What `latency_us` is measured from: "planned" (response time) or "sent" (service time;
    /// from the planned time for a request that waited for its connection to be set up).
    pub latency_basis: &'static str,
    pub pacing: PacingSummary,
    pub seed: u64,
    pub late_after_us: f64,
    pub target: String,
    pub host: String,
    pub path: String,
    pub connections: usize,
    pub max_connections: usize,
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
    /// Arrivals planned per second of the window (open: requests; partly-open: sessions).
    pub offered_rps: Option<f64>,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub requests_in_flight_at_end: usize,
    /// Closed model with a fixed population and no pipelining: Little's law's boundary term
    /// (see [`LoadReport::closed_boundary_s`]; added within version 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_boundary_s: Option<f64>,
    pub latency_us: LatencySummaryUs,
    pub response_time_us: LatencySummaryUs,
    pub service_time_us: LatencySummaryUs,
    pub schedule_lag_us: LatencySummaryUs,
    pub latency_non2xx_us: CountedLatency,
    pub flow: FlowCounts,
    pub sessions: Option<Sessions>,
    /// "http" or "memcached" (added within version 2; absent means "http").
    pub protocol: &'static str,
    /// HTTP requests kept in flight per connection (1: no pipelining; added within version 2).
    pub pipeline: u32,
    /// SO_RCVBUF of the generator's connections, when `rcvbuf` was given (added within
    /// version 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<Rcvbuf>,
    /// Runs with a request mix only: one entry per class, in the mix's order (added within
    /// version 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mix: Option<Vec<ClassSummary>>,
    /// memcached runs only: the workload and its command, hit and miss counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcached: Option<MemcachedSummary>,
    pub errors: Errors,
    pub error_examples: BTreeMap<&'static str, String>,
    pub status_codes: BTreeMap<String, u64>,
    pub timeline: Vec<TimelineEntry>,
    pub warmup: WarmupCounts,
    pub hdr_log: Option<String>,
}

/// One second of the window as shown live (`archlab-engine load` prints one line per second
/// on stderr): offered (arrivals) vs achieved rate, headline latency, errors, schedule lag.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveSecond {
    pub second: u32,
    /// Mean planned arrival rate of the second (open and partly-open).
    pub planned_rps: Option<f64>,
    /// Mean planned users of the second (closed).
    pub planned_users: Option<f64>,
    /// Arrivals taken up per second (0 for the closed model, which has no schedule).
    pub offered_rps: f64,
    pub throughput_rps: f64,
    /// `None` when nothing completed in the second.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub errors: u64,
    /// `None` when nothing was sent in the second.
    pub lag_p99_us: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MemcachedSummary {
    /// "get" or "gets".
    pub retrieval: &'static str,
    pub multi_get: u32,
    /// memtier notation: "1:10", "R:R", "32" or "uniform:MIN-MAX".
    pub ratio: String,
    pub key_pattern: String,
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    /// Exponent of the Z key pattern (only when a Z pattern is used; added within version 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_zipf_exp: Option<f64>,
    pub value_size: String,
    pub verify: bool,
    #[serde(flatten)]
    pub counts: McCounts,
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
    pub thread_cpu: Vec<ThreadCpu>,
    /// The load threads spun on their sockets (`--busy-poll`) instead of sleeping in epoll.
    pub busy_poll: bool,
    /// How the load threads waited on their sockets: "epoll" or "io-uring".
    pub backend: &'static str,
    /// Why `backend = "auto"` ran on epoll (null: io-uring ran, or epoll was asked for).
    pub backend_fallback: Option<String>,
    /// The generator may have limited the run (see `bound_reasons`).
    pub bound: bool,
    pub bound_reasons: Vec<String>,
}

/// The load model as written in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct PacingSummary {
    /// "constant" or "poisson"; null for the closed model.
    pub arrivals: Option<&'static str>,
    /// Open: requests per second; partly-open: sessions per second.
    pub rate_per_s: Option<f64>,
    pub think_time: ThinkSummary,
    pub requests_per_session: Option<SessionLengthSummary>,
    /// "new" or "pooled" (partly-open only).
    pub session_connection: Option<&'static str>,
    /// Open and partly-open with a varying rate: the segments over the window (the warm-up
    /// holds the first rate); `rate_per_s` is then their mean. Added within version 2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_schedule: Option<Vec<ScheduleSegment>>,
    /// Closed with a varying number of users: the segments over the window (the warm-up holds
    /// the first count; a ramp spends equal time at each whole count). Added within version 2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users_schedule: Option<Vec<ScheduleSegment>>,
}

/// One segment of a schedule, from `from` to `to` linearly (equal for a step).
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleSegment {
    /// Start, seconds from the start of the measurement window.
    pub start_s: f64,
    pub duration_s: f64,
    pub from: f64,
    pub to: f64,
}

fn segments_of(p: &crate::schedule::Profile) -> Vec<ScheduleSegment> {
    let mut start = 0.0;
    p.segments()
        .iter()
        .map(|s| {
            let d = s.duration.as_secs_f64();
            let seg = ScheduleSegment { start_s: start, duration_s: d, from: s.from, to: s.to };
            start += d;
            seg
        })
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct ThinkSummary {
    pub distribution: &'static str,
    pub mean_s: f64,
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SessionLengthSummary {
    pub distribution: &'static str,
    pub mean: f64,
}

impl PacingSummary {
    fn of(p: &Pacing) -> PacingSummary {
        let think = p.think();
        let (min_s, max_s) = match think {
            ThinkTime::Uniform { min, max } => (Some(min.as_secs_f64()), Some(max.as_secs_f64())),
            _ => (None, None),
        };
        let (length, connection) = match p {
            Pacing::PartlyOpen { length, connection, .. } => {
                let distribution = match length {
                    SessionLength::Fixed(_) => "fixed",
                    SessionLength::Geometric { .. } => "geometric",
                };
                (Some(SessionLengthSummary { distribution, mean: length.mean() }), Some(connection.name()))
            }
            _ => (None, None),
        };
        PacingSummary {
            arrivals: p.arrivals().map(|a| a.kind()),
            rate_per_s: p.arrivals().map(|a| a.rate_per_s()),
            think_time: ThinkSummary { distribution: think.kind(), mean_s: think.mean().as_secs_f64(), min_s, max_s },
            requests_per_session: length,
            session_connection: connection,
            rate_schedule: p.rate_schedule().map(segments_of),
            users_schedule: p.users_schedule().map(segments_of),
        }
    }
}

/// Sessions of the partly-open model in the window.
#[derive(Clone, Debug, Serialize)]
pub struct Sessions {
    pub started: u64,
    pub completed: u64,
    pub aborted: u64,
    pub in_progress_at_end: u64,
    /// Session arrivals planned in the window that never got a connection.
    pub never_started: u64,
    pub mean_requests_per_completed_session: Option<f64>,
}

/// SO_RCVBUF asked for and applied (Linux doubles the value asked, for its bookkeeping).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Rcvbuf {
    pub requested_bytes: usize,
    /// `null` when no connection opened.
    pub applied_bytes: Option<usize>,
}

/// One class of a request mix over the window.
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    /// Index of the class in the mix (the class byte of raw records).
    pub class: usize,
    pub path: String,
    pub weight: f64,
    /// Weight over the total weight: the expected share of the requests sent.
    pub share: f64,
    pub sent: u64,
    pub responses: u64,
    /// 2xx responses.
    pub requests: u64,
    pub throughput_rps: f64,
    pub errors: Errors,
    pub response_time_us: LatencySummaryUs,
    pub service_time_us: LatencySummaryUs,
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
