//! One load thread's connection machinery, the same for every load model: its connection
//! slots, their request cycle, and its epoll loop. What to send when (the model) is decided
//! through the [`Model`] trait, which `driver.rs` implements: chiefly `start_driving`, `idle` (a
//! connection can take a request), `completed` and `lost`, plus the model's timers; this file
//! never looks at the model.
//!
//! A connection is a small state machine (closed -> connecting -> open -> sending/awaiting ->
//! open ...) driven by level-triggered readiness: readable is watched for the whole life of a
//! connection, writable only while connecting or while a request is stuck in the socket
//! buffer, so the steady state needs no `epoll_ctl`. Every socket gets a new epoch when it is
//! closed; events and timers carry the epoch they were made for and are ignored once it has
//! passed, which makes closing and reopening within one batch of events safe.
//!
//! Pipelining (HTTP, closed model): a connection holds up to D requests in flight, the oldest
//! in the connection's own fields and the others in a FIFO behind it; queued requests are
//! written with one `sendmsg`, each run of requests of one class as one slice of that class's
//! D copies, and responses, framed one by one from each read, complete the oldest first. A
//! failure fails every request in flight on it.
//!
//! Two backends wait on the sockets ([`Io`]): level-triggered epoll with one `send` and one
//! `recv` system call per request, or the thread's io_uring (`ring.rs`), where the same state
//! machine is driven by completions instead of readiness: a request is a queued `send` of the
//! whole request (its send time is when it was queued; the turn's operations reach the kernel
//! together, at the latest when the thread next waits), after which the connection awaits its
//! response as after a whole epoll `send` (the kernel reports only a failed or short send), and
//! bytes arrive as multishot `recv` completions in provided buffers, parsed by the same codec
//! and recorded by the same recorder as under epoll.
//!
//! Request mixes: the class of each request is drawn when it is sent or queued (`mix.rs`,
//! one seeded stream per thread) and travels with it (the connection's fields, the FIFO),
//! so its response, failure and raw record are counted in its class.

use super::recorder::Recorder;
use super::ring::{self, Ring};
use super::{io_error, CycleEdges, Msg, Shared, Start, GRACE};
use crate::config::{IoBackend, LoadConfig};
use crate::error::LoadError;
use crate::mix::ClassDraw;
use crate::protocol::http::ResponseReader;
use crate::protocol::memcached::McClient;
use crate::protocol::{Codec, Progress};
use crate::records::Record;
use crate::stats::{ErrorClass, Outcome};
use crate::timer::Timers;
use archlab_metrics::clock::now_ns;
use archlab_netio::socket::{connect_nonblocking_with, getsockopt_int, set_nodelay, take_error};
use archlab_netio::{cpus::pin_current_thread, Event, Interest, Poller, Trigger, Waker};
use std::collections::VecDeque;
use std::fmt::Display;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Duration;

/// Receive buffer of a load thread, shared by its connections (data is consumed at once).
const RECV_BUFFER_BYTES: usize = 64 * 1024;
/// Wait after a failed connect before retrying, so that a dead server is not hammered.
const RECONNECT_BACKOFF_NS: u64 = 10_000_000;
/// Most events taken from epoll per wait.
const MAX_EVENTS: usize = 1024;
const TIMER_TOKEN: u64 = u64::MAX;
/// Timer "connection index" of the arrival schedule (open and partly-open models).
pub(super) const ARRIVAL_TIMER: u32 = u32::MAX;
/// Timer "connection index" of the closed model's users schedule.
pub(super) const USERS_TIMER: u32 = u32::MAX - 1;
const WAKER_TOKEN: u64 = u64::MAX - 1;

