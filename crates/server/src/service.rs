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
//!   [`Forwarding`] mode: backend connections are non-blocking and registered in the loop's own
//!   poller under the client slot's `reactor::backend_token`, so a loop thread blocks only in
//!   `epoll_wait` and a request never changes threads.
//!
//! The workload path is untouched by the seam: with [`Service::Workload`] a front-end calls
//! `serve_buffered` exactly as before (one predictable branch per batch of requests in the
//! blocking front-ends, none in the event loops, whose mode is chosen when they are built).

use crate::conn::{InBuf, OutBuf};
use crate::frontend::reactor::{Conn, Ctx, Mode, Next};
use crate::http_service::{Flow, KeepAlive};
use archlab_netio::{Interest, Trigger};
use archlab_wire::http::Limits;
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
}
