//! The memcached middleware of seed 002 (ETH ASL 2017), between memtier-style clients and
//! memcached servers, instrumented per request.
//!
//! Mechanism (the seed's design, `Arch::Seed`): one net thread ([`net_thread`]) accepts
//! clients and reads them without blocking (`archlab-netio`'s epoll poller), each through its
//! own incremental request reader (`archlab_wire::memcached_request`); it chooses the server
//! of every retrieval round-robin and puts each request on one blocking FIFO
//! (`archlab-handoff`'s queue). W worker threads ([`worker`]), each holding a blocking
//! connection to every server, take requests from it: a `set` is sent to every server and
//! succeeds only if all store it; a get or a non-sharded multi-get goes to the chosen server;
//! a sharded multi-get is split into one request per server and the values are merged back
//! into key order ([`reply`]). The worker writes the answer to the client itself, without
//! waiting: what the client's socket does not take stays in the client's buffer and the net
//! thread writes it when the socket becomes writable, so a client that does not read holds no
//! worker ([`client`]). Requests queue in the FIFO (and behind a client's own earlier
//! requests, which are held back while more than 1 MiB of its answers wait unwritten,
//! [`client`]); the net thread blocks only in epoll; workers block on the FIFO and on the
//! servers' replies, never on a client. Expected bottleneck: the servers' service time when
//! they are slow, else the wake-ups of the hand-off and of the blocking reads (several context
//! switches per request).
//!
//! The alternatives change one piece: `Arch::Ring` and `Arch::Actor` replace the FIFO by
//! `archlab-handoff`'s ring or actors; `Arch::EventLoop` replaces hand-off and workers by
//! non-blocking connections to the servers driven by the net thread itself ([`event_loop`]),
//! with the requests of many clients pipelined on each connection. Everything else - reading,
//! routing, answers, instrumentation ([`stats`]) - is the same code.
//!
//! Faults: a server that stays silent for the server timeout, closes, or sends bytes that are
//! not a reply fails the requests waiting on it with `SERVER_ERROR backend ...`; the server is
//! marked down for every thread ([`health`]) and its connections are reopened after an
//! exponential backoff (10 ms doubling to 1 s); meanwhile retrievals go to the next server
//! that is up (every value is on every server) while sets fail at once (a set is acknowledged
//! only if every replica stored it).

mod client;
pub mod config;
pub mod errors;
mod event_loop;
mod health;
mod net_thread;
mod reply;
pub mod request;
pub mod stats;
mod worker;

pub use config::{Arch, ConfigError, MiddlewareConfig};
pub use errors::ErrorClass;
pub use stats::{ServerReport, StatsReport, WindowReport};

use archlab_handoff::{ActorConfig, Dispatch, HandOffSpec, QueueConfig, RingConfig, WaitStrategy};
use archlab_netio::Waker;
use client::{Client, Job};
use net_thread::{Backend, NetThread};
use stats::Collector;
use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One server as every thread sees it: its health and its counts.
#[derive(Debug)]
pub(crate) struct ServerCounters {
    pub addr: SocketAddr,
    pub health: health::Health,
    pub requests: AtomicU64,
    pub timeouts: AtomicU64,
    pub closed: AtomicU64,
    pub garbage: AtomicU64,
    pub unavailable: AtomicU64,
    pub reconnects: AtomicU64,
}

impl ServerCounters {
    fn new(addr: SocketAddr) -> Self {
        ServerCounters {
            addr,
            health: health::Health::default(),
            requests: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            garbage: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
        }
    }

    /// Count `f` and mark the server down.
    pub fn failed(&self, f: errors::Failure) {
        self.health.failed(stats::now());
        self.count_failure(f);
    }

