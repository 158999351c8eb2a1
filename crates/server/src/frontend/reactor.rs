//! The epoll event loop shared by readiness front-ends, and `single-thread` / `reactor` (seed
//! 001's SingleT-Async, seed 000's NIO server) built from one of them.
//!
//! Mechanism: one thread waits in `epoll_wait`. In [`Mode::Inline`] (single-thread, each netty
//! loop), when a connection is readable it reads, answers every complete request inline and
//! writes the responses in the same turn under the loop's [`WritePolicy`]: `single-thread`
//! write-spins like SingleT-Async (`while (buf.hasRemaining()) write(buf)`, seed 001 §4: the
//! deliberate exception to "no busy waiting", since the spin is what that seed measures), netty
//! stops at `EAGAIN` (waiting for writability) or after `write_spin` calls (a flush task runs
//! after the other ready connections). [`Mode::Hybrid`] (HybridNetty) is Inline with the
//! write policy chosen per request class by a `frontend::hybrid::Router`. In [`Mode::Staged`] the loop is only the poller of the
//! dispatching front-ends (`frontend::staged`): connections are registered one-shot, handed to
//! the route's stages when ready, and come back through the loop's [`Inbox`]. Connections are registered
//! edge-triggered for both directions once (no `epoll_ctl` per request); a read shorter than
//! the free buffer space proves the socket drained, which saves the extra `read` returning
//! `EAGAIN`, except once the poller has reported the peer's close (EPOLLRDHUP, EPOLLHUP): the
//! end of stream behind the data raises no further edge, so the loop then reads on to end of
//! stream or `EAGAIN` (a client that half-closes after its request, or leaves mid-request, is
//! noticed and its descriptor closed). While the process is out of descriptors and the
//! acceptor has no reserve left (`acceptor::PAUSE`), the listener is not watched. The listener is level-triggered so that a backlog left after a transient accept
//! error is seen again. Requests queue in socket buffers; the thread blocks only in
//! `epoll_wait`. Expected bottleneck: the one core, and head-of-line blocking when a request
//! is CPU-heavy. A connection closed after a refused request lingers (see `conn::LINGER`): its write side
//! is shut down and its input discarded until the client closes or the deadline passes; the
//! deadlines bound the `epoll_wait` timeout.

use crate::acceptor::{accept_pending, Backlog};
use crate::conn::{Flushed, InBuf, OutBuf, WritePolicy, LINGER, LINGER_MAX_BYTES};
use crate::frontend::hybrid::{self, Router};
use crate::frontend::staged::{Back, Job, Route};
use crate::http_service::{serve_buffered, Flow, KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::Server;
use archlab_netio::{Event, Interest, Poller, Trigger, Waker};
use archlab_wire::http::Limits;
use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const FIRST_CONN: u64 = 2;
const EVENTS_PER_WAIT: usize = 1024;
/// Stop reading a connection whose unsent output exceeds this (a pipelining client that does
/// not read); reading resumes once the output drains.
const OUTPUT_HIGH_WATER: usize = 256 * 1024;

pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) input: InBuf,
    pub(crate) output: OutBuf,
    pub(crate) closing: bool,
    /// Closing after refusing a request: linger instead of closing at once.
    pub(crate) refused: bool,
    read_paused: bool,
    /// The poller reported the peer's close (EPOLLRDHUP/EPOLLHUP/EPOLLERR): read on to EOF or
    /// an error, since no further edge will come.
    peer_closed: bool,
    /// Set once the write side is shut down: input is discarded until then.
    lingering_until: Option<Instant>,
    discarded: usize,
    /// Staged mode: the hop of the route to run when the connection is next ready.
    pub(crate) resume_hop: usize,
    /// Hybrid mode: the class and path of the responses being written, and whether their
    /// first flush (the observation) is still to come.
    class: String,
    path: hybrid::Path,
    unobserved: bool,
}

/// What to do with a connection after it was driven.
enum Next {
    Keep,
    Close,
    Linger,
    /// Netty's flush task: the write-spin limit was reached, continue after the other events.
    FlushLater,
}

/// How the loop serves ready connections.
pub enum Mode {
    /// Read, handle and write on the loop thread.
    Inline(WritePolicy),
    /// Hand ready connections to the route's stages (the loop is a poller only).
    Staged(Arc<Route>),
    /// Read and handle inline, write on the path the router picks per request class
    /// (HybridNetty, `frontend::hybrid`).
    Hybrid(Router),
}

/// How `drive` writes: one policy, or per request class.
enum Writes<'a> {
    Fixed(WritePolicy),
    Routed(&'a mut Router),
}

