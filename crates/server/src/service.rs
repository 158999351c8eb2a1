//! The seam between a front-end and what answers its requests: a [`Service`].
//!
//! Every front-end serves the same HTTP/1.1 connections; what answers a request is either the
//! lab's workloads ([`Service::Workload`], `http_service::serve_buffered`: run the workload on
//! the calling thread, append the response) or a [`Forward`] service that sends the request to
//! another server and relays its answer (the reverse proxy of `archlab-proxy`). A forwarding
//! service waits for someone else, so how it may wait depends on the front-end, and the
//! registry says which way each architecture takes (`registry::Architecture::proxy`):
//!
//! * threads that may block (thread-per-connection, the blocking pools, the handlers of a
//!   staged route) run a [`BlockingForward`]: it gets the client connection ([`ClientConn`])
//!   and may block in `connect`, `read` and `write` on backends and on the client while it
//!   streams bodies; requests queue where they queue for the workloads, and behind backends;
//! * event loops (single-thread, netty's loops) run a [`LoopForward`] through the loop's
//!   `frontend::reactor::Forwarding` mode: backend connections are non-blocking and registered
//!   in the loop's own poller under the client slot's [`backend_token`], so a loop thread
//!   blocks only in `epoll_wait` and a request never changes threads.
//!
//! The workload path is untouched by the seam: with [`Service::Workload`] a front-end calls
//! `serve_buffered` exactly as before (one predictable branch per batch of requests in the
//! blocking front-ends, none in the event loops, whose mode is chosen when they are built).
//!
//! The types both sides of the seam speak live here, below the server's options (which hold a
//! [`Service`]) and below every front-end: what a request leaves the connection to do
//! ([`Flow`], [`KeepAlive`]), a thread's [`Scratch`] (built from the options in
//! `http_service`), and an event loop's connection ([`Conn`]), context ([`Ctx`]) and verdict
//! ([`Next`]), which `frontend::reactor` drives. Keeping them here keeps the crate's imports one
//! way: options -> service, front-ends -> options and service.

use crate::admission::Admitted;
use crate::conn::{InBuf, OutBuf};
use crate::pool_control::Gate;
use crate::timeouts::Watch;
use archlab_netio::{Interest, Poller};
use archlab_wire::http::Limits;
use archlab_workload::Context;
use std::any::Any;
use std::fmt;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

/// What a front-end runs for the requests of its connections.
#[derive(Clone, Default)]
pub enum Service {
    /// The lab's workloads, answered on the thread that read the request.
    #[default]
    Workload,
    /// Requests forwarded to other servers and their answers relayed.
    Forward(Arc<dyn Forward>),
}

impl Service {
    pub fn is_forward(&self) -> bool {
        matches!(self, Service::Forward(_))
    }
}

impl fmt::Debug for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Service::Workload => f.write_str("Workload"),
            Service::Forward(_) => f.write_str("Forward"),
        }
    }
}

/// A service that forwards requests: it hands each thread of a front-end the handler that
/// fits how that thread may wait.
pub trait Forward: Send + Sync + 'static {
    /// The handler of a thread that may block.
    fn blocking(&self) -> Box<dyn BlockingForward>;
    /// The handler of an event loop, which must never block.
    fn event_loop(&self) -> Box<dyn LoopForward>;
}

/// A client connection as a thread that may block sees it: its socket (blocking, possibly
/// with a read timeout, or non-blocking: a handler waits with `poll` either way), the bytes
/// received and not yet answered, and the bytes not yet sent.
pub struct ClientConn<'a> {
    pub stream: &'a mut TcpStream,
    pub input: &'a mut InBuf,
    pub output: &'a mut OutBuf,
}

