//! Forwarding on a thread that may block (thread-per-connection, the blocking pools, the
//! handlers of a staged route): [`BlockingForwarder`].
//!
//! Mechanism: for each request in the client's input, pick a backend, take an idle pooled
//! connection or connect (blocking, within `connect_timeout_ms`), write the rewritten head and
//! the body as it arrives from the client (never blocking on the backend's socket, and reading
//! the backend meanwhile: a `100 Continue` is relayed at once, an early final answer ends the
//! body), then read the response and relay it into the client's output, flushing to the client
//! every [`STREAM_FLUSH_BYTES`] so that a large body streams through a bounded buffer. The
//! thread blocks in `connect`, in `write` of the head to the backend, in `read` from the backend
//! (each read at most `backend_timeout_ms`: SO_RCVTIMEO, set once per connection), and in `poll`
//! on the client and the backend while a body streams in or out (at most `client_timeout_ms`
//! for the client, `backend_timeout_ms` for the backend). Requests queue in front of this
//! thread as they do for the workloads; a thread holds its backend connection for one exchange
//! and returns it to the shared pool.

use crate::http::backend::{Backend, Failure};
use crate::http::exchange::{write_error, ErrorStatus, Exchange, Fault, Relay};
use crate::http::pool::BackendConn;
use crate::http::{thread_rng, Proxy};
use archlab_metrics::counters;
use archlab_prng::Xoshiro256pp;
use archlab_server::conn::WritePolicy;
use archlab_server::http_service::{Flow, KeepAlive};
use archlab_server::service::{BlockingForward, ClientConn};
use archlab_wire::http::{self, Limits};
use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A response body is flushed to the client whenever this much of it is buffered.
pub const STREAM_FLUSH_BYTES: usize = 64 * 1024;
/// Bytes read from a backend per call.
const READ_CHUNK: usize = 64 * 1024;

pub struct BlockingForwarder {
    proxy: Arc<Proxy>,
    rng: Xoshiro256pp,
    buf: Vec<u8>,
}

/// How an exchange left the client connection.
enum Outcome {
    /// Answered (relayed, or the proxy's own error response); the connection goes on if `keep`.
    Answered { keep: bool },
    /// The client left, stalled, or the response broke off after its head: close.
    Close,
    /// Answered with the rest of the request body unread: close lingering.
    Refuse,
}

/// Why an attempt on a backend ended early.
enum AttemptError {
    Backend(Fault),
    /// The client left or stalled while its body or the response streamed.
    Client,
}

/// Why no connection to a backend could be had.
enum Checkout {
    Failed(Fault),
    /// At its connection limit for `connect_timeout_ms`.
    Busy,
}

impl BlockingForwarder {
    pub fn new(proxy: Arc<Proxy>) -> BlockingForwarder {
        let rng = thread_rng(proxy.options.seed);
        BlockingForwarder { proxy, rng, buf: vec![0; READ_CHUNK] }
    }

