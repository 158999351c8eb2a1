//! Acceptor + fixed pool of blocking workers (seed 000's Blocking server, pool of four).
//!
//! Mechanism: an acceptor thread blocks in `accept` and appends each connection to an
//! unbounded FIFO; P worker threads take connections from it and serve them with blocking
//! reads and writes. Requests queue in that FIFO (as connections) and in socket buffers;
//! workers block in `read` on a silent client. Expected bottleneck: P, once a request costs
//! real CPU or a client thinks.
//!
//! Keep-alive policy: a worker serves its connection for as long as the client keeps it open,
//! except that while other connections wait for a worker it answers with `Connection: close`
//! and closes. Without that, the (P+1)-th keep-alive connection would wait until one of the
//! first P closes, i.e. forever under a closed-loop load (the field notes on seed 000's pool
//! discuss this); Tomcat's blocking connector solved the same problem the same way, by
//! disabling keep-alive when its threads run short. Handing an idle keep-alive connection
//! back to the FIFO instead would not work: a worker that picks it up blocks in `read` on a
//! client with nothing to say while others wait. Under pressure this architecture therefore
//! pays a TCP connection per request, which is its real cost.

use crate::acceptor::accept_blocking;
use crate::frontend::blocking_conn::BlockingConn;
use crate::http_service::{KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::Server;
use std::collections::VecDeque;
use std::io;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub struct BlockingPool {
    options: ServerOptions,
    threads: usize,
}

impl BlockingPool {
    pub fn new(options: &ServerOptions, threads: usize) -> Self {
        BlockingPool { options: options.clone(), threads }
    }
}

/// FIFO of connections waiting for a worker. `waiting` mirrors the length so that workers can
/// check for waiting connections without taking the lock after every response.
#[derive(Default)]
struct ConnQueue {
    items: Mutex<VecDeque<BlockingConn>>,
    ready: Condvar,
    waiting: AtomicUsize,
}

impl ConnQueue {
    fn push(&self, conn: BlockingConn) {
        let mut q = self.items.lock().unwrap();
        q.push_back(conn);
        self.waiting.store(q.len(), Ordering::Release);
        drop(q);
        self.ready.notify_one();
    }

    fn pop(&self) -> BlockingConn {
        let mut q = self.items.lock().unwrap();
        loop {
            if let Some(c) = q.pop_front() {
                self.waiting.store(q.len(), Ordering::Release);
                return c;
            }
            q = self.ready.wait(q).unwrap();
        }
    }

    fn has_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }
}

impl Server for BlockingPool {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let queue = Arc::new(ConnQueue::default());
        for i in 0..self.threads {
            let queue = queue.clone();
            let limits = self.options.limits.clone();
            std::thread::Builder::new().name(format!("worker-{i}")).spawn(move || {
                let mut scratch = Scratch::default();
                loop {
                    let policy = || if queue.has_waiting() { KeepAlive::Refuse } else { KeepAlive::AsRequested };
                    queue.pop().serve(&limits, &mut scratch, policy);
                }
            })?;
        }
        let limits = self.options.limits.clone();
        accept_blocking(&listener, &self.options, |stream| queue.push(BlockingConn::new(stream, &limits)))
    }
}
