//! The registry: the one place that names server architectures.
//!
//! Each entry says what the architecture is (one line, shown by `archlab-engine
//! architectures`), which options it accepts, and how to build it from shared pieces. Adding
//! an architecture means composing front-ends and hand-offs and adding one entry here.

use crate::conn::WritePolicy;
use crate::frontend::multi_reactor::{self, LoopWrites, DEFAULT_WRITE_SPIN};
use crate::frontend::pool::BlockingHandOff;
use crate::frontend::staged::{Hop, Ops, Staged};
use crate::frontend::{ncopy, reactor, thread_per_connection, uring, work_stealing};
use crate::options::{OptionError, OptionName, ServerOptions};
use crate::Server;
use archlab_handoff::{ActorConfig, Dispatch, HandOffSpec, QueueConfig, RingConfig, WaitStrategy};
use std::fmt;

pub struct Architecture {
    pub name: &'static str,
    pub description: &'static str,
    /// Options this architecture uses, [`OptionName::COMMON`] included; any other option given
    /// to it is an error.
    pub accepts: &'static [OptionName],
    build: fn(&ServerOptions) -> Box<dyn Server>,
    /// A check that needs the machine rather than the options (io-uring: may this process set
    /// up rings?), run before the server listens so that a refusal comes before `listening`.
    pub preflight: Option<fn() -> std::io::Result<()>>,
    /// Whether the listener handed to `serve` must be bound with SO_REUSEPORT (ncopy: its copies
    /// bind the same address beside it).
    pub reuse_port: bool,
    /// Whether and how the architecture runs a forwarding service (`service::Service::Forward`,
    /// `archlab-engine proxy`).
    pub proxy: ProxySupport,
}

/// How an architecture runs a forwarding service (a reverse proxy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxySupport {
    /// It does not: its threads may not block and it has no non-blocking forwarding (tokio,
    /// io-uring, ncopy, hybrid), or its route splits handling from writing (SEDA, NIO2,
    /// async-4), so no one thread owns a request from its forwarding to its response.
    Unsupported,
    /// The thread serving the connection blocks on the backend (thread-per-connection, the
    /// pools, the handlers of a staged route).
    BlockingCall,
    /// The backend connection is non-blocking, in the event loop's own poller.
    SamePoller,
}

impl ProxySupport {
    pub fn can_proxy(self) -> bool {
        self != ProxySupport::Unsupported
    }

    /// How `archlab-engine architectures` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxySupport::Unsupported => "no",
            ProxySupport::BlockingCall => "blocking call",
            ProxySupport::SamePoller => "same poller",
        }
    }
}

impl Architecture {
    pub fn options(&self) -> impl Iterator<Item = OptionName> + '_ {
        self.accepts.iter().copied()
    }

    pub fn accepts_option(&self, option: OptionName) -> bool {
        self.options().any(|o| o == option)
    }
}

/// Seed 000 §5.3 item 1: "A simple blocking threaded server with a thread pool of size four".
pub const DEFAULT_POOL_THREADS: usize = 4;
/// Seed 000 §5.3: "There are four handlers" / "four handler actors" (ring and actor variants).
pub const DEFAULT_HANDLERS: usize = 4;
/// sTomcat-Async's worker pool: `Executors.newFixedThreadPool(8)` in `sgzhang/AsynMessaging`
/// (`src/com/sgzhang/test/Server.java`, field notes §2.2).
pub const DEFAULT_ASYNC_THREADS: usize = 8;
/// Ring slots: the 1024 of the LMAX-based transport in the field notes (§3); seed 000 gives none.
pub const DEFAULT_RING_SIZE: usize = 1024;
/// Actor mailbox bound and SEDA queue bound: chosen here (the seeds give none), large enough
/// that a 1,000-connection burst does not block the front-end.
pub const DEFAULT_MAILBOX: usize = 1024;
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
/// Akka's default dispatcher `throughput` (messages per actor per turn).
pub const DEFAULT_ACTOR_BATCH: usize = 5;
/// SEDA batching factor: one event per dequeue unless asked (seed 000 names the factor, not a value).
pub const DEFAULT_SEDA_BATCH: usize = 1;

