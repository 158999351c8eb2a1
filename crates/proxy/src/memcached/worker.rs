//! A worker thread of the hand-off architectures (seed 002 §1.6-1.7): it holds one blocking
//! connection to every memcached server and runs one request at a time, taken from the
//! hand-off: a `set` is written to every server, then every reply is read (the servers work in
//! parallel; the request waits for the slowest); a retrieval is written as planned (whole to
//! one server, or one part per server) and its replies are read likewise; the answer is built
//! (`reply`) and written to the client by this thread without waiting: what the client's
//! socket does not take is left in the client's buffer for the net thread (`client`). It
//! blocks on the hand-off and on each server's reply (at most the server timeout of silence,
//! and a request gives up once the timeout has passed since its first write), never on a
//! client.
//!
//! A server that fails a request (silent, closed, garbage) loses this worker's connection; the
//! worker reconnects on a later request once the backoff allows, and until then routes
//! retrievals around it and fails sets at once.

use super::client::{Client, Job};
use super::errors::{ErrorClass, Failure};
use super::reply::{retrieval_answer, set_answer, Expect, ReplyKind, ReplyScan, ServerOutcome};
use super::request::{plan_retrieval, Op, Part, RequestType, RetrievalOp, SetOp, Timeline};
use super::stats::{now, SharedRecorder};
use super::{ServerCounters, Shared};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Initial receive buffer of a server connection; it grows to the largest reply seen.
const INITIAL_BUFFER: usize = 16 * 1024;

/// One worker's blocking connection to one server.
struct ServerLink {
    addr: SocketAddr,
    timeout: Duration,
    stream: Option<TcpStream>,
    /// When `stream` was opened (a connection older than the server's last failure is reopened).
    opened_ns: u64,
    /// `buf[..filled]`: received, not yet consumed.
    buf: Vec<u8>,
    filled: usize,
    connected_before: bool,
}

impl ServerLink {
    fn new(addr: SocketAddr, timeout: Duration) -> ServerLink {
        ServerLink {
            addr,
            timeout,
            stream: None,
            opened_ns: 0,
            buf: vec![0; INITIAL_BUFFER],
            filled: 0,
            connected_before: false,
        }
    }

    /// Drop a connection opened before the server's last failure.
    fn forget_if_outdated(&mut self, server: &ServerCounters) {
        if self.stream.is_some() && server.health.outdated(self.opened_ns) {
            self.stream = None;
            self.filled = 0;
        }
    }

    /// Connect unless connected; refused while the server is down.
    fn connect(&mut self, server: &ServerCounters) -> Result<(), Failure> {
        if self.stream.is_some() {
            return Ok(());
        }
        if let Some(retry_in) = server.health.wait_left(now()) {
            return Err(Failure::Unavailable { retry_in });
        }
        let setup = |s: &TcpStream| {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))
        };
        let opened_ns = now();
        match TcpStream::connect_timeout(&self.addr, self.timeout).and_then(|s| setup(&s).map(|_| s)) {
            Ok(s) => {
                if self.connected_before {
                    server.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                self.connected_before = true;
                self.stream = Some(s);
                self.opened_ns = opened_ns;
                self.filled = 0;
                Ok(())
            }
            Err(_) => {
                // Counted by the request that fails for it, if one does (a plan moves on).
                server.health.failed(now());
                Err(Failure::Unavailable { retry_in: Duration::ZERO })
            }
        }
    }

    /// Drop the connection after `f`; the server is down for every worker.
    fn fail(&mut self, f: Failure, server: &ServerCounters) -> Failure {
        server.failed(f);
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.filled = 0;
        f
    }

    /// Write a request (connecting first if needed).
    fn send(&mut self, bytes: &[u8], server: &ServerCounters) -> Result<(), Failure> {
        self.connect(server).inspect_err(|&f| server.count_failure(f))?;
        let stream = self.stream.as_mut().expect("connected above");
        archlab_metrics::counters::count_write();
        match stream.write_all(bytes) {
            Ok(()) => {
                server.requests.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(self.fail(io_failure(&e, self.timeout), server)),
        }
    }

    /// Read until one complete reply is buffered: its kind and length (the bytes are
    /// `buf[..length]` until [`ServerLink::consume`]).
    fn receive(
        &mut self,
        expect: Expect,
        deadline: Instant,
        server: &ServerCounters,
    ) -> Result<(ReplyKind, usize), Failure> {
        let mut scan = ReplyScan::default();
        loop {
            match scan.scan(&self.buf[..self.filled], expect) {
                Ok(Some((len, kind))) => return Ok((kind, len)),
                Ok(None) => {}
                Err(why) => return Err(self.fail(Failure::Garbage(why), server)),
            }
            if Instant::now() >= deadline {
                return Err(self.fail(Failure::Timeout(self.timeout), server));
            }
            if self.filled == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let stream = self.stream.as_mut().expect("a link that sent is connected");
            archlab_metrics::counters::count_read();
            match stream.read(&mut self.buf[self.filled..]) {
                Ok(0) => return Err(self.fail(Failure::Closed, server)),
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fail(io_failure(&e, self.timeout), server)),
            }
        }
    }

    /// Drop a reply of `len` bytes that has been used. Bytes after it mean the server answered
    /// what it was not asked: the stream is out of step, so the connection is dropped.
    fn consume(&mut self, len: usize, server: &ServerCounters) {
        if self.filled > len {
            self.fail(Failure::Garbage("bytes after the reply"), server);
        } else {
            self.filled = 0;
            server.health.succeeded();
        }
    }
}

