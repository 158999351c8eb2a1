//! Server replies: finding where one ends ([`ReplyScan`], incremental, so a large multi-get
//! reply arriving in many reads is walked once), and turning the replies of all the servers a
//! request went to into the one answer the client gets ([`set_answer`], [`retrieval_answer`]).
//!
//! The rules are seed 002's (§1.7): a `set` succeeds only if every server stored it, otherwise
//! the client gets the first failure in server order (a server's own error line relayed, or a
//! `SERVER_ERROR backend ...` line for a server that failed); a retrieval sent whole is relayed
//! as the server sent it; a sharded one is merged: the `VALUE` blocks of every part in the
//! order of the request's keys, misses left out, then `END`. An error line ends a reply of any
//! kind (memcached ends a retrieval with one when a key is refused).

use super::errors::{ErrorClass, Failure};
use super::request::{Part, RetrievalOp};
use archlab_wire::memcached::{parse_reply, Parse, Reply};
use archlab_wire::memcached_request::split_keys;
use std::net::SocketAddr;

/// What a request expects back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    Retrieval,
    Storage,
}

/// A complete reply, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyKind {
    /// `VALUE` blocks (`hits` of them), then `END`.
    Values {
        hits: usize,
    },
    Stored,
    /// `NOT_STORED`, `EXISTS` or `NOT_FOUND`.
    Refused,
    /// `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR ...`.
    ErrorLine,
}

/// Where the scan of a reply got to.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReplyScan {
    at: usize,
    hits: usize,
}

impl ReplyScan {
    /// Scan on in `buf` (which starts with the reply): `Some((length, kind))` once complete,
    /// `None` until more bytes come; an error names what was malformed.
    pub fn scan(&mut self, buf: &[u8], expect: Expect) -> Result<Option<(usize, ReplyKind)>, &'static str> {
        loop {
            let (reply, n) = match parse_reply(&buf[self.at..]).map_err(|m| m.0)? {
                Parse::Partial => return Ok(None),
                Parse::Complete(r, n) => (r, n),
            };
            self.at += n;
            let kind = match (reply, expect) {
                (r, _) if r.is_error() => ReplyKind::ErrorLine,
                (Reply::Value { .. }, Expect::Retrieval) => {
                    self.hits += 1;
                    continue;
                }
                (Reply::End, Expect::Retrieval) => ReplyKind::Values { hits: self.hits },
                (Reply::Stored, Expect::Storage) => ReplyKind::Stored,
                (Reply::NotStored | Reply::Exists | Reply::NotFound, Expect::Storage) => ReplyKind::Refused,
                _ => return Err("a reply that does not answer the request"),
            };
            let len = self.at;
            *self = ReplyScan::default();
            return Ok(Some((len, kind)));
        }
    }
}

/// One server's outcome: its complete reply, or how it failed.
pub(crate) type ServerOutcome<'a> = Result<(ReplyKind, &'a [u8]), Failure>;

/// The answer to a `set` from every server's outcome (`outcomes[i]` from `servers[i]`; a server
/// not tried is a failure too): `STORED` only if all stored. Appends it to `out`; returns the
/// error class of a failed request.
pub(crate) fn set_answer<'a>(
    outcomes: impl IntoIterator<Item = (SocketAddr, ServerOutcome<'a>)>,
    out: &mut Vec<u8>,
) -> Option<ErrorClass> {
    for (server, outcome) in outcomes {
        let class = match outcome {
            Ok((ReplyKind::Stored, _)) => continue,
            Ok((kind, line)) => {
                out.extend_from_slice(line);
                if kind == ReplyKind::Refused {
                    ErrorClass::NotStored
                } else {
                    ErrorClass::ServerErrorReply
                }
            }
            Err(f) => {
                out.extend_from_slice(&f.reply(server));
                f.class()
            }
        };
        return Some(class);
    }
    out.extend_from_slice(b"STORED\r\n");
    None
}

