//! `netty`: one acceptor thread + N event loops (seed 001's NettyServer: a boss
//! `NioEventLoopGroup(1)` and a worker group of N loops).
//!
//! Mechanism: the acceptor blocks in `accept` and hands each connection round-robin to a
//! loop through the loop's inbox (a wake-up via eventfd); the connection then belongs to
//! that loop for life, and the loop reads, handles and writes it as `single-thread` does,
//! except for writes: a loop stops writing a connection at `EAGAIN` (and waits for
//! writability) or after `write_spin` calls (Netty's `writeSpinCount`, default 16; a flush
//! task continues after the other ready connections).
//! Requests queue in socket buffers and, briefly, in the inboxes; loop threads block in
//! `epoll_wait`. Expected bottleneck: the loops' cores; the accept hand-off costs one wake-up
//! per connection, not per request. With more than one CPU given, loop i is pinned to the
//! i-th CPU of the list (round-robin). `hybrid` (HybridNetty) is this front-end with loops
//! that route writes per request class (`frontend::hybrid`).

use crate::acceptor::{accept_blocking, Admission};
use crate::conn::WritePolicy;
use crate::frontend::hybrid::Router;
use crate::frontend::reactor::{EventLoop, Forwarding, Inline, Mode};
use crate::options::ServerOptions;
use crate::service::Service;
use crate::Server;
use std::io;
use std::net::TcpListener;

/// Netty's `DefaultChannelConfig.writeSpinCount` (every 4.x version; seed 001 §5.1: "16 in
/// Netty-v4 by default"), counted per flush as Netty 4.1.6 does (see `WritePolicy::SpinLimit`).
pub const DEFAULT_WRITE_SPIN: usize = 16;

/// How the loops write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopWrites {
    /// Netty: every response under the write-spin limit.
    Netty,
    /// HybridNetty: per request class, the Netty path or the single-thread path.
    Hybrid,
}

pub struct MultiReactor {
    options: ServerOptions,
    loops: usize,
    write_spin: usize,
    writes: LoopWrites,
}

impl MultiReactor {
    pub fn new(options: &ServerOptions, loops: usize, write_spin: usize, writes: LoopWrites) -> Self {
        MultiReactor { options: options.clone(), loops, write_spin, writes }
    }
}

impl Server for MultiReactor {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let spin = self.write_spin;
        if let Service::Forward(f) = &self.options.service {
            // Forwarding loops: the backends in each loop's poller (netty's loops only).
            let f = f.clone();
            return self.serve_with(listener, || Forwarding(f.event_loop()));
        }
        match self.writes {
            LoopWrites::Netty => self.serve_with(listener, || Inline(WritePolicy::SpinLimit(spin))),
            LoopWrites::Hybrid => self.serve_with(listener, || Inline(Router::new(spin))),
        }
    }
}

impl MultiReactor {
    /// Start the loops, each in the mode `mode()` makes, and accept for them.
    fn serve_with<M: Mode>(&self, listener: TcpListener, mode: impl Fn() -> M) -> io::Result<()> {
        let mut inboxes = Vec::with_capacity(self.loops);
        for i in 0..self.loops {
            let (event_loop, inbox) = EventLoop::with_inbox(&self.options, mode())?;
            let writes = self.writes;
            inboxes.push(inbox);
            let cpu = self.options.cpus.as_ref().filter(|c| c.ids().len() > 1).map(|c| c.nth(i));
            std::thread::Builder::new().name(format!("loop-{i}")).spawn(move || {
                if let Some(cpu) = cpu {
                    // Pinning is best effort: the process is already confined to the list.
                    let _ = archlab_netio::cpus::pin_current_thread(&[cpu]);
                }
                if let Err(e) = event_loop.run() {
                    eprintln!("{writes:?}: event loop {i} failed: {e}");
                    std::process::exit(1);
                }
            })?;
        }
        let mut next = 0;
        accept_blocking(&listener, &self.options, &Admission::new(self.options.max_connections), |stream, place| {
            inboxes[next].send(stream, place);
            next = (next + 1) % inboxes.len();
        })
    }
}
