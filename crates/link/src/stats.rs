//! What a link applied, per direction: packets and bytes in and out, each kind of drop, the
//! packets still held, and the achieved delay (from the read off one TUN device to the write
//! into the other) as an HDR histogram, with the lateness against the planned departure.
//!
//! Every packet read is accounted for exactly once: `packets_in` is the sum of `packets_out`,
//! `loss_drops`, `queue_drops`, `hold_drops`, `write_errors` and `held`. The forwarding thread updates its
//! direction's counters under a mutex that only a report contends for.

use archlab_metrics::hdr::{self, LatencyHistogram, LatencySummaryUs};
use archlab_metrics::rusage::ResourceUsage;
use serde::Serialize;

/// The packet counts of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PacketCounts {
    /// Packets read from the sending side's device.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Packets written into the receiving side's device.
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Dropped by the random loss draw.
    pub loss_drops: u64,
    /// Dropped because the rate limiter's queue was full.
    pub queue_drops: u64,
    /// Dropped because the forwarder already held its maximum of packets in flight.
    pub hold_drops: u64,
    /// Refused by the receiving side's device.
    pub write_errors: u64,
    /// In flight (read, not yet written or dropped).
    pub held: u64,
}

/// The counters of one direction, owned by its forwarding thread.
#[derive(Debug)]
pub(crate) struct DirectionCounters {
    pub(crate) counts: PacketCounts,
    /// Achieved delay of each packet written, ns.
    pub(crate) delay: LatencyHistogram,
    /// How long after its planned departure each packet was written, ns.
    pub(crate) late: LatencyHistogram,
    /// The early-wake margin of the forwarding thread, ns.
    pub(crate) wake_margin_ns: u64,
}

impl Default for DirectionCounters {
    fn default() -> Self {
        DirectionCounters {
            counts: PacketCounts::default(),
            delay: hdr::new_latency_histogram(),
            late: hdr::new_latency_histogram(),
            wake_margin_ns: 0,
        }
    }
}

impl DirectionCounters {
    pub(crate) fn report(&self, kernel_drops: Option<u64>) -> DirectionReport {
        DirectionReport {
            counts: self.counts,
            kernel_drops,
            delay_us: LatencySummaryUs::of(&self.delay),
            late_us: LatencySummaryUs::of(&self.late),
            wake_margin_us: self.wake_margin_ns as f64 / 1e3,
            delay_hdr: hdr::to_base64(&self.delay),
        }
    }
}

/// One direction's part of a [`LinkReport`].
#[derive(Clone, Debug, Serialize)]
pub struct DirectionReport {
    #[serde(flatten)]
    pub counts: PacketCounts,
    /// Dropped by the kernel before the forwarder read them (the sending side's device queue
    /// was full); `None` if the counter could not be read.
    pub kernel_drops: Option<u64>,
    /// Achieved delay from read to write, microseconds.
    pub delay_us: LatencySummaryUs,
    /// Write time minus planned departure, microseconds.
    pub late_us: LatencySummaryUs,
    /// How early the forwarding thread wakes before a departure to spin the rest.
    pub wake_margin_us: f64,
    /// The achieved delay histogram (ns), V2 deflate encoded, base64.
    pub delay_hdr: String,
}

/// What a link applied since it started: the `stats` line of `archlab-engine link`.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    pub name: String,
    pub elapsed_s: f64,
    pub up: DirectionReport,
    pub down: DirectionReport,
    /// CPU time and context switches of the forwarder's process.
    pub rusage: ResourceUsage,
}
