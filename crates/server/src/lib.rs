//! Server architectures of the lab, composed from shared pieces.
//!
//! # The contract
//! An architecture is built from [`ServerOptions`] by the [`registry`] (the one place that
//! names architectures) and then [`Server::serve`]s an already-bound listener until the
//! process ends. Every architecture speaks the same HTTP/1.1 through the same
//! [`http_service`] (parse with `archlab-wire`, run the workload of `archlab-workload`, write the
//! response), so a comparison measures only who waits on sockets and who hands what to whom:
//!
//! * [`frontend::thread_per_connection`]: an acceptor thread spawns one thread per connection.
//! * [`frontend::pool`]: an acceptor hands connections through a hand-off (queue, ring or
//!   actor of `archlab-handoff`) to K blocking handlers.
//! * [`frontend::reactor`]: one epoll event loop; `single-thread` runs one that also accepts.
//! * [`frontend::multi_reactor`]: an acceptor hands connections round-robin to N event loops
//!   (Netty's boss + worker group), each connection pinned to its loop for life.
//! * [`frontend::hybrid`]: HybridNetty, the multi-reactor with loops that pick a write path
//!   per request class.
//! * [`frontend::ncopy`]: N single-thread event loops with SO_REUSEPORT listeners, each pinned.
//! * [`frontend::uring`]: `io-uring`, a kernel proactor: N threads, one io_uring each, the kernel
//!   accepts, receives and sends, completions are handled inline.
//! * [`frontend::work_stealing`]: `tokio`, one task per connection on a work-stealing runtime.
//! * [`frontend::staged`]: an event loop as poller plus stages fed through hand-offs; one route
//!   per architecture (async-fix, async-4, NIO-X, NIO2(-X), SEDA-X).
//!
//! Pieces shared by all front-ends: [`acceptor`] (the accept loops, written once), [`conn`]
//! (connection buffers, write policies), [`http_service`] (requests in, responses out). Hand-offs
//! are counted by the server itself (`archlab_metrics::counters`).

pub mod acceptor;
pub mod admission;
pub mod conn;
pub mod frontend;
pub mod http_service;
pub mod options;
pub mod pool_control;
pub mod registry;
pub mod service;
pub mod timeouts;

pub use archlab_handoff::{Dispatch, WaitStrategy};
/// Create the `/file` workload's data file now (servers call it at start; see `archlab_workload`).
pub use archlab_workload::prepare_file;
pub use options::{OptionName, ServerOptions};
pub use registry::{Architecture, BuildError, ProxySupport, REGISTRY};
pub use service::Service;

use std::io;
use std::net::TcpListener;

/// A built architecture, ready to serve.
pub trait Server: Send {
    /// Serve connections accepted from `listener` on the calling thread (plus the threads the
    /// architecture starts) until the process ends. Returns only on a fatal error.
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()>;
}
