//! A client request on its way through the middleware: what the net thread makes of an item
//! read from a client ([`Op::from_item`]: a copy out of the client's buffer, in the form sent
//! to the servers), the times it collects on the lab clock ([`Timeline`]), and which servers a
//! retrieval goes to ([`plan_retrieval`]).
//!
//! Routing follows seed 002 §1.3 and §1.7: the net thread picks the server of every retrieval
//! round-robin; a `set` goes to every server; a multi-get goes whole to the chosen server, or,
//! sharded, as one request per server, the keys split into contiguous groups of sizes that
//! differ by at most one, the first group to the chosen server (so that a multi-get with fewer
//! keys than servers does not always load the same ones). Since every value is on every
//! server, a retrieval whose server is known to be down goes to the next one that is not.

use super::errors::ErrorClass;
use archlab_wire::memcached::Retrieval;
use archlab_wire::memcached_request::{split_keys, Item, Reject, Request};
use std::borrow::Cow;
use std::io::Write as _;
use std::ops::Range;

/// The three request types of seed 002's statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestType {
    Get,
    MultiGet,
    Set,
}

impl RequestType {
    pub const ALL: [RequestType; 3] = [RequestType::Get, RequestType::MultiGet, RequestType::Set];

    pub fn as_str(self) -> &'static str {
        match self {
            RequestType::Get => "get",
            RequestType::MultiGet => "multi_get",
            RequestType::Set => "set",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The moments of one request, in nanoseconds of `archlab_metrics::clock::now_ns`. Each is
/// taken by the thread that does the step, so consecutive moments are ordered and the
/// response time splits exactly into the differences of consecutive moments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The read that brought the request's first byte.
    pub arrival_ns: u64,
    /// Put on the hand-off (the event loop: queued for the servers' connections).
    pub enqueue_ns: u64,
    /// Taken by a worker (the event loop: written to the servers' connections).
    pub dequeue_ns: u64,
    /// Just before the first byte to a server.
    pub server_send_ns: u64,
    /// The last server reply complete.
    pub server_recv_ns: u64,
    /// The reply handed to the client's socket (what it did not take is buffered, written
    /// later by the net thread).
    pub reply_ns: u64,
}

impl Timeline {
    pub fn response_ns(&self) -> u64 {
        self.reply_ns - self.arrival_ns
    }
    pub fn queue_wait_ns(&self) -> u64 {
        self.dequeue_ns - self.enqueue_ns
    }
    pub fn service_ns(&self) -> u64 {
        self.server_recv_ns - self.server_send_ns
    }
}

/// A retrieval in the form sent to one server: `get k1 k2\r\n` with single spaces.
#[derive(Debug)]
pub(crate) struct RetrievalOp {
    pub line: Vec<u8>,
    /// Where the keys start in `line`.
    pub keys_at: usize,
    pub key_count: usize,
    /// The server the net thread chose, round-robin.
    pub server: usize,
}

impl RetrievalOp {
    /// The keys, single-space separated.
    pub fn keys(&self) -> &[u8] {
        &self.line[self.keys_at..self.line.len() - 2]
    }

    pub fn request_type(&self) -> RequestType {
        if self.key_count == 1 {
            RequestType::Get
        } else {
            RequestType::MultiGet
        }
    }