    pub fn count_failure(&self, f: errors::Failure) {
        let c = match f {
            errors::Failure::Timeout(_) => &self.timeouts,
            errors::Failure::Closed => &self.closed,
            errors::Failure::Garbage(_) => &self.garbage,
            errors::Failure::Unavailable { .. } => &self.unavailable,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn report(&self) -> ServerReport {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerReport {
            addr: self.addr.to_string(),
            requests: n(&self.requests),
            timeouts: n(&self.timeouts),
            closed: n(&self.closed),
            garbage: n(&self.garbage),
            unavailable: n(&self.unavailable),
            reconnects: n(&self.reconnects),
        }
    }
}

/// What the threads of one middleware share.
pub(crate) struct Shared {
    pub config: MiddlewareConfig,
    pub servers: Vec<ServerCounters>,
    /// Clients a worker finished with that the net thread must see again (see `Client::finish`).
    pub returns: Mutex<Vec<Arc<Client>>>,
    /// Wakes the net thread (returns, stop).
    pub waker: Waker,
    pub stop: AtomicBool,
    /// Requests dispatched and not finished; `drained` is signalled when it reaches 0 after stop.
    in_flight: AtomicUsize,
    drain_lock: Mutex<()>,
    drained: Condvar,
}

impl Shared {
    pub fn dispatched(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// A request of `client` is answered (written or buffered, or failed): let the net thread
    /// dispatch the client's next request, watch its buffered answers or close it if needed,
    /// and count the request out.
    pub fn finished(&self, client: &Arc<Client>, returns: Option<&mut Vec<Arc<Client>>>) {
        if client.finish() {
            match returns {
                Some(local) => local.push(client.clone()),
                None => {
                    self.returns.lock().unwrap().push(client.clone());
                    let _ = self.waker.wake();
                }
            }
        }
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 && self.stop.load(Ordering::Acquire) {
            let _guard = self.drain_lock.lock().unwrap();
            self.drained.notify_all();
        }
    }

    /// Wait until no request is in flight, at most until `deadline`; false on timeout.
    fn wait_drained(&self, deadline: Instant) -> bool {
        let mut guard = self.drain_lock.lock().unwrap();
        while self.in_flight.load(Ordering::Acquire) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            guard = self.drained.wait_timeout(guard, left).unwrap().0;
        }
        true
    }
}

/// Why the middleware did not start.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Io { what: &'static str, error: io::Error },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::Io { what, error } => write!(f, "cannot {what}: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> StartError {
    move |error| StartError::Io { what, error }
}

/// The hand-off of a worker architecture.
fn hand_off(arch: Arch, workers: usize) -> Option<HandOffSpec> {
    match arch {
        Arch::Seed => Some(HandOffSpec::Queue(QueueConfig { capacity: None, handlers: workers, batch: 1 })),
        Arch::Ring => Some(HandOffSpec::Ring(RingConfig {
            slots: config::RING_SLOTS,
            handlers: workers,
            wait: WaitStrategy::Blocking,
            dispatch: Dispatch::WorkPool,
        })),
        // One dispatcher per actor: a worker blocks on its servers, so an actor must not keep
        // a dispatcher from the others.
        Arch::Actor => Some(HandOffSpec::Actor(ActorConfig {
            actors: workers,
            mailbox: config::ACTOR_MAILBOX,
            dispatchers: workers,
            batch: 1,
        })),
        Arch::EventLoop => None,
    }
}

/// A running middleware.
pub struct Middleware {
    shared: Arc<Shared>,
    collector: Arc<Mutex<Collector>>,
    stats_stop: Arc<(Mutex<bool>, Condvar)>,
    net: Option<JoinHandle<()>>,
    stats: Option<JoinHandle<()>>,
    local_addr: SocketAddr,
}

/// Put jobs on an `archlab-handoff` hand-off to the workers.
struct HandOffBackend {
    sender: archlab_handoff::Sender<Job>,
}

impl Backend for HandOffBackend {
    fn dispatch(&mut self, _poller: &archlab_netio::Poller, job: Job, _returns: &mut Vec<Arc<Client>>) -> usize {
        // The queue length the seed logs: this request and those still waiting before it.
        let length = self.sender.backlog() + 1;
        self.sender.send(job);
        length
    }
}

impl Middleware {
    /// Start the middleware of `config` on `listener` (bound by the caller, e.g. to port 0).
    pub fn start(config: MiddlewareConfig, listener: TcpListener) -> Result<Middleware, StartError> {
        config.validate()?;
        let local_addr = listener.local_addr().map_err(io_err("read the listening address"))?;
        let mut collector = Collector::new(config.window, config.stats_dir.as_deref()).map_err(|e| StartError::Io {
            what: "create the interval logs of --stats-dir",
            error: io::Error::other(e.to_string()),
        })?;
        let shared = Arc::new(Shared {
            servers: config.servers.iter().map(|&a| ServerCounters::new(a)).collect(),
            returns: Mutex::new(Vec::new()),
            waker: Waker::new().map_err(io_err("create the net thread's waker"))?,
            stop: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            drain_lock: Mutex::new(()),
            drained: Condvar::new(),
            config,
        });
        let net_recorder = collector.recorder();
        let backend: Box<dyn Backend> = match hand_off(shared.config.arch, shared.config.worker_count()) {
            Some(spec) => {
                let recorders: Vec<_> = (0..spec.threads()).map(|_| collector.recorder()).collect();
                let sender = archlab_handoff::start(&spec, "mc-worker", |i| {
                    let mut w = worker::Worker::new(shared.clone(), recorders[i].clone());
                    move |job: Job| w.handle(job)
                })
                .map_err(io_err("start the worker threads"))?;
                Box::new(HandOffBackend { sender })
            }
            None => Box::new(event_loop::EventLoop::new(shared.clone(), collector.recorder())),
        };
        let net = NetThread::new(listener, shared.clone(), backend, net_recorder)
            .map_err(io_err("set up the net thread's poller"))?;
        let net = std::thread::Builder::new()
            .name("mc-net".into())
            .spawn(move || net.run())
            .map_err(io_err("start the net thread"))?;
        let collector = Arc::new(Mutex::new(collector));
        let stats_stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stats = {
            let (collector, stop) = (collector.clone(), stats_stop.clone());
            std::thread::Builder::new()
                .name("mc-stats".into())
                .spawn(move || rotate_windows(&collector, &stop))
                .map_err(io_err("start the statistics thread"))?
        };
        Ok(Middleware { shared, collector, stats_stop, net: Some(net), stats: Some(stats), local_addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Statistics of every request finished so far.
    pub fn report(&self) -> StatsReport {
        let c = self.collector.lock().unwrap();
        let (totals, windows, elapsed_s, start_unix_s) = c.report(stats::now());
        let config = &self.shared.config;
        StatsReport {
            arch: config.arch.as_str(),
            workers: config.worker_count(),
            sharded: config.sharded,
            window_s: config.window.as_secs_f64(),
            elapsed_s,
            start_unix_s,
            totals,
            windows,
            servers: self.shared.servers.iter().map(ServerCounters::report).collect(),
            rusage: stats::usage_json(),
        }
    }

    /// Stop: no more connections or requests are accepted, requests under way are finished
    /// (for at most twice the server timeout), the last window is closed and the interval logs
    /// flushed. Returns the final statistics.
    pub fn shutdown(mut self) -> Result<StatsReport, String> {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.waker.wake();
        let deadline = Instant::now() + 2 * self.shared.config.server_timeout + Duration::from_millis(100);
        if let Some(net) = self.net.take() {
            let _ = net.join();
        }
        self.shared.wait_drained(deadline);
        {
            let (lock, cv) = &*self.stats_stop;
            *lock.lock().unwrap() = true;
            cv.notify_all();
        }
        if let Some(stats) = self.stats.take() {
            let _ = stats.join();
        }
        {
            let mut c = self.collector.lock().unwrap();
            c.rotate(stats::now()).map_err(|e| format!("cannot write the interval logs: {e}"))?;
            c.flush().map_err(|e| format!("cannot write the interval logs: {e}"))?;
        }
        Ok(self.report())
    }
}

impl Drop for Middleware {
    /// A middleware dropped without [`Middleware::shutdown`] stops its net and statistics
    /// threads (without waiting for them); its workers stay blocked on the empty hand-off.
    fn drop(&mut self) {
        if self.net.is_some() {
            self.shared.stop.store(true, Ordering::Release);
            let _ = self.shared.waker.wake();
            let (lock, cv) = &*self.stats_stop;
            *lock.lock().unwrap() = true;
            cv.notify_all();
        }
    }
}

/// The statistics thread: close a window at each window boundary until stopped.
fn rotate_windows(collector: &Mutex<Collector>, stop: &(Mutex<bool>, Condvar)) {
    let (lock, cv) = stop;
    loop {
        let end = collector.lock().unwrap().window_end_ns();
        let mut stopped = lock.lock().unwrap();
        loop {
            if *stopped {
                return;
            }
            let now = stats::now();
            if now >= end {
                break;
            }
            stopped = cv.wait_timeout(stopped, Duration::from_nanos(end - now)).unwrap().0;
        }
        drop(stopped);
        if let Err(e) = collector.lock().unwrap().rotate(end) {
            eprintln!("archlab middleware: cannot write the interval logs: {e}");
        }
    }
}
