//! `archlab-engine link`: create an emulated link between two network namespaces
//! (`alk-NAME-client`, `alk-NAME-server`), print `ready {json}` (namespaces, addresses, what
//! each direction applies), forward until SIGTERM or SIGINT, then remove everything and print
//! `stats {json}` (also on SIGUSR1). `--cleanup NAME` removes what a killed forwarder left;
//! `--cleanup-stale` does so for every link whose forwarder is gone. Programs run on a side
//! with `ip netns exec NETNS ...`. The mechanism is in `archlab-link`.

use crate::args::{parse_cpus, parse_duration, read_document};
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_link::params::{parse_bytes, parse_loss, parse_rate, RateSetting};
use archlab_link::{
    Control, Event, Link, LinkConfig, LinkError, LinkName, RawDirection, RawLink, Scheduling, ThreadOptions,
};
use archlab_netio::CpuList;
use clap::{ArgGroup, Args};
use std::io::Write;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("what").required(true).args(["name", "cleanup", "cleanup_stale"])))]
pub struct LinkArgs {
    /// Name of the link: its namespaces are alk-NAME-client and alk-NAME-server.
    #[arg(long)]
    name: Option<String>,
    /// Remove the namespaces a killed forwarder of link NAME left, then exit.
    #[arg(long, value_name = "NAME")]
    cleanup: Option<String>,
    /// Remove what killed forwarders left, for every link, then exit.
    #[arg(long)]
    cleanup_stale: bool,
    /// The link's parameters as one JSON object (a file, or - for stdin), keys as the flags
    /// with _ for - (delay_up, rate, mtu...), instead of the flags; see docs/link.md.
    #[arg(long, value_name = "FILE")]
    params: Option<std::path::PathBuf>,
    /// MTU of both devices, bytes (576..=65535) [default: 1500]
    #[arg(long, allow_hyphen_values = true)]
    mtu: Option<u32>,
    /// One-way delay of each direction, e.g. 5ms (a round trip gets twice this).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    delay: Option<Duration>,
    /// Delay of the up direction (client to server) only.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    delay_up: Option<Duration>,
    /// Delay of the down direction (server to client) only.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    delay_down: Option<Duration>,
    /// Each packet's delay is uniform in delay +- jitter (at most the delay); order is kept
    /// unless --reorder.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    jitter: Option<Duration>,
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    jitter_up: Option<Duration>,
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    jitter_down: Option<Duration>,
    /// Rate limit of each direction, e.g. 100mbit (units bit, kbit, mbit, gbit), or unlimited.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    rate: Option<RateSetting>,
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    rate_up: Option<RateSetting>,
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    rate_down: Option<RateSetting>,
    /// Bytes that may wait for the rate limiter, e.g. 64KiB; more are dropped
    /// [default: one bandwidth-delay product of the round trip, at least 64KiB]
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    queue: Option<u64>,
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    queue_up: Option<u64>,
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    queue_down: Option<u64>,
    /// Token bucket size of the rate limiter, bytes [default: the MTU]
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    burst: Option<u64>,
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    burst_up: Option<u64>,
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    burst_down: Option<u64>,
    /// Probability that a packet is dropped, 0..1 or a percentage (1%).
    #[arg(long, value_parser = parse_loss, allow_hyphen_values = true)]
    loss: Option<f64>,
    #[arg(long, value_parser = parse_loss, allow_hyphen_values = true)]
    loss_up: Option<f64>,
    #[arg(long, value_parser = parse_loss, allow_hyphen_values = true)]
    loss_down: Option<f64>,
    /// Let jitter reorder packets.
    #[arg(long)]
    reorder: bool,
    /// TCP congestion control of both sides' stacks, e.g. cubic [default: the host's]
    #[arg(long)]
    congestion: Option<String>,
    /// Seed of the loss and jitter draws [default: 1]
    #[arg(long)]
    seed: Option<u64>,
    /// CPUs both forwarding threads run on, e.g. "0" or "0-1".
    #[arg(long, value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// CPUs of the up direction's thread (it reads what the client sends; the client's CPU
    /// keeps its wake-ups local, as a NIC's transmit path would).
    #[arg(long, value_parser = parse_cpus, conflicts_with = "cpus")]
    cpus_up: Option<CpuList>,
    /// CPUs of the down direction's thread (it reads what the server sends).
    #[arg(long, value_parser = parse_cpus, conflicts_with = "cpus")]
    cpus_down: Option<CpuList>,
    /// How the forwarding threads are scheduled: realtime (SCHED_FIFO), high (nice -20) or
    /// normal (nice 0); realtime and high need CAP_SYS_NICE (see docs/link.md) [default: realtime]
    #[arg(long, value_parser = parse_scheduling)]
    scheduling: Option<Scheduling>,
}

