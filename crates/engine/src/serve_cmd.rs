//! `archlab-engine serve` and `architectures`: build an architecture from the registry, bind,
//! print `listening HOST:PORT` as the first stdout line, and serve until SIGTERM. SIGUSR1
//! prints one `rusage {json}` line (CPU time, context switches and peak RSS of the whole
//! process, exited threads included, and the server's socket read/write call counts) so that
//! the orchestrator can measure the server.

use crate::args::parse_cpus;
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_netio::socket::listen;
use archlab_netio::CpuList;
use archlab_server::options::OptionName;
use archlab_server::{registry, Dispatch, ServerOptions, WaitStrategy, REGISTRY};
use archlab_work::{DbConfig, DbPool, DB_POOL_DEFAULT, DB_POOL_MAX, DB_WAIT_DEFAULT_MS, DB_WAIT_MAX_MS};

use clap::Args;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Architecture to serve (see `archlab-engine architectures`).
    #[arg(long)]
    arch: String,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one (printed on the first stdout line).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Worker pool size (architectures with a pool).
    #[arg(long)]
    threads: Option<usize>,
    /// Number of event loops (netty, hybrid) or of io_uring rings, one thread each (io-uring).
    #[arg(long)]
    loops: Option<usize>,
    /// Handlers K of a ring, actors of an actor system, threads per SEDA stage (default 4).
    #[arg(long)]
    handlers: Option<usize>,
    /// Ring slots, a power of two (default 1024).
    #[arg(long)]
    ring_size: Option<usize>,
    /// Ring wait strategy: blocking (default), yielding, busy-spin.
    #[arg(long, value_parser = parse_wait)]
    wait: Option<WaitStrategy>,
    /// Ring dispatch: modulo or work-pool.
    #[arg(long, value_parser = parse_dispatch)]
    dispatch: Option<Dispatch>,
    /// Actor mailbox capacity (default 1024).
    #[arg(long)]
    mailbox: Option<usize>,
    /// Actor dispatcher threads (default: one per actor).
    #[arg(long)]
    dispatchers: Option<usize>,
    /// Items per dequeue: SEDA batching factor (default 1), actor throughput (default 5).
    #[arg(long)]
    batch: Option<usize>,
    /// Capacity of each SEDA stage queue (default 1024).
    #[arg(long)]
    queue_capacity: Option<usize>,
    /// Netty's write-spin limit: write calls per flush round (default 16).
    #[arg(long)]
    write_spin: Option<usize>,
    /// SO_SNDBUF of accepted connections, bytes (Linux doubles it).
    #[arg(long)]
    sndbuf: Option<usize>,
    /// SO_RCVBUF of accepted connections, bytes (Linux doubles it).
    #[arg(long)]
    rcvbuf: Option<usize>,
    /// N-copy model: number of single-thread copies (ncopy; default one per CPU).
    #[arg(long)]
    copies: Option<usize>,
    /// CPUs to run on, e.g. "1" or "2-3"; the whole process is pinned to them.
    #[arg(long, value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// Largest request body accepted, in bytes (larger -> 413).
    #[arg(long, default_value_t = 1024 * 1024)]
    max_body_bytes: usize,
    /// Disable TCP_NODELAY on accepted connections.
    #[arg(long)]
    no_nodelay: bool,
    /// Downstream HTTP service of `/call?ms=M` (an `archlab-engine serve --arch sync` that
    /// answers `/delay?ms=M`), as HOST:PORT.
    #[arg(long, value_parser = parse_downstream)]
    downstream: Option<SocketAddr>,
    /// PostgreSQL database of `/db?id=N`, as postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME
    /// (HOST an IP address or localhost); its table `emp(id, first_name)` is looked up by id.
    #[arg(long, value_parser = parse_db)]
    db: Option<DbConfig>,
    /// Connections of the `/db` pool, opened at start-up and shared by every thread [default: 10]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=DB_POOL_MAX as u64), requires = "db")]
    db_pool: Option<u64>,
    /// How long a `/db` request waits for a free connection before answering 503, in ms [default: 1000]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=DB_WAIT_MAX_MS), requires = "db")]
    db_wait_ms: Option<u64>,
}

fn parse_db(s: &str) -> Result<DbConfig, String> {
    DbConfig::parse(s)
}

fn parse_downstream(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| format!("expected HOST:PORT with a numeric host, e.g. 127.0.0.1:8081, got {s:?}"))
}

