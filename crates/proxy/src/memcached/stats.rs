//! The middleware's instrumentation (seed 002 §1.9): per request its [`Timeline`] on the lab
//! clock, aggregated per window (5 s by default) and over the whole run into throughput per
//! request type, HDR distributions of response, queue-wait and service time, hits, misses and
//! keys, the queue length, and error counts per class.
//!
//! Mechanism: every thread that finishes requests (a worker, or the event loop) records into
//! its own [`Recorder`] behind a mutex that only the statistics thread ever contends for,
//! once per window, when it swaps the recorder for an empty one ([`Collector::rotate`]); the
//! net thread records the queue length at each enqueue into its own. Rotation merges the
//! recorders of the window, writes one line per distribution into the HDR interval logs (if
//! asked for), adds the window into the run's totals and keeps its summary. A report
//! ([`Collector::report`]) also includes the open window, so a report taken at any moment
//! covers every request finished until then.
//!
//! Definitions: the response time runs from the first byte read to the reply written; the
//! queue wait from the hand-off to the worker taking the request; the service time from the
//! first byte sent to a server to the last server reply complete (the seed's three). The rest
//! of the response time is kept as three sums (before the hand-off: parsing, and waiting
//! behind the client's earlier requests; from the worker taking the request to the first
//! server write; after the last server reply: merging and writing the answer), so that
//! response = queue wait + service + rest holds exactly on the stored sums. The queue length
//! is sampled at every enqueue, including the new request (the seed's `l_queue`); its time
//! average over a window is Little's law applied to the window: the sum of the queue waits of
//! the requests taken in the window divided by its length (exact up to the waits that
//! straddle the window's edges).

use super::errors::ErrorClass;
use super::request::{RequestType, Timeline};
use archlab_metrics::clock::{now_ns, ClockAnchor};
use archlab_metrics::hdr::{self, LatencyHistogram, LatencySummaryUs};
use archlab_metrics::interval_log::{IntervalLog, IntervalLogError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Distributions of one request type.
#[derive(Clone, Debug)]
struct TypeRecorder {
    requests: u64,
    response: LatencyHistogram,
    queue_wait: LatencyHistogram,
    service: LatencyHistogram,
}

impl TypeRecorder {
    fn new() -> Self {
        TypeRecorder {
            requests: 0,
            response: hdr::new_latency_histogram(),
            queue_wait: hdr::new_latency_histogram(),
            service: hdr::new_latency_histogram(),
        }
    }

    fn merge(&mut self, o: &TypeRecorder) {
        self.requests += o.requests;
        hdr::merge(&mut self.response, &o.response);
        hdr::merge(&mut self.queue_wait, &o.queue_wait);
        hdr::merge(&mut self.service, &o.service);
    }
}

/// Sums of the parts of the response time, in nanoseconds, over the requests recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimeSplitNs {
    pub response: u64,
    pub queue_wait: u64,
    pub service: u64,
    /// First byte read -> put on the hand-off.
    pub before_queue: u64,
    /// Taken from the hand-off -> first byte to a server.
    pub before_service: u64,
    /// Last server reply complete -> reply written.
    pub after_service: u64,
}

impl TimeSplitNs {
    fn add(&mut self, t: &Timeline) {
        self.response += t.response_ns();
        self.queue_wait += t.queue_wait_ns();
        self.service += t.service_ns();
        self.before_queue += t.enqueue_ns - t.arrival_ns;
        self.before_service += t.server_send_ns - t.dequeue_ns;
        self.after_service += t.reply_ns - t.server_recv_ns;
    }

    fn merge(&mut self, o: &TimeSplitNs) {
        self.response += o.response;
        self.queue_wait += o.queue_wait;
        self.service += o.service;
        self.before_queue += o.before_queue;
        self.before_service += o.before_service;
        self.after_service += o.after_service;
    }
}

/// What one thread recorded during one window.
#[derive(Clone, Debug)]
pub struct Recorder {
    types: [TypeRecorder; 3],
    split: TimeSplitNs,
    hits: u64,
    misses: u64,
    keys: u64,
    errors: [u64; ErrorClass::COUNT],
    /// Queue length at each enqueue (values: requests).
    queue_length: LatencyHistogram,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            types: [TypeRecorder::new(), TypeRecorder::new(), TypeRecorder::new()],
            split: TimeSplitNs::default(),
            hits: 0,
            misses: 0,
            keys: 0,
            errors: [0; ErrorClass::COUNT],
            queue_length: hdr::new_latency_histogram(),
        }
    }
}

