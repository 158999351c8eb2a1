//! Forwarding on an event loop (single-thread, netty's loops): [`LoopForwarder`].
//!
//! Mechanism: the client connection stays in its loop slot; its exchange's backend connection
//! is non-blocking (`connect` without waiting for the handshake) and registered edge-triggered
//! in the same poller under `reactor::backend_token(slot)`, so the loop hands the backend's
//! events to this forwarder with the client's slot, and the same [`Exchange`] as the blocking
//! driver's decides what is sent and relayed. Every event, whichever socket it came from, runs
//! [`LoopForwarder::drive`]: flush what the client can take, then advance the exchange as far
//! as the sockets allow (read the client's request, connect, write the request, read and relay
//! the response), stopping only at `EAGAIN`; an edge is never waited for that may already have
//! passed. While a request's body waits, the backend is read too: its `100 Continue` reaches a
//! client that waits for it before sending the body, and a final answer that comes first ends
//! the forwarding of the body. A response is read from the backend only while less than
//! [`RELAY_HIGH_WATER`] of it waits for a slow client, so memory per connection stays bounded.
//! Deadlines (connect, backend silence, a stalled request body) are a heap of (instant, slot)
//! the loop asks for in `due`; a deadline that moved later is pushed again when its old entry
//! comes up.
//!
//! Each loop has its own pool of idle backend connections (still registered in its poller),
//! and its share of a backend's `max_conns` is whatever the other loops leave: at the limit an
//! exchange waits in the loop's queue for that backend, woken when this loop returns or closes a
//! connection to it, and answered 503 after `connect_timeout_ms` if none came free. Requests
//! queue in client sockets and, at a limit, in those queues; the loop thread blocks only in
//! `epoll_wait`. Nothing changes threads: 0 hand-offs per request.

use crate::http::backend::{Failure, InFlight};
use crate::http::blocking::{connect_fault, write_fault};
use crate::http::exchange::{write_error, ErrorStatus, Exchange, Fault, Relay};
use crate::http::pool::{BackendConn, LoopPool};
use crate::http::{thread_rng, Proxy};
use archlab_metrics::counters;
use archlab_netio::socket::connect_nonblocking;
use archlab_netio::{Interest, Poller, Trigger};
use archlab_prng::Xoshiro256pp;
use archlab_server::conn::WritePolicy;
use archlab_server::frontend::reactor::{backend_token, Conn, Ctx, Next};
use archlab_server::service::{LoopForward, LoopState};
use archlab_wire::http;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reading a response stops while this much of it waits for the client.
pub const RELAY_HIGH_WATER: usize = 256 * 1024;
const READ_CHUNK: usize = 64 * 1024;
/// How often idle pooled connections are looked at for expiry.
const EXPIRY_CHECK: Duration = Duration::from_secs(1);

pub struct LoopForwarder {
    proxy: Arc<Proxy>,
    rng: Xoshiro256pp,
    pool: LoopPool,
    buf: Vec<u8>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Slots to run at once (woken at the connection limit).
    runnable: Vec<usize>,
    /// Per backend: slots waiting for a connection under its limit.
    waiting: Vec<VecDeque<usize>>,
    next_expiry: Instant,
}

/// What a client connection of the loop is doing.
#[derive(Default)]
struct ClientState {
    flight: Option<Box<Flight>>,
    /// Once the output is flushed, end the connection this way.
    after_flush: Option<End>,
    peer: Option<SocketAddr>,
    peer_known: bool,
}