fn io_failure(e: &io::Error, timeout: Duration) -> Failure {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failure::Timeout(timeout),
        _ => Failure::Closed,
    }
}

pub(crate) struct Worker {
    shared: Arc<Shared>,
    recorder: SharedRecorder,
    links: Vec<ServerLink>,
    /// Per part of the current request: its failure, or its reply's kind and length.
    results: Vec<Result<(ReplyKind, usize), Failure>>,
    parts: Vec<Part>,
    request: Vec<u8>,
    answer: Vec<u8>,
}

impl Worker {
    /// A worker with a connection to every server (a server that cannot be reached now is
    /// tried again on a later request).
    pub fn new(shared: Arc<Shared>, recorder: SharedRecorder) -> Worker {
        let timeout = shared.config.server_timeout;
        let mut links: Vec<ServerLink> = shared.servers.iter().map(|s| ServerLink::new(s.addr, timeout)).collect();
        for (link, server) in links.iter_mut().zip(&shared.servers) {
            let _ = link.connect(server);
        }
        Worker {
            shared,
            recorder,
            links,
            results: Vec::new(),
            parts: Vec::new(),
            request: Vec::new(),
            answer: Vec::new(),
        }
    }

    pub fn handle(&mut self, job: Job) {
        let Job { client, op, mut t } = job;
        t.dequeue_ns = now();
        let outcome = match &op {
            Op::Reject(r) => {
                if let Some(line) = &r.reply {
                    self.answer.clear();
                    self.answer.extend_from_slice(line);
                    let _ = self.write(&client);
                }
                if r.close {
                    client.close_after_flush();
                }
                Err(r.class)
            }
            Op::Set(s) => self.set(s, &mut t),
            Op::Retrieval(g) => self.retrieval(g, &mut t),
        };
        let outcome = match (outcome, &op) {
            (Ok(done), Op::Set(SetOp { noreply: true, .. })) => Ok(done),
            (Ok(done), _) => self.write(&client).map(|_| done),
            (Err(class), Op::Reject(_)) => Err(class),
            (Err(class), Op::Set(SetOp { noreply: true, .. })) => Err(class),
            (Err(class), _) => {
                let _ = self.write(&client);
                Err(class)
            }
        };
        t.reply_ns = now();
        {
            let mut r = self.recorder.lock().unwrap();
            match outcome {
                Ok((ty, keys, hits)) => r.request(ty, &t, keys, hits),
                Err(class) => r.error(class),
            }
        }
        self.shared.finished(&client, None);
    }

    /// Write the answer, or as much as the client's socket takes now: the rest is buffered
    /// and written by the net thread when the socket is writable, so a client that does not
    /// read never holds this worker. A client that is gone is disconnected.
    fn write(&self, client: &Client) -> Result<(), ErrorClass> {
        match client.write_or_buffer(&self.answer) {
            Ok(_) => Ok(()),
            Err(_) => {
                let _ = client.stream.shutdown(Shutdown::Both);
                Err(ErrorClass::ClientWrite)
            }
        }
    }

