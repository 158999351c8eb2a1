//! Serving one connection with blocking I/O: read, answer every complete request, write the
//! responses with `write_all`, repeat until the connection closes. Shared by the
//! thread-per-connection and pool front-ends. The thread serving a connection blocks in
//! `read` while the client is silent, which is exactly the cost those architectures pay, and in
//! `write` while the client does not read (a response over `max_output_bytes` is written part
//! by part, so such a client holds one part of memory, and its thread). The request and idle
//! timeouts (`crate::timeouts`) are the socket's read timeout (`SO_RCVTIMEO`), set only when
//! it changes: once per connection while requests arrive in one read.

use crate::acceptor::Admitted;
use crate::conn::{linger_close_blocking, InBuf, OutBuf};
use crate::http_service::{serve_connection, Flow, KeepAlive, Scratch};
use crate::service::ClientConn;
use crate::timeouts::{Expiry, Timeouts, Watch};
use archlab_metrics::counters::{count_limit, count_write, LimitEvent};
use archlab_wire::http::{request_timeout_response, Limits};
use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How often a handler waiting on an idle connection looks whether another connection is
/// starving for it (see [`BlockingConn::serve_yielding`]).
const IDLE_CHECK: Duration = Duration::from_millis(50);
/// How much of the idle timeout may have passed before the wait starts while the whole timeout
/// is still set as the read timeout (see [`BlockingConn::set_read_timeout`]).
const IDLE_ROUNDING: Duration = Duration::from_millis(10);

/// A connection with its buffers, its timeouts and its place under the connection cap.
pub struct BlockingConn {
    stream: TcpStream,
    input: InBuf,
    output: OutBuf,
    timeouts: Timeouts,
    watch: Watch,
    /// The socket's read timeout as last set (`SO_RCVTIMEO`), so that it is set only when it
    /// changes: once per connection while requests arrive whole.
    read_timeout: Option<Duration>,
    _place: Admitted,
}

impl BlockingConn {
    pub fn new(stream: TcpStream, place: Admitted, limits: &Limits, timeouts: Timeouts) -> BlockingConn {
        BlockingConn {
            stream,
            input: InBuf::new(limits.max_header_bytes + limits.max_body_bytes),
            output: OutBuf::default(),
            timeouts,
            watch: Watch::new(),
            read_timeout: None,
            _place: place,
        }
    }

    /// Serve requests until the connection ends. `policy()` is asked before each batch of
    /// buffered requests whether the connection may stay open after them.
    pub fn serve(self, limits: &Limits, scratch: &mut Scratch, policy: impl Fn() -> KeepAlive) {
        self.serve_inner(limits, scratch, policy, None)
    }

    /// As [`BlockingConn::serve`] for a handler shared by many connections: while the client is
    /// idle between requests the handler wakes every [`IDLE_CHECK`], and when
    /// `starving()` says another connection has waited for a handler through two checks in a
    /// row, it closes this idle keep-alive connection (as HTTP lets a server do at any time,
    /// RFC 9112 §9.8) and takes the next. Without it a connection handed to a handler that is
    /// blocked on a silent client (an actor's mailbox, or every pool thread held by idle
    /// clients) would wait until that client spoke again: forever, if it waits for the answer.
    pub fn serve_yielding(
        self,
        limits: &Limits,
        scratch: &mut Scratch,
        policy: impl Fn() -> KeepAlive,
        starving: impl Fn() -> bool,
    ) {
        self.serve_inner(limits, scratch, policy, Some(&starving))
    }

    fn serve_inner(
        mut self,
        limits: &Limits,
        scratch: &mut Scratch,
        policy: impl Fn() -> KeepAlive,
        starving: Option<&dyn Fn() -> bool>,
    ) {
        let mut starved_checks = 0;
        loop {
            let flow = if self.input.is_empty() {
                Flow::KeepOpen
            } else {
                let conn = ClientConn { stream: &mut self.stream, input: &mut self.input, output: &mut self.output };
                serve_connection(conn, limits, scratch, policy())
            };
            if self.output.pending() > 0 && self.output.flush_to(&mut self.stream).is_err() {
                return;
            }
            match flow {
                Flow::KeepOpen => {}
                // The blocking flush sent everything: answer the requests that waited behind it.
                Flow::Drain => continue,
                Flow::Close => return,
                Flow::Refused => return linger_close_blocking(&mut self.stream),
            }
            self.watch.observe(&self.input, 0, false);
            if !self.set_read_timeout(starving.is_some()) {
                return self.expire();
            }
            match self.input.read_from(&mut self.stream) {
                Ok(0) => return,
                Ok(_) => starved_checks = 0,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if self.watch.deadline(&self.timeouts).is_some_and(|(d, _)| d <= Instant::now()) {
                        return self.expire();
                    }
                    let idle = self.input.is_empty();
                    starved_checks = if idle && starving.is_some_and(|s| s()) { starved_checks + 1 } else { 0 };
                    if starved_checks >= 2 {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Set the read timeout the connection's state asks for (the time left of a request in
    /// progress, the idle timeout, and at most [`IDLE_CHECK`] for a shared handler); false
    /// when the request's time has already run out.
    fn set_read_timeout(&mut self, shared: bool) -> bool {
        let wanted = match self.watch.deadline(&self.timeouts) {
            None => None,
            Some((deadline, why)) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                match (why, self.timeouts.idle) {
                    // Just gone idle: the whole idle timeout, the same value every time, so that
                    // the socket option is set once. (The kernel's timer may end a few ms early,
                    // on a jiffy: then the rest of the time is waited for.)
                    (Expiry::Idle, Some(idle)) if left + IDLE_ROUNDING >= idle => Some(idle),
                    _ => Some(left),
                }
            }
        };
        let wanted = if shared { Some(wanted.map_or(IDLE_CHECK, |w| w.min(IDLE_CHECK))) } else { wanted };
        if wanted != self.read_timeout && self.stream.set_read_timeout(wanted).is_ok() {
            self.read_timeout = wanted;
        }
        true
    }

    /// The connection's timeout ran out: answer 408 to a request in progress (and linger), or
    /// close an idle connection.
    fn expire(mut self) {
        if self.watch.in_request() {
            count_limit(LimitEvent::RequestTimedOut);
            count_write();
            if self.stream.write_all(request_timeout_response()).is_ok() {
                linger_close_blocking(&mut self.stream);
            }
        } else {
            count_limit(LimitEvent::IdleClosed);
        }
    }
}
