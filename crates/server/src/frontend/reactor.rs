//! The epoll event loop shared by readiness front-ends, and `single-thread` / `reactor` (seed
//! 001's SingleT-Async, seed 000's NIO server) built from one of them.
//!
//! Mechanism: one thread waits in `epoll_wait`. What the loop does with a ready connection is
//! its [`Mode`], a trait each front-end implements, with the per-connection state of the mode
//! kept in the connection (`Conn::state`); the loop itself knows connections, readiness,
//! lingering and its inbox, nothing of stages or request classes. In [`Inline`] modes
//! (single-thread, each netty loop), when a connection is readable the loop reads, answers every
//! complete request inline and writes the responses in the same turn along a [`WritePath`]:
//! a fixed [`WritePolicy`] (`single-thread`
//! write-spins like SingleT-Async (`while (buf.hasRemaining()) write(buf)`, seed 001 §4: the
//! deliberate exception to "no busy waiting", since the spin is what that seed measures), netty
//! stops at `EAGAIN` (waiting for writability) or after `write_spin` calls (a flush task runs
//! after the other ready connections), or a policy chosen per request class (HybridNetty's
//! `frontend::hybrid::Router`). The dispatching front-ends' mode (`frontend::staged`) makes
//! the loop a poller only: connections are registered one-shot, taken out of the loop when
//! ready ([`Next::Away`]) to travel through the route's stages, and come back through the
//! loop's [`Inbox`]. A mode whose response arrives later on the same thread, a reverse proxy's
//! (`crate::service::Forwarding`), keeps the client connection in its slot and registers the
//! backend connection in the same poller under the slot's [`backend_token`]: the loop hands
//! the backend's events to [`Mode::backend_ready`] with the client's slot, and the mode's own
//! deadlines (a backend that does not answer) to [`Mode::timer`], so nothing changes threads.
//! Inline connections are registered
//! edge-triggered for both directions once (no `epoll_ctl` per request); a read shorter than
//! the free buffer space proves the socket drained, which saves the extra `read` returning
//! `EAGAIN`, except once the poller has reported the peer's close (EPOLLRDHUP, EPOLLHUP): the
//! end of stream behind the data raises no further edge, so the loop then reads on to end of
//! stream or `EAGAIN` (a client that half-closes after its request, or leaves mid-request, is
//! noticed and its descriptor closed). While the process is out of descriptors and the
//! acceptor has no reserve left (`acceptor::PAUSE`), and while the server holds
//! `max_connections` (until a connection closes and the [`Admission`] wakes the loop through its
//! inbox), the listener is not watched. The listener is level-triggered so that a backlog left
//! after a transient accept error is seen again. Requests queue in socket buffers; the thread
//! blocks only in `epoll_wait`. Expected bottleneck: the one core, and head-of-line blocking
//! when a request is CPU-heavy. A connection closed after a refused request lingers (see
//! `conn::LINGER`): its write side is shut down and its input discarded until the client closes
//! or the deadline passes. The request and idle timeouts (`crate::timeouts`) are kept per
//! connection in a [`Watch`] that the loop updates whenever a mode has served the connection,
//! and the loop [`Sweep`]s its connections when the earliest deadline is due: a request that
//! has not arrived whole is answered 408 (one write: nothing else is unsent then) and lingers,
//! an idle connection is closed. Lingering deadlines and the next sweep bound the `epoll_wait`
//! timeout; a connection away from the loop (in a stage) has no timeout running.

use crate::acceptor::{accept_pending, Admission, Admitted, Backlog};
use crate::conn::{FlushReport, Flushed, InBuf, OutBuf, WritePolicy, LINGER, LINGER_MAX_BYTES};
use crate::http_service::{serve_buffered, Flow, KeepAlive, Scratch};
use crate::options::ServerOptions;
pub use crate::service::{backend_token, Conn, Ctx, Next};
use crate::service::{LoopForward, LoopState, Service, BACKEND_BIT, FIRST_CONN};
use crate::timeouts::{Expiry, Sweep, Timeouts, Watch};
use crate::Server;
use archlab_metrics::counters::{count_limit, count_write, LimitEvent};
use archlab_netio::{Event, Interest, Poller, Trigger, Waker};
use archlab_wire::http::{request_timeout_response, Limits};
use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const EVENTS_PER_WAIT: usize = 1024;