fn parse_wait(s: &str) -> Result<WaitStrategy, String> {
    WaitStrategy::parse(s).ok_or_else(|| format!("expected {}, got {s:?}", OptionName::Wait.allowed()))
}

fn parse_dispatch(s: &str) -> Result<Dispatch, String> {
    Dispatch::parse(s).ok_or_else(|| format!("expected {}, got {s:?}", OptionName::Dispatch.allowed()))
}

pub fn list_architectures(json: bool) {
    if json {
        let list: Vec<serde_json::Value> = REGISTRY
            .iter()
            .map(|a| {
                serde_json::json!({
                    "name": a.name,
                    "description": a.description,
                    "options": a.options().map(|o| o.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return;
    }
    let width = REGISTRY.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for a in REGISTRY {
        println!("{:width$}  {}", a.name, a.description);
    }
}

/// The `rusage` line's JSON: getrusage of the whole process plus the server's own counts of
/// socket read and write calls (which `/proc/<pid>/io` does not see) and of what it refused at
/// its limits.
fn usage_json() -> serde_json::Value {
    let mut v = serde_json::to_value(archlab_metrics::rusage::process_usage()).expect("serialisable");
    let counts = serde_json::to_value(archlab_metrics::counters::totals()).expect("serialisable");
    let limits = serde_json::to_value(archlab_metrics::counters::limit_totals()).expect("serialisable");
    for counts in [counts, limits] {
        if let (Some(v), serde_json::Value::Object(c)) = (v.as_object_mut(), counts) {
            v.extend(c);
        }
    }
    v
}

pub fn run(a: ServeArgs) -> Result<(), CliError> {
    let mut options = ServerOptions {
        threads: a.threads,
        loops: a.loops,
        handlers: a.handlers,
        ring_size: a.ring_size,
        wait: a.wait,
        dispatch: a.dispatch,
        mailbox: a.mailbox,
        dispatchers: a.dispatchers,
        batch: a.batch,
        queue_capacity: a.queue_capacity,
        write_spin: a.write_spin,
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        copies: a.copies,
        cpus: a.cpus.clone(),
        nodelay: !a.no_nodelay,
        downstream: a.downstream,
        ..Default::default()
    };
    options.limits.max_body_bytes = a.max_body_bytes;
    // A bad architecture or option is refused before any database connection is opened.
    registry::build(&a.arch, &options).map_err(|e| CliError::usage(e.to_string()))?;
    registry::preflight(&a.arch).map_err(|e| CliError::runtime(e.to_string()))?;
    // The /db pool's connections are opened before the server listens: a server that printed
    // `listening` answers /db without a handshake, and a wrong --db fails here, clearly.
    if let Some(config) = a.db {
        let size = a.db_pool.map_or(DB_POOL_DEFAULT, |n| n as usize);
        let wait = std::time::Duration::from_millis(a.db_wait_ms.unwrap_or(DB_WAIT_DEFAULT_MS));
        let pool = DbPool::open(config, size, wait)
            .map_err(|e| CliError::runtime(format!("cannot open the /db connection pool: {e}")))?;
        options.db = Some(std::sync::Arc::new(pool));
    }
    let server = registry::build(&a.arch, &options).map_err(|e| CliError::usage(e.to_string()))?;
    // The /file workload's file is made before the first request, not during it.
    archlab_server::prepare_file().map_err(CliError::runtime)?;
    // Signals first, so that every thread started below inherits the blocked mask.
    spawn_handler(|signal| match signal {
        Signal::Terminate => std::process::exit(0),
        Signal::Report => {
            let line = format!("rusage {}\n", usage_json());
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    })
    .map_err(|e| CliError::runtime(format!("cannot install signal handling: {e}")))?;
    if let Some(cpus) = &a.cpus {
        cpus.pin_current_thread().map_err(|e| CliError::runtime(format!("cannot pin to CPUs {cpus}: {e}")))?;
    }
    let addr = SocketAddr::new(a.host, a.port);
    let listener = listen(addr, &registry::listen_options(&a.arch)).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            " (the port is busy: pick another or use --port 0)"
        } else {
            ""
        };
        CliError::runtime(format!("cannot listen on {addr}: {e}{hint}"))
    })?;
    let local = listener.local_addr().map_err(|e| CliError::runtime(e.to_string()))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening {local}");
        let _ = out.flush();
    }
    server.serve(listener).map_err(|e| CliError::runtime(format!("{} stopped: {e}", a.arch)))
}
