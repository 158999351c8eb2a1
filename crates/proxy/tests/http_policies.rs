//! Policies through the proxy on real sockets: which backend each request reached, seen by the
//! client (each fake backend answers with its own name) or by the backends' own counts. Unit
//! tests of `policy.rs` cover the bounded-load arithmetic; these show the policies at work in
//! blocking and event-loop architectures alike.

mod support;

use archlab_proxy::http::{HashKey, Policy, ProxyOptions};
use archlab_server::ServerOptions;
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use support::{connect, options, read_any_response, start_proxy, Behavior, Fake};

/// One architecture per way of waiting: a thread per connection, a pool, an event loop, N loops,
/// reactors with workers, loops with a ring.
const ARCHS: [&str; 6] = ["thread-per-connection", "blocking", "single-thread", "netty", "reactor-pool", "netty-ring"];

fn named(name: &str) -> Fake {
    Fake::start(Behavior::Answer { body: name.as_bytes().to_vec(), delay: Duration::ZERO })
}

/// The bodies of `n` sequential GETs of `target` with `headers` on one connection.
fn bodies(addr: SocketAddr, n: usize, target: &str, headers: &str) -> Vec<String> {
    let mut s = connect(addr);
    let mut buf = Vec::new();
    (0..n)
        .map(|_| {
            write!(s, "GET {target} HTTP/1.1\r\nHost: t\r\n{headers}\r\n").unwrap();
            let r = read_any_response(&mut s, &mut buf).expect("a response");
            assert_eq!(r.status, 200, "{}", r.head);
            String::from_utf8(r.body).unwrap()
        })
        .collect()
}

#[test]
fn round_robin_is_exact_in_every_model() {
    let fakes = [named("a"), named("b"), named("c")];
    let addrs: Vec<SocketAddr> = fakes.iter().map(|f| f.addr).collect();
    for arch in ARCHS {
        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&addrs));
        let seen = bodies(addr, 12, "/x", "");
        assert_eq!(seen.concat(), "abcabcabcabc", "{arch}");
    }
}

#[test]
fn weighted_round_robin_interleaves_by_weight() {
    let fakes = [named("a"), named("b"), named("c")];
    let list = format!("{}*5,{},{}", fakes[0].addr, fakes[1].addr, fakes[2].addr);
    for arch in ["blocking", "netty"] {
        let o =
            ProxyOptions { backends: list.parse().unwrap(), policy: Policy::WeightedRoundRobin, ..Default::default() };
        let (addr, _) = start_proxy(arch, ServerOptions::default(), o);
        // nginx's smooth weighted round-robin for weights 5, 1, 1 (its `upstream` documentation).
        assert_eq!(bodies(addr, 14, "/x", "").concat(), "aabacaaaabacaa", "{arch}");
    }
}

/// Requests of `clients` clients sent back to back on keep-alive connections for `run` (or
/// at most 5000 each); returns how many each client made.
fn hammer(addr: SocketAddr, clients: usize, run: Duration) -> Vec<usize> {
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + run;
                let mut s = connect(addr);
                let mut buf = Vec::new();
                let mut n = 0;
                while n < 5000 && std::time::Instant::now() < deadline {
                    write!(s, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                    let r = read_any_response(&mut s, &mut buf).expect("a response");
                    assert_eq!(r.status, 200, "{}", r.head);
                    n += 1;
                }
                n
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Four clients send requests back to back for 2 s through a proxy in front of a backend that
/// takes 500 ms per request and one that answers at once. A request goes to the slow backend
/// only when it has no more requests in flight than the fast one; at most 3 clients can be
/// waiting there (one of four is always free, sending to the fast backend), so it starts at
/// most 3 requests per 500 ms window: 15 in 2 s. The free client keeps the fast backend busy
/// at one request per 20 ms at the very least (a loopback exchange takes well under 1 ms),
/// 100 in 2 s. So with p2c and least-requests the slow backend gets at most 15 requests and
/// fewer than a tenth of the fast one's; with round-robin or random each client would alternate
/// and the two counts would be about equal.
#[test]
fn p2c_and_least_requests_favour_the_idle_backend_over_the_slow_one() {
    for policy in [Policy::P2c, Policy::LeastRequests] {
        for arch in ["thread-per-connection", "single-thread", "reactor-pool"] {
            let slow = Fake::start(Behavior::Answer { body: b"slow".to_vec(), delay: Duration::from_millis(500) });
            let fast = named("fast");
            let o = ProxyOptions { policy, ..options(&[slow.addr, fast.addr]) };
            let (addr, _) = start_proxy(arch, ServerOptions::default(), o);
            let made: usize = hammer(addr, 4, Duration::from_secs(2)).iter().sum();
            let (s, f) = (slow.requests(), fast.requests());
            eprintln!("{policy:?} {arch}: slow {s}, fast {f}");
            assert_eq!(s + f, made, "{policy:?} {arch}");
            assert!(s <= 15 && s * 10 < f, "{policy:?} {arch}: slow backend {s} requests, fast one {f}");
        }
    }
}

/// Consistent hashing on a header: 300 users keep their backend when a fourth backend joins,
/// except those the new one takes (about a quarter: at least one).
#[test]
fn consistent_hashing_keeps_keys_when_a_backend_joins() {
    let fakes = [named("a"), named("b"), named("c"), named("d")];
    let owners = |n: usize, arch: &str| -> HashMap<u32, String> {
        let addrs: Vec<SocketAddr> = fakes[..n].iter().map(|f| f.addr).collect();
        let o = ProxyOptions {
            policy: Policy::ConsistentHash,
            hash_key: HashKey::Header("x-user".into()),
            ..options(&addrs)
        };
        let (addr, _) = start_proxy(arch, ServerOptions::default(), o);
        (0..300u32).map(|u| (u, bodies(addr, 1, "/x", &format!("X-User: user-{u}\r\n")).remove(0))).collect()
    };
    for arch in ["thread-per-connection", "single-thread"] {
        let (before, after) = (owners(3, arch), owners(4, arch));
        let moved: Vec<u32> = (0..300).filter(|u| before[u] != after[u]).collect();
        assert!(moved.iter().all(|u| after[u] == "d"), "{arch}: a key moved between old backends");
        assert!(!moved.is_empty() && moved.len() < 150, "{arch}: {} of 300 moved", moved.len());
        // The same key goes to the same backend every time.
        assert_eq!(owners(4, arch), after, "{arch}");
    }
}
