//! The memcached codec against a real memcached (Debian package `memcached`), started by the
//! test on 127.0.0.1 with a free port and killed at the end: values containing CR LF
//! round-trip, multi-get replies keep the request's key order and omit misses, `gets`
//! carries CAS uniques, and the error replies of seed 002 §1.2 are recognised. Without
//! memcached the test fails, saying how to install it.

use archlab_wire::memcached::{parse_reply, write_retrieval, write_set, Parse, Reply, Retrieval};
use archlab_wire::memcached_process::{self, MemcachedProcess};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Start memcached and connect to it.
fn start() -> (MemcachedProcess, TcpStream) {
    let server = memcached_process::require(&[]);
    let s = TcpStream::connect(server.addr).expect("memcached accepts");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    (server, s)
}

/// Send `request` and read reply elements until `last` says the reply is complete.
fn exchange(s: &mut TcpStream, request: &[u8], last: impl Fn(&Reply) -> bool) -> Vec<Reply<'static>> {
    s.write_all(request).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let mut at = 0;
        let mut count = 0;
        while let Parse::Complete(r, n) = parse_reply(&buf[at..]).unwrap() {
            at += n;
            count += 1;
            if last(&r) {
                // Replies borrow the buffer: leak it (the test is short) to hand them back.
                return reparse(Box::leak(buf.into_boxed_slice()), count);
            }
        }
        let n = s.read(&mut chunk).expect("memcached answers");
        assert!(n > 0, "memcached closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn reparse(mut buf: &'static [u8], count: usize) -> Vec<Reply<'static>> {
    (0..count)
        .map(|_| match parse_reply(buf).unwrap() {
            Parse::Complete(r, n) => {
                buf = &buf[n..];
                r
            }
            Parse::Partial => unreachable!(),
        })
        .collect()
}

fn single(r: &Reply) -> bool {
    !matches!(r, Reply::Value { .. })
}

#[test]
fn codec_round_trips_against_a_real_memcached() {
    let (_server, mut s) = start();
    let mut req = Vec::new();
    let value = b"line one\r\nline two\r\n\r\nEND\r\n";
    write_set(&mut req, b"k1", 42, 0, value, false);
    assert_eq!(exchange(&mut s, &req, single), [Reply::Stored]);
    req.clear();
    write_set(&mut req, b"k3", 0, 0, b"three", false);
    assert_eq!(exchange(&mut s, &req, single), [Reply::Stored]);

    // Multi-get: the request's order, misses left out, values with CR LF whole.
    req.clear();
    write_retrieval(&mut req, Retrieval::Get, [&b"k3"[..], b"missing", b"k1"]);
    let got = exchange(&mut s, &req, |r| *r == Reply::End);
    assert_eq!(
        got,
        [
            Reply::Value { key: b"k3", flags: 0, cas: None, data: b"three" },
            Reply::Value { key: b"k1", flags: 42, cas: None, data: value },
            Reply::End,
        ]
    );
    // gets carries a CAS unique; a miss alone is just END.
    req.clear();
    write_retrieval(&mut req, Retrieval::Gets, [&b"k1"[..]]);
    let got = exchange(&mut s, &req, |r| *r == Reply::End);
    assert!(matches!(got[0], Reply::Value { cas: Some(_), data, .. } if data == value), "{got:?}");
    req.clear();
    write_retrieval(&mut req, Retrieval::Get, [&b"nothing"[..]]);
    assert_eq!(exchange(&mut s, &req, single), [Reply::End]);

    // Errors: an unknown command, a data block of the wrong length, a value too large.
    assert_eq!(exchange(&mut s, b"bogus\r\n", single), [Reply::Error]);
    let got = exchange(&mut s, b"set k 0 0 3\r\nabcdef\r\n", single);
    assert!(matches!(got[0], Reply::ClientError(_)), "{got:?}");
    // memcached may follow a bad chunk with ERROR for the rest of the line: drain it.
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let _ = s.read(&mut [0u8; 256]);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    req.clear();
    write_set(&mut req, b"big", 0, 0, &vec![b'x'; 2 * 1024 * 1024], false);
    let got = exchange(&mut s, &req, single);
    assert!(matches!(got[0], Reply::ServerError(_)), "{got:?}");
}
