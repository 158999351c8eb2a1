//! The options of a server, defined once: name, type, allowed values, default and
//! documentation of each in one declaration ([`ServerOptions`]), from which come the flags of
//! `archlab-engine serve`, the JSON of `serve --options FILE` and of the Python side's
//! `archlab._native.check_server`, the checks, and the schema the spec reads its `[server]` keys
//! from. Adding an option is one line here (plus, for an option that only some architectures
//! take, its name in their lists in the registry).
//!
//! Which options an architecture accepts is declared in the registry: the options with a name
//! of their own ([`OptionName`]) are refused by an architecture that does not list them, never
//! silently ignored; the others (CPUs, socket and HTTP settings, the workloads' services)
//! apply to every architecture. A value out of range is refused with the allowed values,
//! whether it comes from a flag, from JSON or from code (`registry::build` checks).

use crate::pool_control::{ControlSettings, PoolControl, POOL_INTERVAL_DEFAULT_MS};
use crate::service::Service;
use crate::timeouts::Timeouts;
use archlab_handoff::{Dispatch, WaitStrategy};
use archlab_netio::CpuList;
use archlab_options::{Choice, Int, Kind, NoFlag, PowerOfTwo, Text};
use archlab_wire::http::Limits;
use archlab_workload::{
    DbConfig, DbPool, ProgramSet, DB_POOL_DEFAULT, DB_POOL_MAX, DB_WAIT_DEFAULT_MS, DB_WAIT_MAX_MS,
};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;

pub use archlab_options::{OptionError, OptionInfo};

/// Sizes of pools, loops, handlers, batches, copies.
const COUNT: Int<usize> = Int::new(1, 65_536);
/// Bounds of queues and mailboxes (2^24 items).
const CAPACITY: Int<usize> = Int::new(1, 1 << 24);
/// SO_SNDBUF / SO_RCVBUF in bytes.
const SOCKET_BUFFER: Int<usize> = Int::new(1024, 1 << 30);
/// Timeouts in ms, 0 for none; at most a day.
const TIMEOUT_MS: Int<u64> = Int::new(0, 86_400_000);
/// nginx's `client_header_timeout` (and `client_body_timeout`): 60 s.
pub const REQUEST_TIMEOUT_DEFAULT_MS: u64 = 60_000;
/// nginx's `keepalive_timeout`: 75 s.
pub const IDLE_TIMEOUT_DEFAULT_MS: u64 = 75_000;
/// Unsent response bytes a connection may hold by default: 1 MiB, four times the largest of
/// seed 001's responses (100 KB), so that the seeds' workloads never meet the bound, and a
/// part of a streamed body is large enough that refilling costs nothing next to sending it.
pub const MAX_OUTPUT_DEFAULT_BYTES: usize = 1 << 20;