    fn exchange(&mut self, conn: &mut ClientConn<'_>, x: &mut Exchange) -> Outcome {
        // The failure of the first attempt, answered if no other backend can take the retry.
        let mut first_failure: Option<(ErrorStatus, String)> = None;
        loop {
            let Some(i) = self.proxy.balancer.pick(x.key_hash, &mut self.rng, x.failed_on) else {
                if let Some((status, why)) = first_failure {
                    return answer(conn, x, status, why);
                }
                self.proxy.count_unavailable();
                return answer(conn, x, ErrorStatus::ServiceUnavailable, "no healthy backend".into());
            };
            let backend = self.proxy.backend(i).clone();
            x.attempt();
            if x.attempts > 1 {
                backend.count_retry();
            }
            let mut b = match self.checkout(&backend) {
                Ok(b) => b,
                Err(Checkout::Busy) => {
                    self.proxy.count_unavailable();
                    let why = format!("backend {} is at its connection limit", backend.addr);
                    return answer(conn, x, ErrorStatus::ServiceUnavailable, why);
                }
                Err(Checkout::Failed(fault)) => {
                    let why = format!("{} ({})", fault.detail, backend.addr);
                    if self.proxy.failed(i, &fault, false, x.may_retry()) {
                        x.failed_on = Some(i);
                        first_failure = Some((fault.status(), why));
                        continue;
                    }
                    return answer(conn, x, fault.status(), why);
                }
            };
            let in_flight = backend.start();
            let result = self.attempt(conn, x, &mut b);
            drop(in_flight);
            match result {
                Ok(()) => {
                    backend.succeeded(x.status, x.sent_at.elapsed());
                    if x.keep_backend {
                        self.proxy.pool.put(b);
                    }
                    if x.body_cut() {
                        // Answered before its body was read whole: nothing can tell where the
                        // next request would start.
                        return Outcome::Refuse;
                    }
                    return Outcome::Answered { keep: x.keep_client };
                }
                Err(AttemptError::Client) => return Outcome::Close,
                Err(AttemptError::Backend(fault)) => {
                    let reused = b.reused;
                    drop(b);
                    let why = format!("{} ({})", fault.detail, backend.addr);
                    if self.proxy.failed(i, &fault, reused, x.may_retry()) {
                        x.failed_on = Some(i);
                        first_failure = Some((fault.status(), why));
                        continue;
                    }
                    if x.head_relayed {
                        return Outcome::Close;
                    }
                    return answer(conn, x, fault.status(), why);
                }
            }
        }
    }

    /// An idle pooled connection, or a new one under the backend's limit.
    fn checkout(&self, backend: &Arc<Backend>) -> Result<BackendConn, Checkout> {
        let until = Instant::now() + self.proxy.connect_timeout();
        loop {
            let seen = backend.released_count();
            if let Some(c) = self.proxy.pool.take(backend.index) {
                return Ok(c);
            }
            if backend.try_open(self.proxy.options.max_conns) {
                break;
            }
            if !backend.wait_released(seen, until) {
                return Err(Checkout::Busy);
            }
        }
        let stream = match connect(backend.addr, self.proxy.connect_timeout(), self.proxy.backend_timeout()) {
            Ok(s) => s,
            Err(fault) => {
                backend.closed();
                return Err(Checkout::Failed(fault));
            }
        };
        Ok(BackendConn::new(stream, backend.clone()))
    }

    /// Send the request to `b` and relay its response.
    fn attempt(
        &mut self,
        conn: &mut ClientConn<'_>,
        x: &mut Exchange,
        b: &mut BackendConn,
    ) -> Result<(), AttemptError> {
        let sending = |e: io::Error| AttemptError::Backend(write_fault(e));
        write_all(&mut b.stream, &x.backend_head).map_err(sending)?;
        self.send_body(conn, x, b)?;
        while !x.is_done() {
            counters::count_read();
            let relayed = match b.stream.read(&mut self.buf) {
                Ok(0) => x.backend_closed(),
                Ok(n) => x.relay(&self.buf[..n], conn.output.vec()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    Err(Fault { failure: Failure::Timeout, detail: "the backend did not answer in time".into() })
                }
                // A reset: as a close, at whatever point of the response it came.
                Err(_) => x.backend_closed(),
            };
            match relayed.map_err(AttemptError::Backend)? {
                Relay::Done => return Ok(()),
                Relay::More if conn.output.pending() >= STREAM_FLUSH_BYTES => {
                    if !client_flush(conn, self.proxy.client_timeout()) {
                        return Err(AttemptError::Client);
                    }
                }
                Relay::More => {}
            }
        }
        Ok(())
    }