/// Connections of one loop, indexed by token - FIRST_CONN. A slot whose connection is away on
/// a stage (staged mode) is empty but not free.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Box<Conn>>>,
    free: Vec<usize>,
}

impl Slab {
    fn insert(&mut self, poller: &Poller, stream: TcpStream, limits: &Limits, staged: bool) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        let (interest, trigger) =
            if staged { (Interest::READABLE, Trigger::OneShot) } else { (Interest::BOTH, Trigger::Edge) };
        if poller.register(stream.as_raw_fd(), idx as u64 + FIRST_CONN, interest, trigger).is_err() {
            self.free.push(idx);
            return;
        }
        self.slots[idx] = Some(Box::new(Conn {
            stream,
            input: InBuf::new(limits.max_header_bytes + limits.max_body_bytes),
            output: OutBuf::default(),
            closing: false,
            refused: false,
            read_paused: false,
            peer_closed: false,
            lingering_until: None,
            discarded: 0,
            resume_hop: 0,
            class: String::new(),
            path: hybrid::Path::Profile,
            unobserved: false,
        }));
    }

    fn remove(&mut self, idx: usize) {
        // Closing the fd removes it from the epoll set.
        self.slots[idx] = None;
        self.free.push(idx);
    }
}

/// What other threads hand to a loop.
enum Mail {
    /// An accepted connection (netty's boss -> worker loop).
    New(TcpStream),
    /// A connection coming back from a stage (staged mode).
    Back(Job, Back),
}

/// A loop's inbox: other threads push, then wake the loop (only when the inbox was empty: a
/// non-empty inbox has a wake-up pending already).
pub struct Inbox {
    pending: Mutex<Vec<Mail>>,
    waker: Waker,
}

impl Inbox {
    pub fn new() -> io::Result<Arc<Inbox>> {
        Ok(Arc::new(Inbox { pending: Mutex::new(Vec::new()), waker: Waker::new()? }))
    }

    fn push(&self, mail: Mail) {
        archlab_metrics::counters::count_handoff();
        let mut pending = self.pending.lock().unwrap();
        let was_empty = pending.is_empty();
        pending.push(mail);
        drop(pending);
        if was_empty {
            // A failed wake-up (eventfd counter full) still leaves one pending wake-up.
            let _ = self.waker.wake();
        }
    }

    /// Hand an accepted connection to the loop (one hand-off per connection).
    pub fn send(&self, stream: TcpStream) {
        self.push(Mail::New(stream))
    }

    /// Return a connection from a stage to its poller (one hand-off).
    pub(crate) fn back(&self, job: Job, back: Back) {
        self.push(Mail::Back(job, back))
    }
}

pub struct EventLoop {
    poller: Poller,
    conns: Slab,
    listener: Option<TcpListener>,
    inbox: Arc<Inbox>,
    options: ServerOptions,
    mode: Mode,
    scratch: Scratch,
    /// (deadline, slot) of lingering connections, in deadline order (LINGER is constant).
    lingering: VecDeque<(Instant, usize)>,
    /// Connections whose flush stopped at the write-spin limit (netty's flush tasks).
    flush_tasks: Vec<usize>,
    /// Out of descriptors without a reserve: the listener is not watched until then.
    accept_resumes: Option<Instant>,
}

