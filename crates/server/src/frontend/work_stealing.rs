//! `tokio`: the work-stealing baseline. A tokio multi-thread runtime (W worker threads, default
//! one per CPU) runs one task per connection; idle workers steal runnable tasks from busy ones.
//!
//! Mechanism: the shared blocking acceptor (`acceptor::accept_blocking`) hands each connection
//! to the runtime (`spawn`, one hand-off per connection, as netty's boss does); the task then
//! reads into the connection's `InBuf` whenever the socket is readable, answers every complete
//! request through the shared `http_service`, and writes through the shared `OutBuf` until
//! `EAGAIN`, then awaits writability. Readiness comes from tokio's epoll driver (mio), so the
//! only new code here is the await points; the buffers, limits, write counting and lingering
//! close are the ones every architecture uses; the request and idle timeouts
//! (`crate::timeouts`) are a tokio timer on the wait for readability. Requests queue in socket buffers and in the
//! runtime's run queues (a worker's local queue, the global queue); workers block in
//! `epoll_wait` when no task is runnable. Work stealing moves tasks between workers without
//! counting a hand-off (it is the scheduler's, not the application's). Expected bottleneck:
//! the workers' cores; a workload that blocks (`/call`, `/delay`, `/file`) holds its worker,
//! and other tasks are stolen by the remaining workers rather than waiting behind it.

use crate::acceptor::{accept_blocking, Admission};
use crate::conn::{Flushed, InBuf, OutBuf, WritePolicy, LINGER, LINGER_MAX_BYTES};
use crate::http_service::{serve_buffered, Flow, KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::timeouts::Watch;
use crate::Server;
use archlab_metrics::counters::{count_limit, count_write, LimitEvent};
use archlab_wire::http::request_timeout_response;
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Arc;

pub struct WorkStealing {
    options: ServerOptions,
    workers: usize,
}

impl WorkStealing {
    pub fn new(options: &ServerOptions, workers: usize) -> Self {
        WorkStealing { options: options.clone(), workers }
    }
}

impl Server for WorkStealing {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.workers)
            .thread_name("worker")
            .enable_io()
            .enable_time()
            .build()?;
        let options = Arc::new(self.options.clone());
        accept_blocking(&listener, &self.options, &Admission::new(self.options.max_connections), |stream, place| {
            archlab_metrics::counters::count_handoff();
            let options = options.clone();
            runtime.spawn(async move {
                let _place = place;
                if stream.set_nonblocking(true).is_err() {
                    return;
                }
                if let Ok(stream) = tokio::net::TcpStream::from_std(stream) {
                    serve_connection(stream, &options).await;
                }
            });
        })
    }
}

/// `std::io` faces of a tokio stream: `try_read`/`try_write` return `WouldBlock` when the
/// socket is not ready, which the shared buffers already handle.
struct Nonblocking<'a>(&'a tokio::net::TcpStream);

impl Read for Nonblocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Nonblocking<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

async fn serve_connection(stream: tokio::net::TcpStream, options: &ServerOptions) {
    let limits = &options.limits;
    let timeouts = options.timeouts();
    let mut watch = Watch::new();
    let mut input = InBuf::new(limits.max_header_bytes + limits.max_body_bytes);
    let mut output = OutBuf::default();
    let mut scratch = Scratch::new(options);
    loop {
        let flow = if input.is_empty() {
            Flow::KeepOpen
        } else {
            serve_buffered(&mut input, &mut output, limits, &mut scratch, KeepAlive::AsRequested)
        };
        while output.pending() > 0 {
            match output.flush(&mut Nonblocking(&stream), WritePolicy::UntilBlocked) {
                Ok(Flushed::Done) => {}
                Ok(_) if stream.writable().await.is_ok() => {}
                _ => return,
            }
        }
        match flow {
            Flow::KeepOpen => {}
            // Everything went out: answer the requests that waited behind it.
            Flow::Drain => continue,
            Flow::Close => return,
            Flow::Refused => return linger(stream).await,
        }
        watch.observe(&input, 0, false);
        loop {
            match input.read_from(&mut Nonblocking(&stream)) {
                Ok(0) => return,
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let readable = match watch.deadline(&timeouts) {
                        None => stream.readable().await,
                        Some((deadline, _)) => {
                            let deadline = tokio::time::Instant::from_std(deadline);
                            match tokio::time::timeout_at(deadline, stream.readable()).await {
                                Ok(readable) => readable,
                                Err(_) => return expire(stream, &watch).await,
                            }
                        }
                    };
                    if readable.is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

/// The connection's timeout ran out: answer 408 to a request in progress (one write: nothing
/// else is unsent) and linger, or close an idle connection.
async fn expire(stream: tokio::net::TcpStream, watch: &Watch) {
    if watch.in_request() {
        count_limit(LimitEvent::RequestTimedOut);
        count_write();
        let _ = stream.try_write(request_timeout_response());
        linger(stream).await
    } else {
        count_limit(LimitEvent::IdleClosed);
    }
}

/// Lingering close (see `conn::LINGER`): shut down the write side, discard input until the
/// client closes, [`LINGER_MAX_BYTES`] were discarded or [`LINGER`] passed.
async fn linger(stream: tokio::net::TcpStream) {
    // SAFETY: plain syscall on a descriptor `stream` owns for the whole call.
    unsafe { libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR) };
    let discard = async {
        let mut sink = [0u8; 16 * 1024];
        let mut discarded = 0;
        while discarded < LINGER_MAX_BYTES {
            archlab_metrics::counters::count_read();
            match stream.try_read(&mut sink) {
                Ok(0) => return,
                Ok(n) => discarded += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if stream.readable().await.is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, discard).await;
}
