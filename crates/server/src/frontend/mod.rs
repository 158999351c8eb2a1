//! Front-ends: who waits on sockets. Blocking front-ends share [`blocking_conn`] (one thread
//! blocked in `read` on one connection at a time); readiness front-ends share
//! [`reactor::EventLoop`].

pub mod blocking_conn;
pub mod multi_reactor;
pub mod pool;
pub mod reactor;
pub mod thread_per_connection;
