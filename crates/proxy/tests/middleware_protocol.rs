//! One answer per request and the connection's end where memcached ends it, in every
//! architecture: a meta set (`ms`, outside the subset) gets one answer and its data block is
//! never read as a command; `quit` answers what came before and closes; a binary-protocol
//! request is not left waiting for bytes that never come. Where memcached answers the same
//! request in a comparable way, the same bytes go to a real memcached and to the middleware
//! and the two answers are compared (a differential check).

mod common;

use common::*;
use std::io::Read;
use std::time::Duration;

/// How soon a connection that must close is closed: far above a round trip on a busy
/// machine, far below the client timeouts a hang runs into.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);

/// The answers' bytes up to and including the next `END` line (read as bytes: memcached's
/// meta answers are not in the client codec's vocabulary). Only the answers to the requests
/// sent may arrive, so reading on past `END` would block; the socket's timeout bounds it.
fn bytes_through_end(c: &mut Client) -> Vec<u8> {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"END\r\n") {
        assert_eq!(c.stream.read(&mut byte).expect("an answer within ANSWER_WITHIN"), 1, "closed after {got:?}");
        got.push(byte[0]);
    }
    got
}

#[test]
fn a_meta_set_gets_one_answer_and_the_connection_goes_on() {
    let servers = memcacheds(1);
    // Blocks that look like commands, or like the end of a line, are data all the same.
    let requests: [&[u8]; 3] = [b"ms k 5\r\nvalue\r\n", b"ms k 7 T0 F3\r\nget k\r\n\r\n", b"ms k 5\r\nEND\r\n\r\n"];
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        let mut c = Client::connect(mw.local_addr());
        for ms in requests {
            // memcached stores it (`HD`); the middleware refuses it (`ERROR`): one status line
            // each, then the answer to the get that follows, and nothing else.
            let bytes = [ms, b"get never-set\r\n"].concat();
            let mut direct = Client::connect(servers[0].addr);
            direct.send(&bytes);
            assert_eq!(String::from_utf8_lossy(&bytes_through_end(&mut direct)), "HD\r\nEND\r\n", "{bytes:?}");
            c.send(&bytes);
            assert_eq!(String::from_utf8_lossy(&bytes_through_end(&mut c)), "ERROR\r\nEND\r\n", "{arch}");
        }
        assert_eq!(c.set("after", 1, b"x"), "STORED", "{arch}: the connection goes on");
        assert_eq!(c.get(&["after"]), Ok(vec![(b"after".to_vec(), 1, b"x".to_vec())]), "{arch}");
        let report = mw.shutdown().unwrap();
        assert_eq!(report.totals.errors.by_class["unknown_command"], requests.len() as u64, "{arch}");
    }
}

#[test]
fn quit_answers_what_came_before_and_closes_as_memcached_does() {
    let servers = memcacheds(1);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        assert_eq!(Client::connect(mw.local_addr()).set("q", 3, b"v"), "STORED");
        // Pipelined behind a request, with one after it that must not be answered; alone; and
        // with a token after it, which memcached accepts.
        for bytes in [&b"get q\r\nquit\r\nget q\r\n"[..], b"quit\r\n", b"get q\r\nquit now\r\n"] {
            let mut direct = Client::connect(servers[0].addr);
            direct.send(bytes);
            let want = direct.read_until_closed(CLOSE_WITHIN).expect("memcached closes on quit");
            let mut c = Client::connect(mw.local_addr());
            c.send(bytes);
            let got = c.read_until_closed(CLOSE_WITHIN).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "{arch}: {bytes:?}");
        }
        let report = mw.shutdown().unwrap();
        assert_eq!(report.totals.errors.total, 0, "{arch}: quit is no error");
        assert_eq!(report.totals.by_type["get"].requests, 2, "{arch}: only the gets before quit");
    }
}

#[test]
fn a_binary_request_closes_the_connection_at_once() {
    // memcached's answer is no reference here: by default it speaks the binary protocol, and
    // with it disabled (`-B ascii`) it reads the bytes as a text line and stays silent until
    // 2048 of them, so such a client waits for its own timeout. The middleware closes at once
    // (`RequestReader::closed` says why it does not answer).
    let servers = memcacheds(1);
    // The magic byte alone; a whole binary get of key "k" (24-byte header, key length 1, body
    // length 1); and one after a text request, which is answered first.
    let get_k = b"\x80\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00k";
    let cases: [(Vec<u8>, &[u8]); 3] = [
        (vec![0x80], b""),
        (get_k.to_vec(), b""),
        ([&b"get b\r\n"[..], get_k].concat(), b"VALUE b 0 1\r\nB\r\nEND\r\n"),
    ];
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        assert_eq!(Client::connect(mw.local_addr()).set("b", 0, b"B"), "STORED");
        for (bytes, want) in &cases {
            let mut c = Client::connect(mw.local_addr());
            c.send(bytes);
            let got = c.read_until_closed(CLOSE_WITHIN).unwrap_or_else(|e| panic!("{arch}: {e}"));
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want), "{arch}: {bytes:?}");
        }
        let report = mw.shutdown().unwrap();
        assert_eq!(report.totals.errors.by_class["binary_protocol"], cases.len() as u64, "{arch}");
    }
}
