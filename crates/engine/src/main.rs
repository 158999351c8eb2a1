//! `archlab-engine`: the data plane's one binary. Argument parsing and glue only: every
//! subcommand calls a library (`archlab-server`, `archlab-load`, `archlab-proxy`, `archlab-link`)
//! and prints what it returns.
//! Exit codes: 0 success, 1 runtime failure (message on stderr), 2 invalid arguments.

mod args;
mod link_cmd;
mod load_cmd;
mod middleware_cmd;
mod proxy_cmd;
mod records_cmd;
mod search_cmd;
mod serve_cmd;
mod signals;
mod start_at;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "archlab-engine",
    version,
    about = "archlab data plane: servers, load generator, memcached middleware, link emulator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// List the registered server architectures (name and one-line description).
    Architectures {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve one architecture until SIGTERM; the first stdout line is `listening HOST:PORT`.
    Serve(serve_cmd::ServeArgs),
    /// Drive load against a target and write a JSON summary and an HDR interval log.
    Load(load_cmd::LoadArgs),
    /// Work with raw per-request records (`load --records`): export to JMeter's JTL CSV.
    #[command(subcommand)]
    Records(records_cmd::RecordsCommand),
    /// Find the highest open-model rate meeting a latency objective (bisection over runs).
    SearchRate(search_cmd::SearchArgs),
    /// Emulate a network link (delay, rate, jitter, loss) between two network namespaces.
    Link(link_cmd::LinkArgs),
    /// Run the memcached middleware of seed 002 in front of memcached servers until SIGTERM;
    /// the first stdout line is `listening HOST:PORT`, SIGUSR1 prints a `stats {json}` line.
    Middleware(middleware_cmd::MiddlewareArgs),
    /// Run the HTTP reverse proxy in an architecture until SIGTERM; the first stdout line is
    /// `listening HOST:PORT`, SIGUSR1 prints a `rusage {json}` line with per-backend counters.
    Proxy(proxy_cmd::ProxyArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Architectures { json } => {
            serve_cmd::list_architectures(json);
            Ok(())
        }
        Command::Serve(a) => serve_cmd::run(a),
        Command::Load(a) => load_cmd::run(a),
        Command::Records(c) => records_cmd::run(c),
        Command::SearchRate(a) => search_cmd::run(a),
        Command::Link(a) => link_cmd::run(a),
        Command::Middleware(a) => middleware_cmd::run(a),
        Command::Proxy(a) => proxy_cmd::run(a),
    };
    if let Err(e) = result {
        eprintln!("archlab-engine: error: {e}");
        std::process::exit(e.exit_code());
    }
}

/// An error that ends the process with a message and an exit code.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    /// 2 for invalid arguments (like clap), 1 for failures at run time.
    pub code: i32,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> Self {
        CliError { message: message.into(), code: 2 }
    }
    pub fn runtime(message: impl Into<String>) -> Self {
        CliError { message: message.into(), code: 1 }
    }
    fn exit_code(&self) -> i32 {
        self.code
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
