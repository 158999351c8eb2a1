//! The event-loop back end (`Arch::EventLoop`): no hand-off and no workers; the net thread
//! itself drives one non-blocking connection per memcached server, registered on its own
//! poller (twemproxy's shape, built from the same reader, router and answers as the seed's
//! design).
//!
//! Mechanism: a request becomes a call with one part per server it needs (a `set`: every
//! server; a retrieval: as planned). Each part's bytes are appended to its server link's
//! output buffer and a waiter is appended to the link's FIFO; after each round of events every
//! link with queued bytes is written once, so the requests of all clients that arrived in the
//! round go out in one `write` per server (pipelining). Replies are read as they come and
//! matched to waiters in order (memcached answers a connection's requests in order); when a
//! call's last part is answered, the answer is built and written to the client, what the
//! socket does not take being kept in the client's buffer and written on writability by the
//! net thread's code (`net_thread`, `client`), as in the hand-off designs.
//! Requests queue in the links' output buffers and, at the servers, in their sockets; nothing
//! blocks but `epoll_wait`. Expected bottleneck: this one thread's CPU (one core), with fewer
//! system calls per request than the hand-off designs as load grows (one server write and
//! read per round, not per request).
//!
//! Times: a request's enqueue is its dispatch here, its dequeue and first server send the
//! first `write` of one of its parts, so its queue wait is the wait for the end of the round.
//! A link whose oldest waiter has waited the server timeout (for the bytes to be written or
//! for the reply), that closes, or that sends garbage fails every waiter with `SERVER_ERROR
//! backend ...` and is reconnected (non-blocking connect) after the backoff.

use super::client::{Client, Job};
use super::errors::{ErrorClass, Failure};
use super::net_thread::{Backend, BACKEND_BASE};
use super::reply::{retrieval_answer, set_answer, Expect, ReplyKind, ReplyScan, ServerOutcome};
use super::request::{plan_retrieval, Op, Part, RequestType};
use super::stats::{now, SharedRecorder};
use super::Shared;
use archlab_netio::socket::{connect_nonblocking, take_error};
use archlab_netio::{Event, Interest, Poller, Trigger};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const READ_BYTES: usize = 64 * 1024;

/// A part's reply, kept until the call's other parts are answered.
type PartResult = Result<(ReplyKind, Vec<u8>), Failure>;

/// A request under way.
struct Call {
    job: Job,
    parts: Vec<Part>,
    results: Vec<Option<PartResult>>,
    left: usize,
    /// A part was written to a server (the dequeue and server-send times are set).
    sent: bool,
}

/// A part waiting at a link, in the order of its bytes.
#[derive(Clone, Copy)]
struct Waiter {
    call: usize,
    part: usize,
    expect: Expect,
    /// Queued at (then: written at), for the server timeout.
    since_ns: u64,
    /// End of its bytes in the link's output stream (written once `written >= end`).
    end: u64,
}

/// The connection to one server.
struct Link {
    addr: SocketAddr,
    token: u64,
    stream: Option<TcpStream>,
    connecting_since: Option<u64>,
    armed: Option<Interest>,
    out: Vec<u8>,
    out_at: usize,
    /// Bytes ever queued and ever written on this connection (waiters' `end` counts in them).
    queued: u64,
    written: u64,
    input: Vec<u8>,
    in_at: usize,
    in_end: usize,
    scan: ReplyScan,
    waiting: VecDeque<Waiter>,
    connected_before: bool,
}

impl Link {
    fn new(index: usize, addr: SocketAddr) -> Link {
        Link {
            addr,
            token: BACKEND_BASE + index as u64,
            stream: None,
            connecting_since: None,
            armed: None,
            out: Vec::new(),
            out_at: 0,
            queued: 0,
            written: 0,
            input: vec![0; READ_BYTES],
            in_at: 0,
            in_end: 0,
            scan: ReplyScan::default(),
            waiting: VecDeque::new(),
            connected_before: false,
        }
    }

    /// Connected (not connecting).
    fn is_connected(&self) -> bool {
        self.stream.is_some() && self.connecting_since.is_none()
    }

