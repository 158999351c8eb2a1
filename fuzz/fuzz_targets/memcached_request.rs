//! The memcached request reader of the middleware (`archlab_wire::memcached_request`), fed any
//! bytes as what a client sent. The first byte picks the limits: the defaults, or limits small
//! enough that the fuzzer reaches every refusal (line too long, value too large) with short
//! inputs; the rest is the stream.
//!
//! Invariants checked, beyond "no panic":
//! - the stream fed in two pieces at any cut point (the first through `extend`, the second
//!   read into `spare` and `commit`ted, as the middleware's net thread does) yields exactly the
//!   items of the stream fed at once: a request split across reads is never read differently;
//! - after the reader has handed out every complete item, the bytes it keeps are bounded by its
//!   limits (one command line plus one data block), whatever the client sends;
//! - after `line too long` the reader yields nothing more, and the refusal says the connection
//!   closes;
//! - every request is well formed: keys valid and at most 250 bytes, a retrieval's key count
//!   matching its keys, a value no larger than the limit; written again in the protocol's
//!   canonical form it reads back as the same request, using all the bytes written.
#![no_main]

use archlab_fuzz::cut_points;
use archlab_wire::memcached::{is_valid_key, Retrieval, MAX_KEY_BYTES};
use archlab_wire::memcached_request::{Item, Reject, Request, RequestLimits, RequestReader};
use libfuzzer_sys::fuzz_target;

/// An item copied out of the reader's buffer, to compare items of different readers.
#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Retrieval { cmd: Retrieval, keys: Vec<Vec<u8>>, key_count: usize },
    Set { key: Vec<u8>, flags: u32, exptime: i64, data: Vec<u8>, noreply: bool },
    Reject { reject: Reject, silent: bool },
}

fn own(item: &Item<'_>) -> Owned {
    match item {
        Item::Request(r @ Request::Retrieval { cmd, key_count, .. }) => {
            Owned::Retrieval { cmd: *cmd, keys: r.keys().map(<[u8]>::to_vec).collect(), key_count: *key_count }
        }
        Item::Request(Request::Set(s)) => Owned::Set {
            key: s.key.to_vec(),
            flags: s.flags,
            exptime: s.exptime,
            data: s.data.to_vec(),
            noreply: s.noreply,
        },
        Item::Reject { reject, silent } => Owned::Reject { reject: *reject, silent: *silent },
    }
}

/// The most bytes a reader may keep once it has yielded every complete item: the longest
/// command line with its CR LF, plus the largest value with its CR LF.
fn retained_bound(l: &RequestLimits) -> usize {
    l.max_line_bytes.max(l.max_retrieval_line_bytes) + 2 + l.max_value_bytes + 2
}

/// Take every complete item, checking each and the reader after the last.
fn drain(reader: &mut RequestReader, out: &mut Vec<Owned>) {
    let limits = *reader.limits();
    while let Some((item, _stamp)) = reader.next_item() {
        check_item(&item, &limits);
        let closes = matches!(item, Item::Reject { reject: Reject::LineTooLong, .. });
        out.push(own(&item));
        if closes {
            assert!(reader.is_closed(), "line too long left the reader open");
        }
    }
    let held = reader.buffered();
    assert!(held <= retained_bound(&limits), "the reader keeps {held} bytes, more than its limits allow");
}

fn check_item(item: &Item<'_>, limits: &RequestLimits) {
    match item {
        Item::Request(r) => {
            let keys: Vec<&[u8]> = r.keys().collect();
            if let Request::Retrieval { key_count, .. } = r {
                assert!(*key_count > 0 && *key_count == keys.len(), "key count {key_count} of {} keys", keys.len());
            }
            if let Request::Set(s) = r {
                assert!(s.data.len() <= limits.max_value_bytes, "a value of {} bytes accepted", s.data.len());
                check_key(s.key);
            }
            keys.iter().for_each(|k| check_key(k));
            check_rewritten(r, limits);
        }
        Item::Reject { reject, .. } => {
            assert_eq!(reject.closes(), *reject == Reject::LineTooLong, "{reject:?}");
        }
    }
}

fn check_key(key: &[u8]) {
    assert!(key.len() <= MAX_KEY_BYTES && is_valid_key(key), "invalid key {key:?} accepted");
}

/// The canonical form of a request reads back as the same request.
fn check_rewritten(r: &Request<'_>, limits: &RequestLimits) {
    let mut bytes = Vec::new();
    match r {
        Request::Retrieval { cmd, .. } => {
            bytes.extend_from_slice(if *cmd == Retrieval::Get { b"get" } else { b"gets" });
            for k in r.keys() {
                bytes.push(b' ');
                bytes.extend_from_slice(k);
            }
        }
        Request::Set(s) => {
            bytes.extend_from_slice(b"set ");
            bytes.extend_from_slice(s.key);
            bytes.extend_from_slice(format!(" {} {} {}", s.flags, s.exptime, s.data.len()).as_bytes());
            if s.noreply {
                bytes.extend_from_slice(b" noreply");
            }
            bytes.extend_from_slice(b"\r\n");
            bytes.extend_from_slice(s.data);
        }
    }
    bytes.extend_from_slice(b"\r\n");
    // The canonical line is never longer than the one read (single spaces, no leading zeros),
    // so the same limits accept it.
    let mut again = RequestReader::new(*limits);
    again.extend(&bytes, 0);
    let got = again.next_item().map(|(item, _)| own(&item));
    assert_eq!(got, Some(own(&Item::Request(*r))), "rewritten {:?}", String::from_utf8_lossy(&bytes));
    assert!(again.next_item().is_none() && again.buffered() == 0, "bytes left after a rewritten request");
}

/// The stream fed at once.
fn at_once(limits: RequestLimits, stream: &[u8]) -> Vec<Owned> {
    let mut reader = RequestReader::new(limits);
    let mut items = Vec::new();
    reader.extend(stream, 1);
    drain(&mut reader, &mut items);
    items
}

/// The stream fed in two pieces, the second read into the reader's spare space.
fn in_two(limits: RequestLimits, stream: &[u8], cut: usize) -> Vec<Owned> {
    let (a, b) = stream.split_at(cut);
    let mut reader = RequestReader::new(limits);
    let mut items = Vec::new();
    reader.extend(a, 1);
    drain(&mut reader, &mut items);
    let spare = reader.spare(b.len());
    spare[..b.len()].copy_from_slice(b);
    reader.commit(b.len(), 2);
    drain(&mut reader, &mut items);
    items
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, stream)) = data.split_first() else { return };
    let limits = if pick & 1 == 0 {
        RequestLimits::default()
    } else {
        // Small limits from the picking byte: lines of 8-39 bytes (retrieval lines up to twice
        // that), values of 0-3 bytes.
        let line = 8 + usize::from(pick >> 3 & 0x1f);
        RequestLimits {
            max_value_bytes: usize::from(pick >> 1 & 0x3),
            max_line_bytes: line,
            max_retrieval_line_bytes: line * (1 + usize::from(pick >> 6 & 1)),
        }
    };
    let whole = at_once(limits, stream);
    for cut in cut_points(stream.len(), &[]) {
        assert_eq!(in_two(limits, stream, cut), whole, "split at {cut} read differently from the whole stream");
    }
});