archlab_options::option_set! {
    /// What a server architecture is built from: the options of `archlab-engine serve`.
    pub struct ServerOptions names OptionName {
        /// Worker pool size (architectures with a pool).
        threads: Option<usize> = None, COUNT, named Threads;
        /// Number of event loops (netty, hybrid) or of io_uring rings, one thread each (io-uring).
        loops: Option<usize> = None, COUNT, named Loops;
        /// Handlers K of a ring, actors of an actor system, threads per SEDA stage (default 4).
        handlers: Option<usize> = None, COUNT, named Handlers;
        /// Ring slots, a power of two (default 1024).
        ring_size: Option<usize> = None, PowerOfTwo { min: 2, max: 1 << 24 }, named RingSize;
        /// Ring wait strategy: blocking (default), yielding, busy-spin.
        wait: Option<WaitStrategy> = None, Choice { all: &WaitStrategy::ALL, name: WaitStrategy::as_str }, named Wait;
        /// Ring dispatch: modulo or work-pool (default modulo; work-pool behind a blocking front-end).
        dispatch: Option<Dispatch> = None, Choice { all: &Dispatch::ALL, name: Dispatch::as_str }, named Dispatch;
        /// Actor mailbox capacity (default 1024).
        mailbox: Option<usize> = None, CAPACITY, named Mailbox;
        /// Actor dispatcher threads (default: one per actor).
        dispatchers: Option<usize> = None, COUNT, named Dispatchers;
        /// Items per dequeue: SEDA batching factor (default 1), actor throughput (default 5).
        batch: Option<usize> = None, COUNT, named Batch;
        /// Capacity of each SEDA stage queue (default 1024).
        queue_capacity: Option<usize> = None, CAPACITY, named QueueCapacity;
        /// Resize the worker pool while serving: `hill-climb` (hill climbing on measured
        /// throughput, as the .NET thread pool does; blocking and seda-queue). The pool's
        /// threads (`threads`, SEDA's `handlers`) are the largest size; the sizes chosen are
        /// in the `rusage` line's `pool_sizes`.
        pool_control: Option<PoolControl> = None, Choice { all: &PoolControl::ALL, name: PoolControl::as_str }, named PoolControlOpt;
        /// Smallest pool size of `pool_control`, and the size it starts at (default 1).
        pool_min: Option<usize> = None, COUNT, named PoolMin;
        /// Control interval of `pool_control`, in ms: the throughput of each interval decides
        /// the next size (default 500).
        pool_interval_ms: Option<u64> = None, Int::<u64>::new(10, 60_000), named PoolIntervalMs;
        /// Netty's write-spin limit: write calls per flush round (default 16).
        write_spin: Option<usize> = None, COUNT, named WriteSpin;
        /// SO_SNDBUF of accepted connections, bytes (Linux doubles it).
        sndbuf: Option<usize> = None, SOCKET_BUFFER, named SendBuffer;
        /// SO_RCVBUF of accepted connections, bytes (Linux doubles it).
        rcvbuf: Option<usize> = None, SOCKET_BUFFER, named RecvBuffer;
        /// N-copy model: number of single-thread copies (ncopy; default one per CPU).
        copies: Option<usize> = None, COUNT, named Copies;
        /// CPUs to run on, e.g. "1" or "2-3"; the whole process is pinned to them, threads
        /// pinned one by one are spread over them.
        cpus: Option<CpuList> = None, Text::<CpuList>::of("a CPU list such as 1, 0-1 or 0,2-3", "CPUS");
        /// Largest request body accepted, in bytes (larger -> 413).
        limits as max_body_bytes: Limits = Limits::default(), BodyLimit;
        /// TCP_NODELAY on accepted connections, so that responses go out at once (`--no-nodelay`
        /// turns it off).
        nodelay: bool = true, NoFlag;
        /// How long a request may take to arrive, in ms, from its first byte to its last (head
        /// and body): a client still sending it after that long (slowloris, a stalled body) is
        /// answered 408 and the connection closed. 0: no limit (experiments on slow clients).
        /// Default 60 s, nginx's client_header_timeout.
        request_timeout_ms: u64 = REQUEST_TIMEOUT_DEFAULT_MS, TIMEOUT_MS;
        /// How long a connection may stay idle, in ms (no request in progress and no response
        /// unsent: a new connection that says nothing, a keep-alive connection between
        /// requests); then the server closes it. 0: no limit. Default 75 s, nginx's
        /// keepalive_timeout.
        idle_timeout_ms: u64 = IDLE_TIMEOUT_DEFAULT_MS, TIMEOUT_MS;
        /// Connections the server holds at once, at most: at the cap it stops accepting (new
        /// connections wait in the listen backlog) until one closes. 0: no cap but the
        /// process's descriptor limit.
        max_connections: usize = 0, Int::<usize>::new(0, 1 << 24);
        /// Unsent response bytes a connection may hold: over it, the connection's further
        /// requests wait until its output drains, and a larger response body is produced in
        /// parts of this size as the client takes them (streamed), never held whole.
        max_output_bytes: usize = MAX_OUTPUT_DEFAULT_BYTES, Int::<usize>::new(4096, 1 << 30);
        /// Downstream HTTP service of `/call?ms=M` (an `archlab-engine serve --arch sync` that
        /// answers `/delay?ms=M`), as HOST:PORT; without it `/call` answers 503.
        downstream: Option<SocketAddr> = None,
            Text::<SocketAddr>::of("HOST:PORT with a numeric host, e.g. 127.0.0.1:8081", "HOST:PORT");
        /// PostgreSQL database of `/db?id=N`, as postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME
        /// (HOST an IP address or localhost); its table `emp(id, first_name)` is looked up by id.
        /// Without it `/db` answers 503.
        db: Option<DbConfig> = None, Text::<DbConfig> {
            allowed: archlab_workload::DB_URL_FORM,
            value_name: "URL",
            parse: |s| DbConfig::from_url(s).map_err(str::to_string),
            show: DbConfig::url,
        };
        /// Connections of the `/db` pool, opened at start-up and shared by every thread (with `db`;
        /// HikariCP's default).
        db_pool: usize = DB_POOL_DEFAULT, Int::<usize>::new(1, DB_POOL_MAX as u64);
        /// How long a `/db` request waits for a free connection before answering 503, in ms
        /// (with `db`).
        db_wait_ms: u64 = DB_WAIT_DEFAULT_MS, Int::<u64>::new(1, DB_WAIT_MAX_MS);
        /// Service programs of `/program?name=P`: a TOML file of named programs (steps of CPU
        /// work, PostgreSQL lookups, downstream calls and fan-outs, sleeps, bounded loops), read
        /// and checked when the options are; without it `/program` answers 503.
        programs: Option<ProgramSet> = None, Text::<ProgramSet> {
            allowed: archlab_workload::PROGRAM_FILE_FORM,
            value_name: "FILE",
            parse: |s| ProgramSet::load(std::path::Path::new(s)).map_err(|e| e.to_string()),
            show: ProgramSet::source,
        };
        /// An option that exists only in builds with the `contract-probe` feature and does
        /// nothing: the test that an option declared here reaches specs and the engine without
        /// any change to the Python side.
        #[cfg(feature = "contract-probe")]
        contract_probe: Option<usize> = None, COUNT;
    }
    runtime {
        /// The `/db` pool opened from `db` (by `archlab-engine serve` before it listens), shared
        /// by every thread of the process.
        database: Option<Arc<DbPool>> = None;
        /// What answers the requests: the workloads, or a forwarding service (a reverse proxy)
        /// set by the program that builds the server.
        service: Service = Service::Workload;
    }
}

