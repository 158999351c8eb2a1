//! What the proxy's tests run against: the proxy in-process in an architecture of the server
//! registry ([`start_proxy`]), real archlab backends in-process ([`backend`]), and small
//! misbehaving backends on real loopback sockets ([`Fake`]: slow, stalling, garbage, dying
//! mid-response, chunked), the pattern of memcached's `t/proxyunits.t` and nginx-tests'
//! in-config backends (field notes §8). Every socket binds 127.0.0.1 port 0.

// Each test binary uses some of these helpers.
#![allow(dead_code)]

use archlab_netio::socket::listen;
use archlab_proxy::http::{BackendList, Proxy, ProxyOptions};
use archlab_server::{registry, ServerOptions, REGISTRY};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The architectures that can run the proxy, from the registry.
pub fn proxy_architectures() -> Vec<&'static str> {
    REGISTRY.iter().filter(|a| a.proxy.can_proxy()).map(|a| a.name).collect()
}

/// A real archlab server (the workloads) of architecture `arch`, in-process; its address.
pub fn backend(arch: &str) -> SocketAddr {
    let listener = listen("127.0.0.1:0".parse().unwrap(), &registry::listen_options(arch)).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = registry::build(arch, &ServerOptions::default()).unwrap();
    std::thread::spawn(move || server.serve(listener));
    addr
}

/// Proxy options in front of `backends`, with the other options at their defaults.
pub fn options(backends: &[SocketAddr]) -> ProxyOptions {
    let list: Vec<String> = backends.iter().map(|a| a.to_string()).collect();
    ProxyOptions { backends: list.join(",").parse::<BackendList>().unwrap(), ..Default::default() }
}

/// The proxy of `options` served by architecture `arch` in-process; its address and its state.
pub fn start_proxy(arch: &str, server: ServerOptions, options: ProxyOptions) -> (SocketAddr, Arc<Proxy>) {
    let proxy = Proxy::new(options).unwrap();
    proxy.start().unwrap();
    let server = ServerOptions { service: proxy.service(), ..server };
    let listener = listen("127.0.0.1:0".parse().unwrap(), &registry::listen_options(arch)).unwrap();
    let addr = listener.local_addr().unwrap();
    let built = registry::build(arch, &server).unwrap_or_else(|e| panic!("{arch}: {e}"));
    std::thread::spawn(move || built.serve(listener));
    (addr, proxy)
}

/// Wait (bounded) until `done()` holds; false when it never did. Polls: the counters it reads
/// have no notification.
pub fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

/// How a fake backend answers every request.
#[derive(Clone)]
pub enum Behavior {
    /// 200 with this body (Content-Length), after `delay`; keep-alive.
    Answer { body: Vec<u8>, delay: Duration },
    /// Read the request, then never answer (until the proxy closes).
    Stall,
    /// Answer bytes that are not HTTP.
    Garbage,
    /// Read the request and close without a byte.
    CloseBeforeResponse,
    /// Send a head promising 1000 bytes, 10 of them, then close.
    DieMidResponse,
    /// 200 with this body in chunks of these sizes (chunked coding), keep-alive.
    Chunked { body: Vec<u8>, chunk_sizes: Vec<usize> },
    /// Per path: 200 with the path as body, except `/health`, answered `health_status`.
    Health { health_status: u16 },
}

/// A fake backend: one thread per connection, each request read (head and Content-Length body)
/// and answered as its [`Behavior`] says.
pub struct Fake {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
}

impl Fake {
    pub fn start(behavior: Behavior) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (behavior, counted) = (behavior.clone(), counted.clone());
                std::thread::spawn(move || {
                    let _ = serve_fake(stream, &behavior, &counted);
                });
            }
        });
        Fake { addr, requests }
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// The head of the next request on `s` (with `buf` holding what was read beyond it) and its
/// body; None at end of stream.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<(String, Vec<u8>)>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                if !fill(s, buf)? {
                    return Ok(None);
                }
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Ok(Some((head, body)));
        }
        if !fill(s, buf)? {
            return Ok(None);
        }
    }
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 64 * 1024];
    let n = s.read(&mut chunk)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