use OptionName::{
    Batch, Copies, Dispatch as DispatchOpt, Dispatchers, Handlers, Loops, Mailbox, PoolControlOpt, PoolIntervalMs,
    PoolMin, QueueCapacity, RecvBuffer, RingSize, SendBuffer, Threads, Wait, WriteSpin,
};
// Each list ends with the socket options every architecture accepts (OptionName::COMMON).
const SOCKET_ONLY: &[OptionName] = &[SendBuffer, RecvBuffer];
const POOL: &[OptionName] = &[Threads, SendBuffer, RecvBuffer];
/// A pool the adaptive controller can size (`crate::pool_control`).
const POOL_CONTROLLED: &[OptionName] = &[Threads, PoolControlOpt, PoolMin, PoolIntervalMs, SendBuffer, RecvBuffer];
const RING: &[OptionName] = &[Handlers, RingSize, Wait, DispatchOpt, SendBuffer, RecvBuffer];
const ACTOR: &[OptionName] = &[Handlers, Mailbox, Dispatchers, Batch, SendBuffer, RecvBuffer];
const SEDA_QUEUE: &[OptionName] =
    &[Handlers, QueueCapacity, Batch, PoolControlOpt, PoolMin, PoolIntervalMs, SendBuffer, RecvBuffer];
const NIO2_RING: &[OptionName] = &[Threads, Handlers, RingSize, Wait, DispatchOpt, SendBuffer, RecvBuffer];
const NIO2_ACTOR: &[OptionName] = &[Threads, Handlers, Mailbox, Dispatchers, Batch, SendBuffer, RecvBuffer];
const NETTY: &[OptionName] = &[Loops, WriteSpin, SendBuffer, RecvBuffer];
const NCOPY: &[OptionName] = &[Copies, SendBuffer, RecvBuffer];
const RINGS: &[OptionName] = &[Loops, SendBuffer, RecvBuffer];
const LOOPS_POOL: &[OptionName] = &[Loops, Threads, SendBuffer, RecvBuffer];
const LOOPS_RING: &[OptionName] = &[Loops, Handlers, RingSize, Wait, DispatchOpt, SendBuffer, RecvBuffer];

/// The three hand-off mechanisms of seed 000 (§5.2).
#[derive(Clone, Copy)]
enum Mechanism {
    Queue,
    Ring,
    Actor,
}

/// A hand-off of `mechanism` with K handlers, from the options (defaults from the seeds).
/// A ring dispatches modulo by default (the idiom of the Java code in the field notes)...
fn handoff(o: &ServerOptions, mechanism: Mechanism) -> HandOffSpec {
    handoff_dispatching(o, mechanism, Dispatch::Modulo)
}

/// ...except behind a blocking front-end, whose handlers hold a connection for its lifetime:
/// with modulo dispatch the fifth connection would wait for handler 0 even while handlers 1-3
/// are idle, so there a ring's default is the work pool (LMAX's `WorkerPool`).
fn handoff_dispatching(o: &ServerOptions, mechanism: Mechanism, default_dispatch: Dispatch) -> HandOffSpec {
    let k = o.handlers.unwrap_or(DEFAULT_HANDLERS);
    match mechanism {
        Mechanism::Queue => HandOffSpec::Queue(QueueConfig {
            capacity: Some(o.queue_capacity.unwrap_or(DEFAULT_QUEUE_CAPACITY)),
            handlers: k,
            batch: o.batch.unwrap_or(DEFAULT_SEDA_BATCH),
        }),
        Mechanism::Ring => HandOffSpec::Ring(RingConfig {
            slots: o.ring_size.unwrap_or(DEFAULT_RING_SIZE),
            handlers: k,
            wait: o.wait.unwrap_or(WaitStrategy::Blocking),
            dispatch: o.dispatch.unwrap_or(default_dispatch),
        }),
        Mechanism::Actor => HandOffSpec::Actor(ActorConfig {
            actors: k,
            mailbox: o.mailbox.unwrap_or(DEFAULT_MAILBOX),
            dispatchers: o.dispatchers.unwrap_or(k),
            batch: o.batch.unwrap_or(DEFAULT_ACTOR_BATCH),
        }),
    }
}

