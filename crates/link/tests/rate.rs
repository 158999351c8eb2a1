//! A rate-limited link carries a bulk TCP transfer at the configured rate: real kernel TCP on
//! both sides (cwnd growth, drops at the link's queue, recovery), the link in between.
//!
//! The rate limit applies to IP packets, headers included, so the receiver's payload rate is
//! converted to the rate on the link with the exact ratio of IP bytes the link carried in the
//! transfer's direction to payload bytes (from the link's own byte counter; an exact count,
//! not a time). The window starts 0.3 s after the first byte (past slow start) and ends at the
//! last byte.
//!
//! The link's queue (16 MiB) is larger than anything TCP can have in flight (the receive
//! window stops at `tcp_rmem`'s maximum, 6 MiB), so the queue never overflows and never runs
//! empty once slow start has filled it: the link is busy throughout the window, whatever the
//! scheduling of the two endpoints. With a small tail-drop queue the transfer would also show
//! TCP's own losses, including the occasional 200 ms retransmission timeout after slow start
//! overshoots, which is TCP's behaviour on such a link, not the limiter's accuracy; the queue's
//! tail drop is checked exactly in the shaper's unit tests.
//!
//! Sampling error: the window's ends are read timestamps, accurate to one packet time (1.2 ms
//! at 10 Mbit/s) over a window of about 1.7 s, i.e. under 0.1 %; the bucket itself is exact
//! (see the shaper's unit tests). The tolerance is 5 %.

mod common;

use archlab_link::params::RateSetting;
use archlab_link::{Direction, Link};
use common::{assert_accounted, finish, raw, serial, start, tcp_connect, tcp_listener};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Send `total` bytes across the link in `direction`; the receiver's (seconds since its first
/// byte, bytes so far) after every read.
fn bulk(link: &Link, direction: Direction, total: usize) -> Vec<(f64, usize)> {
    let listener = tcp_listener(&link.server().netns, link.server().addr);
    let to = listener.local_addr().unwrap();
    let client = tcp_connect(&link.client().netns, to);
    let (server, _) = listener.accept().unwrap();
    server.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    server.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut sender, mut receiver) = match direction {
        Direction::Down => (server, client),
        Direction::Up => (client, server),
    };
    let writer = std::thread::spawn(move || {
        let chunk = vec![0x5au8; 64 * 1024];
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len());
            sender.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
    });
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    let mut timeline = Vec::new();
    let mut first: Option<Instant> = None;
    while got < total {
        let n = receiver.read(&mut buf).expect("data keeps coming");
        assert!(n > 0, "the sender closed after {got} of {total} bytes");
        let t0 = *first.get_or_insert_with(Instant::now);
        got += n;
        timeline.push((t0.elapsed().as_secs_f64(), got));
    }
    writer.join().unwrap();
    timeline
}

fn check_rate(tag: &str, direction: Direction, rate_bps: u64, delay: Duration) {
    let mut r = raw(tag);
    let own = match direction {
        Direction::Up => &mut r.up,
        Direction::Down => &mut r.down,
    };
    own.rate = Some(RateSetting::BitsPerSecond(rate_bps));
    own.queue_bytes = Some(16 << 20);
    r.both.delay = Some(delay);
    let link = start(r);
    // About two seconds at the configured rate.
    let total = (rate_bps / 8 * 2) as usize;
    let timeline = bulk(&link, direction, total);
    let report = finish(link);
    assert_accounted(&report);
    let carried = match direction {
        Direction::Up => &report.up,
        Direction::Down => &report.down,
    };
    let wire_per_payload = carried.counts.bytes_out as f64 / total as f64;
    let start = timeline.iter().find(|(t, _)| *t >= 0.3).expect("the transfer lasts longer than 0.3 s");
    let end = timeline.last().unwrap();
    let measured_bps = (end.1 - start.1) as f64 * wire_per_payload * 8.0 / (end.0 - start.0);
    let error = measured_bps / rate_bps as f64 - 1.0;
    eprintln!(
        "{tag}: {} at {rate_bps} bit/s, delay {delay:?}: measured {measured_bps:.0} bit/s ({:+.2} %), \
         wire/payload {wire_per_payload:.4}, window {:.2} s, late {:?}",
        direction.name(),
        error * 100.0,
        end.0 - start.0,
        carried.late_us,
    );
    assert_eq!(carried.counts.queue_drops, 0, "{tag}: the queue was sized never to overflow");
    assert!(error.abs() <= 0.05, "{tag}: {measured_bps:.0} bit/s measured for {rate_bps} configured");
}

#[test]
fn a_bulk_transfer_runs_at_the_configured_rate() {
    let _timing = serial();
    check_rate("rate-down", Direction::Down, 10_000_000, Duration::ZERO);
    check_rate("rate-rtt", Direction::Down, 50_000_000, Duration::from_millis(2));
    check_rate("rate-up", Direction::Up, 20_000_000, Duration::ZERO);
}
