//! The server's conformance suite through the reverse proxy: every property of the server's
//! `tests/common/conformance.rs` (the same functions, the same test client) on every
//! architecture that can proxy, each in front of a real archlab backend (`single-thread`,
//! in-process). The proxy must be indistinguishable from the server it fronts: the same
//! answers to every workload, keep-alive and close, pipelining, the same refusals of malformed
//! requests (it parses with the server's parser and limits), a thousand concurrent connections,
//! and every client's leaving noticed. `the_suite_covers_every_proxy_architecture` fails when
//! an architecture that can proxy is missing here.

#[path = "../../server/tests/common/mod.rs"]
mod common;
mod support;

use archlab_proxy::http::ProxyOptions;
use archlab_server::ServerOptions;
use common::conformance::Subject;
use support::{backend, options, proxy_architectures, start_proxy};

/// Architectures whose shared blocking handlers close an idle keep-alive connection when
/// another connection starves for a handler (as in the server's suite).
const CLOSE_IDLE_UNDER_PRESSURE: &[&str] = &["blocking", "blocking-ring", "blocking-actor"];

/// The proxy in architecture `name` in front of a fresh backend. Idle backend connections are
/// closed after 300 ms (and looked at every 100 ms), so that the descriptor count of
/// `a_peers_close_is_always_noticed` settles once the clients are gone.
fn proxied(name: &'static str) -> Subject {
    Subject::new(name, CLOSE_IDLE_UNDER_PRESSURE.contains(&name), move || {
        let options = ProxyOptions {
            backend_idle_timeout_ms: 300,
            probe_interval_ms: 100,
            ..options(&[backend("single-thread")])
        };
        start_proxy(name, ServerOptions::default(), options).0
    })
}

conformance_suite! { proxied;
    thread_per_connection => "thread-per-connection",
    sync => "sync",
    blocking => "blocking",
    blocking_ring => "blocking-ring",
    blocking_actor => "blocking-actor",
    single_thread => "single-thread",
    reactor => "reactor",
    reactor_ring => "reactor-ring",
    reactor_actor => "reactor-actor",
    async_fix => "async-fix",
    netty => "netty",
    reactor_pool => "reactor-pool",
    netty_ring => "netty-ring",
}

#[test]
fn the_suite_covers_every_proxy_architecture() {
    let mut can = proxy_architectures();
    let mut covered = SUITE.to_vec();
    can.sort_unstable();
    covered.sort_unstable();
    assert_eq!(covered, can, "add each architecture that can proxy to `conformance_suite!` in this file");
}