impl Recorder {
    /// A request answered normally. `keys`, `hits`: of a retrieval (0 for a `set`).
    pub fn request(&mut self, ty: RequestType, t: &Timeline, keys: usize, hits: usize) {
        let r = &mut self.types[ty.index()];
        r.requests += 1;
        hdr::record_ns(&mut r.response, t.response_ns());
        hdr::record_ns(&mut r.queue_wait, t.queue_wait_ns());
        hdr::record_ns(&mut r.service, t.service_ns());
        self.split.add(t);
        self.keys += keys as u64;
        self.hits += hits as u64;
        self.misses += keys.saturating_sub(hits) as u64;
    }

    pub fn error(&mut self, class: ErrorClass) {
        self.errors[class.index()] += 1;
    }

    pub fn queue_length(&mut self, length: usize) {
        hdr::record_ns(&mut self.queue_length, length as u64);
    }

    fn merge(&mut self, o: &Recorder) {
        for (a, b) in self.types.iter_mut().zip(&o.types) {
            a.merge(b);
        }
        self.split.merge(&o.split);
        self.hits += o.hits;
        self.misses += o.misses;
        self.keys += o.keys;
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
        hdr::merge(&mut self.queue_length, &o.queue_length);
    }

    /// All types together: response, queue wait, service.
    fn all(&self) -> TypeRecorder {
        let mut all = TypeRecorder::new();
        for t in &self.types {
            all.merge(t);
        }
        all
    }

    fn report(&self, start: Duration, length: Duration) -> WindowReport {
        let secs = length.as_secs_f64();
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let all = self.all();
        let by_type = RequestType::ALL
            .iter()
            .map(|ty| {
                let t = &self.types[ty.index()];
                let report = TypeReport {
                    requests: t.requests,
                    throughput_rps: rate(t.requests),
                    response_us: LatencySummaryUs::of(&t.response),
                    queue_wait_us: LatencySummaryUs::of(&t.queue_wait),
                    service_us: LatencySummaryUs::of(&t.service),
                };
                (ty.as_str(), report)
            })
            .collect();
        let q = &self.queue_length;
        let queue_length = QueueLengthReport {
            samples: q.len(),
            mean: (!q.is_empty()).then(|| q.mean()),
            p50: (!q.is_empty()).then(|| q.value_at_quantile(0.5)),
            p99: (!q.is_empty()).then(|| q.value_at_quantile(0.99)),
            max: (!q.is_empty()).then(|| q.max()),
            time_avg: if secs > 0.0 { self.split.queue_wait as f64 / 1e9 / secs } else { 0.0 },
        };
        let by_class = ErrorClass::ALL.iter().map(|c| (c.as_str(), self.errors[c.index()])).collect();
        WindowReport {
            start_s: start.as_secs_f64(),
            length_s: secs,
            requests: all.requests,
            throughput_rps: rate(all.requests),
            by_type,
            response_us: LatencySummaryUs::of(&all.response),
            queue_wait_us: LatencySummaryUs::of(&all.queue_wait),
            service_us: LatencySummaryUs::of(&all.service),
            time_split_ns: self.split,
            hits: self.hits,
            misses: self.misses,
            keys: self.keys,
            queue_length,
            errors: ErrorReport { total: self.errors.iter().sum(), by_class },
        }
    }
}

/// A recorder one thread owns and the statistics thread swaps once per window.
pub type SharedRecorder = Arc<Mutex<Recorder>>;

#[derive(Clone, Debug, Serialize)]
pub struct TypeReport {
    pub requests: u64,
    pub throughput_rps: f64,
    pub response_us: LatencySummaryUs,
    pub queue_wait_us: LatencySummaryUs,
    pub service_us: LatencySummaryUs,
}

#[derive(Clone, Debug, Serialize)]
pub struct QueueLengthReport {
    /// Enqueues (one sample each).
    pub samples: u64,
    pub mean: Option<f64>,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
    /// Mean number of requests waiting over the window (Little's law, see the module docs).
    pub time_avg: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ErrorReport {
    pub total: u64,
    pub by_class: BTreeMap<&'static str, u64>,
}

/// One window, or the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct WindowReport {
    /// Offset of the window's start from the middleware's start.
    pub start_s: f64,
    pub length_s: f64,
    /// Requests answered normally (errors are counted in `errors` only).
    pub requests: u64,
    pub throughput_rps: f64,
    pub by_type: BTreeMap<&'static str, TypeReport>,
    pub response_us: LatencySummaryUs,
    pub queue_wait_us: LatencySummaryUs,
    pub service_us: LatencySummaryUs,
    pub time_split_ns: TimeSplitNs,
    pub hits: u64,
    pub misses: u64,
    pub keys: u64,
    pub queue_length: QueueLengthReport,
    pub errors: ErrorReport,
}

