//! Socket set-up: listeners on loopback with port 0, the per-socket options the seeds vary
//! (TCP_NODELAY, SO_SNDBUF/SO_RCVBUF, SO_REUSEPORT), and non-blocking connects for the load
//! generator. Options are set with `setsockopt` directly so that what was asked for and what the
//! kernel granted (Linux doubles SO_SNDBUF) can both be reported.

use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(fd, level, name, &value as *const _ as *const libc::c_void, size_of::<libc::c_int>() as u32)
    })
    .map(|_| ())
}

pub fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are live and sized for the kernel to write.
    cvt(unsafe { libc::getsockopt(fd, level, name, &mut value as *mut _ as *mut libc::c_void, &mut len) })?;
    Ok(value)
}

pub fn set_nodelay(fd: RawFd, on: bool) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as libc::c_int)
}

pub fn set_send_buffer(fd: RawFd, bytes: usize) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes.min(i32::MAX as usize) as libc::c_int)
}

pub fn set_recv_buffer(fd: RawFd, bytes: usize) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes.min(i32::MAX as usize) as libc::c_int)
}

/// Options for a listening socket.
#[derive(Clone, Debug)]
pub struct ListenOptions {
    pub backlog: i32,
    /// Several listeners may bind the same address (N-copy model).
    pub reuse_port: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        // A deep backlog so that 1,000 simultaneous connects are not dropped by the kernel
        // before a slow architecture gets to accept them.
        ListenOptions { backlog: 4096, reuse_port: false }
    }
}

/// Bind and listen on `addr` (port 0 picks a free port).
pub fn listen(addr: SocketAddr, opts: &ListenOptions) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscall; ownership of the fd passes to TcpListener below.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if opts.reuse_port {
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    let (storage, len) = sockaddr(addr);
    // SAFETY: storage holds a valid sockaddr of `len` bytes.
    cvt(unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len) })?;
    cvt(unsafe { libc::listen(fd, opts.backlog) })?;
    Ok(listener)
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; zeroed is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is large enough for sockaddr_in.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is large enough for sockaddr_in6.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Start a non-blocking connect; completion is signalled by writability (check
/// [`take_error`] then).
pub fn connect_nonblocking(addr: SocketAddr) -> io::Result<TcpStream> {
    connect_nonblocking_with(addr, None)
}

/// [`connect_nonblocking`] with SO_RCVBUF set to `rcvbuf` bytes first: the window scale is
/// chosen from the receive buffer at SYN time, so the buffer must be set before connecting.
pub fn connect_nonblocking_with(addr: SocketAddr, rcvbuf: Option<usize>) -> io::Result<TcpStream> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscall; ownership passes to TcpStream.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) })?;
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    if let Some(bytes) = rcvbuf {
        set_recv_buffer(fd, bytes)?;
    }
    let (storage, len) = sockaddr(addr);
    // SAFETY: storage holds a valid sockaddr of `len` bytes.
    let rc = unsafe { libc::connect(fd, &storage as *const _ as *const libc::sockaddr, len) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(stream)
}

/// The pending socket error (SO_ERROR), if any.
pub fn take_error(stream: &TcpStream) -> io::Result<Option<io::Error>> {
    let e = getsockopt_int(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok(if e == 0 { None } else { Some(io::Error::from_raw_os_error(e)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_port_zero_and_reuse_port() {
        let opts = ListenOptions { reuse_port: true, ..Default::default() };
        let a = listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = a.local_addr().unwrap();
        assert_ne!(addr.port(), 0);
        // SO_REUSEPORT lets a second copy bind the same port.
        let b = listen(addr, &opts).unwrap();
        assert_eq!(b.local_addr().unwrap(), addr);
        // Without it, the port is busy.
        assert!(listen(addr, &ListenOptions::default()).is_err());
    }

    #[test]
    fn send_buffer_is_doubled_by_linux() {
        let l = listen("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_send_buffer(s.as_raw_fd(), 16 * 1024).unwrap();
        let got = getsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap();
        assert_eq!(got, 32 * 1024);
    }

    #[test]
    fn nonblocking_connect_to_closed_port_reports_error() {
        let l = listen("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let s = connect_nonblocking(addr).unwrap();
        // Wait for the connect to finish (the socket turns writable, with POLLERR on failure)
        // instead of for time to pass; 60 s is far beyond loopback's refusal, only a hang fails.
        let mut pfd = libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut pfd, 1, 60_000) };
        assert_eq!(ready, 1, "the connect did not finish within 60 s");
        let e = take_error(&s).unwrap().expect("a pending error after a refused connect");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        assert_eq!(take_error(&s).unwrap().map(|e| e.to_string()), None, "SO_ERROR is cleared once read");
    }
}
