//! The instrumentation of seed 002 §1.9, checked from outside: the response time splits
//! exactly into queue wait + service + the rest and lies within what the client measured on
//! the same clock; the queue length is sampled once per enqueue and never exceeds what the
//! clients can have queued; windows partition the run exactly and the HDR interval logs hold
//! one interval per window with every request in it.

mod common;

use archlab_metrics::clock::now_ns;
use archlab_metrics::interval_log::read_interval_log;
use archlab_proxy::memcached::Arch;
use common::*;
use std::time::Duration;

#[test]
fn the_timing_breakdown_adds_up_and_lies_within_what_the_client_saw() {
    let servers = memcacheds(2);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, true));
        let mut c = Client::connect(mw.local_addr());
        let mut rtts = Vec::new();
        let mut timed = |c: &mut Client, f: &mut dyn FnMut(&mut Client)| {
            let t0 = now_ns();
            f(c);
            rtts.push(now_ns() - t0);
        };
        for i in 0..50 {
            let (a, b) = (format!("a{i}"), format!("b{i}"));
            timed(&mut c, &mut |c| assert_eq!(c.set(&a, 0, b"value"), "STORED"));
            timed(&mut c, &mut |c| assert_eq!(c.get(&[&a]).unwrap().len(), 1));
            timed(&mut c, &mut |c| assert_eq!(c.get(&[&a, &b, "a0"]).unwrap().len(), 2));
        }
        let report = mw.shutdown().unwrap();
        let t = &report.totals;
        let count = |ty: &str| t.by_type[ty].requests;
        assert_eq!((count("set"), count("get"), count("multi_get")), (50, 50, 50), "{arch}");
        let s = t.time_split_ns;
        // Exact on the clock's nanoseconds: the six moments of each request form a chain.
        let parts = [s.queue_wait, s.service, s.before_queue, s.before_service, s.after_service];
        assert_eq!(s.response, parts.iter().sum::<u64>(), "{arch}: {s:?}");
        // No part wrapped around (a moment out of order would make it huge).
        assert!(parts.iter().all(|&p| p <= s.response), "{arch}: {s:?}");
        // A request's response time lies within the client's round trip on the same clock, but
        // for the moment after the reply's `write` returns: a worker preempted there reads the
        // clock after the client has its answer. So compare medians, which one preemption
        // cannot move; HDR keeps 3 significant digits (values within 0.1 % of the truth).
        rtts.sort_unstable();
        let client_p50_us = rtts[rtts.len() / 2] as f64 / 1e3;
        assert!(t.response_us.p50.unwrap() <= client_p50_us * 1.001, "{arch}: {:?} vs {client_p50_us}", t.response_us);
        let hdr_total_ns = t.response_us.mean.unwrap() * 1e3 * 150.0;
        assert!(
            (hdr_total_ns - s.response as f64).abs() <= s.response as f64 * 1e-3,
            "{arch}: {hdr_total_ns} vs {}",
            s.response
        );
        // Every request went to a server and back.
        assert!(t.service_us.min.unwrap() > 0.0, "{arch}");
        assert_eq!((t.keys, t.hits, t.misses), (200, 150, 50), "{arch}");
    }
}

#[test]
fn the_queue_length_is_sampled_at_every_enqueue_and_bounded_by_the_clients() {
    let servers = memcacheds(1);
    for (arch, workers) in
        [(Arch::Seed, Some(1)), (Arch::Ring, Some(1)), (Arch::Actor, Some(1)), (Arch::EventLoop, None)]
    {
        let mw = start(config(addrs(&servers), arch, workers, false));
        let addr = mw.local_addr();
        const CLIENTS: usize = 8;
        const GETS: usize = 50;
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    assert_eq!(c.set(&format!("q{t}"), 0, b"v"), "STORED");
                    // Half of them pipelined: still one request of the client at a time queued.
                    if t % 2 == 0 {
                        c.send(format!("get q{t}\r\n").repeat(GETS).as_bytes());
                        for _ in 0..GETS {
                            assert_eq!(c.values().unwrap().len(), 1);
                        }
                    } else {
                        for _ in 0..GETS {
                            assert_eq!(c.get(&[&format!("q{t}")]).unwrap().len(), 1);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let report = mw.shutdown().unwrap();
        let (t, q) = (&report.totals, &report.totals.queue_length);
        let requests = (CLIENTS * (GETS + 1)) as u64;
        assert_eq!(t.requests, requests, "{arch}");
        assert_eq!(q.samples, requests, "{arch}: one sample per enqueue");
        assert!(q.max.unwrap() <= CLIENTS as u64, "{arch}: {q:?}");
        assert!(q.mean.unwrap() >= 1.0, "{arch}: the sample includes the request itself");
        // Little's law over the run: mean number waiting = total wait / elapsed.
        let little = t.time_split_ns.queue_wait as f64 / 1e9 / report.elapsed_s;
        assert!((q.time_avg - little).abs() <= little * 1e-9 + 1e-12, "{arch}");
        assert!(q.time_avg <= CLIENTS as f64, "{arch}");
    }
}

#[test]
fn windows_partition_the_run_and_the_interval_logs_hold_them() {
    let servers = memcacheds(1);
    for (arch, workers) in every_arch() {
        let dir = std::env::temp_dir().join(format!("archlab-mw-windows-{}-{arch}", std::process::id()));
        let mut cfg = config(addrs(&servers), arch, workers, false);
        cfg.window = Duration::from_millis(100);
        cfg.stats_dir = Some(dir.clone());
        let mw = start(cfg);
        let mut c = Client::connect(mw.local_addr());
        let mut i = 0u32;
        wait_until("three windows closed", Duration::from_secs(10), || {
            for _ in 0..5 {
                assert_eq!(c.set(&format!("w{}", i % 20), i, b"x"), "STORED");
                c.get(&[&format!("w{}", i % 20)]).unwrap();
                i += 1;
            }
            c.send(b"bogus\r\n");
            assert_eq!(c.line(), "ERROR");
            mw.report().windows.len() >= 3
        });
        let report = mw.shutdown().unwrap();
        let w = &report.windows;
        assert!(w.len() >= 4, "{arch}: the last, partial window is closed at shutdown");
        assert_eq!(w.iter().map(|w| w.requests).sum::<u64>(), report.totals.requests, "{arch}");
        assert_eq!(w.iter().map(|w| w.errors.total).sum::<u64>(), report.totals.errors.total, "{arch}");
        assert_eq!(report.totals.requests, 2 * u64::from(i), "{arch}");
        for pair in w.windows(2) {
            assert!(
                (pair[0].start_s + pair[0].length_s - pair[1].start_s).abs() < 1e-9,
                "{arch}: windows are contiguous"
            );
        }
        for full in &w[..w.len() - 1] {
            assert!((full.length_s - 0.1).abs() < 1e-9, "{arch}: {}", full.length_s);
        }
        for (name, want) in
            [("response-all", report.totals.requests), ("service-set", report.totals.by_type["set"].requests)]
        {
            let log = std::fs::read(dir.join(format!("{name}.hlog"))).unwrap();
            let parsed = read_interval_log(&log).unwrap();
            assert_eq!(parsed.intervals.len(), w.len(), "{arch}: {name}");
            let logged: u64 = parsed.intervals.iter().map(|i| i.histogram.len()).sum();
            assert_eq!(logged, want, "{arch}: {name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
