//! The conformance properties: what every server of the lab must do on a socket, each a
//! function of a [`Subject`] (a name and a way to start a fresh instance), so that the same
//! properties check every architecture of the registry (`tests/conformance.rs`) and every
//! architecture running the reverse proxy (`archlab-proxy`'s `tests/conformance.rs`).
//! [`conformance_suite!`](crate::conformance_suite) generates one test per (property, subject)
//! pair, so that a failure names its subject and `cargo test --test conformance reactor::` runs
//! one subject's suite.
//!
//! Properties that count the process's open descriptors (`a_peers_close_is_always_noticed`)
//! run alone: they take [`DESCRIPTORS`] for writing, every other test takes it for reading.

use super::{
    assert_closed, connect, get, open_descriptors, read_more, read_response, request, settle_to, try_read_response,
};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::RwLock;
use std::time::Duration;

/// Readers: tests whose connections may come and go at any time. Writer: a test that counts
/// the descriptors of the process and needs no other test to open or close any meanwhile.
pub static DESCRIPTORS: RwLock<()> = RwLock::new(());

/// What the properties run against.
pub struct Subject {
    pub name: String,
    start: Box<dyn Fn() -> SocketAddr>,
    /// Its shared blocking handlers close an idle keep-alive connection when another
    /// connection starves for a handler (`frontend::pool`, RFC 9112 §9.8): a client that holds
    /// many idle connections may see some of them closed and must retry on a new one.
    pub closes_idle_under_pressure: bool,
}

impl Subject {
    pub fn new(name: &str, closes_idle_under_pressure: bool, start: impl Fn() -> SocketAddr + 'static) -> Subject {
        Subject { name: name.to_string(), start: Box::new(start), closes_idle_under_pressure }
    }

    /// Start a fresh instance; its address.
    pub fn start(&self) -> SocketAddr {
        (self.start)()
    }
}

/// One test per (property, subject): `conformance_suite!(subject_fn; module => "name", ...)`
/// with `subject_fn(name: &'static str) -> Subject` in the invoking module; also defines `SUITE`,
/// the names covered.
#[macro_export]
macro_rules! conformance_suite {
    ($subject:ident; $($module:ident => $name:literal),* $(,)?) => {
        /// The subjects the generated tests cover.
        const SUITE: &[&str] = &[$($name),*];
        $(
            mod $module {
                use $crate::common::conformance as c;
                fn subject() -> c::Subject {
                    super::$subject($name)
                }
                fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
                    c::DESCRIPTORS.read().unwrap_or_else(|e| e.into_inner())
                }
                #[test]
                fn every_endpoint_answers_correctly() {
                    let _g = shared();
                    c::every_endpoint_answers_correctly(&subject())
                }
                #[test]
                fn keep_alive_and_close_semantics() {
                    let _g = shared();
                    c::keep_alive_and_close_semantics(&subject())
                }
                #[test]
                fn pipelined_requests_are_answered_in_order() {
                    let _g = shared();
                    c::pipelined_requests_are_answered_in_order(&subject())
                }
                #[test]
                fn malformed_requests_are_refused_and_closed_while_others_are_served() {
                    let _g = shared();
                    c::malformed_requests_are_refused_and_closed_while_others_are_served(&subject())
                }
                #[test]
                fn an_expected_body_is_invited_before_it_is_sent() {
                    let _g = shared();
                    c::an_expected_body_is_invited_before_it_is_sent(&subject())
                }
                #[test]
                fn a_thousand_concurrent_connections_are_all_served() {
                    let _g = shared();
                    c::a_thousand_concurrent_connections_are_all_served(&subject())
                }
                #[test]
                fn a_peers_close_is_always_noticed() {
                    let _alone = c::DESCRIPTORS.write().unwrap_or_else(|e| e.into_inner());
                    c::a_peers_close_is_always_noticed(&subject())
                }
            }
        )*
    };
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