fn serve_fake(mut s: TcpStream, behavior: &Behavior, counted: &AtomicUsize) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf = Vec::new();
    while let Some((head, _body)) = read_request(&mut s, &mut buf)? {
        counted.fetch_add(1, Ordering::SeqCst);
        match behavior {
            Behavior::Answer { body, delay } => {
                // A slow server, not a test waiting for something: the delay is the behaviour.
                std::thread::sleep(*delay);
                s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes())?;
                s.write_all(body)?;
            }
            Behavior::Stall => {
                // Hold the connection until the proxy gives up on it.
                let mut sink = [0u8; 1024];
                while s.read(&mut sink)? > 0 {}
                return Ok(());
            }
            Behavior::Garbage => {
                s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")?;
                return Ok(());
            }
            Behavior::CloseBeforeResponse => return Ok(()),
            Behavior::DieMidResponse => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")?;
                return Ok(());
            }
            Behavior::Chunked { body, chunk_sizes } => {
                s.write_all(&chunked_response(body, chunk_sizes))?;
            }
            Behavior::Health { health_status } => {
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let status = if path == "/health" { *health_status } else { 200 };
                s.write_all(format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{path}", path.len()).as_bytes())?;
            }
        }
    }
    Ok(())
}

/// A whole chunked response carrying `body` in chunks of `sizes` (cycled).
pub fn chunked_response(body: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    out.extend_from_slice(&chunked_body(body, sizes));
    out
}

/// `body` in chunked coding, chunks of `sizes` (cycled), with a chunk extension and a trailer.
pub fn chunked_body(body: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    for &size in sizes.iter().cycle() {
        if at >= body.len() {
            break;
        }
        let n = size.max(1).min(body.len() - at);
        out.extend_from_slice(format!("{n:x};ext=1\r\n").as_bytes());
        out.extend_from_slice(&body[at..at + n]);
        out.extend_from_slice(b"\r\n");
        at += n;
    }
    out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
    out
}

/// Deterministic pseudo-random bytes (xoshiro256++ from `seed`).
pub fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = archlab_prng::Xoshiro256pp::new(seed);
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

/// A response as the client saw it: status, head, body (de-chunked when chunked: `raw_body`
/// keeps the bytes as they came), and whether the connection ended before it was whole.
#[derive(Debug)]
pub struct Seen {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
    pub raw_body: Vec<u8>,
    pub truncated: bool,
}

/// Read one response (Content-Length, chunked or until close) from `s`; None when the
/// connection ended before any byte.
pub fn read_any_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Seen> {
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if !fill(s, buf).unwrap_or(false) {
            assert!(buf.is_empty(), "the connection ended inside a head: {:?}", String::from_utf8_lossy(buf));
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let status: u16 = head[9..12].parse().unwrap();
    let lower = head.to_ascii_lowercase();
    let length =
        lower.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()));
    let chunked = lower.contains("transfer-encoding: chunked");
    let mut truncated = false;
    let (body, raw_body) = if chunked {
        let mut framing = archlab_wire::http::ChunkedFraming::default();
        let (mut body, mut raw) = (Vec::new(), Vec::new());
        loop {
            if buf.is_empty() && !fill(s, buf).unwrap_or(false) {
                truncated = true;
                break;
            }
            match framing.step(buf).expect("valid chunked framing from the proxy") {
                archlab_wire::http::Chunk::Data(n) => {
                    body.extend_from_slice(&buf[..n]);
                    raw.extend(buf.drain(..n));
                }
                archlab_wire::http::Chunk::Framing(n) => raw.extend(buf.drain(..n)),
                archlab_wire::http::Chunk::End(n) => {
                    raw.extend(buf.drain(..n));
                    break;
                }
                archlab_wire::http::Chunk::NeedMore => unreachable!("buf is not empty"),
            }
        }
        (body, raw)
    } else if let Some(len) = length.or(if status == 204 || status == 304 { Some(0) } else { None }) {
        while buf.len() < len {
            if !fill(s, buf).unwrap_or(false) {
                truncated = true;
                break;
            }
        }
        let body: Vec<u8> = buf.drain(..len.min(buf.len())).collect();
        (body.clone(), body)
    } else {
        while fill(s, buf).unwrap_or(false) {}
        let body: Vec<u8> = std::mem::take(buf);
        (body.clone(), body)
    };
    Some(Seen { status, head, body, raw_body, truncated })
}

