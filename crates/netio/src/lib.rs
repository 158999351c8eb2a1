//! Thin Linux I/O primitives shared by every server front-end and by the load generator.
//!
//! archlab compares concurrency architectures, so the pieces underneath them must be the same
//! for all and must not hide a scheduler of their own: a bare epoll wrapper that offers both
//! edge- and level-triggered registration ([`poller`]), io_uring set-up and provided-buffer
//! rings ([`uring`]), socket set-up with the options the seeds vary ([`socket`]), and CPU
//! lists plus thread pinning ([`cpus`]). Nothing here allocates on the hot path or spawns
//! threads.

pub mod cpus;
pub mod poller;
pub mod socket;
pub mod uring;

pub use cpus::{CpuList, CpuListError};
pub use poller::{Event, Interest, Poller, Trigger, Waker};