    /// Append the request for keys `keys` (indices in request order) to `out`.
    pub fn write_part(&self, keys: Range<usize>, out: &mut Vec<u8>) {
        if keys == (0..self.key_count) {
            out.extend_from_slice(&self.line);
            return;
        }
        out.extend_from_slice(&self.line[..self.keys_at - 1]);
        for key in split_keys(self.keys()).skip(keys.start).take(keys.len()) {
            out.push(b' ');
            out.extend_from_slice(key);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A `set` in the form sent to every server: without `noreply`, so that every replica answers
/// and the middleware knows whether all stored it.
#[derive(Debug)]
pub(crate) struct SetOp {
    pub wire: Vec<u8>,
    pub noreply: bool,
}

/// An item refused by the middleware itself, with its answer (None: a silent `noreply`).
#[derive(Debug)]
pub(crate) struct RejectOp {
    pub reply: Option<Cow<'static, [u8]>>,
    pub close: bool,
    pub class: ErrorClass,
}

#[derive(Debug)]
pub(crate) enum Op {
    Retrieval(RetrievalOp),
    Set(SetOp),
    Reject(RejectOp),
}

impl Op {
    /// Copy an item out of the client's buffer; `server` is the round-robin choice, used by
    /// retrievals.
    pub fn from_item(item: &Item<'_>, server: usize) -> Op {
        match item {
            Item::Request(r @ Request::Retrieval { cmd, keys, key_count }) => {
                let verb: &[u8] = match cmd {
                    Retrieval::Get => b"get ",
                    Retrieval::Gets => b"gets ",
                };
                let mut line = Vec::with_capacity(verb.len() + keys.len() + 2);
                line.extend_from_slice(verb);
                for (i, key) in r.keys().enumerate() {
                    if i > 0 {
                        line.push(b' ');
                    }
                    line.extend_from_slice(key);
                }
                line.extend_from_slice(b"\r\n");
                Op::Retrieval(RetrievalOp { line, keys_at: verb.len(), key_count: *key_count, server })
            }
            Item::Request(Request::Set(s)) => {
                let mut wire = Vec::with_capacity(s.key.len() + s.data.len() + 48);
                wire.extend_from_slice(b"set ");
                wire.extend_from_slice(s.key);
                let _ = write!(wire, " {} {} {}\r\n", s.flags, s.exptime, s.data.len());
                wire.extend_from_slice(s.data);
                wire.extend_from_slice(b"\r\n");
                Op::Set(SetOp { wire, noreply: s.noreply })
            }
            Item::Reject { reject, silent } => Op::Reject(RejectOp {
                reply: (!silent).then(|| reject.reply()),
                close: reject.closes(),
                class: reject_class(reject),
            }),
        }
    }
}

fn reject_class(r: &Reject) -> ErrorClass {
    match r {
        Reject::UnknownCommand => ErrorClass::UnknownCommand,
        Reject::Malformed(_) => ErrorClass::ClientError,
        Reject::TooLarge { .. } => ErrorClass::TooLarge,
        Reject::LineTooLong => ErrorClass::LineTooLong,
    }
}

/// One server's share of a retrieval: the keys at indices `keys` of the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub server: usize,
    pub keys: Range<usize>,
}

/// The parts of a retrieval of `key_count` keys whose round-robin server is `first`, over the
/// servers for which `up(i)` holds; `None` when none is up.
pub(crate) fn plan_retrieval(
    key_count: usize,
    sharded: bool,
    first: usize,
    servers: usize,
    up: impl Fn(usize) -> bool,
    out: &mut Vec<Part>,
) -> Option<()> {
    out.clear();
    let order = (0..servers).map(|i| (first + i) % servers).filter(|&s| up(s));
    if !sharded || key_count == 1 {
        let server = order.clone().next()?;
        out.push(Part { server, keys: 0..key_count });
        return Some(());
    }
    let live: Vec<usize> = order.collect();
    if live.is_empty() {
        return None;
    }
    let groups = live.len().min(key_count);
    for (g, &server) in live.iter().take(groups).enumerate() {
        out.push(Part { server, keys: g * key_count / groups..(g + 1) * key_count / groups });
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use archlab_wire::memcached_request::{RequestLimits, RequestReader};

    fn op(bytes: &[u8]) -> Op {
        let mut r = RequestReader::new(RequestLimits::default());
        r.extend(bytes, 0);
        let (item, _) = r.next_item().unwrap();
        Op::from_item(&item, 1)
    }

    #[test]
    fn requests_are_normalised_for_the_servers() {
        let Op::Retrieval(g) = op(b"gets  a   bb c\n") else { panic!() };
        assert_eq!(g.line, b"gets a bb c\r\n");
        assert_eq!((g.keys(), g.key_count, g.server), (&b"a bb c"[..], 3, 1));
        assert_eq!(g.request_type(), RequestType::MultiGet);
        let mut out = Vec::new();
        g.write_part(1..3, &mut out);
        g.write_part(0..3, &mut out);
        assert_eq!(out, b"gets bb c\r\ngets a bb c\r\n");
        let Op::Set(s) = op(b"set k 7 -1 4 noreply\r\na\r\nb\r\n") else { panic!() };
        assert_eq!((s.wire.as_slice(), s.noreply), (&b"set k 7 -1 4\r\na\r\nb\r\n"[..], true));
        let Op::Reject(r) = op(b"set k 0 0 2000000 noreply\r\n") else { panic!() };
        assert_eq!((r.reply, r.close, r.class), (None, false, ErrorClass::TooLarge));
    }

    #[test]
    fn sharding_splits_contiguously_from_the_chosen_server_over_live_ones() {
        let mut parts = Vec::new();
        plan_retrieval(7, true, 1, 3, |_| true, &mut parts).unwrap();
        assert_eq!(
            parts,
            [Part { server: 1, keys: 0..2 }, Part { server: 2, keys: 2..4 }, Part { server: 0, keys: 4..7 }]
        );
        // Fewer keys than servers: one key each, from the chosen server on.
        plan_retrieval(2, true, 2, 3, |_| true, &mut parts).unwrap();
        assert_eq!(parts, [Part { server: 2, keys: 0..1 }, Part { server: 0, keys: 1..2 }]);
        // Non-sharded: whole, to the chosen server, or the next one up.
        plan_retrieval(5, false, 1, 3, |s| s != 1, &mut parts).unwrap();
        assert_eq!(parts, [Part { server: 2, keys: 0..5 }]);
        plan_retrieval(4, true, 0, 3, |s| s != 1, &mut parts).unwrap();
        assert_eq!(parts, [Part { server: 0, keys: 0..2 }, Part { server: 2, keys: 2..4 }]);
        assert!(plan_retrieval(4, true, 0, 3, |_| false, &mut parts).is_none());
    }
}
