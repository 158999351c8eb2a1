//! Helpers shared by the server's integration tests: start an architecture in-process on
//! 127.0.0.1 port 0, connect a plain blocking client.

// Each test binary uses some of these helpers.
#![allow(dead_code)]

use archlab_netio::socket::listen;
use archlab_netio::socket::set_recv_buffer;
use archlab_server::{registry, ServerOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

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
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Read exactly one Content-Length framed response; returns (status line, body).
pub fn read_response(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed early");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .to_ascii_lowercase()
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap();
            if buf.len() >= end + 4 + len {
                assert_eq!(buf.len(), end + 4 + len, "one response only");
                let status = head.lines().next().unwrap().to_owned();
                return (status, buf[end + 4..].to_vec());
            }
        }
    }
}

/// Send one GET and read its response; returns (status line, body).
pub fn get(s: &mut TcpStream, target: &str) -> (String, Vec<u8>) {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
    read_response(s)
}
