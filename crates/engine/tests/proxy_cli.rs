//! `archlab-engine proxy` from outside: refusals that name the flag, the `listening` line, the
//! per-backend counters of the `rusage` line, and a backend process killed in the middle of a
//! run (SIGKILL) costing no idempotent request whose response had not started.

mod common;

use common::{connect, ServeProcess};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_archlab-engine"))
}

/// Run `archlab-engine ARGS` to its end: exit code and stderr.
fn refused(args: &[&str]) -> (i32, String) {
    let out = engine().args(args).stdin(Stdio::null()).output().expect("archlab-engine runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `archlab-engine proxy --arch ARCH --backends ... ARGS`, running.
fn proxy(arch: &str, backends: &[SocketAddr], args: &[&str]) -> ServeProcess {
    let list: Vec<String> = backends.iter().map(|a| a.to_string()).collect();
    let mut cmd = engine();
    cmd.args(["proxy", "--arch", arch, "--backends", &list.join(",")]).args(args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    ServeProcess::spawn(cmd)
}

#[test]
fn bad_input_is_refused_naming_the_flag() {
    let backend = ServeProcess::start("single-thread", &[], None);
    let b = backend.addr.to_string();
    let (code, err) = refused(&["proxy", "--arch", "netty", "--backends", &b, "--policy", "fastest"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--policy") && err.contains("round-robin") && err.contains("fastest"), "{err}");
    let (code, err) = refused(&["proxy", "--arch", "netty"]);
    assert_eq!(
        (code, err.trim()),
        (2, "archlab-engine: error: --backends: expected at least one HOST:PORT[*WEIGHT], got none")
    );
    let (code, err) = refused(&["proxy", "--arch", "netty", "--backends", "example.com:80"]);
    assert!(code == 2 && err.contains("--backends") && err.contains("numeric host"), "{err}");
    let (code, err) = refused(&["proxy", "--arch", "tokio", "--backends", &b]);
    assert!(code == 2 && err.contains("--arch: expected an architecture that can proxy"), "{err}");
    assert!(err.contains("netty") && err.contains("got \"tokio\""), "{err}");
    let nobody = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let (code, err) = refused(&["proxy", "--arch", "netty", "--backends", &format!("{b},{nobody}")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--backends") && err.contains(&nobody) && err.contains("unreachable"), "{err}");
    let (code, err) = refused(&["proxy", "--arch", "netty", "--backends", &b, "--loops", "0"]);
    assert!(code == 2 && err.contains("--loops"), "{err}");
    let (code, err) = refused(&["proxy", "--arch", "blocking", "--backends", &b, "--loops", "2"]);
    assert!(code == 2 && err.contains("--loops: expected no loops value for architecture 'blocking'"), "{err}");
    let (code, err) = refused(&["proxy", "--arch", "netti", "--backends", &b]);
    assert!(code == 2 && err.contains("--arch: expected one of thread-per-connection"), "{err}");
    // The architectures list says which can proxy, and how.
    let out = engine().arg("architectures").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split("proxy (archlab-engine proxy --arch NAME):").nth(1).expect("a proxy section");
    assert!(section.lines().any(|l| l.starts_with("netty ") && l.ends_with("same poller")), "{section}");
    assert!(section.lines().any(|l| l.starts_with("blocking ") && l.ends_with("blocking call")), "{section}");
    assert!(!section.contains("tokio"), "{section}");
}

#[test]
fn counters_come_with_the_rusage_line() {
    let backends = [ServeProcess::start("single-thread", &[], None), ServeProcess::start("single-thread", &[], None)];
    let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addr).collect();
    let mut p = proxy("single-thread", &addrs, &["--policy", "round-robin"]);
    let mut s = connect(p.addr);
    for _ in 0..10 {
        assert!(common::try_get(&mut s, "/echo?size=10").is_some());
    }
    let usage = p.rusage();
    let list = usage["proxy"]["backends"].as_array().expect("per-backend counters");
    assert_eq!(list.len(), 2);
    for (b, addr) in list.iter().zip(&addrs) {
        assert_eq!(b["addr"], addr.to_string());
        assert_eq!((b["requests"].as_u64(), b["responses"]["2xx"].as_u64()), (Some(5), Some(5)), "{b}");
        assert_eq!(b["in_flight"], 0);
        assert!(b["latency_us"]["p50"].as_f64().is_some_and(|v| v > 0.0), "{b}");
    }
    assert!(usage["write_syscalls"].as_u64().unwrap() >= 20, "{usage}");
}

/// What a client saw of its requests.
#[derive(Default)]
struct Tally {
    ok: usize,
    /// The connection ended after part of a response: the response had started.
    started: usize,
    /// Another status, or the connection ended before any byte of a response.
    lost: usize,
}

/// One keep-alive client sending `n` GETs; a connection ended by the proxy is replaced.
fn client(addr: SocketAddr, n: usize, done: &AtomicUsize) -> Tally {
    let mut t = Tally::default();
    let mut s = connect(addr);
    for _ in 0..n {
        s.write_all(b"GET /echo?size=100 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let whole = loop {
            let n = s.read(&mut chunk).unwrap_or(0);
            if n == 0 {
                break false;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                if buf.len() >= end + 4 + 100 {
                    break true;
                }
            }
        };
        match (whole, buf.is_empty()) {
            (true, _) if buf.starts_with(b"HTTP/1.1 200 ") => t.ok += 1,
            (false, false) if buf.starts_with(b"HTTP/1.1 200 ") => t.started += 1,
            _ => t.lost += 1,
        }
        if !whole {
            s = connect(addr);
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    t
}

#[test]
fn a_killed_backend_loses_no_idempotent_request_that_had_not_started() {
    for arch in ["netty", "thread-per-connection", "reactor-pool"] {
        let mut backends =
            vec![ServeProcess::start("single-thread", &[], None), ServeProcess::start("single-thread", &[], None)];
        let addrs: Vec<SocketAddr> = backends.iter().map(|b| b.addr).collect();
        let mut p = proxy(arch, &addrs, &["--policy", "round-robin", "--probe-interval-ms", "60000"]);
        let (clients, per_client) = (4, 600);
        let done = Arc::new(AtomicUsize::new(0));
        let addr = p.addr;
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let done = done.clone();
                std::thread::spawn(move || client(addr, per_client, &done))
            })
            .collect();
        // Kill the first backend once the run is well under way (a tenth of the requests done).
        let deadline = Instant::now() + Duration::from_secs(60);
        while done.load(Ordering::SeqCst) < clients * per_client / 10 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let killed = backends.remove(0);
        drop(killed); // SIGKILL, then reaped
        let mut total = Tally::default();
        for h in handles {
            let t = h.join().unwrap();
            (total.ok, total.started, total.lost) = (total.ok + t.ok, total.started + t.started, total.lost + t.lost);
        }
        let usage = p.rusage();
        let dead = &usage["proxy"]["backends"][0];
        let broke_off = dead["errors"]["closed_mid_response"].as_u64().unwrap() as usize;
        eprintln!(
            "{arch}: {} ok, {} started and cut, {} lost; killed backend: {dead}",
            total.ok, total.started, total.lost
        );
        assert_eq!(total.ok + total.started + total.lost, clients * per_client, "{arch}");
        // A request can only fail if its response had started at the backend when it died.
        assert!(total.lost + total.started <= broke_off, "{arch}: {} lost, {} cut", total.lost, total.started);
        assert!(dead["ejections"].as_u64().unwrap() >= 1, "{arch}: the dead backend was not ejected: {dead}");
        assert!(usage["proxy"]["backends"][1]["requests"].as_u64().unwrap() as usize >= clients * per_client / 2);
    }
}