/// What a load model decides over the connection machinery of a thread (`driver.rs`): the
/// worker calls these at the points of a connection's cycle and at the model's timers.
pub(super) trait Model: Sized {
    /// The model's state on load thread `thread`.
    fn new(cfg: &LoadConfig, thread: usize) -> Self;
    /// The start gate opened at `t0`: put the slots to work (the first `initial` are connected).
    fn start_driving(w: &mut Worker<'_, Self>, t0: u64, initial: usize, now: u64);
    /// Connection `idx` is open with nothing in flight.
    fn idle(w: &mut Worker<'_, Self>, idx: usize, now: u64);
    /// The response on `idx` completed at `t`; `reusable`: the connection can carry another.
    fn completed(w: &mut Worker<'_, Self>, idx: usize, t: u64, reusable: bool);
    /// Slot `idx` was closed by a failure; returns whether it should connect again.
    fn lost(w: &mut Worker<'_, Self>, idx: usize, now: u64) -> bool;
    /// The users timer ([`USERS_TIMER`]) fired.
    fn users_due(w: &mut Worker<'_, Self>, now: u64);
    /// The arrival timer ([`ARRIVAL_TIMER`]) fired.
    fn arrivals_due(w: &mut Worker<'_, Self>, now: u64);
    /// The window ended: count the arrivals that never started.
    fn count_never_started(w: &mut Worker<'_, Self>);
    /// The window ended: the users' cycle edges, when the model has a fixed population.
    fn cycle_edges(w: &Worker<'_, Self>) -> Option<CycleEdges>;
}

/// Body of load thread `i`: connect, report, wait for the start, drive, hand over, close.
pub(super) fn worker_main<M: Model>(sh: &Shared, i: usize, tx: Sender<Msg>) {
    let mut w = match Worker::<M>::new(sh, i, tx.clone()) {
        Ok(w) => w,
        Err(e) => {
            let _ = tx.send(Msg::Finished(Err(e)));
            return;
        }
    };
    let established = w.establish();
    let _ = tx.send(Msg::Ready { established, first_error: w.first_connect_error.take() });
    let Some(Start::Go { t0_ns }) = sh.start.wait(sh.cfg.connect_timeout() + 2 * GRACE) else { return };
    let result = w.drive(t0_ns).map(|()| {
        M::count_never_started(&mut w);
        let mut summary = w.rec.finish();
        summary.in_flight = w.conns.iter().map(Conn::requests_in_flight).sum();
        summary.thread = i;
        summary.rcvbuf_applied = w.rcvbuf_applied;
        summary.sessions_in_progress = w.conns.iter().filter(|c| c.session_left > 0).count() as u64;
        summary.cycle_edges = M::cycle_edges(&w);
        Box::new(summary)
    });
    let _ = tx.send(Msg::Finished(result));
    // Connections stay open until the coordinator has announced the end of the window.
    sh.release.wait(GRACE);
}

/// Where a connection is in its request cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// No socket (waiting for a back-off, or not yet started).
    Closed,
    Connecting {
        since_ns: u64,
    },
    /// Connected, no request in flight (ready, or thinking until `planned_ns`).
    Open,
    /// Request partly written (`sent` bytes); waits for writability.
    Sending {
        sent: usize,
    },
    /// Request written, response not complete.
    Awaiting,
}

pub(super) struct Conn {
    sock: Option<TcpStream>,
    pub(super) state: State,
    /// Bumped whenever the socket is closed: events and timers of an older epoch are stale.
    pub(super) epoch: u32,
    /// Planned send time of the request in flight, or of the next one (end of a think time).
    pub(super) planned_ns: u64,
    /// When the current socket's connect completed: a request planned before it waited for
    /// the connection, and its set-up counts in that request's response time.
    opened_ns: u64,
    /// When the request in flight was written.
    sent_ns: u64,
    /// When the first byte of its response arrived (0: none yet).
    first_ns: u64,
    /// Bytes of its response received so far, and of the request.
    resp_bytes: u32,
    req_bytes: u32,
    /// Mix class of the request in flight (0 without a mix).
    class: u8,
    /// Responses completed on the current socket (for `requests_per_connection`).
    served: u32,
    /// Pipelining: requests in flight (the front one above, then `behind`: planned, sent,
    /// class), and the bytes of queued requests not yet written: the classes of the requests
    /// not wholly written, `write_pos` bytes into the first.
    pub(super) queued: u32,
    behind: VecDeque<(u64, u64, u8)>,
    owed: usize,
    unwritten: VecDeque<u8>,
    write_pos: usize,
    /// Closed model: when the user's current cycle began (its previous completion or failure,
    /// or the start), and the start of the first cycle that ended in the window (None: none
    /// has): the edges of the window's boundary term (`Driver::cycle_edges`).
    pub(super) cycle_start_ns: u64,
    pub(super) window_cycle_start_ns: Option<u64>,
    /// Partly-open model: requests left in the session bound to this slot (0 = none).
    pub(super) session_left: u32,
    /// Length drawn for that session.
    pub(super) session_len: u32,
    codec: Codec,
}

impl Conn {
    fn new(codec: Codec) -> Self {
        Conn {
            sock: None,
            state: State::Closed,
            epoch: 0,
            planned_ns: 0,
            opened_ns: 0,
            sent_ns: 0,
            first_ns: 0,
            resp_bytes: 0,
            req_bytes: 0,
            class: 0,
            served: 0,
            queued: 0,
            behind: VecDeque::new(),
            owed: 0,
            unwritten: VecDeque::new(),
            write_pos: 0,
            cycle_start_ns: 0,
            window_cycle_start_ns: None,
            session_left: 0,
            session_len: 0,
            codec,
        }
    }

    fn fd(&self) -> i32 {
        self.sock.as_ref().map_or(-1, |s| s.as_raw_fd())
    }

    pub(super) fn in_flight(&self) -> bool {
        matches!(self.state, State::Sending { .. } | State::Awaiting)
    }

    /// Requests sent and not answered (more than one only when pipelining).
    pub(super) fn requests_in_flight(&self) -> usize {
        if self.queued > 0 {
            self.queued as usize
        } else {
            usize::from(self.in_flight())
        }
    }
}

fn token(idx: usize, epoch: u32) -> u64 {
    (u64::from(epoch) << 32) | idx as u64
}

/// What an io_uring operation of a connection was, in bits 30-31 of its token (connection
/// indices stay below 2^30: at most `MAX_CONNECTIONS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Connect = 0,
    Recv = 1,
    Send = 2,
    Cancel = 3,
}

const INDEX_MASK: u64 = (1 << 30) - 1;

fn op_token(idx: usize, epoch: u32, op: Op) -> u64 {
    token(idx, epoch) | (op as u64) << 30
}

/// (connection index, epoch, operation) of an io_uring token.
fn decode(user_data: u64) -> (usize, u32, Op) {
    let op = match (user_data >> 30) & 3 {
        0 => Op::Connect,
        1 => Op::Recv,
        2 => Op::Send,
        _ => Op::Cancel,
    };
    ((user_data & INDEX_MASK) as usize, (user_data >> 32) as u32, op)
}

/// How a load thread waits on its sockets, with what it gets back from each wait.
enum Io {
    Epoll { poller: Poller, events: Vec<Event> },
    Uring { ring: Box<Ring>, cqes: Vec<(u64, i32, u32)> },
}

/// A reset or broken pipe means the peer dropped the connection.
fn is_peer_reset(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED))
}

pub(super) struct Worker<'a, M> {
    pub(super) sh: &'a Shared<'a>,
    waker: &'a Waker,
    /// Declared before `rbuf`: the ring, which the kernel may still fill buffers through, is
    /// dropped before the memory of those buffers.
    io: Io,
    pub(super) timers: Timers,
    pub(super) conns: Vec<Conn>,
    /// HTTP pipelining depth (1: one request in flight per connection).
    pub(super) depth: u32,
    /// Receive memory: one buffer every recv fills (epoll), or the ring's provided buffers.
    rbuf: Box<[u8]>,
    pub(super) rec: Recorder,
    pub(super) driver: M,
    /// The start gate has opened: connections send requests and reconnect.
    pub(super) started: bool,
    /// Time of the current batch of events.
    now: u64,
    /// Connections this thread opens before the start.
    initial: usize,
    first_connect_error: Option<io::Error>,
    /// Global number of this thread's first connection slot (records name connections).
    conn_base: u32,
    /// The class draws of a mix (`None`: every request is class 0).
    draw: Option<ClassDraw>,
    /// Scratch slices of one pipelined `sendmsg` (at most one per request in flight).
    iov: Vec<libc::iovec>,
    /// SO_RCVBUF the kernel applied to this thread's first connection, when one was asked for.
    pub(super) rcvbuf_applied: Option<usize>,
}

impl<'a, M: Model> Worker<'a, M> {
    fn new(sh: &'a Shared<'a>, i: usize, tx: Sender<Msg>) -> Result<Self, LoadError> {
        let cfg = sh.cfg;
        if let Some(cpu) = cfg.cpu_of_thread(i) {
            pin_current_thread(&[cpu]).map_err(|e| io_error(format!("cannot pin load thread {i} to CPU {cpu}"), e))?;
        }
        let n = cfg.slots_of_thread(i);
        let conn_base = (0..i).map(|j| cfg.slots_of_thread(j)).sum::<usize>();
        let records = match &sh.records {
            None => None,
            Some(f) => Some(f.try_clone().map_err(|e| io_error("cannot share the records file", e))?),
        };
        let setup = |e| io_error(format!("cannot set up load thread {i}"), e);
        let timers = Timers::new(n).map_err(setup)?;
        let waker = &sh.wakers[i];
        let (io, rbuf) = match sh.backend {
            IoBackend::Epoll => {
                let poller = Poller::new(n.min(MAX_EVENTS) + 2).map_err(setup)?;
                poller.register(timers.as_raw_fd(), TIMER_TOKEN, Interest::READABLE, Trigger::Level).map_err(setup)?;
                poller.register(waker.as_raw_fd(), WAKER_TOKEN, Interest::READABLE, Trigger::Level).map_err(setup)?;
                let io = Io::Epoll { poller, events: Vec::with_capacity(MAX_EVENTS) };
                (io, vec![0u8; RECV_BUFFER_BYTES].into_boxed_slice())
            }
            IoBackend::IoUring => {
                let mut rbuf = vec![0u8; usize::from(ring::buffer_count(n)) * ring::BUFFER_BYTES].into_boxed_slice();
                // SAFETY: `rbuf` moves into the worker beside the ring and is dropped after it;
                // the worker reads a buffer only between its completion and its recycling.
                let mut ring = Box::new(unsafe { Ring::new(n, &mut rbuf) }.map_err(setup)?);
                ring.watch_readable(timers.as_raw_fd(), TIMER_TOKEN).map_err(setup)?;
                ring.watch_readable(waker.as_raw_fd(), WAKER_TOKEN).map_err(setup)?;
                (Io::Uring { ring, cqes: Vec::with_capacity(ring::BATCH) }, rbuf)
            }
        };
        Ok(Worker {
            sh,
            waker,
            io,
            timers,
            conns: (0..n)
                .map(|slot| {
                    Conn::new(match cfg.memcached() {
                        None => Codec::Http(ResponseReader::default()),
                        Some(w) => Codec::Memcached(Box::new(McClient::new(
                            w,
                            cfg.seed(),
                            i,
                            slot,
                            (conn_base + slot) as u64,
                            cfg.max_connections() as u64,
                        ))),
                    })
                })
                .collect(),
            depth: cfg.pipeline(),
            rbuf,
            rec: Recorder::new(tx, cfg, records),
            driver: M::new(cfg, i),
            started: false,
            now: now_ns(),
            initial: cfg.connections_of_thread(i),
            first_connect_error: None,
            conn_base: conn_base as u32,
            draw: cfg.mix().map(|m| ClassDraw::new(m, cfg.seed(), i)),
            iov: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; cfg.pipeline() as usize],
            rcvbuf_applied: None,
        })
    }

    /// Try every connection once (bounded by the connect timeout); returns how many are open.
    fn establish(&mut self) -> usize {
        self.now = now_ns();
        let deadline = self.now + self.sh.cfg.connect_timeout().as_nanos() as u64;
        for idx in 0..self.initial {
            self.connect(idx, self.now);
        }
        while !self.sh.abort.load(Ordering::Relaxed)
            && self.conns.iter().any(|c| matches!(c.state, State::Connecting { .. }))
        {
            let left = deadline.saturating_sub(now_ns());
            if left == 0 || self.wait(left).is_err() {
                break;
            }
            self.now = now_ns();
            if self.dispatch_all().is_err() {
                break;
            }
        }
        self.now = now_ns();
        self.expire_connects(self.now, true);
        self.conns.iter().filter(|c| c.state == State::Open).count()
    }

    /// The measurement loop, from the start gate to the end of the window.
    fn drive(&mut self, t0_ns: u64) -> Result<(), LoadError> {
        let cfg = self.sh.cfg;
        let warmup_end = t0_ns + cfg.warmup().as_nanos() as u64;
        self.rec.start(t0_ns, warmup_end, self.sh.end_ns.load(Ordering::SeqCst));
        self.started = true;
        self.now = now_ns();
        M::start_driving(self, t0_ns, self.initial, self.now);
        // Timeouts are found by scanning; a tenth of the timeout bounds how late.
        let shortest = cfg.request_timeout().min(cfg.connect_timeout()).as_nanos() as u64;
        let scan_every = (shortest / 10).clamp(1_000_000, 100_000_000);
        let mut next_scan = self.now + scan_every;
        let what = match self.sh.backend {
            IoBackend::Epoll => "epoll/timerfd",
            IoBackend::IoUring => "io_uring",
        };
        let failed = |e| io_error(format!("load thread: {what} failed"), e);
        loop {
            self.timers.rearm().map_err(failed)?;
            let wake_at = self.rec.end.min(next_scan).min(self.rec.next_roll);
            let sleep = if cfg.busy_poll() { 0 } else { wake_at.saturating_sub(self.now) };
            self.wait(sleep).map_err(failed)?;
            self.now = now_ns();
            self.rec.end = self.sh.end_ns.load(Ordering::Relaxed);
            if self.now >= self.rec.end {
                return Ok(());
            }
            self.rec.advance(self.now);
            self.dispatch_all().map_err(failed)?;
            if self.now >= next_scan {
                self.scan_timeouts(self.now);
                next_scan = self.now + scan_every;
            }
        }
    }

    /// Wait up to `timeout_ns` for events or completions (submitting what is queued).
    fn wait(&mut self, timeout_ns: u64) -> io::Result<()> {
        let timeout = Duration::from_nanos(timeout_ns);
        match &mut self.io {
            Io::Epoll { poller, events } => poller.wait(events, Some(timeout)),
            Io::Uring { ring, .. } => ring.wait(timeout),
        }
    }

    /// Handle what the last wait returned: every epoll event, or every completion (in batches,
    /// the operations each batch queued submitted before the next).
    fn dispatch_all(&mut self) -> io::Result<()> {
        match &mut self.io {
            Io::Epoll { events, .. } => {
                let events = std::mem::take(events);
                for ev in &events {
                    self.dispatch(*ev);
                }
                if let Io::Epoll { events: slot, .. } = &mut self.io {
                    *slot = events;
                }
            }
            Io::Uring { cqes, .. } => {
                let mut batch = std::mem::take(cqes);
                loop {
                    let Io::Uring { ring, .. } = &mut self.io else { unreachable!() };
                    ring.reap(&mut batch);
                    for &(data, result, flags) in &batch {
                        self.complete_op(data, result, flags)?;
                    }
                    if batch.len() < ring::BATCH {
                        break;
                    }
                    let Io::Uring { ring, .. } = &mut self.io else { unreachable!() };
                    ring.flush()?;
                }
                if let Io::Uring { cqes, .. } = &mut self.io {
                    *cqes = batch;
                }
            }
        }
        Ok(())
    }

    /// The ring of the io-uring backend (only called on paths of that backend).
    fn ring(&mut self) -> &mut Ring {
        match &mut self.io {
            Io::Uring { ring, .. } => ring,
            Io::Epoll { .. } => unreachable!("an io_uring operation on the epoll backend"),
        }
    }

    /// One io_uring completion: the same transitions as the epoll events of `dispatch`.
    fn complete_op(&mut self, user_data: u64, result: i32, flags: u32) -> io::Result<()> {
        match user_data {
            TIMER_TOKEN | WAKER_TOKEN => {
                if user_data == TIMER_TOKEN {
                    self.fire_timers();
                } else {
                    self.waker.drain();
                }
                if !io_uring::cqueue::more(flags) {
                    // The multishot poll ended (e.g. the completion queue overflowed): re-arm.
                    let fd = if user_data == TIMER_TOKEN { self.timers.as_raw_fd() } else { self.waker.as_raw_fd() };
                    self.ring().watch_readable(fd, user_data)?;
                }
                return Ok(());
            }
            _ => {}
        }
        let (idx, epoch, op) = decode(user_data);
        let buffer = io_uring::cqueue::buffer_select(flags);
        let current = self.conns.get(idx).is_some_and(|c| c.epoch == epoch);
        match op {
            Op::Cancel => {}
            _ if !current => {} // the socket this operation was for is closed already
            Op::Connect => self.on_connect_ready(idx),
            Op::Send => self.on_send_failed(idx, result),
            Op::Recv => {
                let more = io_uring::cqueue::more(flags);
                if result == -libc::ENOBUFS {
                    // Every provided buffer was full when bytes arrived: they wait in the socket.
                } else {
                    let now = now_ns();
                    let input = match (result, buffer) {
                        (n, Some(bid)) if n > 0 => Ok((self.ring().buffer(bid), n as usize)),
                        (0, _) => Ok((0, 0)),
                        (n, _) if n < 0 => Err(io::Error::from_raw_os_error(-n)),
                        _ => Err(io::Error::other("a receive completion without a buffer")),
                    };
                    self.on_input(idx, input, now);
                }
                let c = &self.conns[idx];
                if !more && c.epoch == epoch && matches!(c.state, State::Open | State::Sending { .. } | State::Awaiting)
                {
                    self.ring().recv(idx, op_token(idx, epoch, Op::Recv))?;
                }
            }
        }
        if let Some(bid) = buffer {
            self.ring().recycle(bid);
        }
        Ok(())
    }

    /// io-uring: a send on `idx` failed (`result`: -errno) or ended short (bytes written);
    /// successful sends post no completion.
    fn on_send_failed(&mut self, idx: usize, result: i32) {
        let now = now_ns();
        if result < 0 {
            let e = io::Error::from_raw_os_error(-result);
            let class = if is_peer_reset(&e) { ErrorClass::Closed } else { ErrorClass::Write };
            return self.fail(idx, class, now, &e);
        }
        self.fail(idx, ErrorClass::Write, now, &format_args!("the kernel sent {result} bytes of the request, not all"));
    }

    fn dispatch(&mut self, ev: Event) {
        match ev.token {
            TIMER_TOKEN => self.fire_timers(),
            WAKER_TOKEN => self.waker.drain(),
            tok => {
                let idx = (tok & 0xffff_ffff) as usize;
                if self.conns.get(idx).is_none_or(|c| c.epoch != (tok >> 32) as u32) {
                    return; // the socket this event was for is closed already
                }
                if self.depth > 1 && matches!(self.conns[idx].state, State::Sending { .. }) {
                    // A pipeline reads and writes at once: the server may wait for us to read
                    // before it takes more requests, and the other way round.
                    if ev.writable {
                        self.write_pipelined(idx, self.now);
                    }
                    if (ev.readable || ev.closed) && self.conns[idx].epoch == (tok >> 32) as u32 {
                        self.on_readable(idx);
                    }
                    return;
                }
                match self.conns[idx].state {
                    State::Connecting { .. } => self.on_connect_ready(idx),
                    State::Sending { sent } if ev.writable && !ev.readable && !ev.closed => {
                        self.write_from(idx, sent, self.now)
                    }
                    State::Closed => {}
                    _ if ev.readable || ev.closed => self.on_readable(idx),
                    _ => {}
                }
            }
        }
    }

    pub(super) fn connect(&mut self, idx: usize, now: u64) {
        let c = &mut self.conns[idx];
        let registered = connect_nonblocking_with(self.sh.cfg.target(), self.sh.cfg.rcvbuf()).and_then(|s| {
            match &mut self.io {
                Io::Epoll { poller, .. } => {
                    poller.register(s.as_raw_fd(), token(idx, c.epoch), Interest::WRITABLE, Trigger::Level)?
                }
                Io::Uring { ring, .. } => ring.watch_connect(s.as_raw_fd(), op_token(idx, c.epoch, Op::Connect))?,
            }
            Ok(s)
        });
        match registered {
            Ok(s) => {
                c.sock = Some(s);
                c.state = State::Connecting { since_ns: now };
            }
            Err(e) => self.connect_failed(idx, now, e),
        }
    }

    fn on_connect_ready(&mut self, idx: usize) {
        let now = now_ns();
        let c = &mut self.conns[idx];
        let Some(sock) = c.sock.as_ref() else { return };
        let ready = match take_error(sock) {
            Ok(None) => set_nodelay(sock.as_raw_fd(), true).and_then(|()| match &mut self.io {
                Io::Epoll { poller, .. } => {
                    poller.reregister(sock.as_raw_fd(), token(idx, c.epoch), Interest::READABLE, Trigger::Level)
                }
                Io::Uring { ring, .. } => {
                    ring.attach(idx, sock.as_raw_fd())?;
                    ring.recv(idx, op_token(idx, c.epoch, Op::Recv))
                }
            }),
            Ok(Some(e)) | Err(e) => Err(e),
        };
        match ready {
            Ok(()) => {
                c.state = State::Open;
                c.opened_ns = now;
                if self.rcvbuf_applied.is_none() && self.sh.cfg.rcvbuf().is_some() {
                    let got = getsockopt_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF);
                    self.rcvbuf_applied = got.ok().map(|b| b as usize);
                }
                self.rec.opened(now);
                if self.started {
                    M::idle(self, idx, now);
                }
            }
            Err(e) => self.connect_failed(idx, now, e),
        }
    }

    fn connect_failed(&mut self, idx: usize, now: u64, e: io::Error) {
        self.rec.error(now, ErrorClass::Connect, &e);
        self.close(idx);
        if self.started && M::lost(self, idx, now) {
            self.timers.push(now + RECONNECT_BACKOFF_NS, idx as u32, self.conns[idx].epoch);
        }
        if self.first_connect_error.is_none() {
            self.first_connect_error = Some(e);
        }
    }

    pub(super) fn close(&mut self, idx: usize) {
        let c = &mut self.conns[idx];
        if let (Io::Uring { ring, .. }, Some(sock)) = (&mut self.io, &c.sock) {
            // The ring's operations hold the socket open past `close`: end them first (a
            // connect's poll is cancelled; a shut-down socket completes the receive and any
            // send), and empty the registered file. Their completions come with an old epoch.
            if let State::Connecting { .. } = c.state {
                let _ = ring.cancel(op_token(idx, c.epoch, Op::Connect), op_token(idx, c.epoch, Op::Cancel));
            } else {
                let _ = sock.shutdown(Shutdown::Both);
                let _ = ring.detach(idx);
            }
        }
        c.sock = None; // closing the fd also removes it from the epoll set
        c.epoch = c.epoch.wrapping_add(1);
        c.state = State::Closed;
        c.served = 0;
        c.queued = 0;
        c.behind.clear();
        c.owed = 0;
        c.unwritten.clear();
        c.write_pos = 0;
        c.codec.reset();
    }

    /// Close and connect again at once (no back-off: the server was reachable).
    pub(super) fn reopen(&mut self, idx: usize, now: u64) {
        self.close(idx);
        if self.started && now < self.rec.end {
            self.connect(idx, now);
        }
    }

    /// The request in flight (if any) failed: count it, close, and let the model decide
    /// whether the slot reconnects at once.
    fn fail(&mut self, idx: usize, class: ErrorClass, now: u64, detail: &dyn Display) {
        if now >= self.rec.end {
            // After the window (a read timed after the loop's last look at the clock): like a
            // late response, the requests stay "in flight at the end". Closing here would drop
            // them from that count while the recorder, past its end, counts no error either.
            return;
        }
        self.rec.error(now, class, detail);
        if self.conns[idx].in_flight() {
            self.rec.class_error(now, self.conns[idx].class, class);
            self.record(idx, now, 0, Some(class));
            // Pipelining: the requests behind the front one are lost with the connection, each
            // counted once in the same class.
            while self.conns[idx].queued > 1 {
                self.promote(idx);
                self.rec.error(now, class, detail);
                self.rec.class_error(now, self.conns[idx].class, class);
                self.record(idx, now, 0, Some(class));
            }
        }
        self.close(idx);
        if self.started && M::lost(self, idx, now) && now < self.rec.end {
            self.connect(idx, now);
        }
    }

    /// Pipelining: queue one more request planned at `planned` on `idx` (written by the next
    /// `write_pipelined`).
    pub(super) fn queue_pipelined(&mut self, idx: usize, planned: u64, now: u64) {
        let class = self.next_class();
        let len = self.sh.requests[usize::from(class)].len();
        let c = &mut self.conns[idx];
        if c.queued == 0 {
            c.planned_ns = planned;
            c.sent_ns = now;
            c.first_ns = 0;
            c.resp_bytes = 0;
            c.req_bytes = len as u32;
            c.class = class;
        } else {
            c.behind.push_back((planned, now, class));
        }
        c.queued += 1;
        c.owed += len;
        c.unwritten.push_back(class);
        self.rec.sent(now, planned, class);
    }

    /// The class of the next request sent (0 without a mix).
    #[inline]
    fn next_class(&mut self) -> u8 {
        self.draw.as_mut().map_or(0, ClassDraw::next)
    }

    /// Pipelining: write what is owed on `idx`, as far as the socket takes it.
    pub(super) fn write_pipelined(&mut self, idx: usize, now: u64) {
        let (requests, batches) = (self.sh.requests, self.sh.batches);
        let c = &mut self.conns[idx];
        let fd = c.fd();
        let result = loop {
            if c.owed == 0 {
                break Ok(true);
            }
            // One slice per run of same-class requests, out of that class's D copies (a run
            // is at most D long: at most D requests are in flight); the first starts
            // `write_pos` bytes in. Without a mix this is one slice, as one `send` was.
            let mut slices = 0;
            let mut i = 0;
            while i < c.unwritten.len() {
                let class = c.unwritten[i];
                let run = c.unwritten.iter().skip(i).take_while(|&&k| k == class).count();
                let from = if i == 0 { c.write_pos } else { 0 };
                let bytes = &batches[usize::from(class)][from..run * requests[usize::from(class)].len()];
                self.iov[slices] = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
                slices += 1;
                i += run;
            }
            // SAFETY: a zeroed msghdr is valid; the slices point into the shared batches,
            // which outlive the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = self.iov.as_mut_ptr();
            msg.msg_iovlen = slices as _;
            let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
            if n >= 0 {
                let mut n = n as usize;
                c.owed -= n;
                while n > 0 {
                    let left = requests[usize::from(c.unwritten[0])].len() - c.write_pos;
                    if n < left {
                        c.write_pos += n;
                        break;
                    }
                    n -= left;
                    c.write_pos = 0;
                    c.unwritten.pop_front();
                }
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => break Ok(false),
                _ => break Err(e),
            }
        };
        let written = if c.queued > 0 { State::Awaiting } else { State::Open };
        self.after_write(idx, fd, now, result, written, State::Sending { sent: 0 });
    }

    /// Pipelining: the front request is done with; the next one in flight takes its place.
    fn promote(&mut self, idx: usize) {
        let c = &mut self.conns[idx];
        c.queued = c.queued.saturating_sub(1);
        if let Some((planned, sent, class)) = c.behind.pop_front() {
            c.planned_ns = planned;
            c.sent_ns = sent;
            c.first_ns = 0;
            c.resp_bytes = 0;
            c.class = class;
            c.req_bytes = self.sh.requests[usize::from(class)].len() as u32;
        }
    }

    /// Write the request planned for `planned` on the open, idle connection `idx` now.
    pub(super) fn send(&mut self, idx: usize, planned: u64, now: u64) {
        let class = self.next_class();
        let c = &mut self.conns[idx];
        c.planned_ns = planned;
        c.sent_ns = now;
        c.first_ns = 0;
        c.resp_bytes = 0;
        c.class = class;
        c.req_bytes = match &mut c.codec {
            Codec::Http(_) => self.sh.requests[usize::from(class)].len(),
            Codec::Memcached(m) => m.next_request().len(),
        } as u32;
        self.rec.sent(now, planned, class);
        self.write_from(idx, 0, now);
    }

    fn write_from(&mut self, idx: usize, mut sent: usize, now: u64) {
        let c = &mut self.conns[idx];
        let req = match &c.codec {
            Codec::Http(_) => &self.sh.requests[usize::from(c.class)][..],
            Codec::Memcached(m) => m.request(),
        };
        let (req_ptr, req_len) = (req.as_ptr(), req.len());
        if let Io::Uring { ring, .. } = &mut self.io {
            // Completion-driven: the kernel writes the whole request or reports the failure
            // (`on_send_failed`); the response is awaited from now on, as after a whole `send`.
            // SAFETY: HTTP requests are the run's shared bytes, alive until the threads end
            // (the io-uring backend refuses memcached, whose requests are rebuilt).
            let queued = unsafe { ring.send_all(idx, &req[sent..], op_token(idx, c.epoch, Op::Send)) };
            c.state = State::Awaiting;
            if let Err(e) = queued {
                self.fail(idx, ErrorClass::Write, now, &e);
            }
            return;
        }
        let fd = c.fd();
        let result = loop {
            // SAFETY: the request (shared, or the connection's own, which is not rebuilt
            // while it is being written) is live, and sent <= its length.
            let n =
                unsafe { libc::send(fd, req_ptr.add(sent) as *const libc::c_void, req_len - sent, libc::MSG_NOSIGNAL) };
            if n >= 0 {
                sent += n as usize;
                if sent == req_len {
                    break Ok(true);
                }
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => break Ok(false),
                _ => break Err(e),
            }
        };
        self.after_write(idx, fd, now, result, State::Awaiting, State::Sending { sent });
    }

    /// After a write attempt on `idx`: the state `written` when everything owed went out, or
    /// `stuck` (a `Sending` state) when the socket buffer filled; a failed write ends the
    /// connection. Writability is watched only while a request is stuck in the socket buffer.
    fn after_write(&mut self, idx: usize, fd: RawFd, now: u64, result: io::Result<bool>, written: State, stuck: State) {
        let c = &mut self.conns[idx];
        let was_waiting = matches!(c.state, State::Sending { .. });
        let (state, interest) = match result {
            Ok(true) => (written, Interest::READABLE),
            Ok(false) => (stuck, Interest::BOTH),
            Err(e) => {
                let class = if is_peer_reset(&e) { ErrorClass::Closed } else { ErrorClass::Write };
                return self.fail(idx, class, now, &e);
            }
        };
        c.state = state;
        if was_waiting != matches!(state, State::Sending { .. }) {
            let Io::Epoll { poller, .. } = &self.io else { unreachable!("epoll writes only") };
            if let Err(e) = poller.reregister(fd, token(idx, c.epoch), interest, Trigger::Level) {
                self.fail(idx, ErrorClass::Write, now, &e);
            }
        }
    }

    /// epoll: the socket of `idx` is readable (or closed): read what is there.
    fn on_readable(&mut self, idx: usize) {
        let c = &mut self.conns[idx];
        // SAFETY: rbuf is a live, writable buffer of the given length.
        let n = unsafe { libc::recv(c.fd(), self.rbuf.as_mut_ptr() as *mut libc::c_void, self.rbuf.len(), 0) };
        // The completion time of a response ending in these bytes, and the time the bytes are
        // attributed to, so that bytes and responses always fall in the same phase.
        let now = now_ns();
        let input = if n >= 0 { Ok((0, n as usize)) } else { Err(io::Error::last_os_error()) };
        self.on_input(idx, input, now);
    }

    /// What a receive on `idx` gave at `now`, whichever backend made it: `n` bytes at `at` in
    /// the receive memory (`n` = 0: the peer closed), or an error.
    fn on_input(&mut self, idx: usize, input: io::Result<(usize, usize)>, now: u64) {
        let c = &mut self.conns[idx];
        let in_flight = c.in_flight();
        match input {
            Ok((at, n)) if n > 0 => {
                self.rec.bytes(now, n);
                if !in_flight {
                    return self.fail(idx, ErrorClass::Parse, now, &"bytes received while no request was in flight");
                }
                if self.depth > 1 {
                    return self.read_pipelined(idx, at, at + n, now);
                }
                if c.first_ns == 0 {
                    c.first_ns = now;
                }
                c.resp_bytes = c.resp_bytes.saturating_add(n as u32);
                match c.codec.feed(&self.rbuf[at..at + n]) {
                    Progress::More => {}
                    Progress::Done { outcome, keep_alive } => self.complete(idx, now, outcome, keep_alive),
                    Progress::Invalid(why) => self.fail(idx, ErrorClass::Parse, now, &why),
                }
            }
            Ok(_) if in_flight => {
                self.fail(idx, ErrorClass::Closed, now, &"connection closed by the peer with a request in flight")
            }
            Ok(_) => self.reopen(idx, now),
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {}
                _ if in_flight => {
                    let class = if is_peer_reset(&e) { ErrorClass::Closed } else { ErrorClass::Read };
                    self.fail(idx, class, now, &e);
                }
                _ => self.reopen(idx, now),
            },
        }
    }