/// A thread pool behind an unbounded FIFO (`Executors.newFixedThreadPool(n)`).
fn pool(threads: usize) -> HandOffSpec {
    HandOffSpec::Queue(QueueConfig { capacity: None, handlers: threads, batch: 1 })
}

fn blocking(o: &ServerOptions, handoff: HandOffSpec) -> Box<dyn Server> {
    Box::new(BlockingHandOff::new(o, handoff))
}

/// Seed 000's NIO-X: the poller reads, X's handlers handle and write.
fn reactor_with(o: &ServerOptions, m: Mechanism) -> Box<dyn Server> {
    let hops = vec![Hop::Poller(Ops::READ), Hop::Stage { ops: Ops::HANDLE_WRITE, stage: 0 }];
    Box::new(Staged::new(o, hops, vec![handoff(o, m)], WritePolicy::Spin))
}

/// The poller reads, X's handlers handle and write, behind N pollers (default one per CPU)
/// fed by an acceptor: seed 004's HTTPCore-NIO reactor (X a pool of workers) and its Netty
/// transport handing requests to handlers over an LMAX ring.
fn reactors_with(o: &ServerOptions, handoff: HandOffSpec) -> Box<dyn Server> {
    let hops = vec![Hop::Poller(Ops::READ), Hop::Stage { ops: Ops::HANDLE_WRITE, stage: 0 }];
    let pollers = o.loops.unwrap_or_else(|| o.cpu_count());
    Box::new(Staged::new(o, hops, vec![handoff], WritePolicy::Spin).with_pollers(pollers))
}

/// NIO2's completion pool: Java's default group on Linux starts with one thread per CPU.
fn nio2_pool(o: &ServerOptions) -> HandOffSpec {
    pool(o.threads.unwrap_or_else(|| o.cpu_count()))
}

/// Seed 000's NIO2-X: the completion pool reads, X's handlers handle and write.
fn nio2_with(o: &ServerOptions, m: Mechanism) -> Box<dyn Server> {
    let hops = vec![Hop::Stage { ops: Ops::READ, stage: 0 }, Hop::Stage { ops: Ops::HANDLE_WRITE, stage: 1 }];
    Box::new(Staged::new(o, hops, vec![nio2_pool(o), handoff(o, m)], WritePolicy::UntilBlocked))
}

/// SEDA: read, handle and write stages, each with its own X.
fn seda(o: &ServerOptions, m: Mechanism) -> Box<dyn Server> {
    let hops = vec![
        Hop::Stage { ops: Ops::READ, stage: 0 },
        Hop::Stage { ops: Ops::HANDLE, stage: 1 },
        Hop::Stage { ops: Ops::WRITE, stage: 2 },
    ];
    Box::new(Staged::new(o, hops, vec![handoff(o, m), handoff(o, m), handoff(o, m)], WritePolicy::Spin))
}

/// Netty's acceptor + N loops (default one per CPU), write-spin limit 16 unless set.
fn multi_reactor(o: &ServerOptions, writes: LoopWrites) -> Box<dyn Server> {
    let loops = o.loops.unwrap_or_else(|| o.cpu_count());
    let spin = o.write_spin.unwrap_or(DEFAULT_WRITE_SPIN);
    Box::new(multi_reactor::MultiReactor::new(o, loops, spin, writes))
}