/// Per server: what the middleware sent it and how it failed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerReport {
    pub addr: String,
    /// Requests written to it (a replicated `set` counts once per server).
    pub requests: u64,
    pub timeouts: u64,
    pub closed: u64,
    pub garbage: u64,
    /// Requests failed without being sent: not connected.
    pub unavailable: u64,
    /// Connections opened after the first one of each worker failed or was dropped.
    pub reconnects: u64,
}

/// Everything the middleware reports: a `stats {json}` line.
#[derive(Clone, Debug, Serialize)]
pub struct StatsReport {
    pub arch: &'static str,
    pub workers: usize,
    pub sharded: bool,
    pub window_s: f64,
    /// Seconds since the middleware started.
    pub elapsed_s: f64,
    /// The clock of every time: CLOCK_MONOTONIC; the wall time of the start, for alignment.
    pub start_unix_s: f64,
    pub totals: WindowReport,
    /// Completed windows, oldest first.
    pub windows: Vec<WindowReport>,
    pub servers: Vec<ServerReport>,
    /// Resource usage of the whole process and its socket-call and hand-off counts.
    pub rusage: serde_json::Value,
}

/// The interval logs of `--stats-dir`: one file per distribution and request type.
struct Logs {
    files: Vec<(String, IntervalLog<BufWriter<File>>)>,
}

const DISTRIBUTIONS: [&str; 3] = ["response", "queue_wait", "service"];

