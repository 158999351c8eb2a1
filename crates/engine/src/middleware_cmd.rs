//! `archlab-engine middleware`: the memcached middleware of seed 002 (`archlab-proxy`) in
//! front of memcached servers. Glue only: parse and check the flags, check that every server
//! answers, bind, print `listening HOST:PORT` as the first stdout line, then run until SIGTERM.
//! SIGUSR1 prints one `stats {json}` line (every request finished so far, the closed windows,
//! per-server counts, resource usage); SIGTERM finishes the requests under way, closes the last
//! window, flushes the interval logs of `--stats-dir`, prints the final `stats` line and exits 0.

use crate::args::{parse_cpus, parse_duration};
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_netio::socket::{listen, ListenOptions};
use archlab_netio::CpuList;
use archlab_proxy::memcached::{Arch, Middleware, MiddlewareConfig, StatsReport};
use clap::Args;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MiddlewareArgs {
    /// memcached servers, comma-separated HOST:PORT (SETs go to all, GETs round-robin).
    #[arg(long, required = true, value_delimiter = ',', value_parser = parse_server)]
    servers: Vec<SocketAddr>,
    /// Worker threads of the hand-off architectures [default: 8].
    #[arg(long)]
    workers: Option<usize>,
    /// Split multi-gets into one request per server: true or false.
    #[arg(long, default_value = "false", value_parser = parse_bool, action = clap::ArgAction::Set)]
    sharded: bool,
    /// seed (net thread, FIFO, W workers), ring, actor, or event-loop.
    #[arg(long, default_value = "seed", value_parser = parse_arch)]
    arch: Arch,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one (printed on the first stdout line).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// CPUs to run on, e.g. "1" or "2-3"; every thread of the middleware is pinned to them.
    #[arg(long, value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// Length of a statistics window (e.g. 5s, 500ms) [default: 5s]
    #[arg(long, value_parser = parse_duration)]
    window: Option<Duration>,
    /// A server silent this long while a reply is due has failed (SERVER_ERROR to the client)
    /// [default: 1s]
    #[arg(long, value_parser = parse_duration)]
    server_timeout: Option<Duration>,
    /// Largest value a set may carry, in bytes (memcached's -I; 1 KiB to 128 MiB) [default: 1048576]
    #[arg(long)]
    max_item_bytes: Option<usize>,
    /// Write HDR interval logs (one per distribution and request type, one interval per window)
    /// into this directory.
    #[arg(long)]
    stats_dir: Option<PathBuf>,
}

fn parse_server(s: &str) -> Result<SocketAddr, String> {
    let bad = || format!("expected HOST:PORT (e.g. 127.0.0.1:11211), got {s:?}");
    let addr = s.to_socket_addrs().map_err(|_| bad())?.next().ok_or_else(bad)?;
    if addr.port() == 0 {
        return Err(format!("expected HOST:PORT with a port in 1..=65535, got {s:?}"));
    }
    Ok(addr)
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("expected true or false, got {s:?}")),
    }
}

fn parse_arch(s: &str) -> Result<Arch, String> {
    Arch::parse(s).map_err(|e| format!("expected {}, got {:?}", e.allowed, e.received))
}

/// Print one `stats {json}` line.
fn print_stats(report: &StatsReport) {
    let line = format!("stats {}\n", serde_json::to_string(report).expect("serialisable"));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

pub fn run(a: MiddlewareArgs) -> Result<(), CliError> {
    // The library owns the defaults; flags only override them.
    let mut config = MiddlewareConfig::new(a.servers);
    config.arch = a.arch;
    config.workers = a.workers;
    config.sharded = a.sharded;
    config.window = a.window.unwrap_or(config.window);
    config.server_timeout = a.server_timeout.unwrap_or(config.server_timeout);
    config.max_value_bytes = a.max_item_bytes.unwrap_or(config.max_value_bytes);
    config.stats_dir = a.stats_dir;
    config
        .validate()
        .map_err(|e| CliError::usage(e.to_string().replace("invalid ", "invalid --").replace('_', "-")))?;
    // A mistyped server fails here, before anything listens, rather than as errors later.
    for &server in &config.servers {
        TcpStream::connect_timeout(&server, config.server_timeout).map_err(|e| {
            CliError::runtime(format!("memcached server {server} does not answer: {e} (is it running? see --servers)"))
        })?;
    }
    let running: Arc<Mutex<Option<Middleware>>> = Arc::new(Mutex::new(None));
    // Signals first, so that every thread started below inherits the blocked mask.
    let handle = running.clone();
    spawn_handler(move |signal| {
        let mut guard = handle.lock().unwrap();
        match signal {
            Signal::Report => {
                if let Some(m) = guard.as_ref() {
                    print_stats(&m.report());
                }
            }
            Signal::Terminate => {
                let code = match guard.take().map(Middleware::shutdown) {
                    Some(Ok(report)) => {
                        print_stats(&report);
                        0
                    }
                    Some(Err(e)) => {
                        eprintln!("archlab-engine: error: {e}");
                        1
                    }
                    None => 0,
                };
                std::process::exit(code);
            }
        }
    })
    .map_err(|e| CliError::runtime(format!("cannot install signal handling: {e}")))?;
    if let Some(cpus) = &a.cpus {
        cpus.pin_current_thread().map_err(|e| CliError::runtime(format!("cannot pin to CPUs {cpus}: {e}")))?;
    }
    let addr = SocketAddr::new(a.host, a.port);
    let listener = listen(addr, &ListenOptions::default()).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            " (the port is busy: pick another or use --port 0)"
        } else {
            ""
        };
        CliError::runtime(format!("cannot listen on {addr}: {e}{hint}"))
    })?;
    let middleware = Middleware::start(config, listener).map_err(|e| CliError::runtime(e.to_string()))?;
    let local = middleware.local_addr();
    *running.lock().unwrap() = Some(middleware);
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening {local}");
        let _ = out.flush();
    }
    // The middleware's threads do the work; this one waits for the signal handler to exit.
    loop {
        std::thread::park();
    }
}
