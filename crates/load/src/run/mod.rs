//! A load run: one coordinator and T load threads, shared by the closed, open and
//! partly-open models (the model is a [`Pacing`](crate::Pacing) decided per thread in
//! `driver.rs`; the connection machinery in `worker.rs` is the same for all).
//!
//! Mechanism. Each load thread is pinned to `cpus.nth(i)` and owns about S/T connection slots
//! (S = users of the closed model, the connection cap otherwise), non-blocking, TCP_NODELAY,
//! in its own level-triggered epoll set or its own io_uring (the `backend` parameter, resolved
//! once per run by `resolve_backend`: `auto` probes the kernel and names why it falls back to
//! epoll; the ring's operations are in `ring.rs`); nothing is shared between load threads on
//! the request path. The epoll numbers below; the ring replaces the `send`, the `recv` and the
//! wait by queued operations handed over in one `io_uring_enter` per turn. The request bytes are built once. Per request a thread makes one `send` (the
//! request fits the socket buffer; a partial send waits for writability) and normally one
//! `recv` into a 64 KiB per-thread buffer, plus one vDSO clock read whose value is both the
//! completion time of a response and, in the closed model, the send time of the next
//! request. Every request carries its planned time (closed: the end of its think time; open:
//! its slot in the schedule; partly-open: its session's arrival or the end of its think time)
//! and its send time; see `recorder.rs` for what is recorded. Think times, arrivals and
//! reconnect back-offs are a per-thread min-heap behind one timerfd; request and connect
//! timeouts are found by a scan every tenth of the timeout.
//!
//! Timeline. A coordinator (the calling thread) waits until every thread has tried its
//! initial connections, fails with "cannot connect to ADDR" if there were some and none
//! succeeded, then fixes t0: the warm-up is [t0, t0+W), the window [t0+W, t0+W+D), and the
//! arrival schedule starts at t0. Completions are attributed by their completion time;
//! nothing is recorded outside the window except warm-up counters. Every second each thread
//! hands its interval histogram and counters to the coordinator, which merges them, appends
//! one interval to the HDR log and one entry to the timeline, so memory does not grow with
//! the length of the run. At the end of the window the threads stop on their own (requests
//! still in flight are abandoned, not counted; arrivals still waiting count as never
//! started), the coordinator reports [`Phase::End`] while connections are still open, then
//! releases the threads to close them. A [`StopHandle`] moves the end of the window to the
//! moment of the stop.
//!
//! Failures. A connection closed by the server after a complete response (`Connection:
//! close`, idle close) is reopened without counting an error; one lost with a request in
//! flight counts `closed`. Timeouts, parse errors and I/O errors close the connection at once
//! and (except for a partly-open session's own connection) reopen it; failed connects retry
//! after a 10 ms back-off.

use crate::config::{Backend, IoBackend, LoadConfig};
use crate::control::{Phase, StopHandle};
use crate::error::LoadError;
use crate::records::RecordsHeader;
use crate::report::{ClassTotals, LiveSecond, LoadReport, ThreadCpu};
use crate::stats::{ErrorClass, Tally};
use aggregate::Aggregator;
use archlab_metrics::clock::{now_ns, ClockAnchor};
use archlab_metrics::hdr::{self, LatencyHistogram};
use archlab_metrics::interval_log::IntervalLog;
use archlab_metrics::rusage::ResourceUsage;
use archlab_netio::Waker;
use archlab_wire::http::{write_request, Method};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

mod aggregate;
mod driver;
mod recorder;
mod ring;
mod worker;

/// Slack given to threads and the coordinator for anything that is not measurement.
const GRACE: Duration = Duration::from_secs(2);
const SECOND_NS: u64 = 1_000_000_000;

/// Run a load and report what was measured.
pub fn run_load(cfg: &LoadConfig) -> Result<LoadReport, LoadError> {
    run_load_with(cfg, &StopHandle::new(), &mut |_| {})
}

/// [`run_load`] with a stop handle and a callback told when the window opens and closes.
pub fn run_load_with(
    cfg: &LoadConfig,
    stop: &StopHandle,
    on_phase: &mut dyn FnMut(Phase),
) -> Result<LoadReport, LoadError> {
    run_load_live(cfg, stop, on_phase, &mut |_| {})
}

