//! The memcached reply parsing of the load generator, fed any bytes as what a server answered:
//! the element parser (`archlab_wire::memcached::parse_reply`) and the generator's handling of
//! a whole reply (`archlab_load::McClient`) after a `set`, a `get` of one key and a multi-get
//! of three keys, with verification of the values on.
//!
//! Invariants checked, beyond "no panic":
//! - a parsed element used at least one byte and no more than the input, and its key, data
//!   and message borrow the input;
//! - an element written again in the protocol's canonical form parses to the same element,
//!   using exactly the bytes written;
//! - every prefix of the input parses to "need more bytes" or to exactly what the whole input
//!   gives (refusals are final), for every element of the stream;
//! - a client fed the reply split at any point ends as it does when fed the bytes it read all
//!   at once, with the same counts (hits, misses, keys).
#![no_main]

use archlab_fuzz::{borrows, cut_points};
use archlab_load::{KeyPatterns, McClient, McCounts, McWorkload, Progress, Ratio, ValueSize};
use archlab_wire::memcached::{is_valid_key, parse_reply, Malformed, Parse, Reply, Retrieval};
use libfuzzer_sys::fuzz_target;

/// The canonical bytes of one element.
fn write_element(r: &Reply<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match r {
        Reply::Value { key, flags, cas, data } => {
            out.extend_from_slice(b"VALUE ");
            out.extend_from_slice(key);
            out.extend_from_slice(format!(" {flags} {}", data.len()).as_bytes());
            if let Some(c) = cas {
                out.extend_from_slice(format!(" {c}").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(data);
        }
        Reply::End => out.extend_from_slice(b"END"),
        Reply::Stored => out.extend_from_slice(b"STORED"),
        Reply::NotStored => out.extend_from_slice(b"NOT_STORED"),
        Reply::Exists => out.extend_from_slice(b"EXISTS"),
        Reply::NotFound => out.extend_from_slice(b"NOT_FOUND"),
        Reply::Error => out.extend_from_slice(b"ERROR"),
        Reply::ClientError(m) => out.extend_from_slice(&[&b"CLIENT_ERROR "[..], m].concat()),
        Reply::ServerError(m) => out.extend_from_slice(&[&b"SERVER_ERROR "[..], m].concat()),
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn check_element(buf: &[u8], r: &Result<Parse<Reply<'_>>, Malformed>) {
    let Ok(Parse::Complete(reply, used)) = r else { return };
    assert!(*used > 0 && *used <= buf.len(), "used {used} of {}", buf.len());
    let fields: &[&[u8]] = match reply {
        Reply::Value { key, data, .. } => {
            assert!(is_valid_key(key), "invalid key {key:?} accepted");
            &[key, data]
        }
        Reply::ClientError(m) | Reply::ServerError(m) => &[m],
        _ => &[],
    };
    assert!(fields.iter().all(|f| borrows(&buf[..*used], f)), "a field outside the element");
    let again = write_element(reply);
    assert_eq!(
        parse_reply(&again),
        Ok(Parse::Complete(*reply, again.len())),
        "rewritten {:?}",
        String::from_utf8_lossy(&again)
    );
}

/// Every prefix of `buf` parses to Partial or to the whole buffer's result; refusals are final.
fn check_prefixes(buf: &[u8]) {
    let whole = parse_reply(buf);
    check_element(buf, &whole);
    let marks = match whole {
        Ok(Parse::Complete(_, used)) => vec![used],
        _ => Vec::new(),
    };
    let mut refused = false;
    for cut in cut_points(buf.len(), &marks) {
        let got = parse_reply(&buf[..cut]);
        if got == Ok(Parse::Partial) {
            assert!(!refused, "a prefix of {cut} bytes needs more bytes after a shorter one was refused");
            if let Ok(Parse::Complete(_, used)) = whole {
                assert!(cut < used, "a prefix of {cut} bytes holding the whole element is Partial");
            }
            continue;
        }
        assert_eq!(got, whole, "the prefix of {cut} bytes parsed differently from the whole input");
        refused |= got.is_err();
    }
}

/// Walk the stream element by element, checking each one's prefixes.
fn check_stream(buf: &[u8]) {
    let mut at = 0;
    while let Ok(Parse::Complete(_, used)) = parse_reply(&buf[at..]) {
        check_prefixes(&buf[at..]);
        at += used;
    }
    check_prefixes(&buf[at..]);
}

/// Keys `k-0` ..= `k-9` walked in order, values of 4 bytes, verified.
fn workload(ratio: Ratio, multi_get: u32) -> McWorkload {
    let keys: KeyPatterns = "S:S".parse().expect("a valid pattern");
    McWorkload::new(Retrieval::Get, multi_get, ratio, keys, "k-".into(), 0, 9, None, None, ValueSize::Fixed(4), true)
        .expect("a valid workload")
}

/// A fresh client with its first request (which sets what reply it expects) built.
fn client(w: &McWorkload) -> McClient {
    let mut c = McClient::new(w, 1, 0, 0, 0, 1);
    c.next_request();
    c
}

/// Feed `pieces` until the reply ends or is refused: the end, the counts and the bytes read.
fn feed<'a>(w: &McWorkload, pieces: impl IntoIterator<Item = &'a [u8]>) -> (Progress, McCounts, usize) {
    let mut c = client(w);
    let mut read = 0;
    for piece in pieces {
        read += piece.len();
        match c.feed(piece) {
            Progress::More => {}
            end => return (end, c.last_counts(), read),
        }
    }
    (Progress::More, c.last_counts(), read)
}

fn check_client(w: &McWorkload, buf: &[u8]) {
    let (whole, counts, _) = feed(w, [buf]);
    if let Progress::Done { .. } = whole {
        assert!(counts.hits + counts.misses == counts.get_keys && counts.get_keys <= u64::from(w.multi_get));
    }
    for cut in cut_points(buf.len(), &[]) {
        let (a, b) = buf.split_at(cut);
        let (got, got_counts, read) = feed(w, [a, b]);
        let (at_once, at_once_counts, _) = feed(w, [&buf[..read]]);
        assert_eq!(got, at_once, "split at {cut}, {read} bytes read");
        if matches!(got, Progress::Done { .. }) {
            assert_eq!(got_counts, at_once_counts, "split at {cut}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check_stream(data);
    for w in [
        workload(Ratio { sets: 1, gets: 0 }, 1),
        workload(Ratio { sets: 0, gets: 1 }, 1),
        workload(Ratio { sets: 0, gets: 3 }, 3),
    ] {
        check_client(&w, data);
    }
});
