//! The conformance suite: every test runs against every architecture of the registry, so an
//! architecture added to the registry is covered without touching this file. Servers run
//! in-process on 127.0.0.1 with port 0; clients are plain blocking sockets.

mod common;

use archlab_server::{ServerOptions, REGISTRY};
use common::{connect, start};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: Vec<u8>,
}

/// Read exactly one response (Content-Length framed) from `s`, keeping leftovers in `buf`.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Response {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8(buf[..end].to_vec()).unwrap();
            let status: u16 = head[9..12].parse().unwrap();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .expect("Content-Length");
            let total = end + 4 + len;
            while buf.len() < total {
                read_more(s, buf);
            }
            let body = buf[end + 4..total].to_vec();
            buf.drain(..total);
            return Response { status, head, body };
        }
        read_more(s, buf);
    }
}

fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    let n = s.read(&mut chunk).expect("read");
    assert!(n > 0, "connection closed before a whole response (have {:?})", String::from_utf8_lossy(buf));
    buf.extend_from_slice(&chunk[..n]);
}

fn get(s: &mut TcpStream, target: &str) -> Response {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
    read_response(s, &mut Vec::new())
}

/// `s` again if the server has closed it while it was idle (a shared blocking handler may close
/// an idle keep-alive connection that another connection starves for, RFC 9112 §9.8; the FIN is
/// already here by the time the starving connection has its answer), else `s` as it is.
fn reopened_if_closed(s: &mut TcpStream, addr: SocketAddr) {
    s.set_nonblocking(true).unwrap();
    let closed = matches!(s.peek(&mut [0u8; 1]), Ok(0));
    s.set_nonblocking(false).unwrap();
    if closed {
        *s = connect(addr);
    }
}

/// After an error response the server must close: the next read sees end of stream.
fn assert_closed(s: &mut TcpStream, buf: &[u8]) {
    assert!(buf.is_empty(), "unexpected bytes after the error response");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("read to end");
    assert!(rest.is_empty(), "bytes after the error response: {:?}", String::from_utf8_lossy(&rest));
}

fn each_architecture(test: impl Fn(&str, SocketAddr)) {
    for arch in REGISTRY {
        let addr = start(arch.name, &ServerOptions::default());
        let t0 = std::time::Instant::now();
        test(arch.name, addr);
        eprintln!("  {:<24} {:>8.1} ms", arch.name, t0.elapsed().as_secs_f64() * 1e3);
    }
}

#[test]
fn every_endpoint_answers_correctly() {
    each_architecture(|arch, addr| {
        let mut s = connect(addr);
        let r = get(&mut s, "/prime?n=27059");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"true"[..]), "{arch}: prime");
        let r = get(&mut s, "/prime?n=27063");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"false"[..]), "{arch}: composite");
        let r = get(&mut s, "/echo?size=1024");
        assert_eq!((r.status, r.body.len()), (200, 1024), "{arch}: echo");
        let r = get(&mut s, "/echo?size=0");
        assert_eq!((r.status, r.body.len()), (200, 0), "{arch}: empty echo");
        let r = get(&mut s, "/sort?n=1000");
        assert_eq!(r.status, 200, "{arch}: sort");
        assert!(String::from_utf8_lossy(&r.body).contains("1000"), "{arch}: sort body {:?}", r.body);
        let r = get(&mut s, "/nothing");
        assert_eq!(r.status, 404, "{arch}: unknown path");
        let r = get(&mut s, "/prime?n=abc");
        assert_eq!(r.status, 400, "{arch}: bad parameter");
        // A workload error is an ordinary response: the connection stays usable.
        let r = get(&mut s, "/echo?size=10");
        assert_eq!((r.status, r.body.len()), (200, 10), "{arch}: after 400");
        // A POST body is echoed back.
        write!(s, "POST /echo?size=5 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        let r = read_response(&mut s, &mut Vec::new());
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]), "{arch}: POST echo");
        // HEAD: the length of the body, not the body.
        write!(s, "HEAD /echo?size=77 HTTP/1.1\r\nHost: t\r\n\r\nGET /echo?size=3 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut buf = Vec::new();
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                assert!(head.contains("Content-Length: 77"), "{arch}: HEAD {head}");
                buf.drain(..end + 4);
                break;
            }
            read_more(&mut s, &mut buf);
        }
        let r = read_response(&mut s, &mut buf);
        assert_eq!((r.status, r.body.len()), (200, 3), "{arch}: after HEAD");
    });
}

