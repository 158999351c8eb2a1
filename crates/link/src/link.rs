//! A running link: its [`Topology`] and one forwarding thread per direction. `start` checks
//! the privileges, creates both sides and starts the threads; `stop` (or dropping the link)
//! stops the threads, joins them, and removes the namespaces, so nothing outlives it unless the
//! process is killed (then see [`crate::cleanup`]).

use crate::control::Control;
use crate::error::LinkError;
use crate::forwarder::Forwarder;
use crate::netns;
use crate::pacing::Scheduling;
use crate::params::{Direction, DirectionParams, LinkConfig};
use crate::privileges;
use crate::shaper::Shaper;
use crate::stats::{DirectionCounters, LinkReport, PacketCounts};
use crate::topology::{Side, Topology};
use archlab_netio::CpuList;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Where and how the forwarding threads run.
#[derive(Clone, Debug, Default)]
pub struct ThreadOptions {
    /// Pin the up direction's thread (it reads what the client sends) to these CPUs.
    pub cpus_up: Option<CpuList>,
    /// Pin the down direction's thread (it reads what the server sends) to these CPUs.
    pub cpus_down: Option<CpuList>,
    pub scheduling: Scheduling,
}

impl ThreadOptions {
    fn cpus(&self, d: Direction) -> Option<&CpuList> {
        match d {
            Direction::Up => self.cpus_up.as_ref(),
            Direction::Down => self.cpus_down.as_ref(),
        }
    }
}

/// What a started link tells its user: the `ready` line of `archlab-engine link`.
#[derive(Clone, Debug, Serialize)]
pub struct ReadyInfo {
    pub name: String,
    pub pid: u32,
    pub mtu: u32,
    pub client: Side,
    pub server: Side,
    pub up: DirectionParams,
    pub down: DirectionParams,
    pub seed: u64,
    /// TCP congestion control of both sides (None: the host's default).
    pub congestion: Option<String>,
    /// How the forwarding threads are scheduled: high, realtime or normal.
    pub scheduling: &'static str,
    /// The CPUs each forwarding thread is pinned to, if it is.
    pub cpus_up: Option<String>,
    pub cpus_down: Option<String>,
    /// Namespaces left by a killed forwarder of the same name, removed first.
    pub stale_removed: Vec<String>,
}

pub struct Link {
    config: LinkConfig,
    threads_options: ThreadOptions,
    topology: Option<Topology>,
    control: Arc<Control>,
    threads: Vec<JoinHandle<()>>,
    counters: [Arc<Mutex<DirectionCounters>>; 2],
    started: Instant,
}