pub fn every_endpoint_answers_correctly(subject: &Subject) {
    let arch = subject.name.as_str();
    let addr = subject.start();
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
    write!(s, "HEAD /echo?size=77 HTTP/1.1\r\nHost: t\r\n\r\nGET /echo?size=3 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
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
}

pub fn keep_alive_and_close_semantics(subject: &Subject) {
    let arch = subject.name.as_str();
    let addr = subject.start();
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
}

pub fn pipelined_requests_are_answered_in_order(subject: &Subject) {
    let arch = subject.name.as_str();
    let addr = subject.start();
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
}

pub fn malformed_requests_are_refused_and_closed_while_others_are_served(subject: &Subject) {
    let arch = subject.name.as_str();
    let huge_header = format!("GET /echo?size=1 HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    let cases: [(&str, &[u8], u16); 10] = [
        ("bad request line", b"GARBAGE\r\n\r\n", 400),
        ("header block over 8 KiB", huge_header.as_bytes(), 431),
        ("body over the limit", b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n", 413),
        (
            "Content-Length and Transfer-Encoding",
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc",
            400,
        ),
        ("bad header", b"GET / HTTP/1.1\r\nHo st: t\r\n\r\n", 400),
        // A request smuggle through a relay that drops the fields `Connection` names: the body
        // framed by the dropped length would reach the next hop as a request of its own.
        (
            "Connection naming Content-Length",
            b"POST /echo?size=1 HTTP/1.1\r\nHost: t\r\nConnection: Content-Length\r\nContent-Length: 44\r\n\r\n\
              GET /response?size=3000 HTTP/1.1\r\nX-Ignore: ",
            400,
        ),
        ("Connection naming Host", b"GET /echo?size=1 HTTP/1.1\r\nHost: t\r\nConnection: Host\r\n\r\n", 400),
        ("two Host fields", b"GET /echo?size=1 HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n", 400),
        ("HTTP/1.1 without Host", b"GET /echo?size=1 HTTP/1.1\r\n\r\n", 400),
        ("absolute-form target against Host", b"GET http://u/echo?size=1 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ];
    let addr = subject.start();
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
}

/// RFC 9110 §10.1.1: a client that sends `Expect: 100-continue` waits for `100 Continue` (or a
/// final answer) before sending its body. The property waits for the interim answer with the
/// body unsent, so a server or proxy that waits for the body first stalls it until the read
/// timeout fails it (curl would wait its expect timeout, 1 s, on every upload). The body then
/// goes, 900 KB as in the upload that showed the stall, and must be echoed whole; the
/// connection goes on.
pub fn an_expected_body_is_invited_before_it_is_sent(subject: &Subject) {
    let arch = subject.name.as_str();
    let addr = subject.start();
    let mut s = connect(addr);
    let body: Vec<u8> = (0..900_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for round in 0..2 {
        write!(
            s,
            "POST /echo?size=0 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        let mut buf = Vec::new();
        let end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            assert!(read_more(&mut s, &mut buf), "{arch}: round {round}: closed while the body was announced");
        };
        let interim = String::from_utf8_lossy(&buf[..end]).into_owned();
        assert!(interim.starts_with("HTTP/1.1 100 "), "{arch}: round {round}: {interim}");
        buf.drain(..end + 4);
        s.write_all(&body).unwrap();
        let r = read_response(&mut s, &mut buf);
        assert_eq!((r.status, r.body.len()), (200, body.len()), "{arch}: round {round}: {}", r.head);
        assert!(r.body == body, "{arch}: round {round}: the body came back changed");
    }
    assert_eq!(get(&mut s, "/echo?size=3").body.len(), 3, "{arch}: after the uploads");
}

pub fn a_thousand_concurrent_connections_are_all_served(subject: &Subject) {
    let arch = subject.name.as_str();
    const N: usize = 1000;
    let addr = subject.start();
    let mut conns: Vec<TcpStream> = (0..N).map(|_| connect(addr)).collect();
    for (i, s) in conns.iter_mut().enumerate() {
        // A write to a connection the server closed while it was idle fails; the read below
        // tells such a close from a failure.
        let _ = s.write_all(request(&format!("/echo?size={}", i % 100)).as_bytes());
    }
    let mut retried = 0;
    for (i, s) in conns.iter_mut().enumerate() {
        let mut buf = Vec::new();
        let r = try_read_response(s, &mut buf).unwrap_or_else(|| {
            assert!(subject.closes_idle_under_pressure, "{arch}: connection {i} closed without a response");
            assert!(buf.is_empty(), "{arch}: connection {i} ended inside a response");
            retried += 1;
            *s = connect(addr);
            get(s, &format!("/echo?size={}", i % 100))
        });
        assert_eq!((r.status, r.body.len()), (200, i % 100), "{arch}: connection {i}");
    }
    eprintln!("{arch}: {retried} of {N} connections closed while idle and retried");
    for s in &conns {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// Clients of each way of leaving, per kind (enough to show a leak: each one left open costs a
/// descriptor, and the property wants every one back).
const LEAVERS: usize = 20;

/// A client that connects and leaves without a whole request, half-closes after one, or
/// resets the connection: the server notices every one and closes its descriptor, so the
/// process's open descriptors return to what they were (clients of this test run in the same
/// process and are closed before the count is taken).
pub fn a_peers_close_is_always_noticed(subject: &Subject) {
    let arch = subject.name.as_str();
    let addr = subject.start();
    // The server is up (its threads, pollers, rings and reserve descriptor exist) once it has
    // answered; the baseline includes this connection's two ends, which close below.
    let mut warm = connect(addr);
    assert_eq!(get(&mut warm, "/echo?size=1").status, 200, "{arch}");
    let baseline = open_descriptors() - 2;
    drop(warm);
    for i in 0..LEAVERS {
        // Half a request, then close.
        let mut s = connect(addr);
        s.write_all(b"GET /echo?size=10 HTTP/1.1\r\nHost: t\r\n").unwrap();
        drop(s);
        // Connect and close without a byte.
        drop(connect(addr));
        // A whole request, then half-close: the response still comes, then the server closes.
        let mut s = connect(addr);
        s.write_all(request("/echo?size=10").as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf);
        assert_eq!((r.status, r.body.len()), (200, 10), "{arch}: half-closed client {i}");
        assert_closed(&mut s, &buf);
        drop(s);
        // Half a request, then a reset (SO_LINGER 0 makes close send RST).
        let s = connect(addr);
        (&s).write_all(b"GET /echo?size=10 HTTP/1.1\r\n").unwrap();
        let linger = libc::linger { l_onoff: 1, l_linger: 0 };
        // SAFETY: plain system call on a descriptor `s` owns, with a valid struct.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                &linger as *const libc::linger as *const libc::c_void,
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(s);
    }
    let left = settle_to(baseline);
    assert!(left <= baseline, "{arch}: {left} descriptors open, {baseline} before {} clients left", 4 * LEAVERS);
}
