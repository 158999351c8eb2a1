//! A packet-level link emulator for the lab: two network namespaces, a client side and a
//! server side, joined by TUN devices, with a forwarder in user space that applies per
//! direction a delay, a jitter (keeping order unless asked), a rate limit (token bucket with a
//! byte-limited queue) and random loss. Both ends keep their own kernel TCP stacks, so ACK
//! clocking, windows, buffer auto-tuning and Nagle behave as over a real link with a real MTU;
//! this kernel has no `netem`, and a TCP-level relay would hide all of that.
//!
//! Mechanism: the kernel routes what a program on one side sends to the peer's address into
//! that side's TUN device; one thread per direction ([`forwarder`]) reads it, asks the pure
//! [`shaper`] when it may leave (or whether it is dropped), holds it in a heap ordered by
//! departure, and writes it into the other side's device on time ([`pacing`]: sleep, then spin
//! the last microseconds). Packets queue in the sending device's kernel queue until read, then
//! in the heap; the threads block in `ppoll`. The expected bottleneck is the forwarder's CPU:
//! each packet costs one `read` and one `write` system call, and the write runs the receiving
//! side's network stack on the forwarder's thread.
//!
//! Lifetime ([`topology`]): everything created is named with the prefix `alk-` and owned
//! through a lock file; [`Link::stop`] or dropping the link removes it, [`cleanup`] removes
//! what a killed forwarder left.

pub mod control;
pub mod document;
pub mod error;
mod forwarder;
mod link;
pub mod netns;
mod pacing;
pub mod params;
pub mod privileges;
pub mod shaper;
mod stats;
pub mod topology;
pub mod tun;

pub use control::{Control, Event};
pub use error::LinkError;
pub use link::{Link, ReadyInfo, ThreadOptions};
pub use pacing::Scheduling;
pub use params::{Direction, DirectionParams, InvalidParam, LinkConfig, LinkName, RateLimit, RawDirection, RawLink};
pub use stats::{DirectionReport, LinkReport, PacketCounts};
pub use topology::{cleanup, cleanup_stale, namespace_names, Side};