/// An exchange in progress.
struct Flight {
    x: Exchange,
    backend: usize,
    conn: Option<BackendConn>,
    in_flight: Option<InFlight>,
    step: Step,
    /// Bytes of the rewritten head written to the backend.
    head_sent: usize,
    /// Position in the client's input up to which the request was forwarded.
    body_sent: usize,
    /// A write to the backend has succeeded: a failure now is not a refused connection.
    connected: bool,
    deadline: Instant,
    /// Earliest instant at which this flight has an entry in the timer heap.
    timer_at: Option<Instant>,
    /// The first attempt's failure, answered if no other backend can take the retry.
    first_failure: Option<(ErrorStatus, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// At the backend's connection limit, queued.
    WaitConn,
    /// Writing the request (connecting first, for a new connection).
    Sending,
    /// Reading and relaying the response.
    Receiving,
}

/// How a client connection ends once its output is flushed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Close,
    /// After a refused request, or with part of a request body unread (`conn::LINGER`).
    Linger,
}

impl End {
    fn next(self) -> Next {
        match self {
            End::Close => Next::Close,
            End::Linger => Next::Linger,
        }
    }
}

/// Why [`LoopForwarder::drive`] was called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wake {
    Socket,
    Timer,
}

impl LoopForwarder {
    pub fn new(proxy: Arc<Proxy>) -> LoopForwarder {
        let n = proxy.balancer.backends().len();
        let pool = LoopPool::new(n, Duration::from_millis(proxy.options.backend_idle_timeout_ms));
        LoopForwarder {
            rng: thread_rng(proxy.options.seed),
            proxy,
            pool,
            buf: vec![0; READ_CHUNK],
            timers: BinaryHeap::new(),
            runnable: Vec::new(),
            waiting: (0..n).map(|_| VecDeque::new()).collect(),
            next_expiry: Instant::now() + EXPIRY_CHECK,
        }
    }

    fn run(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>, wake: Wake) -> Next {
        let mut st: Box<ClientState> = match conn.state.take().map(|s| s.downcast::<ClientState>()) {
            Some(Ok(st)) => st,
            _ => Box::default(),
        };
        let next = self.drive(&mut st, conn, idx, &ctx, wake);
        conn.state = Some(st);
        next
    }

