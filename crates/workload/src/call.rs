//! `/call?ms=M`: a blocking call to a downstream HTTP service that answers after M ms
//! (blocking I/O with latency, as a servlet calling a back-end does), and `/delay?ms=M`, the
//! downstream side: sleep M ms on the calling thread, then answer.
//!
//! The downstream is another `archlab-engine serve` process (architecture `sync`, one thread
//! per connection, so that sleeping requests do not wait for each other) started by the lab
//! (`python/archlab/lab/services/`) and named to the measured server with `--downstream
//! HOST:PORT`. The call is `GET /delay?ms=M HTTP/1.1` on a keep-alive connection that each
//! server thread keeps in its [`Context`] (one connection per thread, reconnecting once after
//! an error), so a measured request costs one downstream round trip plus M ms, not a TCP
//! handshake. The calling thread blocks in `read` for the whole delay: in a single event loop
//! that stalls every connection, which is what this workload exposes.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Largest `/call?ms=` and `/delay?ms=`: one minute.
pub const DELAY_MAX_MS: u64 = 60_000;
/// Largest downstream response accepted (its body is `/delay`'s short text).
const MAX_RESPONSE: usize = 64 * 1024;

/// Per-thread resources of the workloads: where `/call` goes, and the open connections (one
/// per call a fan-out step issues at once; `/call` uses the first); the process's database pool
/// of `/db` (shared by every thread); the service programs of `/program`.
#[derive(Debug, Default)]
pub struct Context {
    downstream: Option<SocketAddr>,
    conns: Vec<Option<TcpStream>>,
    db: Option<Arc<crate::DbPool>>,
    programs: Option<crate::ProgramSet>,
}

impl Context {
    pub fn new(downstream: Option<SocketAddr>) -> Context {
        Context { downstream, conns: Vec::new(), db: None, programs: None }
    }

    /// The same context with `/db`'s pool.
    pub fn with_db(mut self, db: Option<Arc<crate::DbPool>>) -> Context {
        self.db = db;
        self
    }

    /// The same context with `/program`'s programs.
    pub fn with_programs(mut self, programs: Option<crate::ProgramSet>) -> Context {
        self.programs = programs;
        self
    }

    pub fn db(&self) -> Option<&crate::DbPool> {
        self.db.as_deref()
    }

    pub fn downstream(&self) -> Option<SocketAddr> {
        self.downstream
    }

    pub(crate) fn programs(&self) -> Option<&crate::ProgramSet> {
        self.programs.as_ref()
    }
}

const NO_DOWNSTREAM: &str = "no downstream service (start the server with --downstream HOST:PORT)";

/// `/delay`: sleep, then a short body naming the delay.
pub(crate) fn delay(ms: u64, out: &mut Vec<u8>) {
    std::thread::sleep(Duration::from_millis(ms));
    out.extend_from_slice(format!("slept {ms} ms").as_bytes());
}

/// `/call`: the downstream's body is appended; errors say why the call failed.
pub(crate) fn call(ms: u64, ctx: &mut Context, out: &mut Vec<u8>) -> Result<(), String> {
    let addr = ctx.downstream.ok_or(NO_DOWNSTREAM)?;
    if ctx.conns.is_empty() {
        ctx.conns.push(None);
    }
    call_on(addr, &mut ctx.conns[0], ms, out)
}

/// One call on `slot`'s connection, retried once on a fresh connection if a kept one failed.
fn call_on(addr: SocketAddr, slot: &mut Option<TcpStream>, ms: u64, out: &mut Vec<u8>) -> Result<(), String> {
    let fresh = slot.is_none();
    match round_trip(ms, addr, slot, out) {
        Ok(()) => Ok(()),
        // A kept connection may have been closed by the downstream meanwhile: retry once.
        Err(_) if !fresh => round_trip(ms, addr, slot, out).map_err(|e| format!("downstream {addr}: {e}")),
        Err(e) => Err(format!("downstream {addr}: {e}")),
    }
}

/// A fan-out step: one `GET /delay?ms=M` per entry of `ms`, each on its own keep-alive
/// connection, all sent before any response is read, so the downstream works on them at the
/// same time and the thread waits for the slowest, not for the sum. Bodies are appended in
/// order. A kept connection found closed while reading is replaced and that one call repeated.
pub(crate) fn fan_out(ms: &[u64], ctx: &mut Context, out: &mut Vec<u8>) -> Result<(), String> {
    let addr = ctx.downstream.ok_or(NO_DOWNSTREAM)?;
    if ctx.conns.len() < ms.len() {
        ctx.conns.resize_with(ms.len(), || None);
    }
    let failed = |e: io::Error| format!("downstream {addr}: {e}");
    // Which requests went out on a connection kept from an earlier request (retryable).
    let mut kept = [false; crate::program::FANOUT_MAX_CALLS];
    for (i, &m) in ms.iter().enumerate() {
        let slot = &mut ctx.conns[i];
        kept[i] = slot.is_some();
        let conn = match slot {
            Some(c) => c,
            None => slot.insert(connect(addr).map_err(failed)?),
        };
        if let Err(e) = send(conn, m) {
            *slot = None;
            if !kept[i] {
                return Err(failed(e));
            }
            let conn = slot.insert(connect(addr).map_err(failed)?);
            send(conn, m).map_err(failed)?;
            kept[i] = false;
        }
    }
    for (i, &m) in ms.iter().enumerate() {
        let slot = &mut ctx.conns[i];
        let conn = slot.as_mut().expect("connected above");
        let start = out.len();
        match receive(conn, out) {
            Ok(true) => {}
            Ok(false) => *slot = None,
            Err(e) => {
                out.truncate(start);
                *slot = None;
                if !kept[i] {
                    return Err(failed(e));
                }
                round_trip(m, addr, slot, out).map_err(failed)?;
            }
        }
    }
    Ok(())
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    Ok(s)
}

fn round_trip(ms: u64, addr: SocketAddr, slot: &mut Option<TcpStream>, out: &mut Vec<u8>) -> io::Result<()> {
    if slot.is_none() {
        *slot = Some(connect(addr)?);
    }
    let conn = slot.as_mut().expect("connected");
    let result = send(conn, ms).and_then(|()| receive(conn, out));
    if !matches!(result, Ok(true)) {
        *slot = None;
    }
    result.map(|_| ())
}

/// The request of one call.
fn send(conn: &mut TcpStream, ms: u64) -> io::Result<()> {
    // Downstream socket calls are not counted: the counters measure the server's I/O with its clients.
    conn.write_all(format!("GET /delay?ms={ms} HTTP/1.1\r\nHost: downstream\r\n\r\n").as_bytes())
}

/// One response; its body is appended to `out`; Ok(keep) says whether the connection may be reused.
fn receive(conn: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<bool> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    let invalid = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_owned());
    loop {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before the response"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_RESPONSE {
            return Err(invalid("response too large"));
        }
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = std::str::from_utf8(&buf[..end]).map_err(|_| invalid("response head is not UTF-8"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(invalid(&format!("status {:?}", head.lines().next().unwrap_or(""))));
        }
        let length = head
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .ok_or_else(|| invalid("no Content-Length"))?;
        let keep = !head.to_ascii_lowercase().contains("connection: close");
        let body_start = end + 4;
        while buf.len() < body_start + length {
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed inside the body"));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        out.extend_from_slice(&buf[body_start..body_start + length]);
        return Ok(keep && buf.len() == body_start + length);
    }
}