pub static REGISTRY: &[Architecture] = &[
    Architecture {
        name: "thread-per-connection",
        description: "acceptor thread spawns one blocking thread per connection (sTomcat-Sync, seed 001)",
        accepts: SOCKET_ONLY,
        build: |o| Box::new(thread_per_connection::ThreadPerConnection::new(o)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "sync",
        description: "seed 001's sTomcat-Sync under its own name: thread-per-connection, 0 hand-offs per request",
        accepts: SOCKET_ONLY,
        build: |o| Box::new(thread_per_connection::ThreadPerConnection::new(o)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "blocking",
        description: "acceptor + queue of connections + pool of P blocking workers, default P=4 (Blocking, seed 000)",
        accepts: POOL_CONTROLLED,
        build: |o| blocking(o, pool(o.threads.unwrap_or(DEFAULT_POOL_THREADS))),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "blocking-ring",
        description: "acceptor publishes connections into a ring, K=4 blocking handlers, work-pool dispatch (Blocking Disruptor, seed 000)",
        accepts: RING,
        build: |o| blocking(o, handoff_dispatching(o, Mechanism::Ring, Dispatch::WorkPool)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "blocking-actor",
        description: "acceptor tells connections to K=4 actors serving them blocking (Blocking Actor, seed 000)",
        accepts: ACTOR,
        build: |o| blocking(o, handoff(o, Mechanism::Actor)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "single-thread",
        description: "one epoll thread accepts, reads, handles, write-spins (SingleT-Async, seed 001; 0 hand-offs)",
        accepts: SOCKET_ONLY,
        build: |o| Box::new(reactor::SingleThread::new(o)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::SamePoller,
    },
    Architecture {
        name: "reactor",
        description: "seed 000's NIO server under its own name: one epoll thread does everything",
        accepts: SOCKET_ONLY,
        build: |o| Box::new(reactor::SingleThread::new(o)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::SamePoller,
    },
    Architecture {
        name: "reactor-ring",
        description: "epoll thread reads, ring hands requests to K=4 handlers that handle and write (NIO Disruptor, seed 000)",
        accepts: RING,
        build: |o| reactor_with(o, Mechanism::Ring),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "reactor-actor",
        description: "epoll thread reads, K=4 actors handle and write (NIO Actor, seed 000)",
        accepts: ACTOR,
        build: |o| reactor_with(o, Mechanism::Actor),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "nio2",
        description: "emulated proactor: epoll thread + completion pool (default one thread per CPU) for reads and writes (NIO2, seed 000)",
        accepts: POOL,
        build: |o| {
            let hops = vec![Hop::Stage { ops: Ops::READ_HANDLE, stage: 0 }, Hop::Stage { ops: Ops::WRITE, stage: 0 }];
            Box::new(Staged::new(o, hops, vec![nio2_pool(o)], WritePolicy::UntilBlocked))
        },
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "nio2-ring",
        description: "NIO2 completion pool reads, ring hands requests to K=4 handlers (NIO2 Disruptor, seed 000)",
        accepts: NIO2_RING,
        build: |o| nio2_with(o, Mechanism::Ring),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "nio2-actor",
        description: "NIO2 completion pool reads, K=4 actors handle and write (NIO2 Actor, seed 000)",
        accepts: NIO2_ACTOR,
        build: |o| nio2_with(o, Mechanism::Actor),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "seda-queue",
        description: "SEDA: read, handle, write stages, each a bounded queue + K=4 threads (SEDA Queue, seed 000)",
        accepts: SEDA_QUEUE,
        build: |o| seda(o, Mechanism::Queue),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "seda-ring",
        description: "SEDA with a ring and K=4 handlers per stage (SEDA Disruptor, seed 000)",
        accepts: RING,
        build: |o| seda(o, Mechanism::Ring),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "seda-actor",
        description: "SEDA with K=4 actors per stage (SEDA Actor, seed 000)",
        accepts: ACTOR,
        build: |o| seda(o, Mechanism::Actor),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "async-fix",
        description: "epoll poller + pool of P=8 workers that read, handle and write: 2 hand-offs per request (sTomcat-Async-Fix, seed 001)",
        accepts: POOL,
        build: |o| {
            let hops = vec![Hop::Stage { ops: Ops::ALL, stage: 0 }];
            Box::new(Staged::new(o, hops, vec![pool(o.threads.unwrap_or(DEFAULT_ASYNC_THREADS))], WritePolicy::Spin))
        },
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "async-4",
        description: "epoll poller + pool of P=8: read+handle, back to the poller, write: 4 hand-offs per request (sTomcat-Async, seed 001)",
        accepts: POOL,
        build: |o| {
            let hops = vec![
                Hop::Stage { ops: Ops::READ_HANDLE, stage: 0 },
                Hop::AwaitWritable,
                Hop::Stage { ops: Ops::WRITE, stage: 0 },
            ];
            Box::new(Staged::new(o, hops, vec![pool(o.threads.unwrap_or(DEFAULT_ASYNC_THREADS))], WritePolicy::Spin))
        },
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "netty",
        description: "acceptor + N epoll loops (default N = CPUs), connection pinned to its loop, write-spin limit 16 (NettyServer, seed 001)",
        accepts: NETTY,
        build: |o| multi_reactor(o, LoopWrites::Netty),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::SamePoller,
    },
    Architecture {
        name: "hybrid",
        description: "HybridNetty: netty's acceptor + N loops; per request class, learned in warm-up and corrected at run time, the netty write path for responses that write-spin, the single-thread path for the rest (seed 001 §5.2)",
        accepts: NETTY,
        build: |o| multi_reactor(o, LoopWrites::Hybrid),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "reactor-pool",
        description: "N epoll reactors (default N = CPUs) read, a pool of W=8 workers handles and writes (HTTPCore-NIO's reactor + worker pool, seed 004)",
        accepts: LOOPS_POOL,
        build: |o| reactors_with(o, pool(o.threads.unwrap_or(DEFAULT_ASYNC_THREADS))),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "netty-ring",
        description: "disruptor: N netty-style epoll loops (default N = CPUs) read, a ring hands requests to K=4 handlers that handle and write (seed 004)",
        accepts: LOOPS_RING,
        build: |o| reactors_with(o, handoff(o, Mechanism::Ring)),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::BlockingCall,
    },
    Architecture {
        name: "tokio",
        description: "work-stealing baseline: blocking acceptor + tokio multi-thread runtime of W workers (default W = CPUs), one task per connection",
        accepts: POOL,
        build: |o| Box::new(work_stealing::WorkStealing::new(o, o.threads.unwrap_or_else(|| o.cpu_count()))),
        preflight: None,
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "io-uring",
        description: "kernel proactor: N threads (default N = CPUs), one io_uring each, multishot accept on the shared listener, recv/send completions handled inline (0 hand-offs)",
        accepts: RINGS,
        build: |o| Box::new(uring::IoUringProactor::new(o, o.loops.unwrap_or_else(|| o.cpu_count()))),
        preflight: Some(uring::probe),
        reuse_port: false,
        proxy: ProxySupport::Unsupported,
    },
    Architecture {
        name: "ncopy",
        description: "N-copy model: N single-thread event loops (default N = CPUs), one SO_REUSEPORT listener each, copy i pinned to CPU i of the list (seed 001 §4)",
        accepts: NCOPY,
        build: |o| Box::new(ncopy::NCopy::new(o, o.copies.unwrap_or_else(|| o.cpu_count()))),
        preflight: None,
        reuse_port: true,
        proxy: ProxySupport::Unsupported,
    },
];

/// Run the named architecture's [`Architecture::preflight`] (Ok for unknown names: `build`
/// refuses those).
pub fn preflight(name: &str) -> std::io::Result<()> {
    match lookup(name).and_then(|a| a.preflight) {
        Some(check) => check(),
        None => Ok(()),
    }
}

/// How the listener handed to the named architecture's `serve` must be bound
/// ([`Architecture::reuse_port`]).
pub fn listen_options(name: &str) -> archlab_netio::socket::ListenOptions {
    let reuse_port = lookup(name).is_some_and(|a| a.reuse_port);
    archlab_netio::socket::ListenOptions { reuse_port, ..Default::default() }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    UnknownArchitecture {
        name: String,
    },
    OptionNotAccepted {
        architecture: &'static str,
        option: OptionName,
        value: serde_json::Value,
    },
    /// A value out of its option's range.
    Invalid(OptionError),
    /// A forwarding service given to an architecture that cannot run one.
    CannotProxy {
        architecture: &'static str,
    },
}

/// The names of the architectures that can proxy, comma-separated.
pub fn proxy_architectures() -> String {
    let names: Vec<&str> = REGISTRY.iter().filter(|a| a.proxy.can_proxy()).map(|a| a.name).collect();
    names.join(", ")
}

impl BuildError {
    /// The refusal as the option contract says it: the field, the allowed values, the value.
    pub fn option_error(&self) -> OptionError {
        match self {
            BuildError::UnknownArchitecture { name } => {
                let names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
                OptionError::new("architecture", format!("one of {}", names.join(", ")), format!("{name:?}"))
            }
            BuildError::OptionNotAccepted { architecture, option, value } => {
                let a = lookup(architecture).expect("registered");
                let accepted: Vec<&str> = a.options().map(|o| o.as_str()).collect();
                let takers: Vec<&str> = REGISTRY.iter().filter(|a| a.accepts_option(*option)).map(|a| a.name).collect();
                OptionError::new(
                    option.as_str(),
                    format!(
                        "no {option} value for architecture '{architecture}', which accepts options: {}",
                        accepted.join(", ")
                    ),
                    archlab_options::plain(value),
                )
                .with_hint(format!("{option} applies to {}", takers.join(", ")))
            }
            BuildError::Invalid(e) => e.clone(),
            BuildError::CannotProxy { architecture } => OptionError::new(
                "arch",
                format!("an architecture that can proxy ({})", proxy_architectures()),
                format!("{architecture:?}"),
            ),
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnknownArchitecture { .. } => self.option_error().fmt(f),
            BuildError::OptionNotAccepted { architecture, option, .. } => {
                let a = lookup(architecture).expect("registered");
                let accepted: Vec<&str> = a.options().map(|o| o.as_str()).collect();
                let accepted = accepted.join(", ");
                write!(f, "option {option} does not apply to architecture {architecture} (it accepts: {accepted})")
            }
            BuildError::Invalid(e) => e.fmt(f),
            BuildError::CannotProxy { .. } => self.option_error().fmt(f),
        }
    }
}

impl std::error::Error for BuildError {}

pub fn lookup(name: &str) -> Option<&'static Architecture> {
    REGISTRY.iter().find(|a| a.name == name)
}

/// Check an architecture and its options without building it: the name is registered, every
/// option with a name of its own is one the architecture accepts, and every value is in range.
pub fn check(name: &str, options: &ServerOptions) -> Result<&'static Architecture, BuildError> {
    let arch = lookup(name).ok_or_else(|| BuildError::UnknownArchitecture { name: name.to_string() })?;
    for &option in OptionName::ALL {
        if let Some(value) = options.value_of(option) {
            if !arch.accepts_option(option) {
                return Err(BuildError::OptionNotAccepted { architecture: arch.name, option, value });
            }
        }
    }
    options.check_values().map_err(BuildError::Invalid)?;
    check_pool_control(arch, options)?;
    if options.service.is_forward() && !arch.proxy.can_proxy() {
        return Err(BuildError::CannotProxy { architecture: arch.name });
    }
    Ok(arch)
}

/// `pool_min` and `pool_interval_ms` set `pool_control`, so they need it (never silently
/// ignored), and the smallest size must fit in the pool.
fn check_pool_control(arch: &Architecture, options: &ServerOptions) -> Result<(), BuildError> {
    if options.pool_control.is_none() {
        for (name, set) in
            [("pool_min", options.pool_min.is_some()), ("pool_interval_ms", options.pool_interval_ms.is_some())]
        {
            if set {
                let e = OptionError::new(name, "no value without pool_control", "a value")
                    .with_hint("it sets the adaptive pool of pool_control = \"hill-climb\"");
                return Err(BuildError::Invalid(e));
            }
        }
        return Ok(());
    }
    let (size, option) = if arch.accepts_option(Threads) {
        (options.threads.unwrap_or(DEFAULT_POOL_THREADS), "threads")
    } else {
        (options.handlers.unwrap_or(DEFAULT_HANDLERS), "handlers")
    };
    if let Some(min) = options.pool_min.filter(|&m| m > size) {
        let e =
            OptionError::new("pool_min", format!("an integer in 1..={size} (the pool's {option})"), min.to_string());
        return Err(BuildError::Invalid(e));
    }
    Ok(())
}

/// Build the named architecture, refusing options it does not use and values out of range.
pub fn build(name: &str, options: &ServerOptions) -> Result<Box<dyn Server>, BuildError> {
    let arch = check(name, options)?;
    Ok((arch.build)(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_described() {
        let mut names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        assert!(REGISTRY.iter().all(|a| !a.description.is_empty()));
    }

    #[test]
    fn refuses_unknown_names_and_foreign_options() {
        let e = build("blockin", &ServerOptions::default()).err().unwrap();
        assert!(e.to_string().contains("expected one of thread-per-connection, sync, blocking"), "{e}");
        let o = ServerOptions { loops: Some(2), ..Default::default() };
        let e = build("blocking", &o).err().unwrap();
        assert_eq!(
            e.to_string(),
            "option loops does not apply to architecture blocking (it accepts: threads, pool_control, pool_min, pool_interval_ms, sndbuf, rcvbuf)"
        );
        let o = ServerOptions { threads: Some(0), ..Default::default() };
        let e = build("blocking", &o).err().unwrap();
        assert!(e.to_string().contains("threads: expected an integer in 1..=65536, got 0"), "{e}");
        let o = ServerOptions { ring_size: Some(1000), ..Default::default() };
        let e = build("seda-ring", &o).err().unwrap();
        assert_eq!(e.to_string(), "ring_size: expected a power of two in 2..=16777216, got 1000");
        let o = ServerOptions { wait: Some(WaitStrategy::Yielding), ..Default::default() };
        let e = build("async-fix", &o).err().unwrap();
        assert_eq!(
            e.to_string(),
            "option wait does not apply to architecture async-fix (it accepts: threads, sndbuf, rcvbuf)"
        );
        let o = ServerOptions { sndbuf: Some(512), ..Default::default() };
        let e = build("netty", &o).err().unwrap();
        assert_eq!(e.to_string(), "sndbuf: expected an integer in 1024..=1073741824, got 512");
    }

    #[test]
    fn every_architecture_accepts_the_socket_options() {
        for a in REGISTRY {
            assert!(OptionName::COMMON.iter().all(|&o| a.accepts_option(o)), "{}", a.name);
        }
    }

    #[test]
    fn the_seeds_architectures_are_registered() {
        for name in [
            "blocking",
            "blocking-ring",
            "blocking-actor",
            "reactor",
            "reactor-ring",
            "reactor-actor",
            "nio2",
            "nio2-ring",
            "nio2-actor",
            "seda-queue",
            "seda-ring",
            "seda-actor",
            "sync",
            "async-4",
            "async-fix",
            "single-thread",
            "netty",
            "ncopy",
            "hybrid",
            "tokio",
            "io-uring",
            "reactor-pool",
            "netty-ring",
        ] {
            assert!(lookup(name).is_some(), "{name}");
        }
    }

    #[test]
    fn pool_control_options_are_refused_where_they_would_be_ignored() {
        use crate::pool_control::PoolControl;
        let o = |f: fn(&mut ServerOptions)| {
            let mut o = ServerOptions::default();
            f(&mut o);
            o
        };
        let e = check("blocking", &o(|o| o.pool_min = Some(2))).err().unwrap().to_string();
        assert!(e.starts_with("pool_min: expected no value without pool_control"), "{e}");
        let e = check("blocking", &o(|o| o.pool_interval_ms = Some(100))).err().unwrap().to_string();
        assert!(e.starts_with("pool_interval_ms: expected no value without pool_control"), "{e}");
        let e = check("blocking", &o(|o| (o.pool_control, o.pool_min) = (Some(PoolControl::HillClimb), Some(8))));
        assert!(e
            .err()
            .unwrap()
            .to_string()
            .starts_with("pool_min: expected an integer in 1..=4 (the pool's threads)"));
        let e = check(
            "seda-queue",
            &o(|o| (o.pool_control, o.handlers, o.pool_min) = (Some(PoolControl::HillClimb), Some(2), Some(3))),
        );
        assert!(e
            .err()
            .unwrap()
            .to_string()
            .starts_with("pool_min: expected an integer in 1..=2 (the pool's handlers)"));
        let e = check("netty", &o(|o| o.pool_control = Some(PoolControl::HillClimb))).err().unwrap().to_string();
        assert!(e.starts_with("option pool_control does not apply to architecture netty"), "{e}");
        assert!(
            check("blocking", &o(|o| (o.pool_control, o.threads) = (Some(PoolControl::HillClimb), Some(32)))).is_ok()
        );
        assert!(check("seda-queue", &o(|o| o.pool_control = Some(PoolControl::HillClimb))).is_ok());
    }
}
