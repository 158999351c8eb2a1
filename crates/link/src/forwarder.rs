//! One direction of a link: a dedicated thread reads packets off the sending side's TUN device,
//! asks the [`Shaper`] what becomes of each, holds the survivors in a heap ordered by
//! departure time, and writes each into the receiving side's device when its time comes.
//!
//! Where packets wait: in the kernel's queue of the sending device until the thread reads them
//! (it reads everything waiting each time it wakes), then in the heap. Where the thread
//! blocks: in `ppoll` on the sending device and the stop eventfd, with a timeout at the next
//! departure less the wake-up margin of [`crate::pacing`], after which it spins (still reading
//! arrivals) until the departure. A transparent direction (nothing configured) writes each
//! packet as soon as it is read, without touching the heap.
//!
//! Timestamps are taken when `read` returns; the time a packet spent in the kernel queue
//! before the thread woke is not seen, which is part of the forwarder's own added latency that
//! `bench/link_overhead.py` measures.

use crate::control::Control;
use crate::pacing::{self, WakeMargin};
use crate::params::Direction;
use crate::shaper::{DropCause, Shaper, Verdict};
use crate::stats::DirectionCounters;
use crate::tun::Tun;
use archlab_metrics::clock::now_ns;
use archlab_metrics::hdr::record_ns;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

/// Most packets held in flight per direction; more are dropped (`hold_drops`). 65,536 packets
/// of 1500 bytes are 98 MB: 1 Gbit/s for 0.8 s, more than any delay the lab studies.
const MAX_HELD: usize = 1 << 16;
/// Packets read per turn before due departures are served, so that a flood of arrivals cannot
/// make departures late.
const READ_BATCH: usize = 64;
/// Spare packet buffers kept for reuse.
const POOL_MAX: usize = 4096;

/// A packet waiting for its departure.
struct Held {
    depart_ns: u64,
    /// Arrival order: ties in departure leave in arrival order.
    seq: u64,
    arrival_ns: u64,
    packet: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.depart_ns, self.seq) == (other.depart_ns, other.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest departure first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.depart_ns, other.seq).cmp(&(self.depart_ns, self.seq))
    }
}

pub(crate) struct Forwarder {
    pub(crate) direction: Direction,
    pub(crate) input: Arc<Tun>,
    pub(crate) output: Arc<Tun>,
    pub(crate) shaper: Shaper,
    pub(crate) mtu: usize,
    pub(crate) counters: Arc<Mutex<DirectionCounters>>,
    pub(crate) control: Arc<Control>,
}

/// The state of a running direction.
struct Running {
    f: Forwarder,
    transparent: bool,
    held: BinaryHeap<Held>,
    seq: u64,
    pool: Vec<Vec<u8>>,
}

impl Forwarder {
    /// Forward until a stop is requested; an I/O error on the devices ends the thread and is
    /// reported through the control as the link's failure.
    pub(crate) fn run(self) {
        let direction = self.direction;
        let control = self.control.clone();
        let transparent = self.shaper.is_transparent();
        let mut r = Running { f: self, transparent, held: BinaryHeap::new(), seq: 0, pool: Vec::new() };
        if let Err(e) = r.run() {
            control.fail(format!("{} direction: {e}", direction.name()));
        }
    }
}