impl Link {
    /// Create the link and start forwarding. Its threads run as `options` say; they report
    /// failures and take stop requests through `control`.
    pub fn start(config: &LinkConfig, control: Arc<Control>, options: &ThreadOptions) -> Result<Link, LinkError> {
        privileges::check(options.scheduling)?;
        let topology = Topology::create(&config.name, config.mtu, config.congestion.as_deref())?;
        let counters = [Arc::default(), Arc::default()];
        let mut link = Link {
            config: config.clone(),
            threads_options: options.clone(),
            topology: None,
            control,
            threads: Vec::new(),
            counters,
            started: Instant::now(),
        };
        link.topology = Some(topology);
        // Each thread reports once it runs where and how it was asked to, so that a started
        // link is placed and a placement that fails is a start error, not a later failure.
        let (placed_tx, placed) = std::sync::mpsc::channel::<Result<(), LinkError>>();
        for d in Direction::ALL {
            let t = link.topology();
            let (input, output) = match d {
                Direction::Up => (&t.client_tun, &t.server_tun),
                Direction::Down => (&t.server_tun, &t.client_tun),
            };
            let forwarder = Forwarder {
                direction: d,
                input: input.clone(),
                output: output.clone(),
                shaper: Shaper::new(config.direction(d), config.seed, d),
                mtu: config.mtu as usize,
                counters: link.counters[d.index()].clone(),
                control: link.control.clone(),
            };
            let (cpus, scheduling, placed_tx) = (options.cpus(d).cloned(), options.scheduling, placed_tx.clone());
            let spawned = std::thread::Builder::new().name(format!("link-{}", d.name())).spawn(move || {
                let placement = place(cpus.as_ref(), scheduling);
                let ok = placement.is_ok();
                let _ = placed_tx.send(placement);
                drop(placed_tx);
                if ok {
                    forwarder.run()
                }
            });
            match spawned {
                Ok(t) => link.threads.push(t),
                Err(e) => {
                    link.shutdown();
                    return Err(LinkError::Setup { step: "start a forwarding thread".into(), source: e });
                }
            }
        }
        drop(placed_tx);
        for _ in Direction::ALL {
            // A thread that panicked before reporting drops its sender: an error too.
            let placement =
                placed.recv().unwrap_or_else(|_| Err(LinkError::Forwarding("a forwarding thread died".into())));
            if let Err(e) = placement {
                link.shutdown();
                return Err(e);
            }
        }
        Ok(link)
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    fn topology(&self) -> &Topology {
        self.topology.as_ref().expect("a started link has its topology until stopped")
    }

    /// The client side (where the load generator runs).
    pub fn client(&self) -> &Side {
        &self.topology().client
    }

    /// The server side.
    pub fn server(&self) -> &Side {
        &self.topology().server
    }

    pub fn ready_info(&self) -> ReadyInfo {
        let t = self.topology();
        ReadyInfo {
            name: self.config.name.to_string(),
            pid: std::process::id(),
            mtu: self.config.mtu,
            client: t.client.clone(),
            server: t.server.clone(),
            up: self.config.up,
            down: self.config.down,
            seed: self.config.seed,
            congestion: self.config.congestion.clone(),
            scheduling: self.threads_options.scheduling.name(),
            cpus_up: self.threads_options.cpus_up.as_ref().map(|c| c.to_string()),
            cpus_down: self.threads_options.cpus_down.as_ref().map(|c| c.to_string()),
            stale_removed: t.stale_removed.clone(),
        }
    }

    /// What the link has applied so far.
    pub fn report(&self) -> LinkReport {
        let t = self.topology.as_ref();
        let report_of = |d: Direction| {
            // The sending side's device: what the kernel dropped before the forwarder read it.
            let sender = t.map(|t| match d {
                Direction::Up => &t.client,
                Direction::Down => &t.server,
            });
            let kernel_drops = sender.and_then(|s| netns::tx_dropped(&s.netns, &s.device).ok());
            self.counters[d.index()].lock().unwrap_or_else(|p| p.into_inner()).report(kernel_drops)
        };
        LinkReport {
            name: self.config.name.to_string(),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            up: report_of(Direction::Up),
            down: report_of(Direction::Down),
            rusage: archlab_metrics::rusage::process_usage(),
        }
    }

    /// The packet counts of direction `d` so far (cheap: no device counters are read).
    pub fn counts(&self, d: Direction) -> PacketCounts {
        self.counters[d.index()].lock().unwrap_or_else(|p| p.into_inner()).counts
    }

    /// Stop forwarding and remove everything; returns the final report, or the failure that
    /// stopped a forwarding thread (everything is removed in both cases).
    pub fn stop(mut self) -> Result<LinkReport, LinkError> {
        self.join_threads();
        let report = self.report();
        let removed = self.topology.take().map_or(Ok(()), Topology::remove);
        if let Some(e) = self.control.failure() {
            return Err(LinkError::Forwarding(e));
        }
        removed.map(|_| report)
    }

    fn join_threads(&mut self) {
        self.control.request_stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        self.join_threads();
        if let Some(t) = self.topology.take() {
            let _ = t.remove();
        }
    }
}

/// Pin the calling thread and set its scheduling.
fn place(cpus: Option<&CpuList>, scheduling: Scheduling) -> Result<(), LinkError> {
    if let Some(cpus) = cpus {
        cpus.pin_current_thread().map_err(LinkError::setup(format!("pin a forwarding thread to CPUs {cpus}")))?;
    }
    scheduling.apply().map_err(LinkError::setup(format!("schedule a forwarding thread as {}", scheduling.name())))
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown();
    }
}
