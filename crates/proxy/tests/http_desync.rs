//! The proxy never desynchronises: what reaches a backend reads, under an independent strict
//! reading of HTTP framing (`archlab_wire::http_oracle`), as exactly the requests the proxy
//! answered for, and every answer reaches the client it belongs to. One test per finding of
//! an attacker's review, each run on every architecture that proxies, against a capture
//! backend that keeps every byte it receives ([`Capture`]); and the same hostile bytes sent
//! through HAProxy, whose backend must read the same requests wherever the proxy forwards
//! anything (the proxy may refuse more: it never forwards what HAProxy would not, nor
//! differently). HAProxy is Debian's, started by the test; without it the test fails.

mod support;

use archlab_server::ServerOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{
    backend, connect, eventually, exchange, options, proxy_architectures, read_any_response, start_proxy, Answer,
    Capture,
};

/// The reproduction of the finding: `Connection` names the `Content-Length` that frames the
/// body, whose bytes are a second request that would swallow the next client's request line
/// (and its cookies) into `X-Ignore`.
const SMUGGLE: &[u8] =
    b"POST /echo?size=1 HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 44\r\n\r\n\
                         GET /response?size=3000 HTTP/1.1\r\nX-Ignore: ";

/// What the client saw until the proxy closed the connection (bounded by the read timeout).
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while let Ok(n) = s.read(&mut chunk) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&chunk[..n]);
    }
    all
}

/// (method, target, body length) of each request a capture backend received.
fn seen(capture: &Capture) -> Vec<(String, String, usize)> {
    capture.requests().iter().map(|m| (m.method().to_owned(), m.target().to_owned(), m.body.len())).collect()
}

#[test]
fn the_connection_content_length_smuggle_is_refused_by_every_architecture() {
    let real = backend("single-thread");
    for arch in proxy_architectures() {
        let capture = Capture::start(Answer::Echo);
        for target in [real, capture.addr] {
            let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[target]));
            let mut attacker = connect(addr);
            attacker.write_all(SMUGGLE).unwrap();
            let r = read_any_response(&mut attacker, &mut Vec::new()).expect("an answer to the smuggle");
            assert_eq!(r.status, 400, "{arch}: {}", r.head);
            assert!(until_closed(&mut attacker).is_empty(), "{arch}: more after the 400");
            // The next client gets its own answer, on whatever pooled connection.
            let r = exchange(addr, b"GET /echo?size=12 HTTP/1.1\r\nHost: x\r\nCookie: secret\r\n\r\n");
            assert_eq!(r.status, 200, "{arch}: {}", r.head);
            if target == real {
                assert_eq!(r.body.len(), 12, "{arch}: the second client got another request's answer");
            } else {
                assert_eq!(r.body, b"GET /echo?size=12 0", "{arch}");
            }
        }
        assert_eq!(seen(&capture), [("GET".into(), "/echo?size=12".into(), 0)], "{arch}: the backend read more");
    }
}

#[test]
fn a_response_whose_connection_names_its_framing_is_a_bad_gateway() {
    // The answer names its own Content-Length in Connection, then a second answer follows it
    // on the connection: relayed without framing, it would glue the second to the first.
    let raw = b"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello\
                HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad"
        .to_vec();
    for arch in proxy_architectures() {
        let capture = Capture::start(Answer::Raw(raw.clone()));
        let (addr, proxy) = start_proxy(arch, ServerOptions::default(), options(&[capture.addr]));
        let mut s = connect(addr);
        let mut buf = Vec::new();
        for i in 0..2 {
            s.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let r = read_any_response(&mut s, &mut buf).expect("an answer");
            assert_eq!(r.status, 502, "{arch}: request {i}: {}", r.head);
            assert!(r.head.contains("Connection: keep-alive"), "{arch}: {}", r.head);
        }
        assert_eq!(proxy.report().backends[0].errors["bad_response"], 2, "{arch}");
        // Each backend connection was closed after its bad answer, never reused.
        let closed = eventually(Duration::from_secs(10), || {
            let r = capture.received();
            r.len() == 2 && r.iter().all(|c| c.closed)
        });
        assert!(closed, "{arch}: backend connections {:?}", capture.received());
    }
}