/// How a loop serves ready connections: implemented by each readiness front-end.
pub trait Mode: Send + 'static {
    /// What the mode keeps per connection.
    type State: Default + Send + 'static;
    /// How a new connection is registered with the poller. One-shot registrations are re-armed
    /// for reading whenever a connection stays with the loop ([`Next::Keep`]).
    fn registration(&self) -> (Interest, Trigger);
    /// A connection is ready (`read_first`: a readiness event, not a flush task). The mode
    /// may take it out of `slot` and return [`Next::Away`].
    fn ready(&mut self, slot: &mut Option<Box<Conn<Self::State>>>, idx: usize, ctx: Ctx<'_>, read_first: bool) -> Next;
    /// The connection the mode registered under [`backend_token`]`(idx)` is ready; `conn` is
    /// the client connection of slot `idx`. Events may be stale (the slot's exchange moved on):
    /// a mode tries its non-blocking calls and takes `EAGAIN` as the answer.
    fn backend_ready(&mut self, _conn: &mut Conn<Self::State>, _idx: usize, _ctx: Ctx<'_>) -> Next {
        Next::Keep
    }
    /// Slots whose deadline has passed by `now` go to `fired`; returns the next deadline.
    fn due(&mut self, _now: Instant, _fired: &mut Vec<usize>) -> Option<Instant> {
        None
    }
    /// A deadline of the connection in slot `idx` (reported by [`Mode::due`]) has passed.
    fn timer(&mut self, _conn: &mut Conn<Self::State>, _idx: usize, _ctx: Ctx<'_>) -> Next {
        Next::Keep
    }
    /// Whether the mode is still answering a request of `conn` that it has taken (a proxy's
    /// exchange): the loop runs no request or idle timeout for it meanwhile, the mode's own
    /// deadlines do.
    fn answering(&self, _conn: &Conn<Self::State>) -> bool {
        false
    }
}

/// How an [`Inline`] mode writes: a fixed policy, or one chosen per request class.
pub trait WritePath: Send + 'static {
    /// What the path keeps per connection.
    type State: Default + Send + 'static;
    /// New responses were buffered; `class` is the path and query of the last request.
    fn responded(&mut self, _state: &mut Self::State, _class: &str) {}
    /// The policy of the next flush.
    fn policy(&self, state: &Self::State) -> WritePolicy;
    /// A flush ended with `outcome`, having made the calls of `report`.
    fn flushed(&mut self, _state: &mut Self::State, _outcome: Flushed, _report: FlushReport) {}
}

impl WritePath for WritePolicy {
    type State = ();
    fn policy(&self, _: &()) -> WritePolicy {
        *self
    }
}

/// Read, handle and write on the loop thread, along the write path `W`.
pub struct Inline<W>(pub W);

impl<W: WritePath> Mode for Inline<W> {
    type State = W::State;
    fn registration(&self) -> (Interest, Trigger) {
        (Interest::BOTH, Trigger::Edge)
    }
    fn ready(&mut self, slot: &mut Option<Box<Conn<W::State>>>, _: usize, ctx: Ctx<'_>, read_first: bool) -> Next {
        let conn = slot.as_mut().expect("the loop passes a present connection");
        drive(conn, ctx, &mut self.0, read_first)
    }
}

/// Connections of one loop, indexed by token - FIRST_CONN. A slot whose connection is away
/// ([`Next::Away`]) is empty but not free.
struct Slab<S> {
    slots: Vec<Option<Box<Conn<S>>>>,
    free: Vec<usize>,
}

impl<S: Default> Slab<S> {
    /// Register and keep a new connection; its slot, or None when it could not be registered
    /// (it is closed).
    fn insert(
        &mut self,
        poller: &Poller,
        stream: TcpStream,
        place: Admitted,
        limits: &Limits,
        (interest, trigger): (Interest, Trigger),
    ) -> Option<usize> {
        if stream.set_nonblocking(true).is_err() {
            return None;
        }
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        if poller.register(stream.as_raw_fd(), idx as u64 + FIRST_CONN, interest, trigger).is_err() {
            self.free.push(idx);
            return None;
        }
        self.slots[idx] = Some(Box::new(Conn {
            stream,
            input: InBuf::new(limits.max_header_bytes + limits.max_body_bytes),
            output: OutBuf::default(),
            closing: false,
            refused: false,
            waiting: false,
            peer_closed: false,
            lingering_until: None,
            discarded: 0,
            watch: Watch::new(),
            _place: place,
            state: S::default(),
        }));
        Some(idx)
    }

