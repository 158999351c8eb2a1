//! Random loss: the number of packets dropped matches the configured probability within
//! binomial bounds, every packet is accounted for exactly (the receiver gets precisely what the
//! link says it delivered), and the draws are the seed's: the same seed loses the same
//! packets, another seed others. A TCP transfer across a lossy link still delivers every byte
//! in order (real TCP retransmits what the link drops).

mod common;

use archlab_link::{Direction, Link};
use common::{
    assert_accounted, drain_sequence_numbers, finish, raw, start, tcp_connect, tcp_listener, udp_receiver, udp_socket,
    wait_counts,
};
use std::collections::BTreeSet;
use std::io::{Read, Write};

const DATAGRAMS: u32 = 20_000;
/// Datagrams sent before waiting for the forwarder to have read them all, so that the
/// sending device's kernel queue (10,000 packets) can never overflow.
const BATCH: u32 = 1_000;

/// Send `DATAGRAMS` numbered datagrams up the link; the set of numbers that arrived.
fn send_up(link: &Link) -> BTreeSet<u32> {
    // Room for every datagram (about 1 KiB of kernel memory each) until the test reads them.
    let receiver = udp_receiver(link, 64 << 20);
    let sender = udp_socket(&link.client().netns, link.client().addr);
    sender.connect(receiver.local_addr().unwrap()).unwrap();
    let mut payload = [0u8; 64];
    for seq in 0..DATAGRAMS {
        payload[..4].copy_from_slice(&seq.to_le_bytes());
        sender.send(&payload).unwrap();
        if (seq + 1) % BATCH == 0 {
            wait_counts(link, Direction::Up, |c| c.packets_in > seq as u64 && c.held == 0);
        }
    }
    // Once the link has delivered or dropped every datagram, all that arrived is in the
    // receiver's queue: the forwarder's write returns after the kernel has queued it.
    let counts = wait_counts(link, Direction::Up, |c| c.packets_in >= DATAGRAMS as u64 && c.held == 0);
    let got = drain_sequence_numbers(&receiver);
    assert_eq!(got.len() as u64, counts.packets_out, "the receiver got exactly what the link delivered");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "delivered in order");
    got.into_iter().collect()
}

fn lossy_run(tag: &str, loss: f64, seed: u64) -> (BTreeSet<u32>, u64) {
    let mut r = raw(tag);
    r.up.loss = Some(loss);
    r.seed = Some(seed);
    let link = start(r);
    let got = send_up(&link);
    let report = finish(link);
    assert_accounted(&report);
    assert_eq!(report.up.kernel_drops, Some(0), "the forwarder read every datagram the kernel queued");
    // Nothing but the test's datagrams crossed (IPv6 is off on the link), so the first
    // DATAGRAMS draws are theirs.
    assert_eq!(report.up.counts.packets_in, DATAGRAMS as u64);
    assert_eq!(report.up.counts.loss_drops + got.len() as u64, DATAGRAMS as u64);
    (got, report.up.counts.loss_drops)
}

#[test]
fn drops_follow_the_configured_probability_and_the_seed() {
    for (i, p) in [0.1, 0.01].into_iter().enumerate() {
        let (a, lost) = lossy_run(&format!("loss{i}a"), p, 7);
        // Binomial(n = 20,000, p): mean n p, standard deviation sqrt(n p (1 - p)), 42.4 at
        // p = 0.1 and 14.1 at p = 0.01. Five standard deviations either side: a correct link
        // fails with probability 6e-7.
        let n = DATAGRAMS as f64;
        let (mean, sd) = (n * p, (n * p * (1.0 - p)).sqrt());
        assert!(
            (lost as f64 - mean).abs() <= 5.0 * sd,
            "p = {p}: {lost} of {DATAGRAMS} lost, expected {mean} +- {:.0}",
            5.0 * sd
        );
        let (b, _) = lossy_run(&format!("loss{i}b"), p, 7);
        assert_eq!(a, b, "p = {p}: the same seed loses the same datagrams");
        let (c, _) = lossy_run(&format!("loss{i}c"), p, 8);
        assert_ne!(a, c, "p = {p}: another seed loses others");
    }
}

#[test]
fn tcp_delivers_every_byte_across_a_lossy_link() {
    let mut r = raw("loss-tcp");
    r.both.loss = Some(0.02);
    let link = start(r);
    let listener = tcp_listener(&link.server().netns, link.server().addr);
    let mut client = tcp_connect(&link.client().netns, listener.local_addr().unwrap());
    let (mut server, _) = listener.accept().unwrap();
    server.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    // 2 MiB of a pattern that detects reordering and duplication, not only loss.
    let data: Vec<u8> = (0..2u32 << 20).map(|i| (i % 251) as u8).collect();
    let expected = data.clone();
    let writer = std::thread::spawn(move || {
        client.write_all(&data).unwrap();
    });
    let mut got = Vec::with_capacity(expected.len());
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < expected.len() {
        let n = server.read(&mut buf).expect("data keeps coming");
        assert!(n > 0, "closed after {} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
    }
    writer.join().unwrap();
    assert!(got == expected, "the bytes arrived intact and in order");
    let report = finish(link);
    assert_accounted(&report);
    assert!(report.up.counts.loss_drops > 0, "the link did drop data segments: {:?}", report.up.counts);
}