#[test]
fn framing_and_host_reach_the_backend_as_one_reading() {
    for arch in proxy_architectures() {
        let capture = Capture::start(Answer::Echo);
        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[capture.addr]));
        // Repeated lengths that agree are folded into one field (the oracle refuses any other).
        for lengths in ["Content-Length: 5, 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n"] {
            let req = format!("POST /a HTTP/1.1\r\nHost: t\r\n{lengths}\r\nhello");
            let r = exchange(addr, req.as_bytes());
            assert_eq!((r.status, r.body.as_slice()), (200, &b"POST /a 5"[..]), "{arch}: {lengths:?}");
        }
        // HTTP/1.0 may leave Host out; the backend gets one.
        let r = exchange(addr, b"GET /b HTTP/1.0\r\n\r\n");
        assert_eq!(r.body, b"GET /b 0", "{arch}");
        let forwarded = capture.requests().into_iter().find(|m| m.target() == "/b").unwrap();
        assert_eq!(forwarded.values("host").collect::<Vec<_>>(), [b"archlab-backend"], "{arch}");
        let before = capture.requests().len();
        for (what, req) in [
            ("two Host fields", &b"GET /c HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n"[..]),
            ("HTTP/1.1 without Host", b"GET /c HTTP/1.1\r\n\r\n"),
            ("an absolute-form target against Host", b"GET http://u/c HTTP/1.1\r\nHost: t\r\n\r\n"),
            ("Connection naming Host", b"GET /c HTTP/1.1\r\nHost: t\r\nConnection: Host\r\n\r\n"),
            (
                "Connection naming Transfer-Encoding",
                b"POST /c HTTP/1.1\r\nHost: t\r\nConnection: Transfer-Encoding\r\nContent-Length: 1\r\n\r\nx",
            ),
        ] {
            let r = exchange(addr, req);
            assert_eq!(r.status, 400, "{arch}: {what}: {}", r.head);
        }
        assert_eq!(capture.requests().len(), before, "{arch}: a refused request reached the backend");
    }
}

#[test]
fn an_answer_before_the_body_ends_the_exchange_without_forwarding_the_body() {
    // A backend that answers an `Expect: 100-continue` upload at once with a final status:
    // the client gets it without sending its body, then the connection closes (nothing else
    // could tell where its next request starts), and the backend connection is not reused.
    let refusal = b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n".to_vec();
    let head = b"PUT /up HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 900000\r\n\r\n";
    for arch in proxy_architectures() {
        let capture = Capture::start(Answer::BeforeBody(refusal.clone()));
        let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[capture.addr]));
        let mut s = connect(addr);
        s.write_all(head).unwrap();
        let r = read_any_response(&mut s, &mut Vec::new()).expect("the early answer");
        assert_eq!(r.status, 417, "{arch}: {}", r.head);
        assert!(r.head.contains("Connection: close"), "{arch}: {}", r.head);
        assert!(until_closed(&mut s).is_empty(), "{arch}: more after the early answer");
        let forwarded_only_the_head = eventually(Duration::from_secs(10), || {
            let r = capture.received();
            r.len() == 1 && r[0].closed
        });
        let received = capture.received();
        assert!(forwarded_only_the_head, "{arch}: backend connections {received:?}");
        let text = String::from_utf8_lossy(&received[0].bytes).into_owned();
        assert!(text.starts_with("PUT /up HTTP/1.1\r\n") && text.ends_with("\r\n\r\n"), "{arch}: {text:?}");
    }
}

/// HAProxy (Debian's `haproxy`) as a balancer in front of one backend, on a free port;
/// stopped when dropped.
struct Haproxy {
    addr: SocketAddr,
    child: Child,
    _config: std::path::PathBuf,
}