    fn remove(&mut self, idx: usize) {
        // Closing the fd removes it from the epoll set.
        self.slots[idx] = None;
        self.free.push(idx);
    }
}

/// A connection away from its loop, by slot.
pub struct Away<S> {
    pub idx: usize,
    pub conn: Box<Conn<S>>,
}

/// What the loop does with a connection that comes back.
pub enum Back {
    /// Arm the one-shot registration for this interest.
    Rearm(Interest),
    Close,
    Linger,
}

/// What other threads hand to a loop.
enum Mail<S> {
    /// An accepted connection and its place under the cap (netty's boss -> worker loop).
    New(TcpStream, Admitted),
    /// A connection coming back (from a stage of a staged route).
    Back(Away<S>, Back),
}

/// A loop's inbox: other threads push, then wake the loop (only when the inbox was empty: a
/// non-empty inbox has a wake-up pending already).
pub struct Inbox<S> {
    pending: Mutex<Vec<Mail<S>>>,
    waker: Waker,
}

impl<S> Inbox<S> {
    pub fn new() -> io::Result<Arc<Inbox<S>>> {
        Ok(Arc::new(Inbox { pending: Mutex::new(Vec::new()), waker: Waker::new()? }))
    }

    fn push(&self, mail: Mail<S>) {
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
    pub fn send(&self, stream: TcpStream, place: Admitted) {
        self.push(Mail::New(stream, place))
    }

    /// Return a connection that was away to its loop (one hand-off).
    pub fn back(&self, away: Away<S>, back: Back) {
        self.push(Mail::Back(away, back))
    }
}

pub struct EventLoop<M: Mode> {
    poller: Poller,
    conns: Slab<M::State>,
    listener: Option<TcpListener>,
    inbox: Arc<Inbox<M::State>>,
    options: ServerOptions,
    mode: M,
    registration: (Interest, Trigger),
    scratch: Scratch,
    /// (deadline, slot) of lingering connections, in deadline order (LINGER is constant).
    lingering: VecDeque<(Instant, usize)>,
    /// Connections whose flush stopped at the write-spin limit (netty's flush tasks).
    flush_tasks: Vec<usize>,
    /// Out of descriptors without a reserve: the listener is not watched until then.
    accept_resumes: Option<Instant>,
    /// The cap on connections, shared with the server's other acceptors.
    admission: Arc<Admission>,
    /// At the cap: the listener is not watched until a place is free.
    capped: bool,
    timeouts: Timeouts,
    sweep: Sweep,
}

impl<M: Mode> EventLoop<M> {
    /// A loop that accepts its own connections from `listener`, under the cap of `admission`;
    /// `inbox` takes connections coming back to it.
    pub fn with_listener(
        listener: TcpListener,
        admission: Arc<Admission>,
        inbox: Arc<Inbox<M::State>>,
        options: &ServerOptions,
        mode: M,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let waker = inbox.clone();
        // At the cap the loop stops watching its listener; a freed place wakes it to resume.
        admission.on_free(move || {
            let _ = waker.waker.wake();
        });
        let loop_ = EventLoop::new(Some(listener), admission, inbox, options, mode)?;
        let listener = loop_.listener.as_ref().expect("just set");
        loop_.poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level)?;
        Ok(loop_)
    }

    /// A loop fed by another thread (which took each connection's place) through the
    /// returned inbox.
    pub fn with_inbox(options: &ServerOptions, mode: M) -> io::Result<(Self, Arc<Inbox<M::State>>)> {
        let inbox = Inbox::new()?;
        // Nothing is admitted here: the loop has no listener.
        let admission = Admission::new(0);
        Ok((EventLoop::new(None, admission, inbox.clone(), options, mode)?, inbox))
    }

    /// A loop fed by other threads (which took each connection's place) through `inbox` (made
    /// beforehand, so that they can hold it before the loop exists).
    pub fn with_inbox_of(inbox: Arc<Inbox<M::State>>, options: &ServerOptions, mode: M) -> io::Result<Self> {
        // Nothing is admitted here: the loop has no listener.
        let admission = Admission::new(0);
        EventLoop::new(None, admission, inbox, options, mode)
    }

