//! Jitter: each packet's delay is drawn from delay +- jitter. Without `reorder` a packet never
//! overtakes the one ahead of it, even when jitter is 40 times the gap between packets; with
//! it, packets overtake one another and the achieved delays spread over the whole range.

mod common;

use archlab_link::{Direction, Link};
use archlab_metrics::clock::now_ns;
use common::{
    assert_accounted, drain_sequence_numbers, finish, raw, serial, start, udp_receiver, udp_socket, wait_counts,
};
use std::time::Duration;

const DATAGRAMS: u32 = 2_000;
const GAP_NS: u64 = 100_000;

/// Send numbered datagrams up the link, one every 100 us; their numbers in arrival order.
fn send_paced(link: &Link) -> Vec<u32> {
    let receiver = udp_receiver(link, 16 << 20);
    let sender = udp_socket(&link.client().netns, link.client().addr);
    sender.connect(receiver.local_addr().unwrap()).unwrap();
    let t0 = now_ns();
    for seq in 0..DATAGRAMS {
        // Pacing, not synchronisation: the send times only have to be spread.
        while now_ns() < t0 + seq as u64 * GAP_NS {
            std::hint::spin_loop();
        }
        sender.send(&seq.to_le_bytes()).unwrap();
    }
    wait_counts(link, Direction::Up, |c| c.packets_in >= DATAGRAMS as u64 && c.held == 0);
    drain_sequence_numbers(&receiver)
}

fn jittery(tag: &str, reorder: bool) -> Link {
    let mut r = raw(tag);
    r.up.delay = Some(Duration::from_millis(5));
    r.up.jitter = Some(Duration::from_millis(4));
    r.reorder = reorder;
    start(r)
}

#[test]
fn jitter_keeps_order_unless_reordering_is_allowed() {
    let _timing = serial();
    let kept = jittery("jit-order", false);
    let got = send_paced(&kept);
    let report = finish(kept);
    assert_accounted(&report);
    assert_eq!(got, (0..DATAGRAMS).collect::<Vec<_>>(), "every datagram, in the order sent");

    let free = jittery("jit-free", true);
    let got = send_paced(&free);
    let report = finish(free);
    assert_accounted(&report);
    assert_eq!(got.len(), DATAGRAMS as usize, "none lost");
    let overtaken = got.windows(2).filter(|w| w[1] < w[0]).count();
    // With +-4 ms of jitter and 100 us between packets, about half of all neighbours swap.
    assert!(overtaken > DATAGRAMS as usize / 4, "only {overtaken} inversions");
    // Delays uniform on [1, 9] ms: the 10th and 90th percentiles are 1.8 and 8.2 ms. The
    // standard error of a sample quantile is sqrt(q (1 - q) / n) / density = sqrt(0.09 / 2000)
    // x 8 ms = 54 us for n = 2000; five of them is 0.27 ms, and the forwarder's lateness adds
    // a few microseconds (its median `late_us`).
    let d = report.up.delay_us;
    let (p10, p90) = (quantile(&report, 0.1), quantile(&report, 0.9));
    assert!((p10 - 1_800.0).abs() < 300.0, "p10 {p10} us: {d:?}");
    assert!((p90 - 8_200.0).abs() < 300.0, "p90 {p90} us: {d:?}");
}

/// A quantile of the up direction's achieved delay, decoded from the report's histogram.
fn quantile(report: &archlab_link::LinkReport, q: f64) -> f64 {
    use base64::Engine as _;
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD.decode(&report.up.delay_hdr).unwrap();
    let h: hdrhistogram::Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
    h.value_at_quantile(q) as f64 / 1e3
}
