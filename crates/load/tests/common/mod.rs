//! A tiny keep-alive HTTP/1.1 server for the load generator's tests: one std thread per
//! connection, behaviour chosen per test (delay, status, body size, closing, hanging), and a
//! counter of responses written so that the generator's counts can be checked against the
//! server's, and a one-off stall (for the coordinated-omission test). Bound to 127.0.0.1:0;
//! everything stops when the server is dropped.

// Shared by the test binaries; each uses only part of it.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};

/// Generates each listed test, a `fn(archlab_load::Backend)`, once per load backend:
/// `epoll::NAME` and `io_uring::NAME`, so that one body checks the same accounting on both.
/// A kernel without io_uring fails the `io_uring::` tests with the cause (no skip).
#[allow(unused_macros)] // used by the test binaries that check accounting, not by every one
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod epoll {
            $(#[test]
            fn $name() {
                super::$name(archlab_load::Backend::Epoll)
            })*
        }
        mod io_uring {
            $(#[test]
            fn $name() {
                super::$name(archlab_load::Backend::IoUring)
            })*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_both_backends;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Behaviour {
    /// Sleep before each response (the service time R).
    pub delay: Duration,
    pub status: u16,
    pub body_len: usize,
    /// Close the connection instead of answering its k-th request (so every k-th request is lost).
    pub drop_every: Option<u64>,
    /// Never answer.
    pub hang: bool,
    /// Answer with `Connection: close`, then close.
    pub close_after_response: bool,
    /// (after, length): every response due in [first request + after, + length) is held
    /// until the end of that interval, as if the server froze (a GC pause, a `^Z`).
    pub stall: Option<(Duration, Duration)>,
    /// Answer every second request of a connection (the 2nd, 4th, ...) with this status, so
    /// that a client can check it matched the responses to its requests in order.
    pub alternate_status: Option<u16>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            delay: Duration::ZERO,
            status: 200,
            body_len: 5,
            drop_every: None,
            hang: false,
            close_after_response: false,
            stall: None,
            alternate_status: None,
        }
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    served: Arc<AtomicU64>,
    /// Connections whose server thread is still running.
    open: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(b: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (served2, stop2, open2) = (served.clone(), stop.clone(), open.clone());
        let first: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (b, served, stop, first) = (b.clone(), served2.clone(), stop2.clone(), first.clone());
                // Counted here, before the thread runs, so that a connection accepted is never
                // missed by `served_when_closed`.
                open2.fetch_add(1, Ordering::SeqCst);
                let open = open2.clone();
                std::thread::spawn(move || {
                    serve(conn, &b, &served, &stop, &first);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        TestServer { addr, served, open, stop, acceptor: Some(acceptor) }
    }

    /// Responses written, once every connection accepted so far has been closed by its client
    /// (a finished run closes all of its own): the count is then final. Waits on the count
    /// of open connections, bounded by 30 s.
    pub fn served_when_closed(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.open.load(Ordering::SeqCst) > 0 {
            assert!(
                Instant::now() < deadline,
                "{} server connections still open 30 s after the run",
                self.open.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        self.served()
    }

    /// Responses written completely so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // unblocks accept
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut s: TcpStream, b: &Behaviour, served: &AtomicU64, stop: &AtomicBool, first: &OnceLock<Instant>) {
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    s.set_nodelay(true).unwrap();
    let body = vec![b'x'; b.body_len];
    let conn_header = if b.close_after_response { "Connection: close\r\n" } else { "" };
    let head = format!("HTTP/1.1 {} Test\r\nContent-Length: {}\r\n{conn_header}\r\n", b.status, b.body_len);
    let mut response = head.into_bytes();
    response.extend_from_slice(&body);
    let alternate = b.alternate_status.map(|st| {
        let mut r = format!("HTTP/1.1 {st} Alt\r\nContent-Length: {}\r\n{conn_header}\r\n", b.body_len).into_bytes();
        r.extend_from_slice(&body);
        r
    });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut requests = 0u64;
    while !stop.load(Ordering::SeqCst) {
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            // A client that asks for `Connection: close` gets it (keep-alive off).
            let client_closes = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase().contains("connection: close");
            buf.drain(..end + 4);
            requests += 1;
            if b.hang {
                continue;
            }
            if b.drop_every == Some(requests) {
                return;
            }
            let first = *first.get_or_init(Instant::now);
            if let Some((after, length)) = b.stall {
                let (from, to) = (first + after, first + after + length);
                let now = Instant::now();
                if now >= from && now < to {
                    std::thread::sleep(to - now);
                }
            }
            if !b.delay.is_zero() {
                std::thread::sleep(b.delay);
            }
            let this = match &alternate {
                Some(alt) if requests.is_multiple_of(2) => alt,
                _ => &response,
            };
            if s.write_all(this).is_err() {
                return;
            }
            served.fetch_add(1, Ordering::SeqCst);
            if b.close_after_response || client_closes {
                return;
            }
        }
    }
}
