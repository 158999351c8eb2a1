//! The epoll event loop shared by readiness front-ends, and `single-thread` (seed 001's
//! SingleT-Async, seed 000's NIO server) built from one of them.
//!
//! Mechanism: one thread waits in `epoll_wait`; when a connection is readable it reads,
//! answers every complete request inline and writes the responses in the same turn; output
//! the kernel does not take at once waits for writability. Connections are registered
//! edge-triggered for both directions once (no `epoll_ctl` per request); a read shorter than
//! the free buffer space proves the socket drained, which saves the extra `read` returning
//! `EAGAIN`. The listener is level-triggered so that a backlog left after a transient accept
//! error is seen again. Requests queue in socket buffers; the thread blocks only in
//! `epoll_wait`. Expected bottleneck: the one core, and head-of-line blocking when a request
//! is CPU-heavy. A connection closed after a refused request lingers (see `conn::LINGER`): its write side
//! is shut down and its input discarded until the client closes or the deadline passes; the
//! deadlines bound the `epoll_wait` timeout.

use crate::acceptor::accept_pending;
use crate::conn::{InBuf, OutBuf, LINGER, LINGER_MAX_BYTES};
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

struct Conn {
    stream: TcpStream,
    input: InBuf,
    output: OutBuf,
    closing: bool,
    /// Closing after refusing a request: linger instead of closing at once.
    refused: bool,
    read_paused: bool,
    /// Set once the write side is shut down: input is discarded until then.
    lingering_until: Option<Instant>,
    discarded: usize,
}

/// What to do with a connection after it was driven.
enum Next {
    Keep,
    Close,
    Linger,
}

/// Connections of one loop, indexed by token - FIRST_CONN.
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
}

impl Slab {
    fn insert(&mut self, poller: &Poller, stream: TcpStream, limits: &Limits) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let idx = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        if poller.register(stream.as_raw_fd(), idx as u64 + FIRST_CONN, Interest::BOTH, Trigger::Edge).is_err() {
            self.free.push(idx);
            return;
        }
        self.slots[idx] = Some(Conn {
            stream,
            input: InBuf::new(limits.max_header_bytes + limits.max_body_bytes),
            output: OutBuf::default(),
            closing: false,
            refused: false,
            read_paused: false,
            lingering_until: None,
            discarded: 0,
        });
    }

    fn remove(&mut self, idx: usize) {
        // Closing the fd removes it from the epoll set.
        self.slots[idx] = None;
        self.free.push(idx);
    }
}

/// Hands accepted connections to a loop running on another thread.
pub struct Inbox {
    pending: Mutex<Vec<TcpStream>>,
    waker: Waker,
}

impl Inbox {
    pub fn send(&self, stream: TcpStream) {
        self.pending.lock().unwrap().push(stream);
        // A failed wake-up (eventfd counter full) still leaves one pending wake-up.
        let _ = self.waker.wake();
    }
}

pub struct EventLoop {
    poller: Poller,
    conns: Slab,
    listener: Option<TcpListener>,
    inbox: Option<Arc<Inbox>>,
    options: ServerOptions,
    scratch: Scratch,
    /// (deadline, slot) of lingering connections, in deadline order (LINGER is constant).
    lingering: VecDeque<(Instant, usize)>,
}