    /// Pipelining: the bytes received (`rbuf[at..end]`) hold the ends of one or more responses, matched in
    /// order to the requests in flight (HTTP/1.1 answers in request order).
    fn read_pipelined(&mut self, idx: usize, mut at: usize, end: usize, now: u64) {
        let epoch = self.conns[idx].epoch;
        while at < end {
            let c = &mut self.conns[idx];
            if c.epoch != epoch || c.queued == 0 {
                if c.epoch == epoch {
                    self.fail(idx, ErrorClass::Parse, now, &"bytes received while no request was in flight");
                }
                return;
            }
            if c.first_ns == 0 {
                c.first_ns = now;
            }
            let Codec::Http(reader) = &mut c.codec else { unreachable!("pipelining is HTTP only") };
            let (progress, used) = reader.feed_prefix(&self.rbuf[at..end]);
            c.resp_bytes = c.resp_bytes.saturating_add(used as u32);
            at += used;
            match progress {
                Progress::More => {}
                Progress::Done { outcome, keep_alive } => self.complete(idx, now, outcome, keep_alive),
                Progress::Invalid(why) => return self.fail(idx, ErrorClass::Parse, now, &why),
            }
        }
    }

    /// The response on `idx` completed at `t`: record it, then think, send or reconnect.
    fn complete(&mut self, idx: usize, t: u64, outcome: Outcome, keep_alive: bool) {
        if t >= self.rec.end {
            // After the window: the request stays "in flight at the end", like those whose
            // response has not arrived, and nothing more is sent.
            return;
        }
        if self.depth > 1 {
            return self.complete_pipelined(idx, t, outcome, keep_alive);
        }
        let c = &mut self.conns[idx];
        // A response before the whole request was written leaves the stream unusable; a
        // connection that served its quota of requests is replaced.
        c.served += 1;
        let quota_left = self.sh.cfg.requests_per_connection().is_none_or(|n| c.served < n);
        let reusable = keep_alive && c.state == State::Awaiting && quota_left;
        c.state = State::Open;
        self.rec.response(t, outcome, c.planned_ns, c.sent_ns, c.class, c.opened_ns > c.planned_ns);
        let (status, class) = match outcome {
            Outcome::Status(s) => (s, ErrorClass::of_status(s)),
            Outcome::Ok => (0, None),
            Outcome::Failed(c) => (0, Some(c)),
        };
        if let Codec::Memcached(m) = &c.codec {
            self.rec.memcached(t, &m.last);
        }
        self.record(idx, t, status, class);
        M::completed(self, idx, t, reusable);
    }