/// [`run_load_with`] and a callback given each whole second of the window as it closes
/// (seconds close once every thread has handed its second over, so about a second late).
pub fn run_load_live(
    cfg: &LoadConfig,
    stop: &StopHandle,
    on_phase: &mut dyn FnMut(Phase),
    on_second: &mut dyn FnMut(&LiveSecond),
) -> Result<LoadReport, LoadError> {
    // The request of each class (one without a mix), built once.
    let requests: Vec<Vec<u8>> = cfg
        .request_paths()
        .into_iter()
        .map(|path| {
            let mut request = Vec::with_capacity(128 + path.len() + cfg.host().len());
            write_request(&mut request, Method::Get, cfg.host(), path, cfg.keep_alive(), &[]);
            request
        })
        .collect();
    // Pipelining: D copies of each class's request back to back, so that any run of queued
    // requests of one class (the same bytes) is one slice of it.
    let batches: Vec<Vec<u8>> = requests.iter().map(|r| r.repeat(cfg.pipeline() as usize)).collect();
    let wakers = (0..cfg.threads())
        .map(|_| Waker::new())
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| io_error("cannot create an eventfd", e))?;
    let records = match cfg.records() {
        None => None,
        Some(path) => {
            let fail = |e| io_error(format!("cannot create the records file {}", path.display()), e);
            std::fs::File::create(path).map_err(fail)?;
            // Appending: each thread's buffer lands whole, without a lock (records.rs).
            Some(std::fs::OpenOptions::new().append(true).open(path).map_err(fail)?)
        }
    };
    let (backend, backend_fallback) = resolve_backend(cfg)?;
    let shared = Shared {
        backend,
        backend_fallback,
        records,
        cfg,
        requests: &requests,
        batches: &batches,
        start: Gate::new(),
        release: Gate::new(),
        end_ns: AtomicU64::new(u64::MAX),
        abort: AtomicBool::new(false),
        wakers,
    };
    let (tx, rx) = mpsc::channel();
    let stop_tx = tx.clone();
    let _installed = stop.install(Box::new(move || {
        let _ = stop_tx.send(Msg::Stop);
    }));
    std::thread::scope(|scope| {
        for i in 0..cfg.threads() {
            let (tx, shared) = (tx.clone(), &shared);
            let spawned = std::thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn_scoped(scope, move || worker::worker_main::<driver::Driver>(shared, i, tx));
            if let Err(e) = spawned {
                shared.abort_all();
                return Err(io_error("cannot start a load thread", e));
            }
        }
        drop(tx);
        coordinate(&shared, &rx, on_phase, on_second)
    })
}

/// The backend the run uses: `auto` probes io_uring once (the kernel may refuse it, or the
/// run may need what only epoll does) and says why it falls back.
fn resolve_backend(cfg: &LoadConfig) -> Result<(IoBackend, Option<String>), LoadError> {
    match cfg.backend() {
        Backend::Epoll => Ok((IoBackend::Epoll, None)),
        Backend::IoUring => match ring::probe() {
            Ok(()) => Ok((IoBackend::IoUring, None)),
            Err(e) => Err(io_error("backend io-uring: cannot run here (backend = \"epoll\" or \"auto\" can)", e)),
        },
        Backend::Auto => match cfg.io_uring_refusal() {
            Some(why) => Ok((IoBackend::Epoll, Some(why.to_string()))),
            None => match ring::probe() {
                Ok(()) => Ok((IoBackend::IoUring, None)),
                Err(e) => Ok((IoBackend::Epoll, Some(e.to_string()))),
            },
        },
    }
}

fn io_error(context: impl Into<String>, source: io::Error) -> LoadError {
    LoadError::Io { context: context.into(), source }
}

/// A value published once by one thread and awaited by others (start decision, release).
struct Gate<T> {
    value: Mutex<Option<T>>,
    cv: Condvar,
}

impl<T: Copy> Gate<T> {
    fn new() -> Self {
        Gate { value: Mutex::new(None), cv: Condvar::new() }
    }

    fn open(&self, v: T) {
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
        self.cv.notify_all();
    }

