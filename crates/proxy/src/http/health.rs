//! Active health: one thread per proxy that, every `probe_interval_ms`, probes each ejected
//! backend (and, with `health_path`, checks every backend) and closes pooled connections that
//! have been idle too long.
//!
//! A probe is a TCP connect within `connect_timeout_ms`; with `health_path` it is
//! `GET health_path` on a new connection, and only a 2xx status within `connect_timeout_ms` +
//! `backend_timeout_ms` counts as healthy. A backend that passes is readmitted (its failure
//! count reset); a checked backend that fails is ejected. The thread blocks in `connect`, `read`
//! and its sleep between rounds, never while holding anything a forwarding thread needs. It
//! holds the proxy weakly and ends with it.

use crate::http::backend::Backend;
use crate::http::Proxy;
use archlab_wire::http::{header_slots, parse_relayed_response_head};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Start the health thread of `proxy`.
pub fn start(proxy: &Arc<Proxy>) -> std::io::Result<()> {
    let weak: Weak<Proxy> = Arc::downgrade(proxy);
    let interval = Duration::from_millis(proxy.options.probe_interval_ms);
    std::thread::Builder::new().name("health".into()).spawn(move || loop {
        std::thread::sleep(interval);
        let Some(proxy) = weak.upgrade() else { return };
        round(&proxy);
    })?;
    Ok(())
}

/// One round of probes and checks.
pub fn round(proxy: &Proxy) {
    for b in proxy.balancer.backends() {
        let checked = proxy.options.health_path.is_some();
        if !checked && b.healthy() {
            continue;
        }
        if probe(proxy, b) {
            b.readmit();
        } else if checked {
            b.eject();
        }
    }
    proxy.pool.expire();
}

/// Whether the backend passes its probe.
fn probe(proxy: &Proxy, b: &Backend) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&b.addr, proxy.connect_timeout()) else { return false };
    let Some(path) = &proxy.options.health_path else { return true };
    let wait = proxy.connect_timeout() + proxy.backend_timeout();
    if s.set_read_timeout(Some(wait)).is_err() || s.set_write_timeout(Some(wait)).is_err() {
        return false;
    }
    let request = format!("GET {} HTTP/1.1\r\nHost: archlab-health\r\nConnection: close\r\n\r\n", path.0);
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        let mut slots = header_slots();
        match parse_relayed_response_head(&buf, &mut slots) {
            Ok(Some(r)) => return (200..300).contains(&r.status),
            Ok(None) => {}
            Err(_) => return false,
        }
    }
}
