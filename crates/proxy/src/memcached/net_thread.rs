//! The net thread (seed 002 §1.3): one thread, one level-triggered epoll poller
//! (`archlab-netio`), a non-blocking listener and every client connection. For each readable
//! client it reads into the client's own `RequestReader` (a per-client incremental parse
//! state machine, so requests split across reads and clients interleaved in time are read
//! correctly), turns each complete item into a request with the round-robin server choice for
//! retrievals, stamps its arrival and enqueue times, and hands it to a [`Backend`]: the hand-off
//! to the workers, or the event loop's server connections. It blocks only in `epoll_wait`.
//!
//! A client has one request under way at a time (see `client`): the others wait in its FIFO
//! and come back here when the current one is answered - through `Shared::returns` and the
//! waker from a worker, directly from the event loop. This thread also writes every answer a
//! client's socket did not take at once, when the socket becomes writable, hands off a
//! client's held-back request once its unwritten answers drain under the bound, and
//! disconnects a client whose unwritten answers make no progress for the server timeout (it
//! does not read). A client that sends `quit` or a binary-protocol request has its input
//! ended: what it sent before is answered, then the connection is closed. When told to stop,
//! it closes the listener, stops reading (requests read but not started are dropped) and
//! keeps serving the back end until no request is in flight or the drain deadline passes.

use super::client::{Admit, Client, Pending, MAX_PENDING};
use super::request::{Op, Timeline};
use super::stats::{now, SharedRecorder};
use super::{ErrorClass, Shared};
use archlab_netio::{Event, Interest, Poller, Trigger};
use archlab_wire::memcached_request::{Closed, Item, Request, RequestLimits, RequestReader};
use std::io::{self, Read};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
const CLIENT_BASE: u64 = 16;
/// Tokens from here on belong to the back end (the event loop's server connections).
pub(crate) const BACKEND_BASE: u64 = 1 << 40;
/// Reads of one client per readiness event before the others get their turn.
const READS_PER_EVENT: usize = 4;
/// Free space offered to each read.
const READ_BYTES: usize = 16 * 1024;

/// Where the net thread puts requests.
pub(crate) trait Backend: Send {
    /// Take `job` (its enqueue time is set); returns the queue length right after, this
    /// request included. A request finished at once (the event loop: every server it needs is
    /// down) puts its client on `returns` if the net thread must see it again.
    fn dispatch(&mut self, poller: &Poller, job: super::client::Job, returns: &mut Vec<Arc<Client>>) -> usize;

    /// An event of a token at or above [`BACKEND_BASE`]; clients whose request it finished
    /// and that need the net thread again go to `returns`.
    fn on_event(&mut self, _poller: &Poller, _event: &Event, _returns: &mut Vec<Arc<Client>>) {}

    /// After each round of events: write what was queued, fail what timed out. Returns how
    /// long the next wait may last at most.
    fn after_events(&mut self, _poller: &Poller, _returns: &mut Vec<Arc<Client>>) -> Option<Duration> {
        None
    }
}

struct Conn {
    client: Arc<Client>,
    reader: RequestReader,
}

pub(crate) struct NetThread {
    poller: Poller,
    listener: Option<TcpListener>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    shared: Arc<Shared>,
    backend: Box<dyn Backend>,
    recorder: SharedRecorder,
    limits: RequestLimits,
    /// The round-robin server of the next retrieval.
    next_server: usize,
    returns: Vec<Arc<Client>>,
    /// Clients with unwritten answers, watched for the write timeout.
    unread: Vec<Arc<Client>>,
    /// When `unread` is next checked (lab clock, ns).
    unread_check_ns: u64,
}

