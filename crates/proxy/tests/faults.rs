//! Faults, in every architecture: a memcached server killed mid-run (requests fail fast with
//! `SERVER_ERROR`, no set is acknowledged once a replica is gone, retrievals go on from the
//! other server, the server is reconnected when it is back), a server stalled with SIGSTOP
//! (the server timeout answers), a peer that answers garbage, a client closing mid-value and a
//! client that does not read its answers. No client ever waits more than `ANSWER_WITHIN` for an
//! answer (the test fails otherwise), and every fault is counted in its class.

mod common;

use common::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_server_killed_mid_run_fails_requests_fast_and_the_other_keeps_serving() {
    for (arch, workers) in every_arch() {
        let mut servers = memcacheds(2);
        let dead_addr = servers[1].addr;
        let mw = start(config(addrs(&servers), arch, workers, false));
        let addr = mw.local_addr();
        let done = Arc::new(AtomicUsize::new(0));
        const CLIENTS: usize = 4;
        const ROUNDS: usize = 150;
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let done = done.clone();
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    let (mut sets, mut gets_ok, mut gets_failed) = (Vec::new(), 0, 0);
                    for r in 0..ROUNDS {
                        let key = format!("k{t}-{r}");
                        sets.push(c.set(&key, 0, key.as_bytes()));
                        match c.get(&[&format!("k{t}-0")]) {
                            Ok(v) if sets[0] == "STORED" => assert_eq!(v.len(), 1, "{v:?}"),
                            Ok(_) => {}
                            Err(e) => {
                                assert!(e.starts_with("SERVER_ERROR backend "), "{e}");
                                gets_failed += 1;
                                continue;
                            }
                        }
                        gets_ok += 1;
                        done.fetch_add(2, Ordering::Relaxed);
                    }
                    (sets, gets_ok, gets_failed)
                })
            })
            .collect();
        wait_until("clients under way", ANSWER_WITHIN, || done.load(Ordering::Relaxed) >= 100);
        drop(servers.pop()); // SIGKILL, mid-run
        let mut answered_after_failure = 0;
        for t in threads {
            let (sets, gets_ok, _) = t.join().expect("a client failed (a hang fails after 10 s)");
            // Once a set fails (its second replica is gone), no later set is acknowledged.
            let first_failure = sets.iter().position(|s| s != "STORED").unwrap_or(sets.len());
            for s in &sets[first_failure..] {
                assert!(s.starts_with(&format!("SERVER_ERROR backend {dead_addr}")), "{arch}: {s}");
            }
            answered_after_failure += gets_ok;
        }
        assert!(answered_after_failure > 0, "{arch}: retrievals go on");
        // Now: sets fail at once, values set before are read from the live server.
        let mut c = Client::connect(addr);
        assert!(c.set("after", 0, b"x").starts_with("SERVER_ERROR backend "), "{arch}");
        for _ in 0..4 {
            assert_eq!(c.get(&["k0-0"]).unwrap().len(), 1, "{arch}: every get goes to the live server");
        }
        let report = mw.report();
        let failed = &report.servers[1];
        assert!(failed.closed + failed.unavailable > 0, "{arch}: {failed:?}");
        let e = &report.totals.errors.by_class;
        assert!(e["server_closed"] + e["server_unavailable"] > 0, "{arch}: {e:?}");
        // The server comes back on its port: it is reconnected (after the backoff, <= 1 s).
        let _revived = archlab_wire::memcached_process::require_at(dead_addr.port(), &[]);
        wait_until("a set stored on both servers again", Duration::from_secs(5), || c.set("back", 0, b"y") == "STORED");
        assert_eq!(direct_get(dead_addr, "back"), Some((0, b"y".to_vec())), "{arch}");
        let report = mw.shutdown().unwrap();
        assert!(report.servers[1].reconnects > 0, "{arch}: {:?}", report.servers[1]);
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: plain syscall on a child process this test started.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
    // The signal is delivered asynchronously: wait until the process state says it took effect.
    let stopped = sig == libc::SIGSTOP;
    wait_until("the signal delivered", ANSWER_WITHIN, || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat.rsplit(')').next().unwrap().split_whitespace().next().unwrap();
        (state == "T") == stopped
    });
}

