//! The one test client of the server's integration tests: start an architecture in-process on
//! 127.0.0.1 port 0, connect plain blocking sockets, send requests and read Content-Length
//! framed responses (keeping what arrived beyond a response for the next one).

// Each test binary uses some of these helpers.
#![allow(dead_code)]

pub mod conformance;

use archlab_netio::socket::listen;
use archlab_netio::socket::set_recv_buffer;
use archlab_server::{registry, ServerOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// Build `name` from the registry and serve it on a thread; returns its address.
pub fn start(name: &str, options: &ServerOptions) -> SocketAddr {
    let listener = listen("127.0.0.1:0".parse().unwrap(), &registry::listen_options(name)).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = registry::build(name, options).unwrap();
    std::thread::spawn(move || server.serve(listener));
    addr
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // `write!` issues several small writes: without TCP_NODELAY, Nagle + delayed ACK would add
    // 40 ms to a request and the tests would measure the client, not the server.
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// A client socket with a small receive buffer (seed 001 §4.3), so that a 100 KiB response
/// cannot sit in the client's kernel buffer while the client is not reading.
pub fn small_window_client(addr: SocketAddr) -> TcpStream {
    // SAFETY: plain syscall; ownership passes to TcpStream.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    set_recv_buffer(fd, 4096).unwrap(); // before connect: it sets the window
    let SocketAddr::V4(a) = addr else { panic!("IPv4 expected") };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
        sin_zero: [0; 8],
    };
    // SAFETY: sin is a valid sockaddr_in of the given size.
    let rc = unsafe {
        libc::connect(fd, &sin as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32)
    };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// The status line and the headers, without the blank line.
    pub head: String,
    pub body: Vec<u8>,
}

/// Read exactly one response (Content-Length framed) from `s`, keeping leftovers in `buf`.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Response {
    try_read_response(s, buf).unwrap_or_else(|| {
        panic!("connection closed before a whole response (have {:?})", String::from_utf8_lossy(buf))
    })
}

/// As [`read_response`], None when the server closed the connection before a whole response.
pub fn try_read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Response> {
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
                if !read_more(s, buf) {
                    return None;
                }
            }
            let body = buf[end + 4..total].to_vec();
            buf.drain(..total);
            return Some(Response { status, head, body });
        }
        if !read_more(s, buf) {
            return None;
        }
    }
}

/// One read into `buf`; false at end of stream (or a reset).
pub fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = vec![0u8; 256 * 1024];
    match s.read(&mut chunk) {
        Ok(0) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => false,
        Err(e) => panic!("read: {e}"),
    }
}

pub fn request(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n")
}

/// Send one GET and read its response.
pub fn get(s: &mut TcpStream, target: &str) -> Response {
    s.write_all(request(target).as_bytes()).unwrap();
    read_response(s, &mut Vec::new())
}

/// Send one GET on a keep-alive connection the server may have closed while it was idle, as
/// HTTP lets a server do at any time (RFC 9112 §9.8; the shared blocking handlers do it when
/// another connection starves for them): when the connection ends before any byte of the
/// response, the request is sent again once on a new connection, which replaces `s` (RFC 9112
/// §9.3.1: a client may retry an idempotent request after such a close).
pub fn get_retrying_idle_close(s: &mut TcpStream, addr: SocketAddr, target: &str) -> Response {
    let sent = s.write_all(request(target).as_bytes());
    let mut buf = Vec::new();
    if let Some(r) = sent.ok().and_then(|_| try_read_response(s, &mut buf)) {
        return r;
    }
    assert!(buf.is_empty(), "the connection ended inside a response: {:?}", String::from_utf8_lossy(&buf));
    *s = connect(addr);
    get(s, target)
}

/// After an error response the server must close: the next read sees end of stream.
pub fn assert_closed(s: &mut TcpStream, buf: &[u8]) {
    assert!(buf.is_empty(), "unexpected bytes after the response");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("read to end");
    assert!(rest.is_empty(), "bytes after the response: {:?}", String::from_utf8_lossy(&rest));
}

/// Descriptors open in this process (servers under test run in-process).
pub fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Wait (bounded by `IO_TIMEOUT`) until `condition` holds; false if it never did. Polls: the
/// conditions waited for (the server's counters, the kernel's queues) have no notification.
pub fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An integer socket option of descriptor `fd`; None when `fd` is not a socket (or was closed).
pub fn sockopt_int(fd: i32, level: libc::c_int, name: libc::c_int) -> Option<i32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a plain system call on a descriptor number with a buffer of the stated size; a
    // descriptor that is not a socket (or was closed meanwhile) fails it.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    (rc == 0).then_some(value)
}

/// This process's IPv4 TCP sockets whose local port is `port`: (descriptor, whether it is a
/// listener). The server runs in the test's process, so its accepted connections are here.
pub fn sockets_on(port: u16) -> Vec<(i32, bool)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Some(listening) = sockopt_int(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) else { continue };
        // SAFETY: zeroed plain-old-data for the kernel to fill.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: as in `sockopt_int`.
        let named = unsafe { libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) } == 0;
        if named && addr.sin_family == libc::AF_INET as libc::sa_family_t && u16::from_be(addr.sin_port) == port {
            found.push((fd, listening == 1));
        }
    }
    found
}

/// Connections waiting in the accept queues of this process's listening sockets on `port`
/// (several with SO_REUSEPORT), as the kernel reports them: TCP_INFO's `tcpi_unacked` is a
/// listener's accept-queue length.
pub fn listen_queue(port: u16) -> usize {
    let mut waiting = 0;
    for (fd, listening) in sockets_on(port) {
        if !listening {
            continue;
        }
        // SAFETY: zeroed plain-old-data for the kernel to fill.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: as in `sockopt_int`.
        let rc = unsafe {
            libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&mut info as *mut libc::tcp_info).cast(), &mut len)
        };
        if rc == 0 {
            waiting += info.tcpi_unacked as usize;
        }
    }
    waiting
}

/// Wait (bounded by `IO_TIMEOUT`) until the process has at most `limit` descriptors open;
/// returns the last count. Polls: descriptor counts have no notification.
pub fn settle_to(limit: usize) -> usize {
    let deadline = Instant::now() + IO_TIMEOUT;
    loop {
        let n = open_descriptors();
        if n <= limit || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `clients` closed-loop clients, each on its own keep-alive connection, sending GET of the
/// current `target` (which the test may change mid-run) until `stop` is set or `deadline`
/// passes (the load is bounded in time whatever the test does); every answer must be 200.
/// Returns the threads (join them) and the count of completed requests.
pub fn closed_loop(
    addr: SocketAddr,
    clients: usize,
    target: std::sync::Arc<std::sync::RwLock<String>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    deadline: Instant,
) -> (Vec<std::thread::JoinHandle<()>>, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::Ordering;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads = (0..clients)
        .map(|_| {
            let (target, stop, done) = (target.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut s = connect(addr);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let path = target.read().unwrap().clone();
                    let r = get_retrying_idle_close(&mut s, addr, &path);
                    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    (threads, done)
}