impl Haproxy {
    fn start(backend: SocketAddr) -> Haproxy {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let config = std::env::temp_dir().join(format!("archlab-desync-haproxy-{}-{port}.cfg", std::process::id()));
        std::fs::write(
            &config,
            format!(
                "global\n  maxconn 256\ndefaults\n  mode http\n  timeout connect 5s\n  timeout client 20s\n  \
                 timeout server 20s\nfrontend f\n  bind {addr}\n  default_backend b\nbackend b\n  server s {backend}\n"
            ),
        )
        .unwrap();
        let binary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].into_iter().find(|p| std::path::Path::new(p).exists());
        let binary =
            binary.expect("haproxy is not installed: install the Debian package haproxy (scripts/bootstrap test)");
        let child = Command::new(binary)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let up = eventually(Duration::from_secs(20), || TcpStream::connect(addr).is_ok());
        assert!(up, "haproxy did not listen on {addr}");
        Haproxy { addr, child, _config: config }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self._config);
    }
}

/// The request sent after each hostile one: its answer says that the relay read everything
/// before it (or the relay closed the connection, having refused).
const SENTINEL: &[u8] = b"GET /sentinel HTTP/1.1\r\nHost: t\r\n\r\n";

/// Send `bytes` then [`SENTINEL`] on a new connection, and read until the sentinel's answer
/// (a capture backend names the target it answers) or the end of the connection.
fn send_all_and_wait(addr: SocketAddr, bytes: &[u8]) {
    let mut s = connect(addr);
    s.write_all(bytes).unwrap();
    let _ = s.write_all(SENTINEL);
    let mut all = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while !all.windows(9).any(|w| w == b"/sentinel") {
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => all.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
}

#[test]
fn hostile_bytes_reach_the_backend_as_they_do_through_haproxy() {
    let vectors: [(&str, &[u8]); 18] = [
        ("Connection naming Content-Length", SMUGGLE),
        (
            "Connection naming Transfer-Encoding",
            b"POST /a HTTP/1.1\r\nHost: t\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n",
        ),
        ("a list of equal lengths", b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello"),
        (
            "repeated equal lengths",
            b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        ),
        ("lengths that disagree", b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhelloo"),
        (
            "Content-Length and Transfer-Encoding",
            b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n",
        ),
        ("a chunked request", b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
        ("two Host fields", b"GET /a HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n"),
        ("an absolute-form target against Host", b"GET http://u/a HTTP/1.1\r\nHost: t\r\n\r\n"),
        ("HTTP/1.1 without Host", b"GET /a HTTP/1.1\r\n\r\n"),
        ("HTTP/1.0 without Host", b"GET /a HTTP/1.0\r\n\r\n"),
        (
            "pipelined requests",
            b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nPOST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nxyz\
              GET /c HTTP/1.1\r\nHost: t\r\n\r\n",
        ),
        ("a length with leading zeros", b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 005\r\n\r\nhello"),
        ("a signed length", b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello"),
        ("a space before the colon", b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length : 5\r\n\r\nhello"),
        ("a folded header line", b"POST /a HTTP/1.1\r\nHost: t\r\nX: a\r\n Content-Length: 5\r\n\r\nhello"),
        ("a bare LF line ending", b"POST /a HTTP/1.1\nHost: t\r\nContent-Length: 5\r\n\r\nhello"),
        (
            "Expect with its body",
            b"POST /a HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
        ),
    ];
    // Both drivers of the exchange: a thread that may block, and an event loop.
    for arch in ["thread-per-connection", "single-thread"] {
        let mut stricter = Vec::new();
        for (what, bytes) in vectors {
            let ours = Capture::start(Answer::Echo);
            let (addr, _) = start_proxy(arch, ServerOptions::default(), options(&[ours.addr]));
            send_all_and_wait(addr, bytes);
            let theirs = Capture::start(Answer::Echo);
            let haproxy = Haproxy::start(theirs.addr);
            send_all_and_wait(haproxy.addr, bytes);
            let (ours, theirs) = (seen(&ours), seen(&theirs));
            if ours.is_empty() && !theirs.is_empty() {
                stricter.push(what);
                continue;
            }
            assert_eq!(ours, theirs, "{arch}: {what}: the backend read other requests than through HAProxy");
        }
        eprintln!("{arch}: refused where HAProxy forwards: {stricter:?}");
        assert!(stricter.contains(&"a chunked request"), "{arch}: chunked requests are refused by design");
    }
}
