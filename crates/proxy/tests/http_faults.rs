//! Faults of backends as the client sees them through the proxy, in blocking and event-loop
//! architectures: retries only for idempotent requests, 502 for garbage and refused
//! connections, 504 for a backend that stalls, 503 with no healthy backend, a closed client
//! connection when a backend dies in the middle of a response, never a hang (every read of the
//! clients is bounded). Bodies, chunked or not, large or not, pass through unchanged. Health:
//! failed active checks eject, probes readmit.

mod support;

use archlab_proxy::http::{Policy, ProxyOptions};
use archlab_server::ServerOptions;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};
use support::{
    backend, chunked_body, connect, eventually, exchange, options, random_bytes, read_any_response, start_proxy,
    Behavior, Fake,
};

const ARCHS: [&str; 6] = ["thread-per-connection", "blocking", "single-thread", "netty", "reactor-pool", "netty-ring"];

/// An address where nothing listens (a port just released).
fn refusing() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn ok() -> Fake {
    Fake::start(Behavior::Answer { body: b"ok".to_vec(), delay: Duration::ZERO })
}

fn request(method: &str) -> Vec<u8> {
    let body = if matches!(method, "PUT" | "POST") { "data" } else { "" };
    format!("{method} /x HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

#[test]
fn only_idempotent_requests_go_to_a_second_backend() {
    for arch in ARCHS {
        for (bad_name, bad) in [("closes", Fake::start(Behavior::CloseBeforeResponse).addr), ("refuses", refusing())] {
            for (method, retried) in [("GET", true), ("PUT", true), ("DELETE", true), ("POST", false), ("PATCH", false)]
            {
                let good = ok();
                // Round-robin starts with the bad backend; it is never ejected here.
                let o = ProxyOptions { eject_after: 1000, ..options(&[bad, good.addr]) };
                let (addr, proxy) = start_proxy(arch, ServerOptions::default(), o);
                let r = exchange(addr, &request(method));
                let what = format!("{arch}: {method} to a backend that {bad_name}");
                if retried {
                    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]), "{what}: {}", r.head);
                    assert_eq!(good.requests(), 1, "{what}");
                    assert_eq!(proxy.report().backends[1].retries, 1, "{what}");
                } else {
                    assert_eq!(r.status, 502, "{what}: {}", r.head);
                    assert_eq!(good.requests(), 0, "{what}: sent twice");
                }
            }
        }
    }
}

#[test]
fn stalls_give_504_garbage_502_no_backend_503_and_nothing_hangs() {
    for arch in ARCHS {
        let quick = |o: ProxyOptions| ProxyOptions { backend_timeout_ms: 300, ..o };
        let stall = Fake::start(Behavior::Stall);
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), quick(options(&[stall.addr])));
        let started = Instant::now();
        let mut s = connect(addr);
        let mut buf = Vec::new();
        for i in 0..2 {
            s.write_all(&request("GET")).unwrap();
            let r = read_any_response(&mut s, &mut buf).expect("a response");
            assert_eq!(r.status, 504, "{arch}: stalled backend, request {i}: {}", r.head);
            assert!(r.head.contains("Connection: keep-alive"), "{arch}: {}", r.head);
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{arch}: {:?}", started.elapsed());
        assert_eq!(proxy.report().backends[0].errors["timeout"], 2, "{arch}");

        let garbage = Fake::start(Behavior::Garbage);
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), quick(options(&[garbage.addr])));
        let r = exchange(addr, &request("GET"));
        assert_eq!(r.status, 502, "{arch}: garbage: {}", r.head);
        assert_eq!(proxy.report().backends[0].errors["bad_response"], 1, "{arch}");

        // One backend that refuses, ejected at its first failure: 502, then 503.
        let o = ProxyOptions { eject_after: 1, ..options(&[refusing()]) };
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), o);
        let mut s = connect(addr);
        let mut buf = Vec::new();
        for expected in [502, 503, 503] {
            s.write_all(&request("GET")).unwrap();
            let r = read_any_response(&mut s, &mut buf).expect("a response");
            assert_eq!(r.status, expected, "{arch}: refusing backend: {}", r.head);
        }
        assert_eq!(proxy.report().unavailable, 2, "{arch}");

        // A backend that dies in the middle of its response: the client sees the response
        // start, then the connection end.
        let dies = Fake::start(Behavior::DieMidResponse);
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), quick(options(&[dies.addr])));
        let r = exchange(addr, &request("GET"));
        assert_eq!(r.status, 200, "{arch}");
        assert!(r.truncated && r.body == b"0123456789", "{arch}: {r:?}");
        assert_eq!(proxy.report().backends[0].errors["closed_mid_response"], 1, "{arch}");
    }
}