#[test]
fn a_stalled_server_is_timed_out_and_recovers() {
    for (arch, workers) in every_arch() {
        let servers = memcacheds(2);
        let stalled = servers[1].addr;
        let mut cfg = config(addrs(&servers), arch, workers, false);
        cfg.server_timeout = Duration::from_millis(200);
        let mw = start(cfg);
        let mut c = Client::connect(mw.local_addr());
        assert_eq!(c.set("before", 5, b"v"), "STORED");
        signal(servers[1].pid(), libc::SIGSTOP);
        let timed_out = format!("SERVER_ERROR backend {stalled} timed out after 200 ms");
        let answer = c.set("during", 0, b"w");
        assert!(
            answer == timed_out || answer.starts_with(&format!("SERVER_ERROR backend {stalled} is unavailable")),
            "{arch}: {answer}"
        );
        // Retrievals: the live server answers; one sent to the stalled one times out.
        let mut ok = 0;
        for _ in 0..6 {
            match c.get(&["before"]) {
                Ok(v) => {
                    assert_eq!(v, [(b"before".to_vec(), 5, b"v".to_vec())]);
                    ok += 1;
                }
                Err(e) => assert_eq!(e, timed_out, "{arch}"),
            }
        }
        assert!(ok >= 3, "{arch}: at least the live server's turns answer ({ok} of 6)");
        signal(servers[1].pid(), libc::SIGCONT);
        wait_until("a set stored again", Duration::from_secs(10), || c.set("after", 0, b"z") == "STORED");
        let report = mw.shutdown().unwrap();
        assert!(report.totals.errors.by_class["server_timeout"] >= 1, "{arch}: {:?}", report.totals.errors);
        assert!(report.servers[1].timeouts >= 1, "{arch}");
    }
}

/// A peer that answers every read with a line memcached never sends.
fn garbage_server() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(b"HELLO there\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_server_answering_garbage_is_dropped_and_counted() {
    for (arch, workers) in every_arch() {
        let servers = memcacheds(1);
        let garbage = garbage_server();
        let mw = start(config(vec![servers[0].addr, garbage], arch, workers, false));
        let mut c = Client::connect(mw.local_addr());
        let answer = c.set("k", 0, b"v");
        assert_eq!(
            answer,
            format!("SERVER_ERROR backend {garbage} sent a malformed reply (unknown reply line)"),
            "{arch}"
        );
        // Nothing acknowledged, but the memcached replica did store it: reads go on.
        let mut ok = 0;
        for _ in 0..4 {
            match c.get(&["k"]) {
                Ok(v) => {
                    assert_eq!(v.len(), 1);
                    ok += 1;
                }
                Err(e) => assert!(e.starts_with(&format!("SERVER_ERROR backend {garbage}")), "{arch}: {e}"),
            }
        }
        assert!(ok >= 2, "{arch}: {ok}");
        let report = mw.shutdown().unwrap();
        assert!(report.totals.errors.by_class["server_garbage"] >= 1, "{arch}");
        assert!(report.servers[1].garbage >= 1, "{arch}: {:?}", report.servers[1]);
    }
}

#[test]
fn a_client_closing_mid_value_is_counted_and_the_others_are_served() {
    for (arch, workers) in every_arch() {
        let servers = memcacheds(1);
        let mw = start(config(addrs(&servers), arch, workers, false));
        let mut quitter = Client::connect(mw.local_addr());
        quitter.send(b"set half 0 0 100\r\nabc");
        drop(quitter);
        let mut c = Client::connect(mw.local_addr());
        assert_eq!(c.set("whole", 0, b"abc"), "STORED");
        wait_until("the abandoned request counted", ANSWER_WITHIN, || {
            mw.report().totals.errors.by_class["client_closed_mid_request"] == 1
        });
        assert_eq!(direct_get(servers[0].addr, "half"), None, "{arch}: half a value is never stored");
        drop(mw.shutdown());
    }
}

#[test]
fn a_client_that_does_not_read_is_disconnected_without_stopping_the_others() {
    use std::io::Read;
    for (arch, workers) in every_arch() {
        let servers = memcacheds(1);
        let mut cfg = config(addrs(&servers), arch, workers, false);
        cfg.server_timeout = Duration::from_millis(300);
        let mw = start(cfg);
        let big = vec![b'b'; 256 * 1024];
        let mut c = Client::connect(mw.local_addr());
        assert_eq!(c.set("big", 0, &big), "STORED");
        let rss_before = archlab_metrics::rusage::process_usage().max_rss_kib;
        // 300 gets of 256 KiB, pipelined and never read: 75 MiB of answers.
        let mut greedy = Client::connect(mw.local_addr());
        greedy.send(&b"get big\r\n".repeat(300));
        for i in 0..20 {
            assert_eq!(c.set(&format!("s{i}"), 0, b"x"), "STORED", "{arch}");
            assert_eq!(c.get(&[&format!("s{i}")]).unwrap().len(), 1, "{arch}");
        }
        // Its answers made no progress for the server timeout: it is disconnected.
        wait_until("the reader-less client disconnected", ANSWER_WITHIN, || {
            mw.report().totals.errors.by_class["client_write"] >= 1
        });
        let grown_mib = (archlab_metrics::rusage::process_usage().max_rss_kib - rss_before) / 1024;
        assert!(grown_mib < 32, "{arch}: answers to a client that does not read are bounded, grew {grown_mib} MiB");
        let mut received = 0;
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            match greedy.stream.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
        assert!(received < 300 * big.len(), "{arch}: the connection was closed before every answer");
        assert_eq!(c.get(&["s0"]).unwrap().len(), 1, "{arch}");
        drop(mw.shutdown());
    }
}