    /// Forward the request's body as it arrives from the client, watching the backend
    /// meanwhile: an interim answer (`100 Continue`, which a client that sent
    /// `Expect: 100-continue` waits for before sending its body) is relayed at once, and a final
    /// answer ends the forwarding (the exchange then has `body_cut`). Writes never block, so a
    /// backend that answers and stops reading cannot hold this thread until the write timeout.
    fn send_body(
        &mut self,
        conn: &mut ClientConn<'_>,
        x: &mut Exchange,
        b: &mut BackendConn,
    ) -> Result<(), AttemptError> {
        let mut sent = x.head_len;
        while sent < x.request_len {
            let have = conn.input.filled().len().min(x.request_len);
            if have > sent {
                match send_nowait(b.stream.as_raw_fd(), &conn.input.filled()[sent..have]) {
                    Ok(n) => {
                        sent += n;
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(AttemptError::Backend(write_fault(e))),
                }
            }
            let (client_in, backend_out) = (have < x.request_len, have > sent);
            let timeout = if backend_out { self.proxy.backend_timeout() } else { self.proxy.client_timeout() };
            let ready = wait_both(conn.stream.as_raw_fd(), client_in, b.stream.as_raw_fd(), backend_out, timeout);
            let Some((client_ready, backend_ready)) = ready else {
                return Err(if backend_out {
                    AttemptError::Backend(Fault {
                        failure: Failure::Timeout,
                        detail: "the backend did not take the request in time".into(),
                    })
                } else {
                    AttemptError::Client
                });
            };
            if backend_ready {
                counters::count_read();
                let relayed = match b.stream.read(&mut self.buf) {
                    Ok(0) => x.backend_closed(),
                    Ok(n) => x.relay(&self.buf[..n], conn.output.vec()),
                    Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => continue,
                    Err(_) => x.backend_closed(),
                };
                relayed.map_err(AttemptError::Backend)?;
                if conn.output.pending() > 0 && !client_flush(conn, self.proxy.client_timeout()) {
                    return Err(AttemptError::Client);
                }
                if x.body_cut() {
                    return Ok(());
                }
            }
            if client_ready && !client_read(conn, self.proxy.client_timeout()) {
                return Err(AttemptError::Client);
            }
        }
        x.mark_body_forwarded();
        Ok(())
    }
}

impl BlockingForward for BlockingForwarder {
    fn serve(&mut self, mut conn: ClientConn<'_>, limits: &Limits, policy: KeepAlive) -> Flow {
        let peer = conn.stream.peer_addr().ok();
        let keep_alive = policy == KeepAlive::AsRequested;
        loop {
            if conn.input.is_empty() {
                return Flow::KeepOpen;
            }
            let begun = Exchange::begin(conn.input.filled(), limits, peer, &self.proxy.options.hash_key, keep_alive);
            let mut x = match begun {
                Ok(Some(x)) => x,
                Ok(None) => return Flow::KeepOpen,
                Err(e) => {
                    conn.output.vec().extend_from_slice(http::error_response(e));
                    return Flow::Refused;
                }
            };
            match self.exchange(&mut conn, &mut x) {
                Outcome::Answered { keep } => {
                    conn.input.consume(x.request_len);
                    if !keep {
                        return Flow::Close;
                    }
                }
                Outcome::Close => return Flow::Close,
                Outcome::Refuse => return Flow::Refused,
            }
        }
    }
}

/// Answer the request with the proxy's own error response. If part of its body has not
/// arrived, the connection closes lingering after it.
fn answer(conn: &mut ClientConn<'_>, x: &Exchange, status: ErrorStatus, message: String) -> Outcome {
    let body_read = conn.input.filled().len() >= x.request_len;
    let keep = x.keeps_client_on_error() && body_read;
    write_error(conn.output.vec(), status, keep, &message);
    if body_read {
        Outcome::Answered { keep }
    } else {
        Outcome::Refuse
    }
}

/// A connection to `addr` within `connect_timeout`, its reads and writes bounded by
/// `io_timeout`.
fn connect(addr: std::net::SocketAddr, connect_timeout: Duration, io_timeout: Duration) -> Result<TcpStream, Fault> {
    let stream = TcpStream::connect_timeout(&addr, connect_timeout).map_err(connect_fault)?;
    let _ = stream.set_nodelay(true);
    stream.set_read_timeout(Some(io_timeout)).map_err(connect_fault)?;
    stream.set_write_timeout(Some(io_timeout)).map_err(connect_fault)?;
    Ok(stream)
}

/// What a failed connect means.
pub fn connect_fault(e: io::Error) -> Fault {
    if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) {
        Fault { failure: Failure::ConnectTimeout, detail: "the backend did not accept the connection in time".into() }
    } else {
        Fault { failure: Failure::Refused, detail: format!("the backend refused the connection ({e})") }
    }
}

