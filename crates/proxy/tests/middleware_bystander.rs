//! Clients that never read cannot stall the others, in every architecture, against real
//! memcached: eight clients each pipeline 200 gets of a 500 KB value and never read a byte,
//! while a bystander does gets of a small key; the bystander's p99 under that load stays within
//! 5x of its unloaded p99 (with a floor only on a machine that shows scheduling noise: see
//! [`P99_FLOOR`]).
//!
//! The unloaded p99 is measured in the same test, with the same number of gets, at the same
//! moments: on a twin - the same architecture, configuration and kind of client, in front of a
//! memcached of its own - whose gets alternate one for one with the loaded ones. So the
//! machine's other work (a build on the other core) delays both alike, where two phases one
//! after the other would see different bursts of it and compare luck.
//!
//! What keeps the test from being fooled: the load is the issue's, unchanged (default socket
//! buffers, `--workers 4`), and is checked to have lasted through the measurement - every
//! non-reader was answered (bytes wait in its socket), none was disconnected, and they still
//! had requests the middleware had not sent to memcached. The server timeout (which also
//! disconnects a client that does not read) is set far beyond the test's length, so a design
//! whose workers wait on a full client socket stalls the bystander past the suite's answer
//! bound (`ANSWER_WITHIN`) and fails. The measurement starts once the middleware has stopped
//! sending the non-readers' gets to memcached for 50 bystander gets in a row (their answers
//! fill their sockets within a few values: the kernel does not grow the receive buffer of a
//! socket that is never read), counted on memcached's own `cmd_get`, so it measures the steady
//! state of the attack rather than the copying of the first answers that precedes it; those
//! gets are counted in neither distribution. Every loop is bounded.

mod common;

use archlab_proxy::memcached::{Arch, Middleware};
use common::*;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const NON_READERS: usize = 8;
const PIPELINED_GETS: usize = 200;
const VALUE_BYTES: usize = 500 * 1024;
/// Gets timed with and without the attack: the p99 is the 8th largest, so a few stray
/// preemptions of the test's threads do not decide it.
const SAMPLES: usize = 800;
/// The bound of the issue: loaded p99 within this factor of the unloaded p99.
const MAX_P99_RATIO: f64 = 5.0;
/// An unloaded get at least this slow shows that the machine delays the bystander's threads
/// by scheduler slices: without the attack a get takes about 100 us even at its slowest (it
/// crosses about six thread wake-ups on loopback: bystander, net thread, worker, memcached,
/// worker, bystander), unless one of those threads waits for a CPU.
const NOISE_EVIDENCE: Duration = Duration::from_millis(1);
/// The bound's floor on such a machine. Why: there one wake-up can wait a whole scheduler
/// slice behind another runnable thread (EEVDF's base slice, 0.75 ms x (1 + log2 CPUs) =
/// 1.5 ms on 2 CPUs, plus a virtual machine's steal), and whether 1% of a distribution's gets
/// are so delayed is luck that moves its p99 from tens of microseconds to milliseconds: with
/// two CPU-bound processes beside the test, either p99 came out anywhere from 50 us to 4 ms,
/// so the ratio of two such p99s measures that luck, not the middleware. 5 ms is above
/// that noise and far below what the test exists to catch: a design that waits on a full
/// client socket stalls the bystander for the server timeout (the issue measured a p99 of
/// 981 ms with the default 1 s; here, past the 10 s answer bound). On a machine without such
/// delays the bound is 5x, as the issue asks.
const P99_FLOOR: Duration = Duration::from_millis(5);
/// Bystander gets in a row without a non-reader's get reaching memcached: the attack is in its
/// steady state (a worker preempted for a few milliseconds on a busy machine may hold up the
/// last answers that long: 50 gets span several scheduler slices). Also the warm-up of each
/// connection.
const SETTLED_AFTER: usize = 50;
/// The most bystander gets to wait for that.
const MAX_SETTLE_GETS: usize = 5000;
/// Far beyond the test's length: no non-reader is disconnected for not reading meanwhile.
const SERVER_TIMEOUT: Duration = Duration::from_secs(120);

/// The bystander's gets without (on the twin) and with the attack, sorted.
struct Phases {
    unloaded: Vec<Duration>,
    loaded: Vec<Duration>,
    settle_gets: usize,
}

/// The 99th percentile (nearest rank) of sorted `samples`.
fn p99(samples: &[Duration]) -> Duration {
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

/// A get of the small key, timed from the request's write to the end of its answer.
fn timed_get(c: &mut Client) -> Duration {
    let t0 = Instant::now();
    let got = c.get(&["small"]).expect("the bystander's get is answered");
    let took = t0.elapsed();
    assert_eq!(got.len(), 1, "the small key is there");
    took
}

/// Bytes received by `s` and not read.
fn unread_bytes(s: &TcpStream) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int for a valid socket descriptor.
    assert_eq!(unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) }, 0);
    n as usize
}

/// Gets memcached served since `baseline` that the bystander did not send: the non-readers'.
/// memcached counts a get before it answers it, so each of the bystander's is counted by the
/// time its answer arrives.
fn others_gets(server: SocketAddr, baseline: u64, bystander_gets: usize) -> u64 {
    server_stat(server, "cmd_get") - baseline - bystander_gets as u64
}