    /// Pipelining: the front request's response completed at `t`. The next request goes out
    /// at once (closed model, no think time); a response that closes the connection loses the
    /// requests behind it, counted `closed`.
    fn complete_pipelined(&mut self, idx: usize, t: u64, outcome: Outcome, keep_alive: bool) {
        let c = &self.conns[idx];
        self.rec.response(t, outcome, c.planned_ns, c.sent_ns, c.class, c.opened_ns > c.planned_ns);
        let (status, class) = match outcome {
            Outcome::Status(s) => (s, ErrorClass::of_status(s)),
            Outcome::Ok => (0, None),
            Outcome::Failed(c) => (0, Some(c)),
        };
        self.record(idx, t, status, class);
        self.promote(idx);
        let c = &mut self.conns[idx];
        if !keep_alive {
            if c.queued > 0 {
                return self.fail(
                    idx,
                    ErrorClass::Closed,
                    t,
                    &"the server closed a pipelined connection with requests in flight",
                );
            }
            return self.reopen(idx, t);
        }
        if c.queued == 0 && c.owed == 0 {
            c.state = State::Open;
        }
        M::completed(self, idx, t, true);
    }

    /// Keep the raw record of the request on `idx`, ended at `t` (when records are on).
    #[inline]
    fn record(&mut self, idx: usize, t: u64, status: u16, error: Option<ErrorClass>) {
        if self.rec.records.is_none() {
            return;
        }
        let c = &self.conns[idx];
        self.rec.record(Record {
            planned_ns: c.planned_ns,
            sent_ns: c.sent_ns,
            first_byte_ns: (c.first_ns != 0).then_some(c.first_ns),
            done_ns: t,
            bytes_received: c.resp_bytes,
            bytes_sent: c.req_bytes,
            connection: self.conn_base + idx as u32,
            status,
            error,
            class: c.class,
        });
    }

