//! `archlab-engine serve` and `architectures`: build an architecture from the registry, bind,
//! print `listening HOST:PORT` as the first stdout line, and serve until SIGTERM. SIGUSR1
//! prints one `rusage {json}` line (CPU time, context switches and peak RSS of the whole
//! process, exited threads included, and the server's socket read/write call counts) so that
//! the orchestrator can measure the server.

use crate::args::read_document;
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_netio::socket::listen;
use archlab_options::Given;
use archlab_server::frontend::hybrid;
use archlab_server::{registry, ServerOptions, REGISTRY};
use archlab_workload::DbPool;

use clap::Args;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

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
    /// The server's options as one JSON object (a file, or - for stdin), e.g.
    /// {"threads": 8, "cpus": "1"}; option flags given beside it override its values.
    #[arg(long = "options", value_name = "FILE")]
    options_file: Option<PathBuf>,
    /// Check the architecture and its options, print the options as the JSON that --options
    /// reads, and exit without serving.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    options: Given<ServerOptions>,
}

impl ServeArgs {
    /// The options of the JSON file (if any) with the option flags over them.
    fn options(&self) -> Result<ServerOptions, CliError> {
        let base = match &self.options_file {
            None => ServerOptions::default(),
            Some(path) => {
                let text = read_document("options", path)?;
                ServerOptions::from_json(&text)
                    .map_err(|e| CliError::usage(format!("invalid --options {}: {e}", path.display())))?
            }
        };
        Ok(self.options.over(base))
    }
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
                    "proxy": a.proxy.as_str(),
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
    println!("\nproxy (archlab-engine proxy --arch NAME):");
    for a in REGISTRY.iter().filter(|a| a.proxy.can_proxy()) {
        println!("{:width$}  {}", a.name, a.proxy.as_str());
    }
}

/// The `rusage` line's JSON: getrusage of the whole process plus the server's own counts of
/// socket read and write calls (which `/proc/<pid>/io` does not see) and of what it refused at
/// its limits.
pub(crate) fn usage_json() -> serde_json::Value {
    let mut v = serde_json::to_value(archlab_metrics::rusage::process_usage()).expect("serialisable");
    let counts = serde_json::to_value(archlab_metrics::counters::totals()).expect("serialisable");
    let limits = serde_json::to_value(archlab_metrics::counters::limit_totals()).expect("serialisable");
    for counts in [counts, limits] {
        if let (Some(v), serde_json::Value::Object(c)) = (v.as_object_mut(), counts) {
            v.extend(c);
        }
    }
    // HybridNetty's routing: requests per path, write calls per path, corrections per direction.
    let (routes, writes) = (hybrid::stats(), hybrid::path_writes());
    if let (Some(v), false) = (v.as_object_mut(), routes == hybrid::RouteStats::default()) {
        v.insert("hybrid".into(), serde_json::json!({ "routes": routes, "writes": writes }));
    }
    // The adaptive pool's sizes over time ([ms since its start, size] per change), when it runs.
    let sizes = archlab_server::pool_control::size_history();
    if let (Some(v), false) = (v.as_object_mut(), sizes.is_empty()) {
        v.insert("pool_sizes".into(), serde_json::json!(sizes));
        v.insert("pool_size".into(), serde_json::json!(archlab_server::pool_control::adopted_size()));
    }
    v
}

pub fn run(a: ServeArgs) -> Result<(), CliError> {
    let mut options = a.options()?;
    // A bad architecture or option is refused before any database connection is opened.
    registry::check(&a.arch, &options).map_err(|e| CliError::usage(e.to_string()))?;
    if a.check {
        println!("{}", options.to_json());
        return Ok(());
    }
    registry::preflight(&a.arch).map_err(|e| CliError::runtime(e.to_string()))?;
    // The /db pool's connections are opened before the server listens: a server that printed
    // `listening` answers /db without a handshake, and a wrong --db fails here, clearly.
    if let Some(config) = options.db.clone() {
        let wait = std::time::Duration::from_millis(options.db_wait_ms);
        let pool = DbPool::open(config, options.db_pool, wait)
            .map_err(|e| CliError::runtime(format!("cannot open the /db connection pool: {e}")))?;
        options.database = Some(std::sync::Arc::new(pool));
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
    if let Some(cpus) = &options.cpus {
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