    /// Register for what the link waits for: readable once connected, writable while
    /// connecting or while bytes wait.
    fn arm(&mut self, poller: &Poller) {
        let Some(stream) = &self.stream else { return };
        let connecting = self.connecting_since.is_some();
        let want = Interest { readable: !connecting, writable: connecting || self.out_at < self.out.len() };
        if self.armed == Some(want) {
            return;
        }
        let fd = stream.as_raw_fd();
        let r = match self.armed {
            None => poller.register(fd, self.token, want, Trigger::Level),
            Some(_) => poller.reregister(fd, self.token, want, Trigger::Level),
        };
        if r.is_ok() {
            self.armed = Some(want);
        }
    }

    /// The oldest waiter's deadline (or the connect's).
    fn deadline_ns(&self, timeout: Duration) -> Option<u64> {
        let since = self.connecting_since.or_else(|| self.waiting.front().map(|w| w.since_ns))?;
        Some(since + timeout.as_nanos() as u64)
    }
}

pub(crate) struct EventLoop {
    shared: Arc<Shared>,
    recorder: SharedRecorder,
    links: Vec<Link>,
    calls: Vec<Option<Call>>,
    free: Vec<usize>,
    /// Calls dispatched and not yet written to any server (the queue of this design).
    unsent: usize,
    answer: Vec<u8>,
    request: Vec<u8>,
}

impl EventLoop {
    /// An event loop with a connection to every server (connected now, so that the first
    /// requests do not wait; a server that cannot be reached is tried again later).
    pub fn new(shared: Arc<Shared>, recorder: SharedRecorder) -> EventLoop {
        let timeout = shared.config.server_timeout;
        let mut links: Vec<Link> = shared.servers.iter().enumerate().map(|(i, s)| Link::new(i, s.addr)).collect();
        for (link, server) in links.iter_mut().zip(&shared.servers) {
            let stream = TcpStream::connect_timeout(&link.addr, timeout).and_then(|s| {
                s.set_nonblocking(true)?;
                s.set_nodelay(true)?;
                Ok(s)
            });
            match stream {
                Ok(s) => {
                    link.stream = Some(s);
                    link.connected_before = true;
                }
                Err(_) => server.health.failed(now()),
            }
        }
        EventLoop {
            shared,
            recorder,
            links,
            calls: Vec::new(),
            free: Vec::new(),
            unsent: 0,
            answer: Vec::new(),
            request: Vec::new(),
        }
    }

    fn timeout(&self) -> Duration {
        self.shared.config.server_timeout
    }

