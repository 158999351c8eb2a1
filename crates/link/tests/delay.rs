//! The delay a link adds to a round trip, measured from outside the link: a UDP ping-pong
//! between a socket in the client namespace and an echo socket in the server namespace, both
//! on the kernel's real UDP/IP stacks, with the link in between.
//!
//! What is compared: the link's added round-trip time, the median RTT at a configured delay
//! minus the median RTT over the same kind of link with nothing configured (which holds the
//! forwarder's own cost and the endpoints' wake-ups, measured by `bench/link_overhead.py`),
//! against the configured up + down delay, for totals from 1 to 50 ms. The tolerance
//! is 5 % of the configured delay.
//!
//! Sampling error of the medians: on this 2-core VM, with other builds running, the RTT
//! samples of one level spread over an interquartile range of about 10-60 us, so the standard
//! error of a median of n samples (about 1.25 IQR/1.35/sqrt(n) for a roughly normal centre)
//! is under 5 us for the 200-1000 samples of the short delays and under 30 us for the 30
//! samples at 50 ms, where 5 % is 2.5 ms. The remaining systematic part is the timer: the
//! forwarder wakes early by a learnt margin and spins to the departure, so its lateness is a
//! few microseconds in the median (the report's `late_us`).

mod common;

use archlab_link::Link;
use archlab_metrics::clock::now_ns;
use common::{assert_accounted, finish, median, raw, serial, start, udp_socket};
use std::time::Duration;

/// Round-trip times of `samples` ping-pongs across the link, in microseconds.
fn ping_pong(link: &Link, samples: usize) -> Vec<f64> {
    let server = udp_socket(&link.server().netns, link.server().addr);
    let server_addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            if &buf[..n] == b"quit" {
                break;
            }
            server.send_to(&buf[..n], from).unwrap();
        }
    });
    let client = udp_socket(&link.client().netns, link.client().addr);
    client.connect(server_addr).unwrap();
    let mut rtts = Vec::with_capacity(samples);
    let mut buf = [0u8; 64];
    // The first exchanges warm caches and the forwarders' wake-up margins.
    for i in 0..(samples + 20) as u64 {
        let t0 = now_ns();
        client.send(&i.to_le_bytes()).unwrap();
        let n = client.recv(&mut buf).expect("the echo answers within 5 s");
        let rtt = now_ns() - t0;
        assert_eq!(&buf[..n], &i.to_le_bytes(), "each answer echoes its own request");
        if i >= 20 {
            rtts.push(rtt as f64 / 1e3);
        }
    }
    client.send(b"quit").unwrap();
    echo.join().unwrap();
    rtts
}

#[test]
fn added_round_trip_time_is_the_configured_delay_from_1_to_50_ms() {
    let _timing = serial();
    let base_link = start(raw("rtt0"));
    let base_us = median(&mut ping_pong(&base_link, 1000));
    finish(base_link);

    let mut failures = Vec::new();
    // (up, down) one-way delays, totals 1, 5, 20 and 50 ms; asymmetric ones included.
    for (i, (up_us, down_us)) in
        [(1_000u64, 0u64), (2_500, 2_500), (15_000, 5_000), (25_000, 25_000)].into_iter().enumerate()
    {
        let mut r = raw(&format!("rtt{}", i + 1));
        r.up.delay = Some(Duration::from_micros(up_us));
        r.down.delay = Some(Duration::from_micros(down_us));
        let link = start(r);
        let configured_us = (up_us + down_us) as f64;
        // About 1.5 s of samples per level, at least 30.
        let samples = ((1_500_000.0 / configured_us) as usize).clamp(30, 1000);
        let rtt_us = median(&mut ping_pong(&link, samples));
        let report = finish(link);
        assert_accounted(&report);
        let added_us = rtt_us - base_us;
        let error = (added_us - configured_us) / configured_us;
        eprintln!(
            "configured {configured_us} us: median RTT {rtt_us:.1} us, base {base_us:.1} us, added {added_us:.1} us \
             ({:+.2} %); achieved one-way p50 up {:?} down {:?} us, late p50 {:?}/{:?} us",
            error * 100.0,
            report.up.delay_us.p50,
            report.down.delay_us.p50,
            report.up.late_us.p50,
            report.down.late_us.p50
        );
        if error.abs() > 0.05 {
            failures.push(format!("{configured_us} us configured, {added_us:.1} us added ({:+.2} %)", error * 100.0));
        }
        // The link's own account of the delay it applied agrees with the configuration.
        for (configured, achieved) in [(up_us, report.up.delay_us.p50), (down_us, report.down.delay_us.p50)] {
            let achieved = achieved.expect("packets crossed both ways");
            if configured > 0 && (achieved - configured as f64).abs() > 0.05 * configured as f64 {
                failures.push(format!("one-way {configured} us configured, {achieved} us achieved (p50)"));
            }
        }
    }
    assert!(failures.is_empty(), "outside 5 %: {failures:?}");
}