#[test]
fn keep_alive_and_close_semantics() {
    each_architecture(|arch, addr| {
        let mut s = connect(addr);
        for _ in 0..100 {
            let r = get(&mut s, "/echo?size=16");
            assert_eq!(r.status, 200, "{arch}");
            assert!(r.head.contains("keep-alive"), "{arch}: {}", r.head);
        }
        write!(s, "GET /echo?size=4 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf);
        assert!(r.head.contains("Connection: close"), "{arch}: {}", r.head);
        assert_closed(&mut s, &buf);
        // HTTP/1.0 closes by default.
        let mut s = connect(addr);
        write!(s, "GET /echo?size=4 HTTP/1.0\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf);
        assert_eq!(r.status, 200, "{arch}");
        assert_closed(&mut s, &buf);
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    each_architecture(|arch, addr| {
        let mut s = connect(addr);
        let sizes = [1usize, 200, 3, 4096, 0, 17, 65536, 5];
        let mut batch = String::new();
        for n in sizes {
            batch.push_str(&format!("GET /echo?size={n} HTTP/1.1\r\nHost: t\r\n\r\n"));
        }
        // Split the batch at an awkward place to exercise partial requests as well.
        let (a, b) = batch.as_bytes().split_at(batch.len() / 2 + 3);
        s.write_all(a).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        s.write_all(b).unwrap();
        let mut buf = Vec::new();
        for n in sizes {
            let r = read_response(&mut s, &mut buf);
            assert_eq!((r.status, r.body.len()), (200, n), "{arch}");
        }
    });
}

#[test]
fn malformed_requests_are_refused_and_closed_while_others_are_served() {
    let huge_header = format!("GET /echo?size=1 HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    let cases: [(&str, &[u8], u16); 5] = [
        ("bad request line", b"GARBAGE\r\n\r\n", 400),
        ("header block over 8 KiB", huge_header.as_bytes(), 431),
        ("body over the limit", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n", 413),
        (
            "Content-Length and Transfer-Encoding",
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
            400,
        ),
        ("bad header", b"GET / HTTP/1.1\r\nHo st: t\r\n\r\n", 400),
    ];
    each_architecture(|arch, addr| {
        // An innocent connection opened before the attacks and used after them.
        let mut other = connect(addr);
        assert_eq!(get(&mut other, "/echo?size=2").status, 200, "{arch}");
        for (what, bytes, status) in &cases {
            let mut s = connect(addr);
            s.write_all(bytes).unwrap();
            let mut buf = Vec::new();
            let r = read_response(&mut s, &mut buf);
            assert_eq!(r.status, *status, "{arch}: {what}: {}", r.head);
            assert!(r.head.contains("Connection: close"), "{arch}: {what}");
            assert_closed(&mut s, &buf);
            reopened_if_closed(&mut other, addr);
            assert_eq!(get(&mut other, "/echo?size=2").status, 200, "{arch}: served after {what}");
        }
    });
}

#[test]
fn a_thousand_concurrent_connections_are_all_served() {
    const N: usize = 1000;
    each_architecture(|arch, addr| {
        let mut conns: Vec<TcpStream> = (0..N).map(|_| connect(addr)).collect();
        for (i, s) in conns.iter_mut().enumerate() {
            write!(s, "GET /echo?size={} HTTP/1.1\r\nHost: t\r\n\r\n", i % 100).unwrap();
        }
        for (i, s) in conns.iter_mut().enumerate() {
            let r = read_response(s, &mut Vec::new());
            assert_eq!((r.status, r.body.len()), (200, i % 100), "{arch}: connection {i}");
        }
        for s in &conns {
            let _ = s.shutdown(Shutdown::Both);
        }
    });
}

#[test]
fn options_are_applied() {
    // A pool of one worker closes a connection after its response while another connection
    // waits, and keeps the connection alive when none waits. The acceptor queues a new
    // connection asynchronously, so the held connection is asked again (bounded) until the
    // worker has seen the waiting one: writing to both at once could let the worker keep the
    // first alive and block on it before the second is queued.
    let addr = start("blocking", &ServerOptions { threads: Some(1), ..Default::default() });
    let mut held = connect(addr);
    assert_eq!(get(&mut held, "/echo?size=1").status, 200);
    let mut waiting = connect(addr);
    let mut closed = false;
    for _ in 0..500 {
        write!(held, "GET /echo?size=1 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let head = read_response(&mut held, &mut Vec::new()).head;
        if head.contains("Connection: close") {
            closed = true;
            break;
        }
        assert!(head.contains("keep-alive"), "{head}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(closed, "the worker never closed the held connection while another waited");
    write!(waiting, "GET /echo?size=1 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let head = read_response(&mut waiting, &mut Vec::new()).head;
    assert!(head.contains("keep-alive"), "{head}");
    // A connection handed to a handler held by an idle keep-alive client is not left waiting:
    // the handler closes the idle connection and serves it (a one-thread pool, and one actor).
    for (arch, options) in [
        ("blocking", ServerOptions { threads: Some(1), ..Default::default() }),
        ("blocking-actor", ServerOptions { handlers: Some(1), ..Default::default() }),
    ] {
        let addr = start(arch, &options);
        let mut idle = connect(addr);
        assert_eq!(get(&mut idle, "/echo?size=1").status, 200, "{arch}");
        let mut starving = connect(addr);
        assert_eq!(get(&mut starving, "/echo?size=3").status, 200, "{arch}: the second connection was served");
        let mut rest = Vec::new();
        idle.read_to_end(&mut rest).expect("the idle connection was closed");
        assert!(rest.is_empty(), "{arch}");
    }
    let addr = start("netty", &ServerOptions { loops: Some(3), ..Default::default() });
    let mut conns: Vec<TcpStream> = (0..6).map(|_| connect(addr)).collect();
    for s in &mut conns {
        assert_eq!(get(s, "/prime?n=11").status, 200);
    }
}
