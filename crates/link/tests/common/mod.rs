//! Shared by the link tests: links with unique names, sockets opened inside a side's
//! namespace, and the check that a stopped link left nothing behind.
//!
//! Every test here runs real namespaces, TUN devices and kernel TCP/UDP; none mocks the path.
//! Tests that time packets take `serial()` so that two links never compete for the two CPUs
//! while one of them is being measured.

#![allow(dead_code)]

use archlab_link::topology::LOCK_DIR;
use archlab_link::{
    namespace_names, netns, Control, Direction, Link, LinkConfig, LinkName, LinkReport, PacketCounts, RawLink,
    ThreadOptions,
};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold while measuring time.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A link name unique to this process and test.
pub fn unique(tag: &str) -> String {
    format!("t{}-{tag}", std::process::id())
}

/// Start a link as `archlab-engine link` does by default, failing with the reason (a missing
/// privilege is a failure, not a skip).
pub fn start(raw: RawLink) -> Link {
    let config = LinkConfig::new(&raw).unwrap_or_else(|e| panic!("{e}"));
    Link::start(&config, Control::new().unwrap(), &ThreadOptions::default())
        .unwrap_or_else(|e| panic!("cannot start link {}: {e}", raw.name))
}

pub fn raw(tag: &str) -> RawLink {
    RawLink { name: unique(tag), ..Default::default() }
}

/// Stop the link and check that its namespaces and its lock file are gone.
pub fn finish(link: Link) -> LinkReport {
    let name = LinkName::new(&link.config().name.to_string()).unwrap();
    let report = link.stop().unwrap_or_else(|e| panic!("stopping the link failed: {e}"));
    assert_nothing_left(&name);
    report
}

pub fn assert_nothing_left(name: &LinkName) {
    for ns in namespace_names(name) {
        assert!(!netns::exists(&ns), "namespace {ns} still exists");
    }
    let lock = Path::new(LOCK_DIR).join(format!("{name}.lock"));
    assert!(!lock.exists(), "{} still exists", lock.display());
}

/// Every packet read is accounted for exactly once.
pub fn assert_accounted(r: &LinkReport) {
    for (d, x) in [("up", &r.up.counts), ("down", &r.down.counts)] {
        let out = x.packets_out + x.loss_drops + x.queue_drops + x.hold_drops + x.write_errors + x.held;
        assert_eq!(x.packets_in, out, "{d}: packets in vs out + drops + held: {x:?}");
    }
}

