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
    /// Pin both threads to these CPUs.
    pub cpus: Option<CpuList>,
    pub scheduling: Scheduling,
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
    /// How the forwarding threads are scheduled: realtime or normal.
    pub scheduling: &'static str,
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
        let topology = Topology::create(&config.name, config.mtu)?;
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
        for d in Direction::ALL {
            let (input, output) = match d {
                Direction::Up => (&topology.client_tun, &topology.server_tun),
                Direction::Down => (&topology.server_tun, &topology.client_tun),
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
            let options = options.clone();
            let spawned = std::thread::Builder::new().name(format!("link-{}", d.name())).spawn(move || {
                if let Some(cpus) = &options.cpus {
                    if let Err(e) = cpus.pin_current_thread() {
                        forwarder.control.fail(format!("cannot pin to CPUs {cpus}: {e}"));
                        return;
                    }
                }
                if let Err(e) = options.scheduling.apply() {
                    forwarder.control.fail(format!("cannot schedule the forwarding thread as SCHED_FIFO: {e}"));
                    return;
                }
                forwarder.run()
            });
            match spawned {
                Ok(t) => link.threads.push(t),
                Err(e) => {
                    link.topology = Some(topology);
                    link.shutdown();
                    return Err(LinkError::Setup { step: "start a forwarding thread".into(), source: e });
                }
            }
        }
        link.topology = Some(topology);
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
            scheduling: self.threads_options.scheduling.name(),
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

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown();
    }
}