/// The answer to a retrieval sent as `parts` (`outcomes[i]` for `parts[i]`, from `servers[i]`),
/// appended to `out`, with the number of hits and, for a failed request, its error class.
pub(crate) fn retrieval_answer(
    op: &RetrievalOp,
    parts: &[Part],
    outcomes: &[(SocketAddr, ServerOutcome<'_>)],
    out: &mut Vec<u8>,
) -> (usize, Option<ErrorClass>) {
    for (server, outcome) in outcomes {
        match outcome {
            Err(f) => {
                out.extend_from_slice(&f.reply(*server));
                return (0, Some(f.class()));
            }
            Ok((ReplyKind::Values { .. }, _)) => {}
            Ok((_, line)) => {
                out.extend_from_slice(line);
                return (0, Some(ErrorClass::ServerErrorReply));
            }
        }
    }
    if let [(_, Ok((ReplyKind::Values { hits }, bytes)))] = outcomes {
        out.extend_from_slice(bytes);
        return (*hits, None);
    }
    let replies: Vec<&[u8]> = outcomes.iter().map(|(_, o)| o.map(|(_, b)| b).unwrap_or_default()).collect();
    (merge_values(op, parts, &replies, out), None)
}

/// Merge complete `VALUE ... END` replies of `parts` into one, in the order of the request's
/// keys; returns the number of values. A server returns the values of its part in the order of
/// its keys, misses left out, so each part's reply is walked once beside its keys.
fn merge_values(op: &RetrievalOp, parts: &[Part], replies: &[&[u8]], out: &mut Vec<u8>) -> usize {
    let mut hits = 0;
    let mut keys = split_keys(op.keys());
    for (part, reply) in parts.iter().zip(replies) {
        let mut at = 0;
        for key in keys.by_ref().take(part.keys.len()) {
            if let Ok(Parse::Complete(Reply::Value { key: got, .. }, n)) = parse_reply(&reply[at..]) {
                if got == key {
                    out.extend_from_slice(&reply[at..at + n]);
                    at += n;
                    hits += 1;
                }
            }
        }
    }
    out.extend_from_slice(b"END\r\n");
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memcached::request::Op;
    use archlab_wire::memcached_request::{RequestLimits, RequestReader};
    use std::time::Duration;

    fn scan_whole(buf: &[u8], expect: Expect) -> Result<Option<(usize, ReplyKind)>, &'static str> {
        ReplyScan::default().scan(buf, expect)
    }

    #[test]
    fn replies_end_where_memcached_ends_them() {
        let r = b"VALUE a 0 5\r\nEND\r\n\r\nVALUE b 1 0\r\n\r\nEND\r\nSTORED\r\n";
        assert_eq!(scan_whole(r, Expect::Retrieval), Ok(Some((r.len() - 8, ReplyKind::Values { hits: 2 }))));
        assert_eq!(scan_whole(b"STORED\r\n", Expect::Storage), Ok(Some((8, ReplyKind::Stored))));
        assert_eq!(scan_whole(b"NOT_STORED\r\n", Expect::Storage), Ok(Some((12, ReplyKind::Refused))));
        assert_eq!(scan_whole(b"SERVER_ERROR oom\r\n", Expect::Storage), Ok(Some((18, ReplyKind::ErrorLine))));
        assert_eq!(
            scan_whole(b"VALUE a 0 1\r\nx\r\nCLIENT_ERROR bad\r\n", Expect::Retrieval).unwrap().unwrap().1,
            ReplyKind::ErrorLine
        );
        assert!(scan_whole(b"STORED\r\n", Expect::Retrieval).is_err());
        assert!(scan_whole(b"END\r\n", Expect::Storage).is_err());
        assert!(scan_whole(b"HELLO\r\n", Expect::Storage).is_err());
        // Incremental: byte by byte, the same answer at the same place.
        let mut s = ReplyScan::default();
        for cut in 1..r.len() - 8 {
            assert_eq!(s.scan(&r[..cut], Expect::Retrieval), Ok(None), "cut {cut}");
        }
        assert_eq!(s.scan(r, Expect::Retrieval), Ok(Some((r.len() - 8, ReplyKind::Values { hits: 2 }))));
    }

    fn addr(i: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 11000 + i))
    }

    #[test]
    fn a_set_is_stored_only_if_every_replica_stored_it() {
        let stored = Ok((ReplyKind::Stored, &b"STORED\r\n"[..]));
        let mut out = Vec::new();
        assert_eq!(set_answer([(addr(0), stored), (addr(1), stored)], &mut out), None);
        assert_eq!(out, b"STORED\r\n");
        out.clear();
        let oom = Ok((ReplyKind::ErrorLine, &b"SERVER_ERROR out of memory storing object\r\n"[..]));
        let gone = Err(Failure::Closed);
        assert_eq!(
            set_answer([(addr(0), stored), (addr(1), oom), (addr(2), gone)], &mut out),
            Some(ErrorClass::ServerErrorReply)
        );
        assert_eq!(out, b"SERVER_ERROR out of memory storing object\r\n");
        out.clear();
        let slow = Err(Failure::Timeout(Duration::from_millis(5)));
        assert_eq!(set_answer([(addr(0), slow), (addr(1), oom)], &mut out), Some(ErrorClass::ServerTimeout));
        assert_eq!(out, b"SERVER_ERROR backend 127.0.0.1:11000 timed out after 5 ms\r\n");
    }

    #[test]
    fn sharded_replies_merge_in_key_order_without_misses() {
        let mut r = RequestReader::new(RequestLimits::default());
        r.extend(b"get a b c d e\r\n", 0);
        let Op::Retrieval(op) = Op::from_item(&r.next_item().unwrap().0, 0) else { panic!() };
        let parts = [Part { server: 0, keys: 0..2 }, Part { server: 1, keys: 2..3 }, Part { server: 2, keys: 3..5 }];
        let p0 = b"VALUE b 0 2\r\n\r\n\r\nEND\r\n";
        let p1 = b"END\r\n";
        let p2 = b"VALUE d 3 1\r\nD\r\nVALUE e 0 1\r\nE\r\nEND\r\n";
        let outcomes = [
            (addr(0), Ok((ReplyKind::Values { hits: 1 }, &p0[..]))),
            (addr(1), Ok((ReplyKind::Values { hits: 0 }, &p1[..]))),
            (addr(2), Ok((ReplyKind::Values { hits: 2 }, &p2[..]))),
        ];
        let mut out = Vec::new();
        assert_eq!(retrieval_answer(&op, &parts, &outcomes, &mut out), (3, None));
        assert_eq!(out, b"VALUE b 0 2\r\n\r\n\r\nVALUE d 3 1\r\nD\r\nVALUE e 0 1\r\nE\r\nEND\r\n");
        // One part failing fails the request, with that server's line.
        out.clear();
        let failed = [outcomes[0], (addr(1), Err(Failure::Garbage("x"))), outcomes[2]];
        assert_eq!(retrieval_answer(&op, &parts, &failed, &mut out), (0, Some(ErrorClass::ServerGarbage)));
        assert!(out.starts_with(b"SERVER_ERROR backend 127.0.0.1:11001 sent a malformed reply"));
    }
}
