//! The HTTP request parser of every server (`archlab_wire::http::parse_request`), fed any
//! bytes, under the default limits and under limits small enough for the input to reach them.
//!
//! Invariants checked, beyond "no panic":
//! - a Complete request consumed at least one byte and no more than the input, its body is the
//!   last bytes it consumed, and every field borrows the input (path and query are UTF-8);
//! - a request that parses, written again by the client writer (`write_request`), parses to the
//!   same method, path, query, keep-alive and body;
//! - incremental parsing: every prefix of the input parses to "need more bytes" or to exactly
//!   what the whole input gives (never a different request, never a different refusal), and
//!   once a prefix is refused every longer one is refused the same way;
//! - pipelining: parsing request after request from the input always makes progress.
#![no_main]

use archlab_fuzz::{borrows, cut_points};
use archlab_wire::http::{header_slots, parse_request, parse_request_head, write_request, HttpError, Limits, Parse};
use libfuzzer_sys::fuzz_target;

/// What one call returned, owned, so that results of different buffers can be compared.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Partial,
    Complete {
        method: String,
        path: String,
        query: String,
        minor: u8,
        keep_alive: bool,
        body: Vec<u8>,
        consumed: usize,
    },
    Refused(HttpError),
}

fn seen(r: &Result<Parse<'_>, HttpError>) -> Seen {
    match r {
        // Waiting for a body whose head asked for `100 Continue` is waiting all the same.
        Ok(Parse::Partial | Parse::ExpectsContinue) => Seen::Partial,
        Ok(Parse::Complete { request, consumed }) => Seen::Complete {
            method: request.method.as_str().to_owned(),
            path: request.path.to_owned(),
            query: request.query.to_owned(),
            minor: request.version_minor,
            keep_alive: request.keep_alive,
            body: request.body.to_vec(),
            consumed: *consumed,
        },
        Err(e) => Seen::Refused(*e),
    }
}

/// Invariants of one result for the buffer it came from.
fn check_one(buf: &[u8], r: &Result<Parse<'_>, HttpError>) {
    let Ok(Parse::Complete { request, consumed }) = r else { return };
    assert!(*consumed > 0 && *consumed <= buf.len(), "consumed {consumed} of {}", buf.len());
    assert!(request.version_minor <= 1, "HTTP/1.{}", request.version_minor);
    for field in [request.path.as_bytes(), request.query.as_bytes(), request.body] {
        assert!(borrows(&buf[..*consumed], field), "a field outside the consumed bytes");
    }
    assert!(
        std::str::from_utf8(request.path.as_bytes()).is_ok() && std::str::from_utf8(request.query.as_bytes()).is_ok()
    );
    assert_eq!(request.body, &buf[consumed - request.body.len()..*consumed], "the body is not the last bytes consumed");
}

/// Write the request again with the client writer and parse it back. Its Host is the one it
/// names: the absolute-form target's authority, else its own Host field, else any.
fn check_round_trip(buf: &[u8], r: &Result<Parse<'_>, HttpError>) {
    let Ok(Parse::Complete { request, .. }) = r else { return };
    let mut slots = header_slots();
    let unlimited = Limits { max_header_bytes: usize::MAX, max_body_bytes: usize::MAX };
    let head = parse_request_head(buf, &unlimited, &mut slots).expect("a complete request has a head").expect("whole");
    let host = match (head.authority, head.host) {
        (Some(authority), _) => authority.to_owned(),
        (None, Some(host)) => String::from_utf8(host.to_vec()).expect("a valid Host is ASCII"),
        (None, None) => "fuzz.test".to_owned(),
    };
    // `?` also when the path is empty: a target is never empty (`?` alone is path "", query "").
    let target = if request.query.is_empty() && !request.path.is_empty() {
        request.path.to_owned()
    } else {
        format!("{}?{}", request.path, request.query)
    };
    let mut out = Vec::new();
    write_request(&mut out, request.method, &host, &target, request.keep_alive, request.body);
    match parse_request(&out, &unlimited) {
        Ok(Parse::Complete { request: again, consumed }) => {
            assert_eq!(consumed, out.len(), "the rewritten request was not consumed whole");
            assert_eq!(again.method, request.method);
            assert_eq!((again.path, again.query), (request.path, request.query));
            assert_eq!(again.keep_alive, request.keep_alive);
            assert_eq!(again.body, request.body);
            assert_eq!(again.version_minor, 1);
        }
        other => panic!("the rewritten request {:?} did not parse: {other:?}", String::from_utf8_lossy(&out)),
    }
}

/// Every prefix gives Partial or the whole input's result; refusals are final.
fn check_prefixes(buf: &[u8], limits: &Limits, whole: &Seen) {
    let marks = match whole {
        Seen::Complete { consumed, body, .. } => vec![*consumed, consumed - body.len(), limits.max_header_bytes],
        _ => vec![limits.max_header_bytes],
    };
    let mut refused = false;
    for cut in cut_points(buf.len(), &marks) {
        let prefix = &buf[..cut];
        let r = parse_request(prefix, limits);
        check_one(prefix, &r);
        let got = seen(&r);
        if got == Seen::Partial {
            assert!(!refused, "a prefix of {cut} bytes needs more bytes after a shorter one was refused");
            if let Seen::Complete { consumed, .. } = whole {
                assert!(cut < *consumed, "a prefix of {cut} bytes holding the whole request is Partial");
            }
            continue;
        }
        assert_eq!(&got, whole, "the prefix of {cut} bytes parsed differently from the whole input");
        refused |= matches!(got, Seen::Refused(_));
    }
}

/// Parse request after request, as a server loop does with pipelined requests.
fn check_pipeline(buf: &[u8], limits: &Limits) {
    let mut at = 0;
    loop {
        let r = parse_request(&buf[at..], limits);
        check_one(&buf[at..], &r);
        match r {
            Ok(Parse::Complete { consumed, .. }) => at += consumed,
            Ok(Parse::Partial | Parse::ExpectsContinue) | Err(_) => break,
        }
    }
    assert!(at <= buf.len());
}

fn check(buf: &[u8], limits: &Limits) {
    let r = parse_request(buf, limits);
    check_one(buf, &r);
    check_round_trip(buf, &r);
    let whole = seen(&r);
    check_prefixes(buf, limits, &whole);
    check_pipeline(buf, limits);
}

fuzz_target!(|data: &[u8]| {
    check(data, &Limits::default());
    // Limits the input itself can exceed, so that 431 and 413 are reached too.
    check(data, &Limits { max_header_bytes: 1 + data.len() / 2, max_body_bytes: data.len() / 4 });
});