    fn new(
        listener: Option<TcpListener>,
        admission: Arc<Admission>,
        inbox: Arc<Inbox<M::State>>,
        options: &ServerOptions,
        mode: M,
    ) -> io::Result<Self> {
        let poller = Poller::new(EVENTS_PER_WAIT)?;
        poller.register(inbox.waker.as_raw_fd(), WAKER, Interest::READABLE, Trigger::Level)?;
        let timeouts = options.timeouts();
        Ok(EventLoop {
            poller,
            conns: Slab { slots: Vec::new(), free: Vec::new() },
            listener,
            inbox,
            options: options.clone(),
            registration: mode.registration(),
            mode,
            scratch: Scratch::new(options),
            lingering: VecDeque::new(),
            flush_tasks: Vec::new(),
            accept_resumes: None,
            admission,
            capped: false,
            timeouts,
            sweep: Sweep::new(&timeouts),
        })
    }

    fn one_shot(&self) -> bool {
        self.registration.1 == Trigger::OneShot
    }

    /// Run forever (returns only on a fatal poller or listener error).
    pub fn run(mut self) -> io::Result<()> {
        let mut events: Vec<Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        let mut tasks = Vec::new();
        let mut fired = Vec::new();
        let mut mode_deadline = None;
        loop {
            // Before waiting: a place freed in the last turn wrote the inbox's eventfd, which
            // that turn's inbox may have drained already.
            self.resume_accepting()?;
            let timeout = if self.flush_tasks.is_empty() {
                let next =
                    [self.lingering.front().map(|(t, _)| *t), self.accept_resumes, self.sweep.wake_at(), mode_deadline];
                next.into_iter().flatten().min().map(|t| t.saturating_duration_since(Instant::now()))
            } else {
                Some(std::time::Duration::ZERO)
            };
            self.poller.wait(&mut events, timeout)?;
            self.expire_lingering();
            for ev in &events {
                match ev.token {
                    LISTENER => self.accept()?,
                    WAKER => self.take_inbox(),
                    token if token & BACKEND_BIT != 0 => {
                        let idx = ((token & !BACKEND_BIT) - FIRST_CONN) as usize;
                        self.on_mode_event(idx, Mode::backend_ready);
                    }
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
            mode_deadline = self.mode.due(Instant::now(), &mut fired);
            for idx in fired.drain(..) {
                self.on_mode_event(idx, Mode::timer);
            }
            // After the events: a request whose last bytes arrived in this turn is not timed out.
            self.sweep_timeouts();
        }
    }

    /// A backend event or a deadline of the mode, for the client connection in slot `idx`.
    fn on_mode_event(&mut self, idx: usize, call: fn(&mut M, &mut Conn<M::State>, usize, Ctx<'_>) -> Next) {
        let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
        if conn.lingering_until.is_some() {
            return;
        }
        let ctx = Ctx { limits: &self.options.limits, scratch: &mut self.scratch, poller: &self.poller };
        let next = call(&mut self.mode, conn, idx, ctx);
        self.after(idx, next);
    }

    fn accept(&mut self) -> io::Result<()> {
        let (Some(listener), conns, poller) = (&self.listener, &mut self.conns, &self.poller) else {
            return Ok(());
        };
        let (limits, registration) = (&self.options.limits, self.registration);
        let mut accepted = false;
        let backlog = accept_pending(listener, &self.options, &self.admission, |s, place| {
            accepted |= conns.insert(poller, s, place, limits, registration).is_some();
        })?;
        let none = Interest { readable: false, writable: false };
        match backlog {
            Backlog::Paused(pause) => {
                // Level-triggered, the listener would be ready again at once: stop watching it.
                poller.reregister(listener.as_raw_fd(), LISTENER, none, Trigger::Level)?;
                self.accept_resumes = Some(Instant::now() + pause);
            }
            Backlog::Capped => {
                poller.reregister(listener.as_raw_fd(), LISTENER, none, Trigger::Level)?;
                self.capped = true;
            }
            Backlog::Drained | Backlog::More => {}
        }
        if accepted {
            self.schedule_idle();
        }
        Ok(())
    }

    fn resume_accepting(&mut self) -> io::Result<()> {
        let Some(listener) = &self.listener else { return Ok(()) };
        let paused = self.accept_resumes.is_some_and(|t| t > Instant::now());
        let capped = self.capped && !self.admission.has_room();
        if (self.accept_resumes.is_some() || self.capped) && !paused && !capped {
            self.accept_resumes = None;
            self.capped = false;
            return self.poller.reregister(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level);
        }
        Ok(())
    }

    /// New connections are idle: the sweep must come by the end of their idle timeout (one
    /// deadline covers every connection accepted now).
    fn schedule_idle(&mut self) {
        if let Some(idle) = self.timeouts.idle {
            self.sweep.schedule(Instant::now() + idle);
        }
    }

    /// A mode has served connection `idx` (or it came back): note which timeout runs for it.
    fn watch(&mut self, idx: usize) {
        let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
        if conn.lingering_until.is_some() {
            return;
        }
        let answering = self.mode.answering(conn);
        conn.watch.observe(&conn.input, conn.output.pending(), answering);
        if let Some((deadline, _)) = conn.watch.deadline(&self.timeouts) {
            self.sweep.schedule(deadline);
        }
    }

    /// Time out the connections whose deadline has passed, when a sweep is due.
    fn sweep_timeouts(&mut self) {
        let now = Instant::now();
        if !self.sweep.begin(now) {
            return;
        }
        for idx in 0..self.conns.slots.len() {
            let Some(Some(conn)) = self.conns.slots.get(idx) else { continue };
            if conn.lingering_until.is_some() {
                continue;
            }
            match conn.watch.deadline(&self.timeouts) {
                Some((deadline, why)) if deadline <= now => self.expire(idx, why),
                Some((deadline, _)) => self.sweep.schedule(deadline),
                None => {}
            }
        }
    }

    fn expire(&mut self, idx: usize, why: Expiry) {
        match why {
            Expiry::Idle => {
                count_limit(LimitEvent::IdleClosed);
                self.conns.remove(idx);
            }
            Expiry::Request => {
                count_limit(LimitEvent::RequestTimedOut);
                let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
                // Nothing else is unsent while a request is in progress: the few bytes fit in
                // the send buffer, so one write does (a client that is gone fails it, fine).
                count_write();
                let _ = conn.stream.write(request_timeout_response());
                conn.refused = true;
                self.start_lingering(idx);
            }
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
        for m in mail {
            match m {
                Mail::New(s, place) => {
                    if self.conns.insert(&self.poller, s, place, &self.options.limits, self.registration).is_some() {
                        self.schedule_idle();
                    }
                }
                Mail::Back(away, back) => self.take_back(away, back),
            }
        }
    }

    /// A connection that was away is back.
    fn take_back(&mut self, away: Away<M::State>, back: Back) {
        let Away { idx, conn } = away;
        self.conns.slots[idx] = Some(conn);
        match back {
            Back::Rearm(interest) => {
                self.rearm(idx, interest);
                self.watch(idx);
            }
            Back::Close => self.conns.remove(idx),
            Back::Linger => self.start_lingering(idx),
        }
    }

    /// Enable a one-shot registration again.
    fn rearm(&mut self, idx: usize, interest: Interest) {
        let Some(Some(conn)) = self.conns.slots.get(idx) else { return };
        let fd = conn.stream.as_raw_fd();
        if self.poller.reregister(fd, idx as u64 + FIRST_CONN, interest, Trigger::OneShot).is_err() {
            self.conns.remove(idx);
        }
    }

    /// `read_first`: a readiness event (read what arrived) rather than a flush task.
    fn on_ready(&mut self, idx: usize, read_first: bool) {
        let slot = match self.conns.slots.get_mut(idx) {
            Some(slot @ Some(_)) => slot,
            _ => return, // a stale token, or a connection that is away
        };
        let next = match slot {
            Some(conn) if conn.lingering_until.is_some() => discard(conn),
            _ => {
                let ctx = Ctx { limits: &self.options.limits, scratch: &mut self.scratch, poller: &self.poller };
                self.mode.ready(slot, idx, ctx, read_first)
            }
        };
        self.after(idx, next);
    }

    /// Do what the mode said about the connection in slot `idx`.
    fn after(&mut self, idx: usize, next: Next) {
        match next {
            Next::Keep if self.one_shot() => self.rearm(idx, Interest::READABLE),
            Next::Keep | Next::Away => {}
            Next::Rearm(interest) => self.rearm(idx, interest),
            Next::FlushLater => self.flush_tasks.push(idx),
            Next::Close => self.conns.remove(idx),
            Next::Linger => self.start_lingering(idx),
        }
        if matches!(next, Next::Keep | Next::Rearm(_)) {
            self.watch(idx);
        }
    }

    fn start_lingering(&mut self, idx: usize) {
        let one_shot = self.one_shot();
        let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
        let _ = conn.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        conn.lingering_until = Some(deadline);
        self.lingering.push_back((deadline, idx));
        // Input may already be waiting and no new edge would announce it.
        match discard(conn) {
            Next::Close => self.conns.remove(idx),
            _ if one_shot => self.rearm(idx, Interest::READABLE),
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
fn discard<S>(conn: &mut Conn<S>) -> Next {
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

/// Read, answer and write as far as the socket and the write path allow.
fn drive<W: WritePath>(conn: &mut Conn<W::State>, ctx: Ctx<'_>, writes: &mut W, read_first: bool) -> Next {
    let mut read = read_first;
    loop {
        while read && !conn.closing && !conn.waiting {
            let room = conn.input.room();
            match conn.input.read_from(&mut conn.stream) {
                Ok(0) => conn.closing = true,
                Ok(n) => {
                    answer(conn, ctx.limits, ctx.scratch, writes);
                    if !conn.closing && !conn.waiting && n < room && !conn.peer_closed {
                        break; // drained: the next arrival raises a new edge
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        read = true;
        let flushed = conn.output.flush(&mut conn.stream, writes.policy(&conn.state));
        if let Ok(outcome) = &flushed {
            writes.flushed(&mut conn.state, *outcome, conn.output.last_flush());
        }
        match flushed {
            Ok(Flushed::Done) if conn.closing => return if conn.refused { Next::Linger } else { Next::Close },
            Ok(Flushed::Done) if conn.waiting => {
                // The output has drained: answer the requests that waited behind it.
                conn.waiting = false;
                answer(conn, ctx.limits, ctx.scratch, writes);
            }
            Ok(Flushed::Done) => return Next::Keep,
            Ok(Flushed::Blocked) => return Next::Keep, // the writable edge brings us back
            Ok(Flushed::SpinLimit) => return Next::FlushLater,
            Err(_) => return Next::Close,
        }
    }
}

/// Answer the complete requests buffered, and note what the connection must do next.
fn answer<W: WritePath>(conn: &mut Conn<W::State>, limits: &Limits, scratch: &mut Scratch, writes: &mut W) {
    let (before, consumed) = (conn.output.pending(), conn.input.consumed());
    let flow = serve_buffered(&mut conn.input, &mut conn.output, limits, scratch, KeepAlive::AsRequested);
    // A request was answered (not only invited to send its body with `100 Continue`, whose
    // write says nothing about its class's responses).
    if conn.output.pending() > before && conn.input.consumed() != consumed {
        writes.responded(&mut conn.state, scratch.last_class());
    }
    match flow {
        Flow::KeepOpen => {}
        Flow::Drain => conn.waiting = true,
        Flow::Close => conn.closing = true,
        Flow::Refused => {
            conn.closing = true;
            conn.refused = true;
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
        let admission = Admission::new(self.options.max_connections);
        match &self.options.service {
            Service::Workload => {
                let mode = Inline(WritePolicy::Spin);
                EventLoop::with_listener(listener, admission, Inbox::new()?, &self.options, mode)?.run()
            }
            Service::Forward(f) => {
                let mode = Forwarding(f.event_loop());
                EventLoop::with_listener(listener, admission, Inbox::new()?, &self.options, mode)?.run()
            }
        }
    }
}

/// The event loop's mode for a forwarding service.
pub struct Forwarding(pub Box<dyn LoopForward>);

impl Mode for Forwarding {
    type State = LoopState;

    fn registration(&self) -> (Interest, Trigger) {
        (Interest::BOTH, Trigger::Edge)
    }

    fn ready(&mut self, slot: &mut Option<Box<Conn<LoopState>>>, idx: usize, ctx: Ctx<'_>, _: bool) -> Next {
        let conn = slot.as_mut().expect("the loop passes a present connection");
        self.0.client_ready(conn, idx, ctx)
    }

    fn backend_ready(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next {
        self.0.backend_ready(conn, idx, ctx)
    }

    fn due(&mut self, now: Instant, fired: &mut Vec<usize>) -> Option<Instant> {
        self.0.due(now, fired)
    }

    fn timer(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next {
        self.0.timer(conn, idx, ctx)
    }

    fn answering(&self, conn: &Conn<LoopState>) -> bool {
        self.0.answering(conn)
    }
}