impl EventLoop {
    /// A loop that accepts its own connections from `listener`.
    pub fn with_listener(listener: TcpListener, options: &ServerOptions) -> io::Result<EventLoop> {
        listener.set_nonblocking(true)?;
        let poller = Poller::new(EVENTS_PER_WAIT)?;
        poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level)?;
        Ok(EventLoop::new(poller, Some(listener), None, options))
    }

    /// A loop fed by another thread through the returned inbox.
    pub fn with_inbox(options: &ServerOptions) -> io::Result<(EventLoop, Arc<Inbox>)> {
        let poller = Poller::new(EVENTS_PER_WAIT)?;
        let inbox = Arc::new(Inbox { pending: Mutex::new(Vec::new()), waker: Waker::new()? });
        poller.register(inbox.waker.as_raw_fd(), WAKER, Interest::READABLE, Trigger::Level)?;
        Ok((EventLoop::new(poller, None, Some(inbox.clone()), options), inbox))
    }

    fn new(poller: Poller, listener: Option<TcpListener>, inbox: Option<Arc<Inbox>>, options: &ServerOptions) -> Self {
        EventLoop {
            poller,
            conns: Slab::default(),
            listener,
            inbox,
            options: options.clone(),
            scratch: Scratch::default(),
            lingering: VecDeque::new(),
        }
    }

    /// Run forever (returns only on a fatal poller or listener error).
    pub fn run(mut self) -> io::Result<()> {
        let mut events: Vec<Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        loop {
            let timeout = self.lingering.front().map(|(t, _)| t.saturating_duration_since(Instant::now()));
            self.poller.wait(&mut events, timeout)?;
            self.expire_lingering();
            for ev in &events {
                match ev.token {
                    LISTENER => self.accept()?,
                    WAKER => self.take_inbox(),
                    token => self.on_ready((token - FIRST_CONN) as usize),
                }
            }
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        let (Some(listener), conns, poller) = (&self.listener, &mut self.conns, &self.poller) else {
            return Ok(());
        };
        let limits = &self.options.limits;
        accept_pending(listener, &self.options, |s| conns.insert(poller, s, limits))
    }

    fn take_inbox(&mut self) {
        let Some(inbox) = &self.inbox else { return };
        inbox.waker.drain();
        let streams = std::mem::take(&mut *inbox.pending.lock().unwrap());
        for s in streams {
            self.conns.insert(&self.poller, s, &self.options.limits);
        }
    }

    fn on_ready(&mut self, idx: usize) {
        let Some(Some(conn)) = self.conns.slots.get_mut(idx) else { return };
        let next = if conn.lingering_until.is_some() {
            discard(conn)
        } else {
            drive(conn, &self.options.limits, &mut self.scratch)
        };
        match next {
            Next::Keep => {}
            Next::Close => self.conns.remove(idx),
            Next::Linger => {
                let _ = conn.stream.shutdown(Shutdown::Write);
                let deadline = Instant::now() + LINGER;
                conn.lingering_until = Some(deadline);
                self.lingering.push_back((deadline, idx));
                // Input may already be waiting and no new edge would announce it.
                if let Next::Close = discard(conn) {
                    self.conns.remove(idx);
                }
            }
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

/// Read, answer and write as far as the socket allows.
fn drive(conn: &mut Conn, limits: &Limits, scratch: &mut Scratch) -> Next {
    loop {
        while !conn.closing && !conn.read_paused {
            let room = conn.input.room();
            match conn.input.read_from(&mut conn.stream) {
                Ok(0) => conn.closing = true,
                Ok(n) => {
                    let flow =
                        serve_buffered(&mut conn.input, conn.output.vec(), limits, scratch, KeepAlive::AsRequested);
                    if flow != Flow::KeepOpen {
                        conn.closing = true;
                        conn.refused = flow == Flow::Refused;
                    } else if conn.output.pending() >= OUTPUT_HIGH_WATER {
                        conn.read_paused = true;
                    } else if n < room {
                        break; // drained: the next arrival raises a new edge
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        match conn.output.flush_to(&mut conn.stream) {
            Ok(true) if conn.closing => return if conn.refused { Next::Linger } else { Next::Close },
            Ok(true) if conn.read_paused => conn.read_paused = false,
            Ok(true) => return Next::Keep,
            Ok(false) => return Next::Keep, // the writable edge brings us back
            Err(_) => return Next::Close,
        }
    }
}

/// `single-thread`: one event loop that accepts, reads, handles and writes.
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
        EventLoop::with_listener(listener, &self.options)?.run()
    }
}
