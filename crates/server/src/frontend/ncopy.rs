//! `ncopy`: seed 001's N-copy model, N independent single-threaded servers (`single-thread`
//! event loops), each with its own SO_REUSEPORT listener on the same address and each pinned
//! to one CPU of the list (field notes §3: "N independent single-thread servers, each pinned
//! with CPU affinity").
//!
//! Mechanism: the kernel spreads incoming connections over the N listeners (SO_REUSEPORT
//! hashes the 4-tuple), so nothing in user space distributes connections and no thread ever
//! hands anything to another: each copy accepts, reads, handles and write-spins exactly as
//! `single-thread` does (0 hand-offs per request). Copy i is pinned to the i-th CPU of the
//! server's CPU list (`--cpus`, else the CPUs the process may run on); `copies` defaults to
//! the number of those CPUs. Requests queue in each listener's backlog and in socket buffers;
//! each copy blocks only in `epoll_wait`. Expected bottleneck: the busiest copy's core, since a
//! connection cannot move: the hash may give one copy more connections than another, and a
//! heavy request delays every connection of its copy. The listener handed to `serve` must be
//! bound with SO_REUSEPORT ([`crate::registry::listen_options`] says so for this architecture);
//! copies 1..N bind the same address beside it.

use crate::acceptor::Admission;
use crate::conn::WritePolicy;
use crate::frontend::reactor::{EventLoop, Inbox, Inline};
use crate::options::ServerOptions;
use crate::Server;
use archlab_netio::socket::{listen, ListenOptions};
use archlab_netio::CpuList;
use std::io;
use std::net::TcpListener;

pub struct NCopy {
    options: ServerOptions,
    copies: usize,
}

impl NCopy {
    pub fn new(options: &ServerOptions, copies: usize) -> Self {
        NCopy { options: options.clone(), copies }
    }
}

/// The CPUs copies are pinned to: the server's list, else the process's affinity mask.
pub fn placement(options: &ServerOptions) -> io::Result<CpuList> {
    match &options.cpus {
        Some(list) => Ok(list.clone()),
        None => archlab_netio::cpus::allowed_cpus(),
    }
}

impl Server for NCopy {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let addr = listener.local_addr()?;
        let cpus = placement(&self.options)?;
        let reuse = ListenOptions { reuse_port: true, ..Default::default() };
        let mut listeners = vec![listener];
        for _ in 1..self.copies {
            listeners.push(listen(addr, &reuse).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("ncopy: cannot bind another SO_REUSEPORT listener on {addr} ({e}); the first listener must be bound with SO_REUSEPORT"),
                )
            })?);
        }
        // One cap for the whole server: a copy at the cap is woken when any copy closes one.
        let admission = Admission::new(self.options.max_connections);
        let mut loops = Vec::with_capacity(self.copies);
        for l in listeners {
            let mode = Inline(WritePolicy::Spin);
            loops.push(EventLoop::with_listener(l, admission.clone(), Inbox::new()?, &self.options, mode)?);
        }
        let mut loops = loops.into_iter().enumerate();
        let (_, first) = loops.next().expect("copies >= 1");
        for (i, event_loop) in loops {
            let cpu = cpus.nth(i);
            std::thread::Builder::new().name(format!("copy-{i}")).spawn(move || {
                // Pinning is best effort: the process is already confined to the list.
                let _ = archlab_netio::cpus::pin_current_thread(&[cpu]);
                if let Err(e) = event_loop.run() {
                    // Connections hashed to a dead copy's listener would hang: end the server.
                    eprintln!("ncopy: copy {i} failed: {e}");
                    std::process::exit(1);
                }
            })?;
        }
        // Copy 0 runs on the calling thread.
        let _ = archlab_netio::cpus::pin_current_thread(&[cpus.nth(0)]);
        first.run()
    }
}
