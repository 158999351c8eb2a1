//! What the middleware's tests share: real memcached servers (Debian's `/usr/bin/memcached`,
//! started on 127.0.0.1 with free ports by `archlab_wire::memcached_process`; a missing
//! memcached fails the test saying how to install it), a middleware on a port-0 listener, and a
//! small blocking client that reads exactly one reply per request with the client codec, and
//! fails the test after 10 s without an answer, so a hang is a failure, not a stuck test.
#![allow(dead_code)]

use archlab_proxy::memcached::{Arch, Middleware, MiddlewareConfig};
use archlab_wire::memcached::{parse_reply, Parse, Reply};
use archlab_wire::memcached_process::{self, MemcachedProcess};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long a client waits for an answer before the test fails.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

pub fn memcacheds(n: usize) -> Vec<MemcachedProcess> {
    (0..n).map(|_| memcached_process::require(&[])).collect()
}

pub fn addrs(servers: &[MemcachedProcess]) -> Vec<SocketAddr> {
    servers.iter().map(|s| s.addr).collect()
}

pub fn config(servers: Vec<SocketAddr>, arch: Arch, workers: Option<usize>, sharded: bool) -> MiddlewareConfig {
    let mut c = MiddlewareConfig::new(servers);
    c.arch = arch;
    c.workers = workers;
    c.sharded = sharded;
    c
}

pub fn start(config: MiddlewareConfig) -> Middleware {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    Middleware::start(config, listener).expect("the middleware starts")
}

/// The architectures with their worker counts, as the tests run them.
pub fn every_arch() -> Vec<(Arch, Option<usize>)> {
    vec![(Arch::Seed, Some(4)), (Arch::Ring, Some(4)), (Arch::Actor, Some(4)), (Arch::EventLoop, None)]
}

/// One element of a reply, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum El {
    Value { key: Vec<u8>, flags: u32, data: Vec<u8> },
    End,
    Line(Vec<u8>),
}

/// The values of a retrieval reply: key, flags, data.
pub type Values = Vec<(Vec<u8>, u32, Vec<u8>)>;

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("the middleware accepts");
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
        Client { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        let n = match self.stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("no answer within {ANSWER_WITHIN:?}")
            }
            Err(e) => panic!("read failed: {e}"),
        };
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// One element, reading as needed.
    pub fn element(&mut self) -> El {
        loop {
            match parse_reply(&self.buf).unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.buf))) {
                Parse::Complete(r, n) => {
                    let el = match r {
                        Reply::Value { key, flags, data, .. } => {
                            El::Value { key: key.to_vec(), flags, data: data.to_vec() }
                        }
                        Reply::End => El::End,
                        _ => El::Line(self.buf[..n - 2].to_vec()),
                    };
                    self.buf.drain(..n);
                    return el;
                }
                Parse::Partial => assert!(self.fill() > 0, "the middleware closed the connection"),
            }
        }
    }

    /// The values of one retrieval reply (through `END`), or its error line.
    pub fn values(&mut self) -> Result<Values, String> {
        let mut out = Vec::new();
        loop {
            match self.element() {
                El::Value { key, flags, data } => out.push((key, flags, data)),
                El::End => return Ok(out),
                El::Line(l) => return Err(String::from_utf8_lossy(&l).into_owned()),
            }
        }
    }

    /// One status line.
    pub fn line(&mut self) -> String {
        match self.element() {
            El::Line(l) => String::from_utf8_lossy(&l).into_owned(),
            other => panic!("expected a status line, got {other:?}"),
        }
    }

    pub fn set(&mut self, key: &str, flags: u32, data: &[u8]) -> String {
        let mut req = format!("set {key} {flags} 0 {}\r\n", data.len()).into_bytes();
        req.extend_from_slice(data);
        req.extend_from_slice(b"\r\n");
        self.send(&req);
        self.line()
    }

    pub fn get(&mut self, keys: &[&str]) -> Result<Values, String> {
        self.send(format!("get {}\r\n", keys.join(" ")).as_bytes());
        self.values()
    }

    /// True once the middleware has closed the connection (after what was buffered).
    pub fn closed(&mut self) -> bool {
        self.buf.is_empty() && self.fill() == 0
    }

    /// Everything the peer sends until it closes the connection (a reset after its last bytes
    /// counts as a close), or an error saying what was received when it did not close within
    /// `within`.
    pub fn read_until_closed(&mut self, within: Duration) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + within;
        let mut got = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("not closed within {within:?}; received {:?}", String::from_utf8_lossy(&got)));
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("read failed: {e}"),
            }
        }
        self.stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
        Ok(got)
    }
}

/// A value straight from one memcached server, bypassing the middleware.
pub fn direct_get(server: SocketAddr, key: &str) -> Option<(u32, Vec<u8>)> {
    let mut c = Client::connect(server);
    c.get(&[key]).unwrap().pop().map(|(_, flags, data)| (flags, data))
}

/// `key` as `server` holds it once a write has reached it, or None after 5 s. A `noreply` write
/// goes to every server without the middleware waiting for any of them, so a server other than
/// the one a later get reads from may store it a moment after that get is answered.
pub fn direct_get_eventually(server: SocketAddr, key: &str) -> Option<(u32, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = direct_get(server, key);
        if got.is_some() || Instant::now() >= deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A counter of memcached's `stats` (e.g. `cmd_get`, which counts keys).
pub fn server_stat(server: SocketAddr, name: &str) -> u64 {
    let mut c = Client::connect(server);
    c.send(b"stats\r\n");
    let mut text = Vec::new();
    while !text.ends_with(b"END\r\n") {
        let mut chunk = [0u8; 8192];
        let n = c.stream.read(&mut chunk).unwrap();
        assert!(n > 0);
        text.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8(text).unwrap();
    let prefix = format!("STAT {name} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in {text}")).parse().unwrap()
}

/// Poll `cond` until it holds, at most `within`; the test fails naming `what` otherwise.
pub fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