    /// Start connecting link `i` unless it is connected or its server is down.
    fn connect(&mut self, poller: &Poller, i: usize) -> Result<(), Failure> {
        let server = &self.shared.servers[i];
        let link = &mut self.links[i];
        if link.stream.is_some() {
            return Ok(());
        }
        if let Some(retry_in) = server.health.wait_left(now()) {
            return Err(Failure::Unavailable { retry_in });
        }
        match connect_nonblocking(link.addr) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                link.stream = Some(stream);
                link.connecting_since = Some(now());
                link.armed = None;
                link.arm(poller);
                Ok(())
            }
            Err(_) => {
                // Counted by the request that fails for it, if one does.
                server.health.failed(now());
                Err(Failure::Unavailable { retry_in: Duration::ZERO })
            }
        }
    }

    fn new_call(&mut self, call: Call) -> usize {
        match self.free.pop() {
            Some(id) => {
                self.calls[id] = Some(call);
                id
            }
            None => {
                self.calls.push(Some(call));
                self.calls.len() - 1
            }
        }
    }

    /// Queue part `part` of call `id` (bytes in `self.request`) on link `server`.
    fn queue(&mut self, poller: &Poller, id: usize, part: usize, server: usize, expect: Expect) -> Result<(), Failure> {
        self.connect(poller, server)?;
        let link = &mut self.links[server];
        if link.out_at == link.out.len() {
            link.out.clear();
            link.out_at = 0;
        }
        link.out.extend_from_slice(&self.request);
        link.queued += self.request.len() as u64;
        link.waiting.push_back(Waiter { call: id, part, expect, since_ns: now(), end: link.queued });
        Ok(())
    }

    /// Write what link `i` has queued; fail it on a write error.
    fn flush_link(&mut self, poller: &Poller, i: usize, returns: &mut Vec<Arc<Client>>) {
        let link = &mut self.links[i];
        if link.connecting_since.is_some() || link.out_at == link.out.len() {
            return;
        }
        let Some(stream) = &link.stream else { return };
        let at = now();
        let mut stream_ref: &TcpStream = stream;
        let result = loop {
            archlab_metrics::counters::count_write();
            match stream_ref.write(&link.out[link.out_at..]) {
                Ok(n) => break Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(0),
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(n) => {
                let before = link.written;
                link.out_at += n;
                link.written += n as u64;
                let after = link.written;
                link.arm(poller);
                // Waiters whose last byte went out in this write wait for their reply from now;
                // the first written part of a call is its dequeue and first server send.
                let EventLoop { links, calls, unsent, .. } = self;
                for w in links[i].waiting.iter_mut().skip_while(|w| w.end <= before) {
                    if w.end > after {
                        break;
                    }
                    w.since_ns = at;
                    if let Some(call) = calls[w.call].as_mut().filter(|c| !c.sent) {
                        call.sent = true;
                        call.job.t.dequeue_ns = at;
                        call.job.t.server_send_ns = at;
                        *unsent -= 1;
                    }
                }
            }
            Err(_) => self.fail_link(poller, i, Failure::Closed, returns),
        }
    }

    /// Fail every waiter of link `i` with `f`, close it and wait before reconnecting.
    fn fail_link(&mut self, poller: &Poller, i: usize, f: Failure, returns: &mut Vec<Arc<Client>>) {
        let shared = self.shared.clone();
        let link = &mut self.links[i];
        if let Some(s) = link.stream.take() {
            let _ = poller.deregister(s.as_raw_fd());
        }
        link.armed = None;
        link.connecting_since = None;
        link.out.clear();
        link.out_at = 0;
        link.queued = 0;
        link.written = 0;
        link.in_at = 0;
        link.in_end = 0;
        link.scan = ReplyScan::default();
        shared.servers[i].health.failed(now());
        let waiting: Vec<Waiter> = link.waiting.drain(..).collect();
        for w in waiting {
            shared.servers[i].count_failure(f);
            self.deliver(w.call, w.part, Err(f), returns);
        }
    }

    /// A part's outcome; the call completes with its last part.
    fn deliver(
        &mut self,
        id: usize,
        part: usize,
        result: Result<(ReplyKind, &[u8]), Failure>,
        returns: &mut Vec<Arc<Client>>,
    ) {
        let call = self.calls[id].as_mut().expect("a waiter's call is live");
        call.left -= 1;
        if call.left > 0 {
            call.results[part] = Some(result.map(|(k, b)| (k, b.to_vec())));
            return;
        }
        let mut call = self.calls[id].take().expect("live");
        self.free.push(id);
        if !call.sent {
            // No part ever reached a server (all failed at once).
            self.unsent -= 1;
            let at = now();
            call.job.t.dequeue_ns = at;
            call.job.t.server_send_ns = at;
        }
        call.job.t.server_recv_ns = now();
        self.answer.clear();
        let addrs: Vec<SocketAddr> = call.parts.iter().map(|p| self.links[p.server].addr).collect();
        let outcomes: Vec<(SocketAddr, ServerOutcome<'_>)> = call
            .results
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let o = if i == part {
                    result
                } else {
                    r.as_ref()
                        .expect("every other part answered")
                        .as_ref()
                        .map(|(k, b)| (*k, b.as_slice()))
                        .map_err(|f| *f)
                };
                (addrs[i], o)
            })
            .collect();
        let outcome = match &call.job.op {
            Op::Set(_) => match set_answer(outcomes.iter().copied(), &mut self.answer) {
                None => Ok((RequestType::Set, 0, 0)),
                Some(c) => Err(c),
            },
            Op::Retrieval(g) => match retrieval_answer(g, &call.parts, &outcomes, &mut self.answer) {
                (hits, None) => Ok((g.request_type(), g.key_count, hits)),
                (_, Some(c)) => Err(c),
            },
            Op::Reject(_) => unreachable!("rejects are answered at dispatch"),
        };
        drop(outcomes);
        let silent = matches!(&call.job.op, Op::Set(s) if s.noreply);
        self.answer_client(call.job, outcome, silent, returns);
    }

    /// Write the answer in `self.answer` (unless `silent`), record the request, let the net
    /// thread see the client again if needed.
    fn answer_client(
        &mut self,
        job: Job,
        outcome: Result<(RequestType, usize, usize), ErrorClass>,
        silent: bool,
        returns: &mut Vec<Arc<Client>>,
    ) {
        let Job { client, mut t, .. } = job;
        let mut outcome = outcome;
        if !silent && !self.answer.is_empty() {
            // What the socket does not take is buffered; `finished` below hands the client to
            // the net thread's part of this thread, which writes it on writability.
            match client.write_or_buffer(&self.answer) {
                Ok(_) => {}
                Err(_) => {
                    let _ = client.stream.shutdown(std::net::Shutdown::Both);
                    if outcome.is_ok() {
                        outcome = Err(ErrorClass::ClientWrite);
                    }
                }
            }
        }
        t.reply_ns = now();
        {
            let mut r = self.recorder.lock().unwrap();
            match outcome {
                Ok((ty, keys, hits)) => r.request(ty, &t, keys, hits),
                Err(class) => r.error(class),
            }
        }
        self.shared.finished(&client, Some(returns));
    }

    /// Read what link `i` has for us and match the replies to its waiters.
    fn read_link(&mut self, poller: &Poller, i: usize, returns: &mut Vec<Arc<Client>>) {
        loop {
            let link = &mut self.links[i];
            let Some(stream) = &link.stream else { return };
            if link.in_end == link.input.len() {
                if link.in_at > 0 {
                    link.input.copy_within(link.in_at..link.in_end, 0);
                    link.in_end -= link.in_at;
                    link.in_at = 0;
                } else {
                    let n = link.input.len() * 2;
                    link.input.resize(n, 0);
                }
            }
            archlab_metrics::counters::count_read();
            let mut stream_ref: &TcpStream = stream;
            let n = match stream_ref.read(&mut link.input[link.in_end..]) {
                Ok(0) => return self.fail_link(poller, i, Failure::Closed, returns),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.fail_link(poller, i, Failure::Closed, returns),
            };
            self.links[i].in_end += n;
            if let Err(f) = self.match_replies(i, returns) {
                return self.fail_link(poller, i, f, returns);
            }
            let link = &self.links[i];
            if link.stream.is_none() || link.in_end < link.input.len() {
                return;
            }
        }
    }

    /// Hand every complete reply buffered on link `i` to its waiter. The buffer is taken out
    /// of the link meanwhile, so that replies can be lent to `deliver` without a copy.
    fn match_replies(&mut self, i: usize, returns: &mut Vec<Arc<Client>>) -> Result<(), Failure> {
        let input = std::mem::take(&mut self.links[i].input);
        let result = self.match_in(i, &input, returns);
        self.links[i].input = input;
        result
    }

    fn match_in(&mut self, i: usize, input: &[u8], returns: &mut Vec<Arc<Client>>) -> Result<(), Failure> {
        loop {
            let link = &mut self.links[i];
            if link.in_at == link.in_end {
                link.in_at = 0;
                link.in_end = 0;
                return Ok(());
            }
            let Some(&w) = link.waiting.front() else {
                return Err(Failure::Garbage("bytes nobody asked for"));
            };
            let (len, kind) = match link.scan.scan(&input[link.in_at..link.in_end], w.expect) {
                Ok(Some(done)) => done,
                Ok(None) => return Ok(()),
                Err(why) => return Err(Failure::Garbage(why)),
            };
            link.waiting.pop_front();
            self.shared.servers[i].health.succeeded();
            let reply = &input[link.in_at..link.in_at + len];
            link.in_at += len;
            self.deliver(w.call, w.part, Ok((kind, reply)), returns);
        }
    }
}