    /// Advance the connection as far as its sockets allow.
    fn drive(
        &mut self,
        st: &mut ClientState,
        conn: &mut Conn<LoopState>,
        idx: usize,
        ctx: &Ctx<'_>,
        wake: Wake,
    ) -> Next {
        if wake == Wake::Timer {
            if let Some(next) = self.on_timer(st, conn, idx, ctx) {
                return next;
            }
        }
        loop {
            if conn.output.pending() > 0 {
                match conn.output.flush(&mut conn.stream, WritePolicy::UntilBlocked) {
                    Ok(_) => {}
                    Err(_) => return Next::Close,
                }
            }
            if let Some(next) = st.after_flush {
                return if conn.output.pending() == 0 { next.next() } else { Next::Keep };
            }
            let Some(flight) = st.flight.as_mut() else {
                // Between requests: parse what arrived, else read more.
                if !conn.input.is_empty() {
                    match self.begin(st, conn, idx, ctx) {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(next) => {
                            st.after_flush = Some(next);
                            continue;
                        }
                    }
                }
                if conn.closing {
                    return Next::Close;
                }
                match conn.input.read_from(&mut conn.stream) {
                    Ok(0) => {
                        // End of stream (or a full buffer, which the parser has refused already).
                        conn.closing = true;
                        st.after_flush = Some(End::Close);
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Next::Close,
                }
                continue;
            };
            match flight.step {
                Step::WaitConn => return Next::Keep,
                Step::Sending => match self.send(flight, conn) {
                    // Not connected yet: nothing to read, and a read would mistake a refused
                    // connection for one closed before the answer.
                    Progress::Blocked if !flight.connected => return self.armed(st, idx),
                    Progress::Blocked => {
                        // While the body waits (for the client, or for room at the backend),
                        // the backend may invite it (`100 Continue`, relayed at once) or answer
                        // before it is whole (then the rest is never forwarded).
                        let pending = conn.output.pending();
                        match self.receive(flight, conn) {
                            Progress::Blocked if conn.output.pending() == pending => return self.armed(st, idx),
                            Progress::Blocked => {} // flush the interim answer, then go on
                            Progress::Advanced => {
                                if flight.x.body_cut() {
                                    flight.step = Step::Receiving;
                                }
                                if flight.x.is_done() {
                                    self.finish(st, conn);
                                }
                            }
                            Progress::Failed(fault) => self.failed(st, conn, idx, ctx, fault),
                            Progress::ClientGone => return Next::Close,
                        }
                    }
                    Progress::Advanced => {}
                    Progress::Failed(fault) => self.failed(st, conn, idx, ctx, fault),
                    Progress::ClientGone => return Next::Close,
                },
                Step::Receiving => {
                    if conn.output.pending() >= RELAY_HIGH_WATER {
                        return self.armed(st, idx); // the client's writable edge resumes us
                    }
                    match self.receive(flight, conn) {
                        Progress::Blocked => return self.armed(st, idx),
                        Progress::Advanced => {
                            if flight.x.is_done() {
                                self.finish(st, conn);
                            }
                        }
                        Progress::Failed(fault) => self.failed(st, conn, idx, ctx, fault),
                        Progress::ClientGone => return Next::Close,
                    }
                }
            }
        }
    }

    /// Parse the request at the front of the input and start its exchange: Ok(false) while its
    /// head is incomplete; Err with how to end the connection after a refusal.
    fn begin(
        &mut self,
        st: &mut ClientState,
        conn: &mut Conn<LoopState>,
        idx: usize,
        ctx: &Ctx<'_>,
    ) -> Result<bool, End> {
        if !st.peer_known {
            st.peer = conn.stream.peer_addr().ok();
            st.peer_known = true;
        }
        let hash_key = &self.proxy.options.hash_key;
        match Exchange::begin(conn.input.filled(), ctx.limits, st.peer, hash_key, true) {
            Ok(None) => Ok(false),
            Ok(Some(x)) => {
                let flight = Box::new(Flight {
                    x,
                    backend: 0,
                    conn: None,
                    in_flight: None,
                    step: Step::WaitConn,
                    head_sent: 0,
                    body_sent: 0,
                    connected: false,
                    deadline: Instant::now(),
                    timer_at: None,
                    first_failure: None,
                });
                st.flight = Some(flight);
                self.start_attempt(st, conn, idx, ctx);
                Ok(true)
            }
            Err(e) => {
                conn.output.vec().extend_from_slice(http::error_response(e));
                conn.closing = true;
                Err(End::Linger)
            }
        }
    }

    /// Pick a backend for the flight and get a connection to it (or queue for one).
    fn start_attempt(&mut self, st: &mut ClientState, conn: &mut Conn<LoopState>, idx: usize, ctx: &Ctx<'_>) {
        let flight = st.flight.as_mut().expect("a flight");
        let Some(i) = self.proxy.balancer.pick(flight.x.key_hash, &mut self.rng, flight.x.failed_on) else {
            if let Some((status, why)) = flight.first_failure.take() {
                return self.answer(st, conn, status, why);
            }
            self.proxy.count_unavailable();
            return self.answer(st, conn, ErrorStatus::ServiceUnavailable, "no healthy backend".into());
        };
        flight.backend = i;
        flight.x.attempt();
        if flight.x.attempts > 1 {
            self.proxy.backend(i).count_retry();
        }
        self.acquire(st, conn, idx, ctx);
    }

    /// A connection to the flight's backend: pooled, new, or a place in the queue.
    fn acquire(&mut self, st: &mut ClientState, conn: &mut Conn<LoopState>, idx: usize, ctx: &Ctx<'_>) {
        let flight = st.flight.as_mut().expect("a flight");
        let i = flight.backend;
        let backend = self.proxy.backend(i).clone();
        let b = match self.pool.take(i) {
            Some(mut b) => {
                let token = backend_token(idx);
                if b.token != Some(token) && register(ctx.poller, &b, token, true).is_err() {
                    drop(b);
                    return self.acquire(st, conn, idx, ctx);
                }
                b.token = Some(token);
                flight.connected = true;
                b
            }
            None if backend.try_open(self.proxy.options.max_conns) => {
                let stream = match connect_nonblocking(backend.addr) {
                    Ok(s) => s,
                    Err(e) => {
                        backend.closed();
                        return self.failed(st, conn, idx, ctx, connect_fault(e));
                    }
                };
                let _ = archlab_netio::socket::set_nodelay(stream.as_raw_fd(), true);
                let mut b = BackendConn::new(stream, backend.clone());
                let token = backend_token(idx);
                if let Err(e) = register(ctx.poller, &b, token, false) {
                    return self.failed(st, conn, idx, ctx, connect_fault(e));
                }
                b.token = Some(token);
                flight.connected = false;
                b
            }
            None => {
                flight.step = Step::WaitConn;
                self.waiting[i].push_back(idx);
                self.set_deadline(flight, idx, self.proxy.connect_timeout());
                return;
            }
        };
        flight.conn = Some(b);
        flight.in_flight = Some(backend.start());
        flight.step = Step::Sending;
        flight.head_sent = 0;
        flight.body_sent = flight.x.head_len;
        let wait = if flight.connected { self.proxy.backend_timeout() } else { self.proxy.connect_timeout() };
        self.set_deadline(flight, idx, wait);
    }

    /// Write the request as far as the sockets allow.
    fn send(&mut self, flight: &mut Flight, conn: &mut Conn<LoopState>) -> Progress {
        let b = flight.conn.as_mut().expect("sending on a connection");
        let failed = |e: std::io::Error, connected: bool| {
            Progress::Failed(if connected { write_fault(e) } else { connect_fault(e) })
        };
        while flight.head_sent < flight.x.backend_head.len() {
            counters::count_write();
            match b.stream.write(&flight.x.backend_head[flight.head_sent..]) {
                Ok(n) => {
                    flight.head_sent += n;
                    flight.connected = true;
                    flight.deadline = Instant::now() + self.proxy.backend_timeout();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Blocked,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return failed(e, flight.connected),
            }
        }
        loop {
            let have = conn.input.filled().len().min(flight.x.request_len);
            while flight.body_sent < have {
                counters::count_write();
                match b.stream.write(&conn.input.filled()[flight.body_sent..have]) {
                    Ok(n) => {
                        flight.body_sent += n;
                        flight.deadline = Instant::now() + self.proxy.backend_timeout();
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Blocked,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return failed(e, true),
                }
            }
            if flight.body_sent >= flight.x.request_len {
                flight.x.mark_body_forwarded();
                flight.step = Step::Receiving;
                flight.deadline = Instant::now() + self.proxy.backend_timeout();
                return Progress::Advanced;
            }
            match conn.input.read_from(&mut conn.stream) {
                Ok(0) => return Progress::ClientGone,
                Ok(_) => flight.deadline = Instant::now() + self.proxy.client_timeout(),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Blocked,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Progress::ClientGone,
            }
        }
    }

    /// Read the response as far as the socket allows, relaying it into the client's output.
    fn receive(&mut self, flight: &mut Flight, conn: &mut Conn<LoopState>) -> Progress {
        let b = flight.conn.as_mut().expect("receiving on a connection");
        loop {
            counters::count_read();
            let relayed = match b.stream.read(&mut self.buf) {
                Ok(0) => flight.x.backend_closed(),
                Ok(n) => flight.x.relay(&self.buf[..n], conn.output.vec()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Blocked,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => flight.x.backend_closed(),
            };
            flight.deadline = Instant::now() + self.proxy.backend_timeout();
            match relayed {
                Ok(Relay::Done) => return Progress::Advanced,
                Ok(Relay::More) if conn.output.pending() >= RELAY_HIGH_WATER => return Progress::Advanced,
                Ok(Relay::More) => {}
                Err(fault) => return Progress::Failed(fault),
            }
        }
    }

    /// The response is whole: count it, keep the backend connection, and go on with the client.
    fn finish(&mut self, st: &mut ClientState, conn: &mut Conn<LoopState>) {
        let mut flight = st.flight.take().expect("a flight");
        let backend = self.proxy.backend(flight.backend).clone();
        backend.succeeded(flight.x.status, flight.x.sent_at.elapsed());
        drop(flight.in_flight.take());
        if let Some(b) = flight.conn.take() {
            if flight.x.keep_backend {
                self.pool.put(b);
            } else {
                drop(b);
            }
            self.wake_one(flight.backend);
        }
        if flight.x.body_cut() {
            // Answered before its body was read whole: nothing can tell where the next request
            // would start, so the connection ends once the answer is out.
            conn.closing = true;
            st.after_flush = Some(End::Linger);
            return;
        }
        conn.input.consume(flight.x.request_len);
        if !flight.x.keep_client {
            st.after_flush = Some(End::Close);
        }
    }

    /// An attempt failed: retry elsewhere, answer, or close the client.
    fn failed(&mut self, st: &mut ClientState, conn: &mut Conn<LoopState>, idx: usize, ctx: &Ctx<'_>, fault: Fault) {
        let flight = st.flight.as_mut().expect("a flight");
        let i = flight.backend;
        let reused = flight.conn.as_ref().is_some_and(|b| b.reused);
        drop(flight.in_flight.take());
        if flight.conn.take().is_some() {
            self.wake_one(i);
        }
        let why = format!("{} ({})", fault.detail, self.proxy.backend(i).addr);
        if self.proxy.failed(i, &fault, reused, flight.x.may_retry()) {
            flight.x.failed_on = Some(i);
            flight.first_failure = Some((fault.status(), why));
            return self.start_attempt(st, conn, idx, ctx);
        }
        if flight.x.head_relayed {
            st.flight = None;
            st.after_flush = Some(End::Close);
            return;
        }
        self.answer(st, conn, fault.status(), why);
    }

    /// Answer the flight's request with the proxy's own error response and end the flight.
    fn answer(&mut self, st: &mut ClientState, conn: &mut Conn<LoopState>, status: ErrorStatus, message: String) {
        let flight = st.flight.take().expect("a flight");
        let body_read = conn.input.filled().len() >= flight.x.request_len;
        let keep = flight.x.keeps_client_on_error() && body_read;
        write_error(conn.output.vec(), status, keep, &message);
        if !body_read {
            conn.closing = true;
            st.after_flush = Some(End::Linger);
            return;
        }
        conn.input.consume(flight.x.request_len);
        if !keep {
            st.after_flush = Some(End::Close);
        }
    }

    /// A deadline of this slot came up (or it was woken at the connection limit): act if it
    /// is really due; None lets `drive` go on as after any event.
    fn on_timer(
        &mut self,
        st: &mut ClientState,
        conn: &mut Conn<LoopState>,
        idx: usize,
        ctx: &Ctx<'_>,
    ) -> Option<Next> {
        let now = Instant::now();
        let flight = st.flight.as_mut()?;
        flight.timer_at = None;
        if flight.step == Step::WaitConn {
            // Woken, or out of time: either way try again; out of time and still nothing, 503.
            self.waiting[flight.backend].retain(|&w| w != idx);
            let due = flight.deadline <= now;
            self.acquire(st, conn, idx, ctx);
            let still_waiting = st.flight.as_ref().is_some_and(|f| f.step == Step::WaitConn);
            if due && still_waiting {
                let f = st.flight.as_mut().expect("a flight");
                self.waiting[f.backend].retain(|&w| w != idx);
                self.proxy.count_unavailable();
                let why = format!("backend {} is at its connection limit", self.proxy.backend(f.backend).addr);
                self.answer(st, conn, ErrorStatus::ServiceUnavailable, why);
            }
            return None;
        }
        if flight.deadline > now {
            let at = flight.deadline;
            self.push_timer(flight, idx, at);
            return None;
        }
        let fault = match flight.step {
            Step::Sending if !flight.connected => Fault {
                failure: Failure::ConnectTimeout,
                detail: "the backend did not accept the connection in time".into(),
            },
            Step::Sending
                if flight.head_sent == flight.x.backend_head.len()
                    && flight.body_sent >= conn.input.filled().len().min(flight.x.request_len) =>
            {
                // Everything received was forwarded: the client is the one that stalled.
                return Some(Next::Close);
            }
            _ => Fault { failure: Failure::Timeout, detail: "the backend did not answer in time".into() },
        };
        self.failed(st, conn, idx, ctx, fault);
        None
    }

    fn set_deadline(&mut self, flight: &mut Flight, idx: usize, wait: Duration) {
        flight.deadline = Instant::now() + wait;
        let at = flight.deadline;
        if flight.timer_at.is_none_or(|t| at < t) {
            self.push_timer(flight, idx, at);
        }
    }

    fn push_timer(&mut self, flight: &mut Flight, idx: usize, at: Instant) {
        flight.timer_at = Some(flight.timer_at.map_or(at, |t| t.min(at)));
        self.timers.push(Reverse((at, idx)));
    }

    /// Before returning to the loop with a flight waiting on a socket: make sure its deadline
    /// will come up (a client waiting for its body uses the client's timeout).
    fn armed(&mut self, st: &mut ClientState, idx: usize) -> Next {
        if let Some(flight) = st.flight.as_mut() {
            if flight.timer_at.is_none() {
                let at = flight.deadline;
                self.push_timer(flight, idx, at);
            }
        }
        Next::Keep
    }

    /// A connection to backend `i` came free in this loop: run the first exchange queued for one.
    fn wake_one(&mut self, i: usize) {
        if let Some(idx) = self.waiting[i].pop_front() {
            self.runnable.push(idx);
        }
    }
}

/// What one step of the exchange did.
enum Progress {
    /// A socket said `EAGAIN`: wait for its edge.
    Blocked,
    Advanced,
    Failed(Fault),
    ClientGone,
}

/// Register a backend connection for both directions under `token` (or move it there).
fn register(poller: &Poller, b: &BackendConn, token: u64, known: bool) -> std::io::Result<()> {
    let fd = b.stream.as_raw_fd();
    if known {
        poller.reregister(fd, token, Interest::BOTH, Trigger::Edge)
    } else {
        poller.register(fd, token, Interest::BOTH, Trigger::Edge)
    }
}

impl LoopForward for LoopForwarder {
    fn client_ready(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next {
        self.run(conn, idx, ctx, Wake::Socket)
    }

    fn backend_ready(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next {
        self.run(conn, idx, ctx, Wake::Socket)
    }

    fn due(&mut self, now: Instant, fired: &mut Vec<usize>) -> Option<Instant> {
        fired.append(&mut self.runnable);
        while let Some(&Reverse((at, idx))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            fired.push(idx);
        }
        if now >= self.next_expiry {
            let next = self.pool.expire(now).unwrap_or(now + EXPIRY_CHECK);
            self.next_expiry = next.max(now + EXPIRY_CHECK / 10);
        }
        let next_timer = self.timers.peek().map(|Reverse((at, _))| *at);
        Some(next_timer.map_or(self.next_expiry, |t| t.min(self.next_expiry)))
    }

    fn timer(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next {
        self.run(conn, idx, ctx, Wake::Timer)
    }

    fn answering(&self, conn: &Conn<LoopState>) -> bool {
        conn.state.as_ref().and_then(|s| s.downcast_ref::<ClientState>()).is_some_and(|st| st.flight.is_some())
    }
}