    /// The published value, or `None` if nothing was published within `timeout`.
    fn wait(&self, timeout: Duration) -> Option<T> {
        let guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self.cv.wait_timeout_while(guard, timeout, |v| v.is_none()).unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

#[derive(Clone, Copy, Debug)]
enum Start {
    Go { t0_ns: u64 },
    Abort,
}

/// What the coordinator and the load threads share.
struct Shared<'a> {
    cfg: &'a LoadConfig,
    /// How the load threads wait on their sockets (`auto` resolved), and why not io_uring.
    backend: IoBackend,
    backend_fallback: Option<String>,
    /// The HTTP request of each mix class (one without a mix).
    requests: &'a [Vec<u8>],
    /// Each class's request repeated `pipeline` times.
    batches: &'a [Vec<u8>],
    start: Gate<Start>,
    /// Opened after [`Phase::End`] was reported: threads may close their connections.
    release: Gate<()>,
    /// End of the window (CLOCK_MONOTONIC ns); lowered by a stop.
    end_ns: AtomicU64,
    /// Give up connecting (the run is abandoned before it starts).
    abort: AtomicBool,
    /// One per load thread, to cut an epoll wait short.
    wakers: Vec<Waker>,
    /// The raw records file, opened for appending (header written by the coordinator).
    records: Option<std::fs::File>,
}

impl Shared<'_> {
    fn wake_all(&self) {
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    fn abort_all(&self) {
        self.abort.store(true, Ordering::SeqCst);
        self.start.open(Start::Abort);
        self.wake_all();
    }
}

/// Messages to the coordinator. A thread's messages arrive in the order it sent them.
enum Msg {
    /// The thread tried all its connections once.
    Ready { established: usize, first_error: Option<io::Error> },
    /// One second of the window (`last`: the thread's final, possibly shorter, interval).
    Interval { index: u32, interval: aggregate::Interval, last: bool },
    /// The thread stopped recording (after its last interval).
    Finished(Result<Box<WorkerSummary>, LoadError>),
    /// The caller asked to stop.
    Stop,
}

/// What a load thread hands back when its window is over.
struct WorkerSummary {
    warmup: Tally,
    window: Tally,
    non2xx: LatencyHistogram,
    /// Whole-window histograms of the response and service times (see `recorder.rs`).
    response: LatencyHistogram,
    service: LatencyHistogram,
    /// Schedule lag: send time - planned time.
    lag: LatencyHistogram,
    cpu: ResourceUsage,
    /// Latest instant the thread attributed to the window (>= the end it applied).
    horizon_ns: u64,
    /// Requests sent but not complete when the window closed (abandoned, not counted).
    in_flight: usize,
    /// Partly-open sessions still running when the window closed.
    sessions_in_progress: u64,
    /// Index of the load thread.
    thread: usize,
    examples: BTreeMap<ErrorClass, String>,
    records_written: u64,
    records_error: Option<String>,
    /// Per mix class, window only (empty without a mix).
    classes: Vec<ClassTotals>,
    /// SO_RCVBUF the kernel applied, when one was asked for and a connection opened.
    rcvbuf_applied: Option<usize>,
    /// Closed model with a fixed population: the users' cycle edges (see `CycleEdges`).
    cycle_edges: Option<CycleEdges>,
}

/// A closed-model thread's users at the window's edges, for the boundary term of Little's law.
/// A user's time from its first cycle that ends in the window (started at `f`, perhaps before
/// the window's start S) to the window's end E is covered by the cycles it completed and the
/// one in progress at E (started at `c`), so the completed cycles sum to
/// sum over users of (E - S) - B, with B = sum of (E - c) - (S - f) = users (E - S) + sum (f - c):
/// the time in the cycles in progress at the end, less the time before S in the first ones.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CycleEdges {
    pub users: usize,
    /// Sum over users of f - c, nanoseconds.
    pub first_minus_last_ns: i128,
}

/// The closed model's boundary term B over all threads (see [`CycleEdges`]) in seconds, with
/// E - S the report's window; None unless every thread has a fixed population. B is signed: a
/// window that begins in long cycles and ends in short ones has more of its users' time before
/// its start than after its end.
fn closed_boundary_s(summaries: &[Box<WorkerSummary>], window: Duration) -> Option<f64> {
    let (mut users, mut sum) = (0usize, 0i128);
    for s in summaries {
        let e = s.cycle_edges?;
        users += e.users;
        sum += e.first_minus_last_ns;
    }
    Some((users as i128 * window.as_nanos() as i128 + sum) as f64 / 1e9)
}