impl Logs {
    fn create(dir: &Path, anchor: &ClockAnchor) -> Result<Logs, IntervalLogError> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        for dist in DISTRIBUTIONS {
            for ty in ["all", "get", "multi_get", "set"] {
                let name = format!("{dist}-{ty}.hlog");
                let out = BufWriter::new(File::create(dir.join(&name))?);
                let comment =
                    format!("archlab memcached middleware: {dist} time of {ty} requests, one interval per window");
                files.push((name, IntervalLog::begin(out, anchor.wall, &[&comment])?));
            }
        }
        Ok(Logs { files })
    }

    fn append(&mut self, window: &Recorder, offset: Duration, length: Duration) -> Result<(), IntervalLogError> {
        let all = window.all();
        let mut logs = self.files.iter_mut();
        for dist in 0..DISTRIBUTIONS.len() {
            for t in std::iter::once(&all).chain(&window.types) {
                let h = [&t.response, &t.queue_wait, &t.service][dist];
                logs.next().expect("one log per distribution and type").1.append(h, offset, length)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IntervalLogError> {
        self.files.iter_mut().try_for_each(|(_, log)| log.flush())
    }
}

/// The statistics of one middleware: recorders, closed windows, totals, interval logs.
pub struct Collector {
    recorders: Vec<SharedRecorder>,
    anchor: ClockAnchor,
    window: Duration,
    window_start_ns: u64,
    totals: Recorder,
    windows: Vec<WindowReport>,
    logs: Option<Logs>,
}

impl Collector {
    pub fn new(window: Duration, stats_dir: Option<&Path>) -> Result<Collector, IntervalLogError> {
        let anchor = ClockAnchor::now();
        let logs = stats_dir.map(|d| Logs::create(d, &anchor)).transpose()?;
        Ok(Collector {
            recorders: Vec::new(),
            anchor,
            window,
            window_start_ns: anchor.mono_ns,
            totals: Recorder::default(),
            windows: Vec::new(),
            logs,
        })
    }

    /// A recorder for one more thread.
    pub fn recorder(&mut self) -> SharedRecorder {
        let r = SharedRecorder::default();
        self.recorders.push(r.clone());
        r
    }

    pub fn start_ns(&self) -> u64 {
        self.anchor.mono_ns
    }

    /// When the open window ends.
    pub fn window_end_ns(&self) -> u64 {
        self.window_start_ns + self.window.as_nanos() as u64
    }

    /// Close the open window at `now_ns`: collect it from every recorder, log and keep it.
    pub fn rotate(&mut self, now_ns: u64) -> Result<(), IntervalLogError> {
        let mut window = Recorder::default();
        for r in &self.recorders {
            let taken = std::mem::take(&mut *r.lock().unwrap());
            window.merge(&taken);
        }
        let offset = Duration::from_nanos(self.window_start_ns - self.anchor.mono_ns);
        let length = Duration::from_nanos(now_ns.saturating_sub(self.window_start_ns));
        if let Some(logs) = &mut self.logs {
            logs.append(&window, offset, length)?;
            logs.flush()?;
        }
        self.windows.push(window.report(offset, length));
        self.totals.merge(&window);
        self.window_start_ns = now_ns;
        Ok(())
    }

    /// Flush the interval logs to their files.
    pub fn flush(&mut self) -> Result<(), IntervalLogError> {
        self.logs.as_mut().map_or(Ok(()), Logs::flush)
    }

    /// The totals so far (closed windows and the open one) and the closed windows.
    pub fn report(&self, now_ns: u64) -> (WindowReport, Vec<WindowReport>, f64, f64) {
        let mut all = self.totals.clone();
        for r in &self.recorders {
            all.merge(&r.lock().unwrap());
        }
        let elapsed = Duration::from_nanos(now_ns.saturating_sub(self.anchor.mono_ns));
        let start_unix_s = self.anchor.wall.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        (all.report(Duration::ZERO, elapsed), self.windows.clone(), elapsed.as_secs_f64(), start_unix_s)
    }
}

/// The whole-process usage and counters, as in `archlab-engine serve`'s `rusage` line.
pub fn usage_json() -> serde_json::Value {
    let mut v = serde_json::to_value(archlab_metrics::rusage::process_usage()).expect("serialisable");
    let counts = serde_json::to_value(archlab_metrics::counters::totals()).expect("serialisable");
    if let (Some(v), serde_json::Value::Object(c)) = (v.as_object_mut(), counts) {
        v.extend(c);
    }
    v
}

/// The lab clock, read once per step.
#[inline]
pub fn now() -> u64 {
    now_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(base: u64, parts: [u64; 5]) -> Timeline {
        let mut t = [base; 6];
        for i in 0..5 {
            t[i + 1] = t[i] + parts[i];
        }
        Timeline {
            arrival_ns: t[0],
            enqueue_ns: t[1],
            dequeue_ns: t[2],
            server_send_ns: t[3],
            server_recv_ns: t[4],
            reply_ns: t[5],
        }
    }

    #[test]
    fn windows_add_up_to_the_totals_and_the_split_is_exact() {
        let dir = std::env::temp_dir().join(format!("archlab-mw-stats-{}", std::process::id()));
        let mut c = Collector::new(Duration::from_secs(5), Some(&dir)).unwrap();
        let (worker, net) = (c.recorder(), c.recorder());
        let start = c.start_ns();
        for i in 0..10u64 {
            worker.lock().unwrap().request(
                RequestType::Get,
                &timeline(start, [1_000, 2_000 + i, 3_000, 40_000, 500]),
                1,
                1,
            );
            net.lock().unwrap().queue_length(1 + i as usize % 3);
        }
        worker.lock().unwrap().error(ErrorClass::ServerTimeout);
        c.rotate(start + 1_000_000_000).unwrap();
        worker.lock().unwrap().request(RequestType::MultiGet, &timeline(start, [10, 20, 30, 40, 50]), 4, 3);
        worker.lock().unwrap().request(RequestType::Set, &timeline(start, [10, 20, 30, 40, 50]), 0, 0);
        let (totals, windows, _, _) = c.report(start + 1_500_000_000);
        assert_eq!(windows.len(), 1);
        assert_eq!(windows[0].requests, 10);
        assert_eq!(windows[0].throughput_rps, 10.0);
        assert_eq!(windows[0].errors.by_class["server_timeout"], 1);
        assert_eq!(windows[0].queue_length.samples, 10);
        assert_eq!(windows[0].queue_length.max, Some(3));
        // Little: sum of waits (10 x 2000 ns + 45 ns) over 1 s.
        assert!((windows[0].queue_length.time_avg - 20_045e-9).abs() < 1e-15);
        assert_eq!(totals.requests, 12);
        assert_eq!((totals.keys, totals.hits, totals.misses), (14, 13, 1));
        assert_eq!(totals.by_type["multi_get"].requests, 1);
        let s = totals.time_split_ns;
        assert_eq!(s.response, s.queue_wait + s.service + s.before_queue + s.before_service + s.after_service);
        c.rotate(start + 2_000_000_000).unwrap();
        c.flush().unwrap();
        let log = std::fs::read(dir.join("response-get.hlog")).unwrap();
        let parsed = archlab_metrics::interval_log::read_interval_log(&log).unwrap();
        assert_eq!(parsed.intervals.len(), 2);
        assert_eq!(parsed.intervals[0].histogram.len(), 10);
        assert_eq!(parsed.intervals[1].start, Duration::from_secs(1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
