//! A server whose process runs out of file descriptors keeps serving: connections beyond the
//! limit are accepted and closed at once through the acceptors' reserve descriptor (each one
//! counted in `closed_out_of_descriptors`), nothing waits in the backlog for ever, and once
//! descriptors are free again new connections are served. Checked for each shape of accept
//! loop: a reactor's non-blocking listener (single-thread), a blocking boss thread (netty),
//! a blocking acceptor spawning threads (thread-per-connection) and io_uring's accept
//! completions (io-uring, one ring: with several acceptors in one process the descriptor freed
//! to shed a connection may go to another acceptor's accept, see `acceptor`). Each server is a child process with RLIMIT_NOFILE = 64, so the
//! test's own descriptors do not count.

mod common;

use common::{connect, try_get, ServeProcess};

/// More clients than the server has descriptors: some must be refused.
const CLIENTS: usize = 120;

#[test]
fn connections_beyond_the_descriptor_limit_are_closed_at_once_and_counted() {
    for (arch, args) in [
        ("single-thread", &[][..]),
        ("netty", &["--loops", "2"][..]),
        ("thread-per-connection", &[][..]),
        ("io-uring", &["--loops", "1"][..]),
    ] {
        let mut server = ServeProcess::start(arch, args, Some(64));
        let mut served = Vec::new();
        let mut closed = 0u64;
        for _ in 0..CLIENTS {
            let mut s = connect(server.addr);
            // A refused client sees end of stream or a reset, never a hang (the read times out
            // after IO_TIMEOUT and fails the test).
            match try_get(&mut s, "/echo?size=3") {
                Some(_) => served.push(s),
                None => closed += 1,
            }
        }
        assert!(closed > 0 && !served.is_empty(), "{arch}: {} served, {closed} closed", served.len());
        // Every client the server closed was counted, and none was dropped otherwise.
        assert_eq!(server.counter("closed_out_of_descriptors"), closed, "{arch}");
        assert_eq!(server.counter("accept_paused"), 0, "{arch}: the reserve descriptor was lost");
        drop(served);
        // Descriptors are free again (the server notices the closes): new clients are served.
        let mut recovered = false;
        for _ in 0..CLIENTS {
            let mut s = connect(server.addr);
            if try_get(&mut s, "/echo?size=3").is_some() {
                recovered = true;
                break;
            }
        }
        assert!(recovered, "{arch}: no connection served after the others closed");
    }
}
