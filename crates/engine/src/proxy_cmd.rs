//! `archlab-engine proxy`: run the HTTP reverse proxy in one architecture of the registry.
//! Glue only: the options are `archlab-server`'s and `archlab-proxy`'s option sets (flags, or one
//! `--options` JSON object holding keys of both), the proxy is `archlab_proxy::http::Proxy`
//! plugged into the architecture as its service. Like `serve`, the first stdout line is
//! `listening HOST:PORT`, SIGTERM stops, and SIGUSR1 prints one `rusage {json}` line: the
//! process's usage and socket calls as `serve` reports them, plus `"proxy"`: the per-backend
//! counters.

use crate::args::read_document;
use crate::serve_cmd::usage_json;
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_netio::socket::listen;
use archlab_options::{Given, OptionError};
use archlab_proxy::http::{options, Proxy, ProxyOptions};
use archlab_server::{registry, ServerOptions};
use clap::Args;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ProxyArgs {
    /// Architecture that runs the proxy (`archlab-engine architectures` says which can).
    #[arg(long)]
    arch: String,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one (printed on the first stdout line).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The server's and the proxy's options as one JSON object (a file, or - for stdin), e.g.
    /// {"backends": "127.0.0.1:8081,127.0.0.1:8082", "policy": "p2c", "threads": 8}; flags
    /// given beside it override its values.
    #[arg(long = "options", value_name = "FILE")]
    options_file: Option<PathBuf>,
    /// Check the architecture and the options, print them as the JSON that --options reads,
    /// and exit without connecting to the backends.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    server: Given<ServerOptions>,
    #[command(flatten)]
    proxy: Given<ProxyOptions>,
}

/// A refusal as the command line says it: the flag, what it takes, what it got.
fn flag_error(e: &OptionError) -> String {
    let flag = match e.field.as_str() {
        "" => String::new(),
        "architecture" | "arch" => "--arch: ".into(),
        field => format!("--{}: ", field.replace('_', "-")),
    };
    let mut m = format!("{flag}expected {}, got {}", e.allowed, e.received);
    if !e.hint.is_empty() {
        m.push_str(&format!(" ({})", e.hint));
    }
    m
}

impl ProxyArgs {
    /// The two option sets: the JSON file's keys split between them, the flags over both.
    fn options(&self) -> Result<(ServerOptions, ProxyOptions), CliError> {
        let (server, proxy) = match &self.options_file {
            None => (ServerOptions::default(), ProxyOptions::default()),
            Some(path) => {
                let invalid = |e: OptionError| CliError::usage(format!("invalid --options {}: {e}", path.display()));
                let text = read_document("options", path)?;
                let doc = archlab_options::parse_document(&text).map_err(invalid)?;
                options::from_json_value(&doc).map_err(invalid)?
            }
        };
        Ok((self.server.over(server), self.proxy.over(proxy)))
    }
}

pub fn run(a: ProxyArgs) -> Result<(), CliError> {
    let (mut options, proxy_options) = a.options()?;
    options::check(&a.arch, &options, &proxy_options).map_err(|e| CliError::usage(flag_error(&e)))?;
    if a.check {
        println!("{}", options::to_json(&options, &proxy_options));
        return Ok(());
    }
    let proxy = Proxy::new(proxy_options).map_err(|e| CliError::usage(flag_error(&e)))?;
    proxy.check_reachable().map_err(|e| CliError::runtime(flag_error(&e)))?;
    options.service = proxy.service();
    let server = registry::build(&a.arch, &options).map_err(|e| CliError::usage(e.to_string()))?;
    // Signals first, so that every thread started below (the health thread included) inherits
    // the blocked mask.
    let reporter = proxy.clone();
    spawn_handler(move |signal| match signal {
        Signal::Terminate => std::process::exit(0),
        Signal::Report => {
            let mut usage = usage_json();
            if let Some(v) = usage.as_object_mut() {
                v.insert("proxy".into(), serde_json::to_value(reporter.report()).expect("serialisable"));
            }
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "rusage {usage}");
            let _ = out.flush();
        }
    })
    .map_err(|e| CliError::runtime(format!("cannot install signal handling: {e}")))?;
    proxy.start().map_err(|e| CliError::runtime(format!("cannot start the health thread: {e}")))?;
    if let Some(cpus) = &options.cpus {
        cpus.pin_current_thread().map_err(|e| CliError::runtime(format!("cannot pin to CPUs {cpus}: {e}")))?;
    }
    let addr = SocketAddr::new(a.host, a.port);
    let listener = listen(addr, &registry::listen_options(&a.arch))
        .map_err(|e| CliError::runtime(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| CliError::runtime(e.to_string()))?;
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening {local}");
        let _ = out.flush();
    }
    server.serve(listener).map_err(|e| CliError::runtime(format!("{} stopped: {e}", a.arch)))
}
