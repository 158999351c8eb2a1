//! The HTTP/1.1 reverse proxy and load balancer: one forwarding core that runs in every
//! concurrency model of the server registry.
//!
//! A [`Proxy`] is the state every thread shares: the backends with their health and counters
//! (`backend.rs`), the policy that picks one (`policy.rs`), the pool of idle keep-alive
//! connections for threads that may block (`pool.rs`) and the health thread (`health.rs`).
//! [`Proxy::service`] turns it into the server's `Service::Forward`, and the architecture
//! decides how its threads wait (`archlab_server::service`): a thread that may block runs
//! [`blocking::BlockingForwarder`] (blocking backend sockets, its own `connect`, `write` and
//! `read`), an event loop runs [`event_loop::LoopForwarder`] (non-blocking backend sockets in
//! the loop's own poller, a pool per loop). Both drive the same [`exchange::Exchange`], which
//! holds every HTTP rule (what is forwarded, what is relayed, what a failure means), so a
//! comparison of architectures compares how they wait, not two proxies.
//!
//! Where requests queue: in the client sockets and the front-end's hand-offs as for any
//! server, then behind the backends (in their sockets and accept queues), and, at a backend's
//! connection limit, for a connection to come free (blocking threads wait on the backend's
//! condition variable, loops in a per-loop queue), for at most `connect_timeout_ms`.

pub mod backend;
pub mod blocking;
pub mod event_loop;
pub mod exchange;
pub mod health;
pub mod options;
pub mod policy;
pub mod pool;

pub use options::{BackendList, BackendSpec, HashKey, Policy, ProxyOptions};

use archlab_options::OptionError;
use archlab_server::service::{BlockingForward, Forward, LoopForward};
use archlab_server::Service;
use backend::{Backend, Failure};
use exchange::Fault;
use policy::Balancer;
use pool::SharedPool;
use serde::Serialize;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The shared state of one reverse proxy.
pub struct Proxy {
    pub options: ProxyOptions,
    pub balancer: Balancer,
    pub pool: SharedPool,
    /// Requests answered 503 because no backend was healthy (or free under its limit).
    unavailable: AtomicU64,
}

impl Proxy {
    /// A proxy for `options` (checked). The health thread is not started: see [`Proxy::start`].
    pub fn new(options: ProxyOptions) -> Result<Arc<Proxy>, OptionError> {
        options.validate()?;
        let backends: Vec<Arc<Backend>> =
            options.backends.0.iter().enumerate().map(|(i, b)| Arc::new(Backend::new(b.addr, b.weight, i))).collect();
        let balancer = Balancer::new(options.policy, backends, options.hash_balance);
        let pool = SharedPool::new(options.backends.0.len(), Duration::from_millis(options.backend_idle_timeout_ms));
        Ok(Arc::new(Proxy { options, balancer, pool, unavailable: AtomicU64::new(0) }))
    }

    /// Start the health thread (probes, checks, idle expiry).
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        health::start(self)
    }

    /// Refuse to start in front of a backend that does not accept a connection: the message
    /// names the option and the backend.
    pub fn check_reachable(&self) -> Result<(), OptionError> {
        for b in self.balancer.backends() {
            if let Err(e) = TcpStream::connect_timeout(&b.addr, self.connect_timeout()) {
                return Err(OptionError::new("backends", "backends that accept connections", b.addr.to_string())
                    .with_hint(format!("{} is unreachable: {e}", b.addr)));
            }
        }
        Ok(())
    }

    /// The server's service that forwards through this proxy.
    pub fn service(self: &Arc<Self>) -> Service {
        Service::Forward(Arc::new(Forwarder(self.clone())))
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.options.connect_timeout_ms)
    }

    pub fn backend_timeout(&self) -> Duration {
        Duration::from_millis(self.options.backend_timeout_ms)
    }

    pub fn client_timeout(&self) -> Duration {
        Duration::from_millis(self.options.client_timeout_ms)
    }

    pub fn backend(&self, i: usize) -> &Arc<Backend> {
        &self.balancer.backends()[i]
    }

    /// Count a request answered 503.
    pub fn count_unavailable(&self) {
        self.unavailable.fetch_add(1, Ordering::Relaxed);
    }

    /// Account for a failed attempt on backend `i` and say whether the request goes to another
    /// backend: only an idempotent request, only once, only when the backend refused the
    /// connection or closed it before any byte of a response.
    pub fn failed(&self, i: usize, fault: &Fault, reused: bool, may_retry: bool) -> bool {
        // A pooled connection closed before any response byte is the keep-alive race, not a
        // sign of a sick backend.
        let health = !(reused && fault.failure == Failure::ClosedBeforeResponse);
        self.backend(i).failed(fault.failure, health, self.options.eject_after);
        may_retry && matches!(fault.failure, Failure::Refused | Failure::ClosedBeforeResponse)
    }

    /// The counters: per backend, and the requests no backend could take.
    pub fn report(&self) -> ProxyReport {
        ProxyReport {
            policy: self.options.policy.as_str(),
            unavailable: self.unavailable.load(Ordering::Relaxed),
            backends: self.balancer.backends().iter().map(|b| b.report()).collect(),
        }
    }
}

/// The proxy's counters, as the `stats` line's `proxy` object.
#[derive(Clone, Debug, Serialize)]
pub struct ProxyReport {
    pub policy: &'static str,
    /// Requests answered 503: no healthy backend, or none free under its connection limit.
    pub unavailable: u64,
    pub backends: Vec<backend::BackendReport>,
}

/// The proxy as the server's forwarding service.
struct Forwarder(Arc<Proxy>);

impl Forward for Forwarder {
    fn blocking(&self) -> Box<dyn BlockingForward> {
        Box::new(blocking::BlockingForwarder::new(self.0.clone()))
    }

    fn event_loop(&self) -> Box<dyn LoopForward> {
        Box::new(event_loop::LoopForwarder::new(self.0.clone()))
    }
}

/// A per-thread random stream for the random and p2c policies: the proxy's seed and a number
/// drawn once per thread, so that threads do not draw the same sequence.
pub(crate) fn thread_rng(seed: u64) -> archlab_prng::Xoshiro256pp {
    static THREADS: AtomicU64 = AtomicU64::new(0);
    archlab_prng::Xoshiro256pp::keyed(seed, &[THREADS.fetch_add(1, Ordering::Relaxed)])
}
