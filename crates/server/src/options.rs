//! Options every architecture is built from. Which options an architecture accepts is
//! declared in the registry; an option given to an architecture that does not use it is an
//! error, never silently ignored, and a value out of range is refused with the allowed values.

use archlab_handoff::{Dispatch, WaitStrategy};
use archlab_netio::CpuList;
use archlab_wire::http::Limits;
use std::fmt;

/// The tunable options, by name (as on the command line, with `-` for `_`, and in specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionName {
    /// Size of a worker pool (blocking pool, reactor workers, NIO2 completion pool).
    Threads,
    /// Number of event loops (netty, hybrid) or of rings, one thread each (io-uring).
    Loops,
    /// K: handler threads of a ring, actors of an actor system, threads of a SEDA stage.
    Handlers,
    /// Ring slots (a power of two).
    RingSize,
    /// Ring wait strategy: blocking | yielding | busy-spin.
    Wait,
    /// Ring dispatch: modulo | work-pool.
    Dispatch,
    /// Actor mailbox capacity.
    Mailbox,
    /// Actor dispatcher threads.
    Dispatchers,
    /// Items taken per dequeue (SEDA batching factor, actor throughput).
    Batch,
    /// Capacity of each SEDA stage queue.
    QueueCapacity,
    /// Netty's write-spin limit: write calls per flush round.
    WriteSpin,
    /// SO_SNDBUF of accepted connections, bytes (Linux doubles it).
    SendBuffer,
    /// SO_RCVBUF of accepted connections, bytes (Linux doubles it).
    RecvBuffer,
    /// N of the N-copy model: single-threaded copies, one SO_REUSEPORT listener each.
    Copies,
}

impl OptionName {
    pub const ALL: [OptionName; 14] = [
        OptionName::Threads,
        OptionName::Loops,
        OptionName::Handlers,
        OptionName::RingSize,
        OptionName::Wait,
        OptionName::Dispatch,
        OptionName::Mailbox,
        OptionName::Dispatchers,
        OptionName::Batch,
        OptionName::QueueCapacity,
        OptionName::WriteSpin,
        OptionName::SendBuffer,
        OptionName::RecvBuffer,
        OptionName::Copies,
    ];

    /// Options every architecture accepts (socket options of accepted connections).
    pub const COMMON: [OptionName; 2] = [OptionName::SendBuffer, OptionName::RecvBuffer];

    pub fn as_str(self) -> &'static str {
        match self {
            OptionName::Threads => "threads",
            OptionName::Loops => "loops",
            OptionName::Handlers => "handlers",
            OptionName::RingSize => "ring_size",
            OptionName::Wait => "wait",
            OptionName::Dispatch => "dispatch",
            OptionName::Mailbox => "mailbox",
            OptionName::Dispatchers => "dispatchers",
            OptionName::Batch => "batch",
            OptionName::QueueCapacity => "queue_capacity",
            OptionName::WriteSpin => "write_spin",
            OptionName::SendBuffer => "sndbuf",
            OptionName::RecvBuffer => "rcvbuf",
            OptionName::Copies => "copies",
        }
    }

    /// The allowed values, for messages; `check` enforces them.
    pub fn allowed(self) -> &'static str {
        match self {
            OptionName::Wait => "one of blocking, yielding, busy-spin",
            OptionName::Dispatch => "one of modulo, work-pool",
            OptionName::RingSize => "a power of two in 2..=16777216",
            OptionName::Mailbox | OptionName::QueueCapacity => "an integer in 1..=16777216",
            OptionName::SendBuffer | OptionName::RecvBuffer => "an integer in 1024..=1073741824",
            _ => "an integer in 1..=65536",
        }
    }

    /// Whether a numeric value is allowed (Wait and Dispatch are typed, so always valid).
    pub fn check(self, value: usize) -> bool {
        match self {
            OptionName::Wait | OptionName::Dispatch => true,
            OptionName::RingSize => value.is_power_of_two() && (2..=1 << 24).contains(&value),
            OptionName::Mailbox | OptionName::QueueCapacity => (1..=1 << 24).contains(&value),
            OptionName::SendBuffer | OptionName::RecvBuffer => (1024..=1 << 30).contains(&value),
            _ => (1..=65_536).contains(&value),
        }
    }
}

impl fmt::Display for OptionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An option's value as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionValue {
    Count(usize),
    Wait(WaitStrategy),
    Dispatch(Dispatch),
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Count(n) => write!(f, "{n}"),
            OptionValue::Wait(w) => f.write_str(w.as_str()),
            OptionValue::Dispatch(d) => f.write_str(d.as_str()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub threads: Option<usize>,
    pub loops: Option<usize>,
    pub handlers: Option<usize>,
    pub ring_size: Option<usize>,
    pub wait: Option<WaitStrategy>,
    pub dispatch: Option<Dispatch>,
    pub mailbox: Option<usize>,
    pub dispatchers: Option<usize>,
    pub batch: Option<usize>,
    pub queue_capacity: Option<usize>,
    pub write_spin: Option<usize>,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    /// N-copy model: number of copies (default: one per CPU of the server).
    pub copies: Option<usize>,
    /// CPUs the server runs on; threads that are pinned individually are spread over them.
    pub cpus: Option<CpuList>,
    pub limits: Limits,
    /// TCP_NODELAY on accepted connections (default on: responses go out at once).
    pub nodelay: bool,
    /// The downstream HTTP service of `/call?ms=` (`--downstream HOST:PORT`); without it
    /// `/call` answers 503.
    pub downstream: Option<std::net::SocketAddr>,
    /// The connection pool of `/db?id=` (`--db URL`), shared by every thread of the process;
    /// without it `/db` answers 503.
    pub db: Option<std::sync::Arc<archlab_work::DbPool>>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            threads: None,
            loops: None,
            handlers: None,
            ring_size: None,
            wait: None,
            dispatch: None,
            mailbox: None,
            dispatchers: None,
            batch: None,
            queue_capacity: None,
            write_spin: None,
            sndbuf: None,
            rcvbuf: None,
            copies: None,
            cpus: None,
            limits: Limits::default(),
            nodelay: true,
            downstream: None,
            db: None,
        }
    }
}

impl ServerOptions {
    pub fn get(&self, name: OptionName) -> Option<OptionValue> {
        let count = |v: Option<usize>| v.map(OptionValue::Count);
        match name {
            OptionName::Threads => count(self.threads),
            OptionName::Loops => count(self.loops),
            OptionName::Handlers => count(self.handlers),
            OptionName::RingSize => count(self.ring_size),
            OptionName::Wait => self.wait.map(OptionValue::Wait),
            OptionName::Dispatch => self.dispatch.map(OptionValue::Dispatch),
            OptionName::Mailbox => count(self.mailbox),
            OptionName::Dispatchers => count(self.dispatchers),
            OptionName::Batch => count(self.batch),
            OptionName::QueueCapacity => count(self.queue_capacity),
            OptionName::WriteSpin => count(self.write_spin),
            OptionName::SendBuffer => count(self.sndbuf),
            OptionName::RecvBuffer => count(self.rcvbuf),
            OptionName::Copies => count(self.copies),
        }
    }

    /// Number of CPUs the server may use: the pinned list, else the CPUs this process may run on.
    pub fn cpu_count(&self) -> usize {
        match &self.cpus {
            Some(l) => l.ids().len(),
            None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        }
    }
}