/// What a failed write of the request means.
pub fn write_fault(e: io::Error) -> Fault {
    if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) {
        Fault { failure: Failure::Timeout, detail: "the backend did not take the request in time".into() }
    } else {
        Fault {
            failure: Failure::ClosedBeforeResponse,
            detail: "the backend closed the connection before answering".into(),
        }
    }
}

fn write_all(s: &mut TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        counters::count_write();
        match s.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Write what the socket takes now, without waiting (`MSG_DONTWAIT`): `WouldBlock` when it
/// takes nothing.
fn send_nowait(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    loop {
        counters::count_write();
        // SAFETY: `bytes` is valid for its length; `fd` is an open socket.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Wait until the client is readable (if `client_in`), the backend readable (always: it may
/// answer at any time), or the backend writable (if `backend_out`), for at most `timeout`:
/// (client ready, backend ready), or None when the time passed. A hang-up or error counts as
/// ready: the read or write that follows says what it was.
fn wait_both(
    client: RawFd,
    client_in: bool,
    backend: RawFd,
    backend_out: bool,
    timeout: Duration,
) -> Option<(bool, bool)> {
    let backend_events = libc::POLLIN | if backend_out { libc::POLLOUT } else { 0 };
    let mut fds = [
        libc::pollfd { fd: if client_in { client } else { -1 }, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: backend, events: backend_events, revents: 0 },
    ];
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    loop {
        // SAFETY: two valid pollfds (a negative fd is ignored by poll).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if rc > 0 {
            return Some((fds[0].revents != 0, fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0));
        }
        if rc == 0 || io::Error::last_os_error().kind() != ErrorKind::Interrupted {
            return None;
        }
    }
}

/// Wait until `fd` is ready for `events` (POLLIN, POLLOUT) or `timeout` passes.
fn wait_ready(fd: RawFd, events: libc::c_short, timeout: Duration) -> bool {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    loop {
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc >= 0 {
            return rc > 0;
        }
        if io::Error::last_os_error().kind() != ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Read more of the request from the client, waiting at most `timeout`; false when the client
/// closed, failed or stalled.
fn client_read(conn: &mut ClientConn<'_>, timeout: Duration) -> bool {
    if !wait_ready(conn.stream.as_raw_fd(), libc::POLLIN, timeout) {
        return false;
    }
    loop {
        match conn.input.read_from(conn.stream) {
            Ok(n) => return n > 0,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A blocking socket's read timeout, or a spurious readiness of a non-blocking one.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !wait_ready(conn.stream.as_raw_fd(), libc::POLLIN, timeout) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
}

/// Write the client's pending output, waiting at most `timeout` each time the socket is full.
fn client_flush(conn: &mut ClientConn<'_>, timeout: Duration) -> bool {
    loop {
        match conn.output.flush(conn.stream, WritePolicy::UntilBlocked) {
            Ok(archlab_server::conn::Flushed::Done) => return true,
            Ok(_) => {
                if !wait_ready(conn.stream.as_raw_fd(), libc::POLLOUT, timeout) {
                    return false;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !wait_ready(conn.stream.as_raw_fd(), libc::POLLOUT, timeout) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::exchange::ErrorStatus;

    #[test]
    fn connect_and_write_failures_are_classified() {
        let timed_out = connect_fault(io::Error::from(ErrorKind::TimedOut));
        assert_eq!((timed_out.failure, timed_out.status()), (Failure::ConnectTimeout, ErrorStatus::GatewayTimeout));
        let refused = connect_fault(io::Error::from(ErrorKind::ConnectionRefused));
        assert_eq!((refused.failure, refused.status()), (Failure::Refused, ErrorStatus::BadGateway));
        assert_eq!(write_fault(io::Error::from(ErrorKind::BrokenPipe)).failure, Failure::ClosedBeforeResponse);
        assert_eq!(write_fault(io::Error::from(ErrorKind::WouldBlock)).failure, Failure::Timeout);
    }
}