impl Running {
    fn run(&mut self) -> io::Result<()> {
        pacing::set_fine_timer_slack();
        let mut margin = WakeMargin::new();
        let mut fds = [
            libc::pollfd { fd: self.f.input.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.f.control.wake_fd(), events: libc::POLLIN, revents: 0 },
        ];
        while !self.f.control.is_stopping() {
            self.read_waiting()?;
            self.send_due(now_ns());
            let now = now_ns();
            match self.held.peek().map(|h| h.depart_ns) {
                None => {
                    pacing::sleep_until(&mut fds, None, now)?;
                }
                Some(depart) if depart <= now => {}
                Some(depart) => {
                    let wake = margin.wake_time(depart);
                    if wake > now {
                        if pacing::sleep_until(&mut fds, Some(wake), now)? {
                            margin.observe(wake, now_ns());
                            self.f.counters.lock().unwrap_or_else(|p| p.into_inner()).wake_margin_ns = margin.ns();
                        }
                    } else {
                        // The last microseconds: spin, still taking arrivals (one of which may
                        // be due earlier, when reordering is allowed).
                        while self.held.peek().is_some_and(|h| now_ns() < h.depart_ns) && !self.f.control.is_stopping()
                        {
                            self.read_waiting()?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Read every packet waiting (up to a batch) and decide for each.
    fn read_waiting(&mut self) -> io::Result<()> {
        for _ in 0..READ_BATCH {
            let mut buf = self.pool.pop().unwrap_or_default();
            // The device never hands over a packet larger than its MTU (it has no
            // segmentation offload), so an MTU-sized buffer always holds a whole packet.
            buf.resize(self.f.mtu, 0);
            match self.f.input.recv(&mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    self.admit(now_ns(), buf);
                }
                Err(e) => {
                    self.recycle(buf);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return Ok(()),
                        io::ErrorKind::Interrupted => {}
                        _ => return Err(io::Error::new(e.kind(), format!("cannot read from the TUN device: {e}"))),
                    }
                }
            }
        }
        Ok(())
    }

    fn admit(&mut self, arrival_ns: u64, packet: Vec<u8>) {
        let len = packet.len() as u64;
        let verdict =
            if self.held.len() >= MAX_HELD { None } else { Some(self.f.shaper.admit(arrival_ns, packet.len())) };
        {
            let c = &mut self.f.counters.lock().unwrap_or_else(|p| p.into_inner()).counts;
            c.packets_in += 1;
            c.bytes_in += len;
            match verdict {
                None => c.hold_drops += 1,
                Some(Verdict::Drop(DropCause::Loss)) => c.loss_drops += 1,
                Some(Verdict::Drop(DropCause::Queue)) => c.queue_drops += 1,
                Some(Verdict::Depart { .. }) => {}
            }
        }
        match verdict {
            Some(Verdict::Depart { at_ns }) if self.transparent => self.transmit(arrival_ns, at_ns, packet),
            Some(Verdict::Depart { at_ns }) => {
                self.seq += 1;
                self.held.push(Held { depart_ns: at_ns, seq: self.seq, arrival_ns, packet });
                self.f.counters.lock().unwrap_or_else(|p| p.into_inner()).counts.held = self.held.len() as u64;
            }
            _ => self.recycle(packet),
        }
    }

    /// Write every held packet whose departure has come.
    fn send_due(&mut self, now_ns: u64) {
        let mut sent = false;
        while self.held.peek().is_some_and(|h| h.depart_ns <= now_ns) {
            let h = self.held.pop().expect("peeked");
            self.transmit(h.arrival_ns, h.depart_ns, h.packet);
            sent = true;
        }
        if sent {
            self.f.counters.lock().unwrap_or_else(|p| p.into_inner()).counts.held = self.held.len() as u64;
        }
    }

    fn transmit(&mut self, arrival_ns: u64, depart_ns: u64, packet: Vec<u8>) {
        let t = now_ns();
        let result = self.f.output.send(&packet);
        {
            let mut c = self.f.counters.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(_) => {
                    c.counts.packets_out += 1;
                    c.counts.bytes_out += packet.len() as u64;
                    record_ns(&mut c.delay, t - arrival_ns);
                    record_ns(&mut c.late, t.saturating_sub(depart_ns));
                }
                // The receiving stack refused it (e.g. out of memory): lost, as on a wire.
                Err(_) => c.counts.write_errors += 1,
            }
        }
        self.recycle(packet);
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL_MAX {
            self.pool.push(buf);
        }
    }
}