impl EventLoop {
    /// A loop that accepts its own connections from `listener`; `inbox` takes connections
    /// returning from stages.
    pub fn with_listener(
        listener: TcpListener,
        inbox: Arc<Inbox>,
        options: &ServerOptions,
        mode: Mode,
    ) -> io::Result<EventLoop> {
        listener.set_nonblocking(true)?;
        let loop_ = EventLoop::new(Some(listener), inbox, options, mode)?;
        let listener = loop_.listener.as_ref().expect("just set");
        loop_.poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level)?;
        Ok(loop_)
    }

    /// A loop fed by another thread through the returned inbox.
    pub fn with_inbox(options: &ServerOptions, mode: Mode) -> io::Result<(EventLoop, Arc<Inbox>)> {
        let inbox = Inbox::new()?;
        Ok((EventLoop::new(None, inbox.clone(), options, mode)?, inbox))
    }

    fn new(listener: Option<TcpListener>, inbox: Arc<Inbox>, options: &ServerOptions, mode: Mode) -> io::Result<Self> {
        let poller = Poller::new(EVENTS_PER_WAIT)?;
        poller.register(inbox.waker.as_raw_fd(), WAKER, Interest::READABLE, Trigger::Level)?;
        Ok(EventLoop {
            poller,
            conns: Slab::default(),
            listener,
            inbox,
            options: options.clone(),
            mode,
            scratch: Scratch::new(options),
            lingering: VecDeque::new(),
            flush_tasks: Vec::new(),
            accept_resumes: None,
        })
    }

    fn staged(&self) -> bool {
        matches!(self.mode, Mode::Staged(_))
    }

    /// Run forever (returns only on a fatal poller or listener error).
    pub fn run(mut self) -> io::Result<()> {
        let mut events: Vec<Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        let mut tasks = Vec::new();
        loop {
            let timeout = if self.flush_tasks.is_empty() {
                let next = [self.lingering.front().map(|(t, _)| *t), self.accept_resumes].into_iter().flatten().min();
                next.map(|t| t.saturating_duration_since(Instant::now()))
            } else {
                Some(std::time::Duration::ZERO)
            };
            self.poller.wait(&mut events, timeout)?;
            self.expire_lingering();
            self.resume_accepting()?;
            for ev in &events {
                match ev.token {
                    LISTENER => self.accept()?,
                    WAKER => self.take_inbox(),
                    token => {
                        let idx = (token - FIRST_CONN) as usize;
                        if ev.closed {
                            self.peer_closed(idx);
                        }
                        self.on_ready(idx, true)
                    }
                }
            }
            std::mem::swap(&mut tasks, &mut self.flush_tasks);
            for idx in tasks.drain(..) {
                self.on_ready(idx, false);
            }
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        let staged = self.staged();
        let (Some(listener), conns, poller) = (&self.listener, &mut self.conns, &self.poller) else {
            return Ok(());
        };
        let limits = &self.options.limits;
        if let Backlog::Paused(pause) =
            accept_pending(listener, &self.options, |s| conns.insert(poller, s, limits, staged))?
        {
            // Level-triggered, the listener would be ready again at once: stop watching it.
            let none = Interest { readable: false, writable: false };
            poller.reregister(listener.as_raw_fd(), LISTENER, none, Trigger::Level)?;
            self.accept_resumes = Some(Instant::now() + pause);
        }
        Ok(())
    }

    fn resume_accepting(&mut self) -> io::Result<()> {
        match (self.accept_resumes, &self.listener) {
            (Some(t), Some(listener)) if t <= Instant::now() => {
                self.accept_resumes = None;
                self.poller.reregister(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level)
            }
            _ => Ok(()),
        }
    }

    /// The poller saw the peer close: from now on a short read does not prove the socket
    /// drained (the end of stream behind the data raises no further edge).
    fn peer_closed(&mut self, idx: usize) {
        if let Some(Some(conn)) = self.conns.slots.get_mut(idx) {
            conn.peer_closed = true;
        }
    }

    fn take_inbox(&mut self) {
        self.inbox.waker.drain();
        let mail = std::mem::take(&mut *self.inbox.pending.lock().unwrap());
        let staged = self.staged();
        for m in mail {
            match m {
                Mail::New(s) => self.conns.insert(&self.poller, s, &self.options.limits, staged),
                Mail::Back(job, back) => self.take_back(job, back),
            }
        }
    }

    /// A connection is back on the poller (from a stage, or from the poller's own hops).
    fn take_back(&mut self, job: Job, back: Back) {
        let Job { idx, conn } = job;
        self.conns.slots[idx] = Some(conn);
        match back {
            Back::Rearm(interest) => self.rearm(idx, interest),
            Back::Close => self.conns.remove(idx),
            Back::Linger => self.start_lingering(idx),
        }
    }

    /// Staged mode: enable the one-shot registration again.
    fn rearm(&mut self, idx: usize, interest: Interest) {
        let Some(Some(conn)) = self.conns.slots.get(idx) else { return };
        let fd = conn.stream.as_raw_fd();
        if self.poller.reregister(fd, idx as u64 + FIRST_CONN, interest, Trigger::OneShot).is_err() {
            self.conns.remove(idx);
        }
    }

    /// `read_first`: a readiness event (read what arrived) rather than a flush task.
    fn on_ready(&mut self, idx: usize, read_first: bool) {
        let lingering = match self.conns.slots.get(idx) {
            Some(Some(conn)) => conn.lingering_until.is_some(),
            _ => return, // a stale token, or a connection away on a stage
        };
        let mut writes = match &mut self.mode {
            Mode::Staged(route) if !lingering => {
                let route = route.clone();
                let conn = self.conns.slots[idx].take().expect("checked above");
                if let Some((job, back)) = route.advance(Job { idx, conn }, true, &mut self.scratch) {
                    self.take_back(job, back);
                }
                return;
            }
            Mode::Staged(_) => Writes::Fixed(WritePolicy::UntilBlocked),
            Mode::Inline(policy) => Writes::Fixed(*policy),
            Mode::Hybrid(router) => Writes::Routed(router),
        };
        let conn = self.conns.slots[idx].as_mut().expect("checked above");
        let next = if lingering {
            discard(conn)
        } else {
            drive(conn, &self.options.limits, &mut self.scratch, &mut writes, read_first)
        };
        match next {
            Next::Keep if self.staged() => self.rearm(idx, Interest::READABLE),
            Next::Keep => {}
            Next::FlushLater => self.flush_tasks.push(idx),
            Next::Close => self.conns.remove(idx),
            Next::Linger => self.start_lingering(idx),
        }
    }

    fn start_lingering(&mut self, idx: usize) {
        let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
        let _ = conn.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        conn.lingering_until = Some(deadline);
        self.lingering.push_back((deadline, idx));
        // Input may already be waiting and no new edge would announce it.
        match discard(conn) {
            Next::Close => self.conns.remove(idx),
            _ if self.staged() => self.rearm(idx, Interest::READABLE),
            _ => {}
        }
    }

    /// Close lingering connections whose deadline has passed. A slot reused by a newer
    /// connection is recognised by its different (or absent) deadline.
    fn expire_lingering(&mut self) {
        let now = Instant::now();
        while let Some(&(deadline, idx)) = self.lingering.front() {
            if deadline > now {
                break;
            }
            self.lingering.pop_front();
            if let Some(Some(conn)) = self.conns.slots.get(idx) {
                if conn.lingering_until == Some(deadline) {
                    self.conns.remove(idx);
                }
            }
        }
    }
}