impl Backend for EventLoop {
    fn dispatch(&mut self, poller: &Poller, job: Job, returns: &mut Vec<Arc<Client>>) -> usize {
        let (parts, expect) = match &job.op {
            Op::Reject(r) => {
                self.answer.clear();
                if let Some(line) = &r.reply {
                    self.answer.extend_from_slice(line);
                }
                let (class, close, client) = (r.class, r.close, job.client.clone());
                let mut job = job;
                let at = now();
                (job.t.dequeue_ns, job.t.server_send_ns, job.t.server_recv_ns) = (at, at, at);
                self.answer_client(job, Err(class), false, returns);
                if close {
                    // After the answer: it is written (or buffered) first.
                    client.close_after_flush();
                }
                return self.unsent;
            }
            Op::Set(_) => {
                ((0..self.links.len()).map(|s| Part { server: s, keys: 0..0 }).collect::<Vec<_>>(), Expect::Storage)
            }
            Op::Retrieval(g) => {
                let at = now();
                let (links, servers) = (&self.links, &self.shared.servers);
                let mut parts = Vec::new();
                let sharded = self.shared.config.sharded;
                // Connected servers first; a server being (re)connected only if no other is up.
                let connected = |i: usize| links[i].is_connected() && servers[i].health.is_up(at);
                let up = |i: usize| servers[i].health.is_up(at);
                if plan_retrieval(g.key_count, sharded, g.server, links.len(), connected, &mut parts).is_none()
                    && plan_retrieval(g.key_count, sharded, g.server, links.len(), up, &mut parts).is_none()
                {
                    // Every server waits to be retried: the chosen one answers (fails) at once.
                    parts.push(Part { server: g.server, keys: 0..g.key_count });
                }
                (parts, Expect::Retrieval)
            }
        };
        let n = parts.len();
        let id = self.new_call(Call { job, parts, results: (0..n).map(|_| None).collect(), left: n, sent: false });
        self.unsent += 1;
        let length = self.unsent;
        for p in 0..n {
            let call = self.calls[id].as_ref().expect("just made");
            let server = call.parts[p].server;
            self.request.clear();
            match &call.job.op {
                Op::Set(s) => self.request.extend_from_slice(&s.wire),
                Op::Retrieval(g) => g.write_part(call.parts[p].keys.clone(), &mut self.request),
                Op::Reject(_) => unreachable!(),
            }
            if let Err(f) = self.queue(poller, id, p, server, expect) {
                self.shared.servers[server].count_failure(f);
                self.deliver(id, p, Err(f), returns);
            } else {
                self.shared.servers[server].requests.fetch_add(1, Ordering::Relaxed);
            }
        }
        length
    }