fn log_comments(cfg: &LoadConfig) -> [String; 2] {
    let corrected = cfg.pacing().corrects_coordinated_omission();
    [
        format!(
            "archlab-engine {} {}-model load: target {} {} connections {} (max {}) threads {} pacing {:?} seed {}",
            env!("CARGO_PKG_VERSION"),
            cfg.pacing().model().name(),
            cfg.target(),
            match cfg.mix() {
                Some(m) => format!("mix {m}"),
                None => format!("path {}", cfg.path()),
            },
            cfg.connections(),
            cfg.max_connections(),
            cfg.threads(),
            cfg.pacing(),
            cfg.seed(),
        ),
        if corrected {
            "One interval per second of the measurement window: response time of 2xx responses measured \
             from the planned send time; coordinated omission corrected"
        } else {
            "One interval per second of the measurement window: latency of 2xx responses; \
             coordinated omission NOT corrected (closed model)"
        }
        .to_string(),
    ]
}

/// The coordinator: start decision, phase reports, stop handling, merging.
fn coordinate(
    sh: &Shared,
    rx: &Receiver<Msg>,
    on_phase: &mut dyn FnMut(Phase),
    on_second: &mut dyn FnMut(&LiveSecond),
) -> Result<LoadReport, LoadError> {
    let cfg = sh.cfg;
    let threads = cfg.threads();

    // 1. Every thread tries its connections once.
    let ready_deadline = now_ns() + (cfg.connect_timeout() + GRACE).as_nanos() as u64;
    let (mut ready, mut established, mut first_error, mut interrupted) = (0, 0, None, false);
    while ready < threads {
        match rx.recv_timeout(Duration::from_nanos(ready_deadline.saturating_sub(now_ns()))) {
            Ok(Msg::Ready { established: e, first_error: fe }) => {
                ready += 1;
                established += e;
                first_error = first_error.or(fe);
            }
            Ok(Msg::Finished(Err(e))) => {
                sh.abort_all();
                return Err(e);
            }
            Ok(Msg::Stop) => {
                interrupted = true;
                sh.abort.store(true, Ordering::SeqCst);
                sh.wake_all();
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if interrupted {
        sh.abort_all();
        return empty_report(cfg, established);
    }
    if established == 0 && cfg.connections() > 0 {
        sh.abort_all();
        let source = first_error.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection established within {:?}", cfg.connect_timeout()),
            )
        });
        return Err(LoadError::Connect { target: cfg.target(), source });
    }

    // 2. Fix the timeline and let the threads go.
    let anchor = ClockAnchor::now();
    let warmup_end = anchor.mono_ns + cfg.warmup().as_nanos() as u64;
    let end = warmup_end + cfg.duration().as_nanos() as u64;
    sh.end_ns.store(end, Ordering::SeqCst);
    let comments = log_comments(cfg);
    let comments: Vec<&str> = comments.iter().map(String::as_str).collect();
    let log = IntervalLog::begin(Vec::new(), anchor.wall_of(warmup_end), &comments)
        .map_err(|e| LoadError::Internal(e.to_string()))?;
    let mut agg = Aggregator::new(threads, warmup_end, log, aggregate::Plan::of(cfg));
    if let Some(mut file) = sh.records.as_ref() {
        let header = RecordsHeader {
            connections: cfg.max_connections() as u32,
            t0_mono_ns: anchor.mono_ns,
            t0_wall_unix_ns: anchor.wall.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            label: cfg.label(),
        };
        header.write(&mut file).map_err(|e| io_error("cannot write the records file", e))?;
    }
    sh.start.open(Start::Go { t0_ns: anchor.mono_ns });

    // 3. Merge seconds as they come, announce the window, handle a stop, collect the threads.
    let hard_deadline = end + GRACE.as_nanos() as u64;
    let (mut summaries, mut failure, mut measuring, mut finished) = (Vec::new(), None, false, 0);
    while finished < threads {
        let now = now_ns();
        if !measuring && now >= warmup_end && sh.end_ns.load(Ordering::SeqCst) > warmup_end {
            measuring = true;
            on_phase(Phase::Measure);
        }
        if now >= hard_deadline {
            break;
        }
        let wake_at = if measuring || interrupted { hard_deadline } else { warmup_end };
        match rx.recv_timeout(Duration::from_nanos(wake_at.saturating_sub(now))) {
            Ok(Msg::Interval { index, interval, last }) => {
                if let Err(e) = agg.add(index, interval, last) {
                    failure = failure.or(Some(e));
                }
                for s in agg.take_live() {
                    on_second(&s);
                }
            }
            Ok(Msg::Finished(result)) => {
                finished += 1;
                match result {
                    Ok(s) => summaries.push(s),
                    Err(e) => {
                        // One thread failing ends the run for all of them, now: `now` was read
                        // before the wait for this message, which may have lasted a second.
                        failure = failure.or(Some(e));
                        sh.end_ns.fetch_min(now_ns(), Ordering::SeqCst);
                        sh.wake_all();
                    }
                }
            }
            Ok(Msg::Stop) => {
                // The window ends at the stop, read now (not before the wait it ended). A stop
                // after the natural end of the window interrupts nothing.
                let at = now_ns();
                if sh.end_ns.fetch_min(at, Ordering::SeqCst) > at {
                    interrupted = true;
                    sh.wake_all();
                }
            }
            Ok(Msg::Ready { .. }) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    if measuring {
        on_phase(Phase::End);
    }
    sh.release.open(());
    if let Some(e) = failure {
        return Err(e);
    }

    // 4. Sum the threads.
    let window_end = summaries.iter().map(|s| s.horizon_ns).max().unwrap_or(end);
    let (latency, timeline, interval_log) = agg.finish(window_end)?;
    let mut report = LoadReport {
        config: cfg.clone(),
        interrupted,
        window: Duration::from_nanos(window_end.saturating_sub(warmup_end)),
        latency,
        timeline,
        interval_log,
        connections_established: established,
        backend: sh.backend,
        backend_fallback: sh.backend_fallback.clone(),
        ..LoadReport::empty(cfg)
    };
    summaries.sort_by_key(|s| s.thread);
    report.closed_boundary_s = closed_boundary_s(&summaries, report.window);
    for s in summaries {
        report.in_flight_at_end += s.in_flight;
        report.sessions_in_progress_at_end += s.sessions_in_progress;
        report.totals.add(&s.window);
        report.warmup_totals.add(&s.warmup);
        hdr::merge(&mut report.latency_non2xx, &s.non2xx);
        hdr::merge(&mut report.latency_response, &s.response);
        hdr::merge(&mut report.latency_service, &s.service);
        hdr::merge(&mut report.schedule_lag, &s.lag);
        report.cpu_user_s += s.cpu.user_cpu_s;
        report.cpu_sys_s += s.cpu.system_cpu_s;
        report.thread_cpu.push(ThreadCpu {
            thread: s.thread,
            cpu: cfg.cpu_of_thread(s.thread),
            user_s: s.cpu.user_cpu_s,
            sys_s: s.cpu.system_cpu_s,
            voluntary_switches: s.cpu.voluntary_context_switches,
        });
        report.records_written += s.records_written;
        for (total, class) in report.classes.iter_mut().zip(&s.classes) {
            total.add(class);
        }
        report.rcvbuf_applied = report.rcvbuf_applied.or(s.rcvbuf_applied);
        if report.records_error.is_none() {
            report.records_error = s.records_error;
        }
        for (class, message) in s.examples {
            report.error_examples.entry(class).or_insert(message);
        }
    }
    Ok(report)
}

/// The report of a run stopped before its start: nothing measured.
fn empty_report(cfg: &LoadConfig, established: usize) -> Result<LoadReport, LoadError> {
    let log = IntervalLog::begin(Vec::new(), ClockAnchor::now().wall, &[])
        .and_then(IntervalLog::finish)
        .map_err(|e| LoadError::Internal(e.to_string()))?;
    Ok(LoadReport {
        interrupted: true,
        interval_log: log,
        connections_established: established,
        ..LoadReport::empty(cfg)
    })
}