/// A middleware of `arch` in front of `server`, holding the keys, and a client of it, warmed up.
fn middleware_and_client(arch: Arch, workers: Option<usize>, server: SocketAddr) -> (Middleware, Client) {
    let mut cfg = config(vec![server], arch, workers, false);
    cfg.server_timeout = SERVER_TIMEOUT;
    let mw = start(cfg);
    let mut c = Client::connect(mw.local_addr());
    assert_eq!(c.set("big", 0, &vec![b'v'; VALUE_BYTES]), "STORED");
    assert_eq!(c.set("small", 0, b"s"), "STORED");
    for _ in 0..SETTLED_AFTER {
        timed_get(&mut c);
    }
    (mw, c)
}

/// The attacked middleware in front of `server`, its twin in front of `twin_server`.
fn measure(arch: Arch, workers: Option<usize>, server: SocketAddr, twin_server: SocketAddr) -> Phases {
    let (mw, mut bystander) = middleware_and_client(arch, workers, server);
    let (twin, mut control) = middleware_and_client(arch, workers, twin_server);

    let baseline = server_stat(server, "cmd_get");
    let rss_before_kib = archlab_metrics::rusage::process_usage().max_rss_kib;
    let non_readers: Vec<TcpStream> = (0..NON_READERS)
        .map(|_| {
            let mut c = Client::connect(mw.local_addr());
            c.send(&b"get big\r\n".repeat(PIPELINED_GETS));
            c.stream
        })
        .collect();
    wait_until("every non-reader answered", ANSWER_WITHIN, || non_readers.iter().all(|s| unread_bytes(s) > 0));
    println!("{arch}: every non-reader answered; waiting for the middleware to stop serving them");
    let (mut settle_gets, mut streak, mut last) = (0, 0, u64::MAX);
    while streak < SETTLED_AFTER {
        assert!(settle_gets < MAX_SETTLE_GETS, "{arch}: non-readers still served after {settle_gets} bystander gets");
        timed_get(&mut bystander);
        settle_gets += 1;
        let served = others_gets(server, baseline, settle_gets);
        streak = if served == last { streak + 1 } else { 0 };
        last = served;
    }
    println!("{arch}: steady after {settle_gets} bystander gets, {last} non-reader gets served");
    let (mut loaded, mut unloaded) = (Vec::with_capacity(SAMPLES), Vec::with_capacity(SAMPLES));
    for i in 0..SAMPLES {
        // Each goes first every other time, so neither is favoured by what the other left.
        let pair = if i % 2 == 0 { [&mut bystander, &mut control] } else { [&mut control, &mut bystander] };
        let [first, second] = pair.map(timed_get);
        let (with, without) = if i % 2 == 0 { (first, second) } else { (second, first) };
        loaded.push(with);
        unloaded.push(without);
    }
    loaded.sort_unstable();
    unloaded.sort_unstable();

    // The load lasted through the measurement.
    let served = others_gets(server, baseline, settle_gets + SAMPLES);
    println!("{arch}: {} non-reader gets served during the measurement", served - last);
    assert!(served < (NON_READERS * PIPELINED_GETS) as u64, "{arch}: the non-readers were all served ({served})");
    for (i, s) in non_readers.iter().enumerate() {
        assert!(unread_bytes(s) > 0, "{arch}: non-reader {i} has no answer waiting");
    }
    assert_eq!(mw.report().totals.errors.by_class["client_write"], 0, "{arch}: a non-reader was disconnected");
    // Memory stayed bounded: each non-reader may have 1 MiB of answers waiting, plus the answer
    // that crossed that bound.
    let grown_mib = (archlab_metrics::rusage::process_usage().max_rss_kib - rss_before_kib) / 1024;
    let bound_mib = (NON_READERS * (1024 * 1024 + VALUE_BYTES)) as u64 / (1024 * 1024) + 16;
    assert!(grown_mib <= bound_mib, "{arch}: memory grew {grown_mib} MiB under the attack, bound {bound_mib}");

    drop(non_readers);
    drop(mw.shutdown());
    drop(twin.shutdown());
    Phases { unloaded, loaded, settle_gets }
}

/// What a panic said.
fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn clients_that_never_read_do_not_stall_a_bystander_in_any_architecture() {
    let servers = memcacheds(2);
    let mut failures = Vec::new();
    // Every architecture is measured even if one fails (a stalled bystander panics after
    // `ANSWER_WITHIN`), so that a failure shows which designs stall.
    for (arch, workers) in every_arch() {
        let p = match std::panic::catch_unwind(|| measure(arch, workers, servers[0].addr, servers[1].addr)) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{arch}: {}", panic_message(&*e)));
                continue;
            }
        };
        let (unloaded_p99, loaded_p99) = (p99(&p.unloaded), p99(&p.loaded));
        let unloaded_max = *p.unloaded.last().unwrap();
        let mut bound = unloaded_p99.mul_f64(MAX_P99_RATIO);
        if unloaded_max >= NOISE_EVIDENCE {
            bound = bound.max(P99_FLOOR);
        }
        let ratio = loaded_p99.as_secs_f64() / unloaded_p99.as_secs_f64();
        println!(
            "{arch}: bystander p99 unloaded {unloaded_p99:?} (max {unloaded_max:?}), loaded {loaded_p99:?} \
             (max {:?}): {ratio:.2}x, bound {bound:?}; {} gets to the steady state",
            p.loaded.last().unwrap(),
            p.settle_gets
        );
        if loaded_p99 > bound {
            failures.push(format!("{arch}: p99 {loaded_p99:?} is {ratio:.2}x {unloaded_p99:?}, above {bound:?}"));
        }
    }
    assert!(failures.is_empty(), "the bystander's p99 under the attack exceeded its bound: {failures:#?}");
}