    fn fire_timers(&mut self) {
        self.timers.acknowledge();
        let now = now_ns();
        while let Some((idx, epoch)) = self.timers.pop_due(now) {
            if idx == ARRIVAL_TIMER {
                M::arrivals_due(self, now);
                continue;
            }
            if idx == USERS_TIMER {
                M::users_due(self, now);
                continue;
            }
            let idx = idx as usize;
            if self.conns[idx].epoch != epoch {
                continue;
            }
            match self.conns[idx].state {
                State::Open => M::idle(self, idx, now),
                State::Closed if now < self.rec.end => self.connect(idx, now),
                _ => {}
            }
        }
    }

    fn scan_timeouts(&mut self, now: u64) {
        let timeout = self.sh.cfg.request_timeout();
        let timeout_ns = timeout.as_nanos() as u64;
        for idx in 0..self.conns.len() {
            let c = &self.conns[idx];
            if c.in_flight() && now.saturating_sub(c.sent_ns) >= timeout_ns {
                self.fail(idx, ErrorClass::Timeout, now, &format_args!("no complete response within {timeout:?}"));
            }
        }
        self.expire_connects(now, false);
    }

    /// Count connects older than the connect timeout (all pending ones when `all`) as failed.
    fn expire_connects(&mut self, now: u64, all: bool) {
        let limit = self.sh.cfg.connect_timeout();
        let limit_ns = limit.as_nanos() as u64;
        for idx in 0..self.conns.len() {
            if let State::Connecting { since_ns } = self.conns[idx].state {
                if all || now.saturating_sub(since_ns) >= limit_ns {
                    let e =
                        io::Error::new(io::ErrorKind::TimedOut, format!("connection not established within {limit:?}"));
                    self.connect_failed(idx, now, e);
                }
            }
        }
    }
}
