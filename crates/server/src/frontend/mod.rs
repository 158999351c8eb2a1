//! Front-ends: who waits on sockets. Blocking front-ends share [`blocking_conn`] (one thread
//! blocked in `read` on one connection at a time); readiness front-ends share
//! [`reactor::EventLoop`], inline (single-thread, netty's loops) or as the poller of the
//! dispatching front-ends of [`staged`]. [`uring`] is the completion-based exception: the
//! kernel performs the I/O and the front-end reacts to completions.

pub mod blocking_conn;
pub mod hybrid;
pub mod multi_reactor;
pub mod ncopy;
pub mod pool;
pub mod reactor;
pub mod staged;
pub mod thread_per_connection;
pub mod uring;
pub mod work_stealing;