    fn set(&mut self, s: &SetOp, t: &mut Timeline) -> Result<(RequestType, usize, usize), ErrorClass> {
        let servers = &self.shared.servers;
        t.server_send_ns = now();
        self.results.clear();
        for (link, server) in self.links.iter_mut().zip(servers) {
            link.forget_if_outdated(server);
            self.results.push(link.send(&s.wire, server).map(|_| (ReplyKind::Stored, 0)));
        }
        let deadline = Instant::now() + self.shared.config.server_timeout;
        for ((link, server), result) in self.links.iter_mut().zip(servers).zip(&mut self.results) {
            if result.is_ok() {
                *result = link.receive(Expect::Storage, deadline, server);
            }
        }
        t.server_recv_ns = now();
        self.answer.clear();
        let links = &self.links;
        let outcomes = self.results.iter().zip(links).map(|(r, link)| (link.addr, outcome(r, link)));
        let class = set_answer(outcomes, &mut self.answer);
        for ((link, server), result) in self.links.iter_mut().zip(servers).zip(&self.results) {
            if let Ok((_, len)) = result {
                link.consume(*len, server);
            }
        }
        match class {
            None => Ok((RequestType::Set, 0, 0)),
            Some(class) => Err(class),
        }
    }

    /// Plan a retrieval over the servers that are up and connect the planned ones; a server
    /// that cannot be connected is down, and the plan is made again without it (nothing was
    /// sent yet, so no request is lost to a reconnection attempt).
    fn plan(&mut self, g: &RetrievalOp) -> Result<(), Failure> {
        let servers = &self.shared.servers;
        for (link, server) in self.links.iter_mut().zip(servers) {
            link.forget_if_outdated(server);
        }
        loop {
            let at = now();
            let sharded = self.shared.config.sharded;
            let planned = plan_retrieval(
                g.key_count,
                sharded,
                g.server,
                servers.len(),
                |i| servers[i].health.is_up(at),
                &mut self.parts,
            );
            if planned.is_none() {
                let retry_in = servers[g.server].health.wait_left(at).unwrap_or_default();
                return Err(Failure::Unavailable { retry_in });
            }
            let parts = &self.parts;
            if parts.iter().all(|p| self.links[p.server].connect(&servers[p.server]).is_ok()) {
                return Ok(());
            }
        }
    }

    fn retrieval(&mut self, g: &RetrievalOp, t: &mut Timeline) -> Result<(RequestType, usize, usize), ErrorClass> {
        let planned = self.plan(g);
        let counters = &self.shared.servers;
        t.server_send_ns = now();
        if let Err(f) = planned {
            // Every server is down: fail at once, naming the chosen one.
            counters[g.server].count_failure(f);
            t.server_recv_ns = now();
            self.answer.clear();
            self.answer.extend_from_slice(&f.reply(counters[g.server].addr));
            return Err(f.class());
        }
        self.results.clear();
        for p in &self.parts {
            self.request.clear();
            g.write_part(p.keys.clone(), &mut self.request);
            self.results
                .push(self.links[p.server].send(&self.request, &counters[p.server]).map(|_| (ReplyKind::Stored, 0)));
        }
        let deadline = Instant::now() + self.shared.config.server_timeout;
        for (p, result) in self.parts.iter().zip(&mut self.results) {
            if result.is_ok() {
                *result = self.links[p.server].receive(Expect::Retrieval, deadline, &counters[p.server]);
            }
        }
        t.server_recv_ns = now();
        self.answer.clear();
        let outcomes: Vec<(SocketAddr, ServerOutcome<'_>)> = self
            .parts
            .iter()
            .zip(&self.results)
            .map(|(p, r)| (self.links[p.server].addr, outcome(r, &self.links[p.server])))
            .collect();
        let (hits, class) = retrieval_answer(g, &self.parts, &outcomes, &mut self.answer);
        drop(outcomes);
        for (p, result) in self.parts.iter().zip(&self.results) {
            if let Ok((_, len)) = result {
                self.links[p.server].consume(*len, &counters[p.server]);
            }
        }
        match class {
            None => Ok((g.request_type(), g.key_count, hits)),
            Some(class) => Err(class),
        }
    }
}

/// A part's outcome with its reply's bytes borrowed from the link's buffer.
fn outcome<'a>(r: &Result<(ReplyKind, usize), Failure>, link: &'a ServerLink) -> ServerOutcome<'a> {
    r.map(|(kind, len)| (kind, &link.buf[..len]))
}