#[test]
fn a_slow_backend_is_the_proxys_to_time_out_not_the_clients_request_timeout() {
    // The server's request timeout (300 ms) is for requests that do not arrive; a request
    // that did, waiting on a backend that answers after 900 ms, gets its answer (the proxy's
    // backend timeout, 60 s by default, is the one that governs it). A head that never
    // completes still gets the 408.
    let slow = Fake::start(Behavior::Answer { body: b"late".to_vec(), delay: Duration::from_millis(900) });
    let server = ServerOptions { request_timeout_ms: 300, ..ServerOptions::default() };
    for arch in ARCHS {
        let (addr, _) = start_proxy(arch, server.clone(), options(&[slow.addr]));
        let r = exchange(addr, &request("GET"));
        assert_eq!((r.status, r.body.as_slice()), (200, &b"late"[..]), "{arch}: {}", r.head);
        let mut s = connect(addr);
        s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n").unwrap();
        let r = read_any_response(&mut s, &mut Vec::new()).expect("a response");
        assert_eq!(r.status, 408, "{arch}: a head that never completes: {}", r.head);
    }
}

#[test]
fn chunked_responses_and_large_bodies_pass_through_unchanged() {
    let payload = random_bytes(300_000, 1);
    let sizes = vec![1, 7, 4096, 65_536, 13, 100_000];
    let chunked = Fake::start(Behavior::Chunked { body: payload.clone(), chunk_sizes: sizes.clone() });
    let big = random_bytes(8 << 20, 2);
    let large = Fake::start(Behavior::Answer { body: big.clone(), delay: Duration::ZERO });
    let echo = backend("single-thread");
    let upload = random_bytes(1_000_000, 3);
    for arch in ARCHS {
        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[chunked.addr]));
        // HTTP/1.1: the chunked framing passes verbatim (chunk sizes, extensions, trailer).
        let r = exchange(addr, b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(r.head.contains("Transfer-Encoding: chunked"), "{arch}: {}", r.head);
        assert!(r.raw_body == chunked_body(&payload, &sizes), "{arch}: chunked framing changed");
        assert!(r.body == payload, "{arch}: chunked payload changed");
        // HTTP/1.0 cannot take chunked coding: the payload alone, then the connection closes.
        let r = exchange(addr, b"GET /c HTTP/1.0\r\n\r\n");
        assert!(!r.head.to_ascii_lowercase().contains("transfer-encoding"), "{arch}: {}", r.head);
        assert!(r.body == payload, "{arch}: de-chunked payload changed ({} bytes)", r.body.len());

        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[large.addr]));
        let r = exchange(addr, b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(!r.truncated && r.body == big, "{arch}: 8 MiB body changed ({} bytes)", r.body.len());

        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[echo]));
        let mut req =
            format!("POST /echo?size=0 HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", upload.len()).into_bytes();
        req.extend_from_slice(&upload);
        let r = exchange(addr, &req);
        assert!(r.status == 200 && r.body == upload, "{arch}: 1 MB upload not echoed unchanged ({})", r.head);
    }
}

#[test]
fn failed_health_checks_eject_and_probes_readmit() {
    for arch in ["blocking", "netty"] {
        let sick = Fake::start(Behavior::Health { health_status: 500 });
        let well = Fake::start(Behavior::Health { health_status: 200 });
        let o = ProxyOptions {
            health_path: Some("/health".parse().unwrap()),
            probe_interval_ms: 20,
            ..options(&[sick.addr, well.addr])
        };
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), o);
        assert!(eventually(Duration::from_secs(10), || proxy.report().backends[0].ejections == 1), "{arch}");
        let before = proxy.report().backends[0].requests;
        for _ in 0..10 {
            assert_eq!(exchange(addr, b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").status, 200, "{arch}");
        }
        assert_eq!(proxy.report().backends[0].requests, before, "{arch}: a request went to the ejected backend");
        assert!(proxy.report().backends[1].requests >= 10, "{arch}");
    }
    // Passive: a backend that refuses is ejected after `eject_after` failures and readmitted by
    // a probe once it accepts connections again.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let down = listener.local_addr().unwrap();
    drop(listener);
    let o = ProxyOptions {
        eject_after: 2,
        probe_interval_ms: 20,
        policy: Policy::RoundRobin,
        ..options(&[down, ok().addr])
    };
    let (addr, proxy) = start_proxy("single-thread", ServerOptions::default(), o);
    for _ in 0..4 {
        assert_eq!(exchange(addr, b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
    }
    assert_eq!(proxy.report().backends[0].ejections, 1);
    // Back on the same port (free since it was released above).
    let back = TcpListener::bind(down).expect("the released port is free again");
    assert!(eventually(Duration::from_secs(10), || proxy.report().backends[0].health
        == archlab_proxy::http::backend::Health::Up));
    drop(back);
}
