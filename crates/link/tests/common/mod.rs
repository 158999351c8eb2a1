//! Shared by the link tests: links with unique names, sockets opened inside a side's
//! namespace, and the check that a stopped link left nothing behind.
//!
//! Every test here runs real namespaces, TUN devices and kernel TCP/UDP; none mocks the path.
//! Tests that time packets take `serial()` so that two links never compete for the two CPUs
//! while one of them is being measured.

#![allow(dead_code)]

use archlab_link::topology::LOCK_DIR;
use archlab_link::{namespace_names, netns, Control, Link, LinkConfig, LinkName, LinkReport, RawLink};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold while measuring time.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A link name unique to this process and test.
pub fn unique(tag: &str) -> String {
    format!("t{}-{tag}", std::process::id())
}

/// Start a link, failing with the reason (a missing privilege is a failure, not a skip).
pub fn start(raw: RawLink) -> Link {
    let config = LinkConfig::new(&raw).unwrap_or_else(|e| panic!("{e}"));
    Link::start(&config, Control::new().unwrap(), None)
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
    for (d, x) in [("up", &r.up), ("down", &r.down)] {
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
