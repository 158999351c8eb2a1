//! HybridNetty (`hybrid`) on real sockets: the routing decision per request class and its
//! correction at run time. The client has a 4 KiB receive window and the server a 16 KiB send
//! buffer (seed 001 §4.3, §5), so a 100 KiB response cannot fit and one of 10 bytes always
//! does. The routing counts are process-wide, so this file is its own test binary with one
//! test.

mod common;

use archlab_metrics::counters::totals;
use archlab_server::frontend::hybrid::{path_writes, stats, PathWrites, RouteStats};
use archlab_server::ServerOptions;
use common::{read_response, small_window_client, start, wait_until};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

/// POST `body` to `/echo?size=0` (the class stays the same whatever the body's size: the
/// response size of one class changes over time, as in the paper), wait 50 ms before reading
/// the echo (the experiment: how long the server meets a full buffer); returns the server's
/// write calls for it and the routing counts it caused. The route is counted before the
/// response is written but a correction after its first flush, which may end after the client
/// has the last byte: the counts are read once they are `expected` (waiting on the counters,
/// bounded by `common::IO_TIMEOUT`), or as they are when they never get there.
fn exchange(s: &mut TcpStream, body_len: usize, expected: RouteStats) -> (u64, RouteStats) {
    let (before, route_before) = (totals(), stats());
    let head = format!("POST /echo?size=0 HTTP/1.1\r\nHost: t\r\nContent-Length: {body_len}\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&vec![b'x'; body_len]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let r = read_response(s, &mut Vec::new());
    assert_eq!((r.status, r.body.len()), (200, body_len));
    let caused = || {
        let route_after = stats();
        RouteStats {
            profiled: route_after.profiled - route_before.profiled,
            netty: route_after.netty - route_before.netty,
            inline: route_after.inline - route_before.inline,
            corrected: route_after.corrected - route_before.corrected,
        }
    };
    wait_until(|| caused() == expected);
    (totals().write_syscalls - before.write_syscalls, caused())
}

const PROFILE: RouteStats = RouteStats { profiled: 1, netty: 0, inline: 0, corrected: 0 };
const INLINE: RouteStats = RouteStats { profiled: 0, netty: 0, inline: 1, corrected: 0 };
const NETTY: RouteStats = RouteStats { profiled: 0, netty: 1, inline: 0, corrected: 0 };

#[test]
fn routes_by_learned_class_and_corrects_a_misclassified_class() {
    let options = ServerOptions { loops: Some(1), sndbuf: Some(16 * 1024), ..Default::default() };
    let addr = start("hybrid", &options);
    let mut s = small_window_client(addr);
    const LARGE: usize = 100 * 1024;

    // Warm-up: the class is unknown, profiled on the Netty path; 10 bytes fit in one write.
    assert_eq!(exchange(&mut s, 10, PROFILE), (1, PROFILE));
    // Learned non-spin: the single-thread path.
    assert_eq!(exchange(&mut s, 10, INLINE), (1, INLINE));
    // The class's responses grow to 100 KiB: the single-thread path write-spins for the 50 ms
    // the client does not read (like `single-thread`), and the observation corrects the class.
    let (spun, route) = exchange(&mut s, LARGE, RouteStats { corrected: 1, ..INLINE });
    assert_eq!(route, RouteStats { corrected: 1, ..INLINE });
    assert!(spun > 100, "the inline path made only {spun} write calls");
    // Now the class takes the Netty path: bounded writes, waiting for writability.
    let (bounded, route) = exchange(&mut s, LARGE, NETTY);
    assert_eq!(route, NETTY);
    assert!((2..64).contains(&bounded) && bounded * 4 < spun, "netty path: {bounded} calls (inline {spun})");
    // And back: small responses on the Netty path go out in one call, which corrects the
    // class to non-spin again.
    let corrected = RouteStats { corrected: 1, ..NETTY };
    assert_eq!(exchange(&mut s, 10, corrected), (1, corrected));
    assert_eq!(exchange(&mut s, 10, INLINE), (1, INLINE));

    // The write calls by path, as the engine reports them: each path's calls are the server's
    // own write calls of the responses it carried, and the class flipped once each way.
    let writes = path_writes();
    let expected = PathWrites {
        profile_calls: 1,
        netty_calls: bounded + 1,
        inline_calls: 1 + spun + 1,
        inline_spun: 1,
        to_write_spin: 1,
        to_non_spin: 1,
    };
    assert_eq!(writes, expected);
}