    fn on_event(&mut self, poller: &Poller, ev: &Event, returns: &mut Vec<Arc<Client>>) {
        let i = (ev.token - BACKEND_BASE) as usize;
        let Some(link) = self.links.get_mut(i) else { return };
        if link.stream.is_none() {
            return;
        }
        if link.connecting_since.is_some() {
            if !(ev.writable || ev.closed) {
                return;
            }
            let stream = link.stream.as_ref().expect("checked");
            match take_error(stream) {
                Ok(None) if !ev.closed => {
                    link.connecting_since = None;
                    if link.connected_before {
                        self.shared.servers[i].reconnects.fetch_add(1, Ordering::Relaxed);
                    }
                    link.connected_before = true;
                    let at = now();
                    for w in link.waiting.iter_mut() {
                        w.since_ns = at;
                    }
                    link.arm(poller);
                    self.flush_link(poller, i, returns);
                }
                _ => self.fail_link(poller, i, Failure::Unavailable { retry_in: Duration::ZERO }, returns),
            }
            return;
        }
        if ev.readable || ev.closed {
            self.read_link(poller, i, returns);
        }
        if ev.writable {
            self.flush_link(poller, i, returns);
        }
    }

    fn after_events(&mut self, poller: &Poller, returns: &mut Vec<Arc<Client>>) -> Option<Duration> {
        for i in 0..self.links.len() {
            // A server whose backoff has passed is reconnected before a request needs it.
            if self.links[i].stream.is_none() {
                let _ = self.connect(poller, i);
            }
            self.flush_link(poller, i, returns);
        }
        let timeout = self.timeout();
        let at = now();
        let mut next: Option<u64> = None;
        for i in 0..self.links.len() {
            if let Some(deadline) = self.links[i].deadline_ns(timeout) {
                if deadline <= at {
                    let f = if self.links[i].connecting_since.is_some() {
                        Failure::Unavailable { retry_in: Duration::ZERO }
                    } else {
                        Failure::Timeout(timeout)
                    };
                    self.fail_link(poller, i, f, returns);
                } else {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                }
            }
        }
        next.map(|d| Duration::from_nanos(d.saturating_sub(now())))
    }
}