/// Send `request` on a new connection to `addr` and read the response.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> Seen {
    let mut s = connect(addr);
    s.write_all(request).unwrap();
    read_any_response(&mut s, &mut Vec::new()).expect("a response")
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// How a [`Capture`] backend answers.
#[derive(Clone)]
pub enum Answer {
    /// Each request as the oracle reads it (`archlab_wire::http_oracle`): 200 with the body
    /// `METHOD TARGET BODY_LENGTH`, so that a client can tell which request its answer was for.
    Echo,
    /// These bytes, once per connection, as soon as a request head is whole (before its body:
    /// a server answering an `Expect: 100-continue` request with a final status).
    BeforeBody(Vec<u8>),
    /// These bytes, once per request the oracle reads.
    Raw(Vec<u8>),
}

/// What one connection of a [`Capture`] received.
#[derive(Clone, Debug, Default)]
pub struct Received {
    pub bytes: Vec<u8>,
    /// The peer closed (or reset) the connection.
    pub closed: bool,
}

/// A backend that keeps every byte each of its connections receives, to be read with the
/// oracle and compared with what the proxy accounted for, and answers as [`Answer`] says. A
/// stream the oracle finds ambiguous is not answered (the connection is closed): what a proxy
/// forwards must never be ambiguous.
pub struct Capture {
    pub addr: SocketAddr,
    conns: Arc<std::sync::Mutex<Vec<Received>>>,
}

impl Capture {
    pub fn start(answer: Answer) -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let conns: Arc<std::sync::Mutex<Vec<Received>>> = Arc::default();
        let all = conns.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let index = {
                    let mut all = all.lock().unwrap();
                    all.push(Received::default());
                    all.len() - 1
                };
                let (all, answer) = (all.clone(), answer.clone());
                std::thread::spawn(move || capture_conn(stream, &answer, &all, index));
            }
        });
        Capture { addr, conns }
    }

    /// What every connection received so far, in the order they were accepted.
    pub fn received(&self) -> Vec<Received> {
        self.conns.lock().unwrap().clone()
    }

    /// Every whole request the backend received, as the oracle reads each connection's bytes;
    /// panics on a stream the oracle finds ambiguous, naming it.
    pub fn requests(&self) -> Vec<archlab_wire::http_oracle::Message> {
        let mut all = Vec::new();
        for (i, r) in self.received().iter().enumerate() {
            match archlab_wire::http_oracle::requests(&r.bytes) {
                Ok((requests, _)) => all.extend(requests),
                Err(e) => panic!(
                    "connection {i} received an ambiguous stream ({e:?}): {:?}",
                    String::from_utf8_lossy(&r.bytes)
                ),
            }
        }
        all
    }
}

fn capture_conn(mut s: TcpStream, answer: &Answer, all: &std::sync::Mutex<Vec<Received>>, index: usize) {
    let _ = s.set_nodelay(true);
    let mut answered = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk).unwrap_or(0);
        let bytes = {
            let mut all = all.lock().unwrap();
            let conn = &mut all[index];
            conn.bytes.extend_from_slice(&chunk[..n]);
            conn.closed = n == 0;
            conn.bytes.clone()
        };
        if n == 0 {
            return;
        }
        let reply = match answer {
            Answer::BeforeBody(raw) => {
                if answered > 0 || !bytes.windows(4).any(|w| w == b"\r\n\r\n") {
                    continue;
                }
                answered = 1;
                raw.clone()
            }
            Answer::Echo | Answer::Raw(_) => {
                let Ok((requests, _)) = archlab_wire::http_oracle::requests(&bytes) else { return };
                let mut reply = Vec::new();
                for m in &requests[answered..] {
                    match answer {
                        Answer::Raw(raw) => reply.extend_from_slice(raw),
                        _ => {
                            let body = format!("{} {} {}", m.method(), m.target(), m.body.len());
                            reply.extend_from_slice(
                                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
                            );
                        }
                    }
                }
                answered = requests.len();
                reply
            }
        };
        if s.write_all(&reply).is_err() {
            return;
        }
    }
}