pub fn udp_socket(netns_name: &str, ip: Ipv4Addr) -> UdpSocket {
    let s = netns::run_in(netns_name, || UdpSocket::bind((ip, 0))).unwrap();
    // Bounds every wait: a lost datagram never hangs a test.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

pub fn tcp_listener(netns_name: &str, ip: Ipv4Addr) -> TcpListener {
    netns::run_in(netns_name, || TcpListener::bind((ip, 0))).unwrap()
}

pub fn tcp_connect(netns_name: &str, to: SocketAddr) -> TcpStream {
    let s = netns::run_in(netns_name, || TcpStream::connect_timeout(&to, Duration::from_secs(5))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Median of a sample (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Ping-like round trips across the link, in microseconds: ICMP echo requests from a raw
/// socket in the client namespace, answered by the server namespace's kernel itself. The
/// start is read just before `sendto` (which hands the request to the client's TUN device
/// synchronously) and the end is the kernel's receive timestamp of the reply
/// (`SO_TIMESTAMPNS`), as `ping` does; so neither end's thread wake-up is in the figure, only
/// the kernel paths, the link's forwarding and its delay. Both readings are CLOCK_REALTIME,
/// the clock of socket timestamps.
///
/// Requests start `period` apart (or back to back when the previous answer comes later), so
/// that traffic of the same rhythm can be compared with and without a delay.
pub fn icmp_rtts_us(link: &Link, samples: usize, period: Duration) -> Vec<f64> {
    let client = link.client().clone();
    let fd = netns::run_in(&client.netns, || {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_ICMP) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .expect("a raw ICMP socket (needs CAP_NET_RAW)");
    let one: libc::c_int = 1;
    let timeout = libc::timeval { tv_sec: 5, tv_usec: 0 };
    // SAFETY: valid option values of the right sizes on a valid socket.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            4,
        );
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(client.peer).to_be() },
        sin_zero: [0; 8],
    };
    let id = (std::process::id() & 0xffff) as u16;
    let mut rtts = Vec::with_capacity(samples);
    // The first exchanges warm caches and the forwarders' wake-up margins.
    let mut next_send = Instant::now();
    for seq in 0..(samples + 20) as u16 {
        // Pacing, not synchronisation: the answer has already come.
        std::thread::sleep(next_send.saturating_duration_since(Instant::now()));
        next_send = Instant::now() + period;
        let mut echo = [0u8; 24];
        echo[0] = 8; // echo request
        echo[4..6].copy_from_slice(&id.to_be_bytes());
        echo[6..8].copy_from_slice(&seq.to_be_bytes());
        let sum = internet_checksum(&echo);
        echo[2..4].copy_from_slice(&sum.to_be_bytes());
        let sent = std::time::SystemTime::now();
        // SAFETY: valid buffer and address of the right sizes.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                echo.as_ptr().cast(),
                echo.len(),
                0,
                (&to as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as u32,
            )
        };
        assert_eq!(n, echo.len() as isize, "sendto: {}", std::io::Error::last_os_error());
        let received = recv_echo_reply(fd.as_raw_fd(), id, seq);
        let rtt = received.duration_since(sent).expect("the reply comes after the request");
        if seq >= 20 {
            rtts.push(rtt.as_nanos() as f64 / 1e3);
        }
    }
    rtts
}

/// Wait for the echo reply `(id, seq)` and return its kernel receive time.
fn recv_echo_reply(fd: std::os::fd::RawFd, id: u16, seq: u16) -> std::time::SystemTime {
    loop {
        let mut buf = [0u8; 256];
        let mut control = [0u64; 16];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: msghdr is plain data; the pointers set below stay valid during recvmsg.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        assert!(n > 0, "no echo reply within 5 s: {}", std::io::Error::last_os_error());
        let packet = &buf[..n as usize];
        let icmp = &packet[((packet[0] & 0x0f) as usize * 4)..];
        if icmp[0] != 0 || icmp[4..6] != id.to_be_bytes() || icmp[6..8] != seq.to_be_bytes() {
            continue;
        }
        // SAFETY: walking the control messages the kernel wrote into `control`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    return std::time::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        panic!("the echo reply carries no receive timestamp");
    }
}

/// The 16-bit one's complement checksum of IP and ICMP (RFC 1071).
fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Wait, at most 10 s, until the counts of direction `d` satisfy `done`; returns them. The
/// forwarder updates them as it works, so this waits on the link's own progress.
pub fn wait_counts(link: &Link, d: Direction, done: impl Fn(&PacketCounts) -> bool) -> PacketCounts {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = link.counts(d);
        if done(&c) {
            return c;
        }
        assert!(Instant::now() < deadline, "the {} direction did not get there in 10 s: {c:?}", d.name());
        std::thread::yield_now();
    }
}

/// A UDP socket in the server namespace whose receive buffer holds `bytes` (SO_RCVBUFFORCE),
/// so that datagrams the test reads late are not dropped by the socket.
pub fn udp_receiver(link: &Link, bytes: usize) -> UdpSocket {
    let s = udp_socket(&link.server().netns, link.server().addr);
    let size = bytes as libc::c_int;
    // SAFETY: a valid option value of the right size on a valid socket.
    let rc = unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, (&size as *const libc::c_int).cast(), 4)
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE: {}", std::io::Error::last_os_error());
    s
}

/// Read every datagram waiting on `s` (without blocking) as little-endian u32 sequence numbers.
pub fn drain_sequence_numbers(s: &UdpSocket) -> Vec<u32> {
    s.set_nonblocking(true).unwrap();
    let mut seqs = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        match s.recv(&mut buf) {
            Ok(n) => {
                assert!(n >= 4, "a datagram of {n} bytes");
                seqs.push(u32::from_le_bytes(buf[..4].try_into().unwrap()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return seqs,
            Err(e) => panic!("recv: {e}"),
        }
    }
}