impl NetThread {
    pub fn new(
        listener: TcpListener,
        shared: Arc<Shared>,
        backend: Box<dyn Backend>,
        recorder: SharedRecorder,
    ) -> io::Result<NetThread> {
        listener.set_nonblocking(true)?;
        let poller = Poller::new(1024)?;
        poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE, Trigger::Level)?;
        poller.register(shared.waker.as_raw_fd(), WAKER, Interest::READABLE, Trigger::Level)?;
        let limits = RequestLimits { max_value_bytes: shared.config.max_value_bytes, ..Default::default() };
        Ok(NetThread {
            poller,
            listener: Some(listener),
            conns: Vec::new(),
            free: Vec::new(),
            shared,
            backend,
            recorder,
            limits,
            next_server: 0,
            returns: Vec::new(),
            unread: Vec::new(),
            unread_check_ns: 0,
        })
    }

    pub fn run(mut self) {
        let mut events = Vec::with_capacity(1024);
        let mut timeout = None;
        let mut drain_deadline: Option<Instant> = None;
        loop {
            if let Err(e) = self.poller.wait(&mut events, timeout) {
                eprintln!("archlab middleware: net thread: epoll_wait failed: {e}");
                return;
            }
            for ev in &events {
                match ev.token {
                    LISTENER => self.accept(),
                    WAKER => {
                        self.shared.waker.drain();
                        let returned = std::mem::take(&mut *self.shared.returns.lock().unwrap());
                        self.returns.extend(returned);
                    }
                    t if t >= BACKEND_BASE => self.backend.on_event(&self.poller, ev, &mut self.returns),
                    t => self.on_client(ev, (t - CLIENT_BASE) as usize),
                }
            }
            self.serve_returns();
            timeout = self.backend.after_events(&self.poller, &mut self.returns);
            self.serve_returns();
            if let Some(check_in) = self.check_unread() {
                timeout = Some(timeout.map_or(check_in, |t| t.min(check_in)));
            }
            if self.shared.stop.load(Ordering::Acquire) {
                let deadline = *drain_deadline.get_or_insert_with(|| self.stop_reading());
                if self.shared.in_flight.load(Ordering::Acquire) == 0 || Instant::now() >= deadline {
                    return;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                timeout = Some(timeout.map_or(left, |t| t.min(left)).min(Duration::from_millis(10)));
            }
        }
    }

    /// Stop accepting and reading; returns the drain deadline.
    fn stop_reading(&mut self) -> Instant {
        if let Some(l) = self.listener.take() {
            let _ = self.poller.deregister(l.as_raw_fd());
        }
        for slot in 0..self.conns.len() {
            if self.conns[slot].is_some() {
                self.end(slot, true);
            }
        }
        Instant::now() + 2 * self.shared.config.server_timeout + Duration::from_millis(50)
    }

    fn accept(&mut self) {
        let Some(listener) = &self.listener else { return };
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let slot = self.free.pop().unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    let client = Arc::new(Client::new(stream, CLIENT_BASE + slot as u64));
                    if client.arm(&self.poller).is_err() {
                        self.free.push(slot);
                        continue;
                    }
                    self.conns[slot] = Some(Conn { client, reader: RequestReader::new(self.limits) });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors or a connection reset before accept: try again on the
                // next readiness event rather than spin.
                Err(_) => return,
            }
        }
    }

    fn on_client(&mut self, ev: &Event, slot: usize) {
        let Some(conn) = self.conns.get(slot).and_then(Option::as_ref) else { return };
        if ev.writable {
            let client = conn.client.clone();
            match client.flush() {
                Ok(flushed) => {
                    if flushed.release {
                        // Its held-back request goes now, as if just answered.
                        self.returns.push(client.clone());
                    }
                    if client.is_done() {
                        self.remove(slot);
                        return;
                    }
                    let _ = client.arm(&self.poller);
                }
                Err(_) => {
                    // The answers can never be delivered: drop them with the connection.
                    client.abandon();
                    self.recorder.lock().unwrap().error(ErrorClass::ClientWrite);
                    self.returns.push(client);
                    return;
                }
            }
        }
        // Once its input has ended, nothing more is read (a hang-up then only matters to the
        // writes above), so a refusal that ended it is counted once.
        if (ev.readable || ev.closed) && !conn.client.input_ended() {
            self.read(slot);
        }
    }

    fn read(&mut self, slot: usize) {
        for _ in 0..READS_PER_EVENT {
            let Some(conn) = self.conns[slot].as_mut() else { return };
            let space = conn.reader.spare(READ_BYTES);
            let want = space.len();
            archlab_metrics::counters::count_read();
            match (&conn.client.stream).read(space) {
                Ok(0) => {
                    if conn.reader.in_request() {
                        self.recorder.lock().unwrap().error(ErrorClass::ClientClosedMidRequest);
                    }
                    self.end(slot, false);
                    return;
                }
                Ok(n) => {
                    conn.reader.commit(n, now());
                    if !self.take_requests(slot) || n < want {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.end(slot, true);
                    return;
                }
            }
        }
    }

    /// Turn the complete items in a client's reader into requests; false when the client was
    /// paused (too many requests wait) or its input ended, and must not be read now.
    fn take_requests(&mut self, slot: usize) -> bool {
        let servers = self.shared.servers.len();
        loop {
            let Some(conn) = self.conns[slot].as_mut() else { return false };
            let Some((item, arrival_ns)) = conn.reader.next_item() else {
                return match conn.reader.closed() {
                    // Answered by its reject item, which closes the connection.
                    None | Some(Closed::LineTooLong) => true,
                    Some(Closed::Quit) => {
                        self.end(slot, false);
                        false
                    }
                    Some(Closed::BinaryProtocol) => {
                        self.recorder.lock().unwrap().error(ErrorClass::BinaryProtocol);
                        self.end(slot, false);
                        false
                    }
                };
            };
            let server = self.next_server;
            if matches!(item, Item::Request(Request::Retrieval { .. })) {
                self.next_server = (self.next_server + 1) % servers;
            }
            let op = Op::from_item(&item, server);
            let client = conn.client.clone();
            let pending = Pending { op, t: Timeline { arrival_ns, ..Timeline::default() } };
            match client.admit(pending) {
                Admit::Dispatch(p) => self.dispatch(client, p),
                Admit::Queued { waiting } if waiting >= MAX_PENDING => {
                    client.pause();
                    let _ = client.arm(&self.poller);
                    return false;
                }
                Admit::Queued { .. } => {}
            }
        }
    }

    fn dispatch(&mut self, client: Arc<Client>, p: Pending) {
        let mut t = p.t;
        t.enqueue_ns = now();
        self.shared.dispatched();
        let job = super::client::Job { client, op: p.op, t };
        let length = self.backend.dispatch(&self.poller, job, &mut self.returns);
        self.recorder.lock().unwrap().queue_length(length);
    }

    /// Clients whose request was answered, or whose held-back request may go: dispatch their
    /// next one, watch their unwritten answers, read them again, or close.
    fn serve_returns(&mut self) {
        while let Some(client) = self.returns.pop() {
            let slot = (client.token - CLIENT_BASE) as usize;
            let ours = self.conns.get(slot).and_then(Option::as_ref).is_some_and(|c| Arc::ptr_eq(&c.client, &client));
            let (next, resume) = client.take_next();
            if let Some(p) = next {
                self.dispatch(client.clone(), p);
            }
            if !ours {
                continue;
            }
            if client.is_done() {
                self.remove(slot);
                continue;
            }
            if client.has_unwritten() && !self.unread.iter().any(|c| Arc::ptr_eq(c, &client)) {
                self.unread.push(client.clone());
            }
            let _ = client.arm(&self.poller);
            if resume {
                // Requests already read while paused.
                self.take_requests(slot);
            }
        }
    }

    /// Disconnect the clients whose unwritten answers made no progress for the server timeout
    /// (checked every quarter of it); returns when to check next, if any client is watched.
    fn check_unread(&mut self) -> Option<Duration> {
        if self.unread.is_empty() {
            return None;
        }
        let timeout_ns = self.shared.config.server_timeout.as_nanos() as u64;
        let at = now();
        if at >= self.unread_check_ns {
            self.unread_check_ns = at + timeout_ns / 4;
            let (recorder, returns) = (&self.recorder, &mut self.returns);
            self.unread.retain(|c| {
                if !c.has_unwritten() {
                    return false;
                }
                if c.stuck_since(at.saturating_sub(timeout_ns)) {
                    c.abandon();
                    recorder.lock().unwrap().error(ErrorClass::ClientWrite);
                    // Seen again to be removed once nothing is under way.
                    returns.push(c.clone());
                    return false;
                }
                true
            });
            self.serve_returns();
        }
        (!self.unread.is_empty()).then(|| Duration::from_nanos(self.unread_check_ns.saturating_sub(at)))
    }

    /// The client's input ended (or failed, `failed`): close now, or once its requests are done.
    fn end(&mut self, slot: usize, failed: bool) {
        let Some(conn) = &self.conns[slot] else { return };
        if conn.client.end_of_input(failed) {
            self.remove(slot);
        } else {
            let _ = conn.client.arm(&self.poller);
        }
    }

    fn remove(&mut self, slot: usize) {
        if let Some(conn) = self.conns[slot].take() {
            conn.client.disarm(&self.poller);
            self.free.push(slot);
        }
    }
}