fn parse_scheduling(s: &str) -> Result<Scheduling, String> {
    Scheduling::parse(s).ok_or_else(|| format!("expected realtime, high or normal, got {s:?}"))
}

impl LinkArgs {
    fn raw(&self, name: &str) -> RawLink {
        RawLink {
            name: name.to_string(),
            mtu: self.mtu,
            both: RawDirection {
                delay: self.delay,
                jitter: self.jitter,
                rate: self.rate,
                queue_bytes: self.queue,
                burst_bytes: self.burst,
                loss: self.loss,
            },
            up: RawDirection {
                delay: self.delay_up,
                jitter: self.jitter_up,
                rate: self.rate_up,
                queue_bytes: self.queue_up,
                burst_bytes: self.burst_up,
                loss: self.loss_up,
            },
            down: RawDirection {
                delay: self.delay_down,
                jitter: self.jitter_down,
                rate: self.rate_down,
                queue_bytes: self.queue_down,
                burst_bytes: self.burst_down,
                loss: self.loss_down,
            },
            reorder: self.reorder,
            seed: self.seed,
            congestion: self.congestion.clone(),
        }
    }

    /// Whether any parameter of a link was given (they mean nothing to a cleanup).
    fn has_link_params(&self) -> bool {
        self.raw("") != RawLink::default()
            || self.params.is_some()
            || self.cpus.is_some()
            || self.cpus_up.is_some()
            || self.cpus_down.is_some()
            || self.scheduling.is_some()
    }
}

fn print_line(kind: &str, json: &impl serde::Serialize) {
    let line = format!("{kind} {}\n", serde_json::to_string(json).expect("serialisable"));
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

fn link_error(e: LinkError) -> CliError {
    match e {
        LinkError::Invalid(p) => {
            CliError::usage(format!("invalid value for --{}: expected {}, got {}", p.param, p.allowed, p.received))
        }
        other => CliError::runtime(other.to_string()),
    }
}

pub fn run(a: LinkArgs) -> Result<(), CliError> {
    if a.cleanup.is_some() || a.cleanup_stale {
        if a.has_link_params() {
            return Err(CliError::usage("--cleanup and --cleanup-stale take no link parameters"));
        }
        let removed = match &a.cleanup {
            Some(name) => {
                let name = LinkName::new(name).map_err(|e| link_error(e.into()))?;
                archlab_link::cleanup(&name)
            }
            None => archlab_link::cleanup_stale(),
        }
        .map_err(link_error)?;
        print_line("removed", &removed);
        return Ok(());
    }
    let name = a.name.as_deref().expect("clap requires one of --name, --cleanup, --cleanup-stale");
    let config = match &a.params {
        Some(path) => {
            if a.raw(name) != (RawLink { name: name.to_string(), ..RawLink::default() }) {
                return Err(CliError::usage(
                    "--params takes the link's parameters in place of their flags: give one or the other",
                ));
            }
            let doc = read_document("params", path)?;
            archlab_link::document::config_from_json(name, &doc, parse_duration).map_err(|e| {
                CliError::usage(format!("invalid {} in --params: expected {}, got {}", e.param, e.allowed, e.received))
            })?
        }
        None => LinkConfig::new(&a.raw(name)).map_err(|e| link_error(e.into()))?,
    };
    let control = Control::new().map_err(|e| CliError::runtime(format!("cannot create an eventfd: {e}")))?;
    // Signals first, so that the forwarding threads inherit the blocked mask, and a signal
    // during set-up is kept until the link exists and can be removed.
    let on_signal = control.clone();
    spawn_handler(move |signal| match signal {
        Signal::Terminate => on_signal.request_stop(),
        Signal::Report => on_signal.request_report(),
    })
    .map_err(|e| CliError::runtime(format!("cannot install signal handling: {e}")))?;
    let options = ThreadOptions {
        cpus_up: a.cpus_up.or(a.cpus.clone()),
        cpus_down: a.cpus_down.or(a.cpus),
        scheduling: a.scheduling.unwrap_or_default(),
    };
    let link = Link::start(&config, control.clone(), &options).map_err(link_error)?;
    print_line("ready", &link.ready_info());
    // Until a stop or a failure (which `stop` returns).
    while let Event::Report = control.next_event() {
        print_line("stats", &link.report());
    }
    let report = link.stop().map_err(link_error)?;
    print_line("stats", &report);
    Ok(())
}