/// Options every architecture accepts (socket options of accepted connections).
impl OptionName {
    pub const COMMON: [OptionName; 2] = [OptionName::SendBuffer, OptionName::RecvBuffer];
}

impl ServerOptions {
    /// The request and idle timeouts the connections of this server run under.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts::new(self.request_timeout_ms, self.idle_timeout_ms)
    }

    /// The adaptive pool's settings for a pool of `threads` threads, when `pool_control` asks
    /// for one (see `crate::pool_control`).
    pub fn pool_control_settings(&self, threads: usize) -> Option<ControlSettings> {
        Some(ControlSettings {
            control: self.pool_control?,
            minimum: self.pool_min.unwrap_or(1),
            maximum: threads,
            interval: std::time::Duration::from_millis(self.pool_interval_ms.unwrap_or(POOL_INTERVAL_DEFAULT_MS)),
        })
    }

    /// Number of CPUs the server may use: the pinned list, else the CPUs this process may run on.
    pub fn cpu_count(&self) -> usize {
        match &self.cpus {
            Some(l) => l.ids().len(),
            None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        }
    }
}

/// `max_body_bytes`: the body limit of the HTTP parser's [`Limits`] (the other limits keep
/// their defaults).
#[derive(Clone, Copy)]
struct BodyLimit;

impl Kind for BodyLimit {
    type Value = Limits;
    fn allowed(&self) -> String {
        "an integer >= 0 (bytes)".into()
    }
    fn value_name(&self) -> &'static str {
        "BYTES"
    }
    fn parse(&self, text: &str) -> Result<Limits, String> {
        let bytes = text.trim().parse().map_err(|_| String::new())?;
        Ok(Limits { max_body_bytes: bytes, ..Limits::default() })
    }
    fn parse_json(&self, v: &Value) -> Result<Limits, String> {
        let bytes = v.as_u64().and_then(|b| usize::try_from(b).ok()).ok_or_else(String::new)?;
        Ok(Limits { max_body_bytes: bytes, ..Limits::default() })
    }
    fn to_json(&self, v: &Limits) -> Value {
        Value::from(v.max_body_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_and_json_read_the_same_options() {
        let o = ServerOptions::from_json(
            r#"{"threads": 3, "wait": "busy-spin", "cpus": "0-1", "max_body_bytes": 10, "nodelay": false,
                "db": "postgresql://u:p%20w@127.0.0.1:5/d", "db_pool": 2}"#,
        )
        .unwrap();
        assert_eq!(
            (o.threads, o.wait, o.limits.max_body_bytes, o.nodelay),
            (Some(3), Some(WaitStrategy::BusySpin), 10, false)
        );
        assert_eq!(o.db.as_ref().unwrap().password.as_deref(), Some("p w"));
        let back = ServerOptions::from_json(&o.to_json().to_string()).unwrap();
        assert_eq!(back.to_json(), o.to_json());
        assert_eq!(o.to_json()["db"], json!("postgresql://u:p%20w@127.0.0.1:5/d"));
        assert_eq!(o.to_json()["db_wait_ms"], json!(1000));
        assert!(o.is_set(OptionName::Wait) && !o.is_set(OptionName::Loops));
    }

    #[test]
    fn refusals_name_the_option_allowed_values_and_value() {
        let e = ServerOptions::from_json(r#"{"ring_size": 1000}"#).unwrap_err();
        assert_eq!(e.to_string(), "ring_size: expected a power of two in 2..=16777216, got 1000");
        let e = ServerOptions::from_json(r#"{"wait": "spin"}"#).unwrap_err();
        assert_eq!(e.to_string(), r#"wait: expected one of blocking, yielding, busy-spin, got "spin""#);
        let e = ServerOptions::from_json(r#"{"db": "mysql://x"}"#).unwrap_err();
        assert_eq!(e.hint, "the scheme must be postgresql://");
        let e = ServerOptions::from_json(r#"{"db_wait_ms": 0}"#).unwrap_err();
        assert_eq!(e.to_string(), "db_wait_ms: expected an integer in 1..=60000, got 0");
    }

    #[test]
    fn the_schema_lists_every_option_with_its_doc() {
        let schema = ServerOptions::schema();
        let names: Vec<&str> = schema.iter().map(|o| o.name).collect();
        assert_eq!(names, ServerOptions::names());
        for name in OptionName::ALL {
            assert!(names.contains(&name.as_str()), "{name}");
        }
        assert!(schema.iter().all(|o| !o.doc.is_empty()));
        let pool = schema.iter().find(|o| o.name == "db_pool").unwrap();
        assert_eq!(pool.default, Some(json!(DB_POOL_DEFAULT)));
    }
}
