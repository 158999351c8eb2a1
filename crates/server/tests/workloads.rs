//! The workloads that need more than the calling thread, end to end through real servers:
//! `/call?ms=` against a real downstream (`sync` serving `/delay?ms=`), `/file?size=` and
//! seed 001's `/response?size=`, and the 503 of `/call` on a server without `--downstream`.

mod common;

use archlab_server::ServerOptions;
use common::{connect, get, start};
use std::time::{Duration, Instant};

#[test]
fn call_goes_to_the_downstream_and_waits_for_it() {
    let downstream = start("sync", &ServerOptions::default());
    for arch in ["single-thread", "async-fix", "blocking", "tokio", "io-uring"] {
        let addr = start(arch, &ServerOptions { downstream: Some(downstream), ..Default::default() });
        let mut s = connect(addr);
        for _ in 0..3 {
            let t = Instant::now();
            let common::Response { status, body, .. } = get(&mut s, "/call?ms=30");
            assert_eq!(status, 200, "{arch}");
            assert_eq!(body, b"slept 30 ms", "{arch}");
            assert!(t.elapsed() >= Duration::from_millis(30), "{arch}: {:?}", t.elapsed());
        }
    }
}

#[test]
fn call_without_downstream_is_503() {
    let addr = start("single-thread", &ServerOptions::default());
    let mut s = connect(addr);
    let common::Response { status, body, .. } = get(&mut s, "/call?ms=1");
    assert_eq!(status, 503);
    assert!(String::from_utf8_lossy(&body).contains("--downstream"), "{}", String::from_utf8_lossy(&body));
    // The connection stays usable.
    assert_eq!(get(&mut s, "/echo?size=3").body, b"abc");
}

#[test]
fn file_and_response_sizes() {
    let addr = start("netty", &ServerOptions { loops: Some(1), ..Default::default() });
    let mut s = connect(addr);
    let common::Response { status, body, .. } = get(&mut s, "/file?size=100000");
    assert_eq!(status, 200);
    assert!(body.iter().enumerate().all(|(i, &b)| b == b'a' + (i % 26) as u8));
    assert_eq!(body.len(), 100_000);
    for size in [102, 10 * 1024, 100 * 1024] {
        let common::Response { status, body, .. } = get(&mut s, &format!("/response?size={size}"));
        assert_eq!(status, 200);
        assert_eq!(body.len(), size);
    }
}