/// Discard the input of a lingering connection; Close once the client has closed.
fn discard(conn: &mut Conn) -> Next {
    let mut sink = [0u8; 16 * 1024];
    loop {
        archlab_metrics::counters::count_read();
        match conn.stream.read(&mut sink) {
            Ok(0) => return Next::Close,
            Ok(n) => {
                conn.discarded += n;
                if conn.discarded >= LINGER_MAX_BYTES {
                    return Next::Close;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
}

/// Read, answer and write as far as the socket and the write policy allow.
fn drive(conn: &mut Conn, limits: &Limits, scratch: &mut Scratch, writes: &mut Writes<'_>, read_first: bool) -> Next {
    let mut read = read_first;
    loop {
        while read && !conn.closing && !conn.read_paused {
            let room = conn.input.room();
            match conn.input.read_from(&mut conn.stream) {
                Ok(0) => conn.closing = true,
                Ok(n) => {
                    let before = conn.output.pending();
                    let flow =
                        serve_buffered(&mut conn.input, conn.output.vec(), limits, scratch, KeepAlive::AsRequested);
                    if let Writes::Routed(router) = writes {
                        if conn.output.pending() > before {
                            conn.class.clear();
                            conn.class.push_str(scratch.last_class());
                            conn.path = router.route(&conn.class);
                            conn.unobserved = true;
                        }
                    }
                    if flow != Flow::KeepOpen {
                        conn.closing = true;
                        conn.refused = flow == Flow::Refused;
                    } else if conn.output.pending() >= OUTPUT_HIGH_WATER {
                        conn.read_paused = true;
                    } else if n < room && !conn.peer_closed {
                        break; // drained: the next arrival raises a new edge
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        read = true;
        let policy = match writes {
            Writes::Fixed(policy) => *policy,
            Writes::Routed(router) => router.policy(conn.path),
        };
        let flushed = conn.output.flush(&mut conn.stream, policy);
        if let (Writes::Routed(router), Ok(outcome)) = (&mut *writes, &flushed) {
            if std::mem::take(&mut conn.unobserved) {
                router.observe(&conn.class, *outcome, conn.output.last_flush());
            }
        }
        match flushed {
            Ok(Flushed::Done) if conn.closing => return if conn.refused { Next::Linger } else { Next::Close },
            Ok(Flushed::Done) if conn.read_paused => conn.read_paused = false,
            Ok(Flushed::Done) => return Next::Keep,
            Ok(Flushed::Blocked) => return Next::Keep, // the writable edge brings us back
            Ok(Flushed::SpinLimit) => return Next::FlushLater,
            Err(_) => return Next::Close,
        }
    }
}

/// `single-thread` / `reactor`: one event loop that accepts, reads, handles and writes,
/// write-spinning on a full send buffer as SingleT-Async does.
pub struct SingleThread {
    options: ServerOptions,
}

impl SingleThread {
    pub fn new(options: &ServerOptions) -> Self {
        SingleThread { options: options.clone() }
    }
}

impl Server for SingleThread {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let mode = Mode::Inline(WritePolicy::Spin);
        EventLoop::with_listener(listener, Inbox::new()?, &self.options, mode)?.run()
    }
}