/// Forwarding on a thread that may block.
pub trait BlockingForward: Send {
    /// Answer the requests in `conn.input` as `serve_buffered` does (same [`Flow`], same
    /// refusals), reading more of a request's body from the client and flushing a response's
    /// body to it as they stream; the caller flushes what is left in `conn.output`.
    fn serve(&mut self, conn: ClientConn<'_>, limits: &Limits, policy: KeepAlive) -> Flow;
}

/// What a [`LoopForward`] keeps per client connection (its own type, behind `Any`).
pub type LoopState = Option<Box<dyn Any + Send>>;

/// Forwarding on an event loop: the calls of `reactor::Mode`, with the per-connection state
/// opaque to the loop.
pub trait LoopForward: Send {
    /// The client connection is readable or writable (edge-triggered, both directions).
    fn client_ready(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next;
    /// The backend connection registered for slot `idx` is ready.
    fn backend_ready(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next;
    /// Slots whose deadline passed go to `fired`; returns the next deadline.
    fn due(&mut self, now: Instant, fired: &mut Vec<usize>) -> Option<Instant>;
    /// A deadline of slot `idx` reported by `due` passed.
    fn timer(&mut self, conn: &mut Conn<LoopState>, idx: usize, ctx: Ctx<'_>) -> Next;
    /// Whether an exchange of `conn` is in progress (its request head taken, its response not
    /// all relayed): the loop's client timeouts pause, the forwarder's deadlines run.
    fn answering(&self, conn: &Conn<LoopState>) -> bool;
}

/// What the connection should do after the buffered requests were answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading: the input holds nothing or a partial request.
    KeepOpen,
    /// Flush the output, then close: the request said so (Connection: close, HTTP/1.0) or
    /// the server refused keep-alive. Nothing unread is expected from the client.
    Close,
    /// Flush the error response, then close lingering: the client may still be sending the
    /// rest of a refused request (see `conn::LINGER`).
    Refused,
    /// Flush the output, and once it has all gone out, call again without reading: a complete
    /// request waits behind output over `max_output_bytes` (the connection reads no further
    /// requests meanwhile).
    Drain,
}

/// Whether the server lets a connection live on after the next response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepAlive {
    /// As the client asks (HTTP/1.1 default on).
    AsRequested,
    /// Answer the next request with `Connection: close` and close: a blocking pool does this
    /// when connections wait for a worker (see `frontend::pool`).
    Refuse,
}

/// Reusable scratch space for response bodies and the workloads' per-thread [`Context`]
/// (`/call`'s downstream connection, `/db`'s shared pool): one per thread (or per connection).
/// With a forwarding [`Service`] it also holds the thread's forwarding handler.
#[derive(Default)]
pub struct Scratch {
    pub(crate) body: Vec<u8>,
    pub(crate) work: Context,
    /// The request class (path and query, `/echo?size=10`) of the last request answered.
    pub(crate) class: String,
    /// `max_output_bytes`: the unsent output beyond which requests wait, and the largest
    /// response body produced at once.
    pub(crate) max_output: usize,
    /// The handler of a forwarding service, for a thread that may block.
    pub(crate) forward: Option<Box<dyn BlockingForward>>,
    /// The adaptive pool's gate, for a thread of a pool under `pool_control`: a request's
    /// workload runs holding one of its permits.
    pub(crate) gate: Option<Arc<Gate>>,
}

/// Poller tokens of an event loop: 0 and 1 are its listener and waker, connections follow.
pub(crate) const FIRST_CONN: u64 = 2;
/// Set in the token of a connection a mode opened for the client in slot `idx` (a proxy's
/// backend connection): [`backend_token`].
pub(crate) const BACKEND_BIT: u64 = 1 << 63;

/// The poller token under which a mode registers the backend connection of the client
/// connection in slot `idx`; its events reach `reactor::Mode::backend_ready` with that slot.
pub fn backend_token(idx: usize) -> u64 {
    BACKEND_BIT | (idx as u64 + FIRST_CONN)
}

/// A connection of an event loop (`frontend::reactor`), with the per-connection state `S` of
/// the loop's mode.
pub struct Conn<S> {
    pub stream: TcpStream,
    pub input: InBuf,
    pub output: OutBuf,
    pub closing: bool,
    /// Closing after refusing a request: linger instead of closing at once.
    pub refused: bool,
    /// Complete requests wait behind output over `max_output_bytes` (`Flow::Drain`): answer
    /// them once the output has gone out, and read nothing more meanwhile.
    pub waiting: bool,
    /// The poller reported the peer's close (EPOLLRDHUP/EPOLLHUP/EPOLLERR): read on to EOF or
    /// an error, since no further edge will come.
    pub(crate) peer_closed: bool,
    /// Set once the write side is shut down: input is discarded until then.
    pub(crate) lingering_until: Option<Instant>,
    pub(crate) discarded: usize,
    /// Which timeout runs for the connection, since when.
    pub(crate) watch: Watch,
    /// The connection's place under `max_connections`, given back when it is dropped.
    pub(crate) _place: Admitted,
    /// What the mode keeps per connection.
    pub state: S,
}

/// What the loop does with a connection after its mode served it.
pub enum Next {
    Keep,
    Close,
    Linger,
    /// Netty's flush task: the write-spin limit was reached, continue after the other events.
    FlushLater,
    /// Arm the one-shot registration for this interest.
    Rearm(Interest),
    /// The mode took the connection out of the loop; it comes back through the loop's inbox.
    Away,
}

/// What one loop's connections are served with: the limits and a thread's scratch space, and
/// the loop's poller, in which a mode may register connections of its own ([`backend_token`]).
pub struct Ctx<'a> {
    pub limits: &'a Limits,
    pub scratch: &'a mut Scratch,
    pub poller: &'a Poller,
}
