//! Property tests: what the client writer produces the server parser reads back unchanged,
//! whatever the read boundaries and however many requests are pipelined; arbitrary bytes never
//! panic; responses round-trip through the client parser.

use super::*;
use proptest::prelude::*;

/// One request as the load generator would send it, plus extra headers a real client adds.
#[derive(Clone, Debug)]
struct Spec {
    method: Method,
    host: String,
    path: String,
    query: Option<String>,
    extra_headers: Vec<(String, String)>,
    keep_alive: bool,
    body: Vec<u8>,
}

impl Spec {
    fn target(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{}", self.path, q),
            None => self.path.clone(),
        }
    }

    /// `write_request`, then the extra headers inserted after the request line.
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_request(&mut out, self.method, &self.host, &self.target(), self.keep_alive, &self.body);
        let line_end = out.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        let mut extra = Vec::new();
        for (name, value) in &self.extra_headers {
            extra.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.splice(line_end..line_end, extra);
        out
    }

    fn check(&self, r: &Request<'_>) {
        assert_eq!(r.method, self.method);
        assert_eq!(r.path, self.path);
        assert_eq!(r.query, self.query.as_deref().unwrap_or(""));
        assert_eq!(r.version_minor, 1);
        assert_eq!(r.keep_alive, self.keep_alive);
        assert_eq!(r.body, &self.body[..]);
    }
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::Get),
        Just(Method::Head),
        Just(Method::Post),
        Just(Method::Put),
        Just(Method::Delete),
        Just(Method::Other),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        method(),
        "[a-z0-9.-]{1,20}(:[0-9]{1,5})?",
        "/[A-Za-z0-9._~/%-]{0,30}",
        proptest::option::of("[A-Za-z0-9=&%._~?/-]{0,30}"),
        // Names that cannot collide with the headers the parser interprets.
        proptest::collection::vec(("X-[A-Za-z0-9-]{1,12}", "[A-Za-z0-9 ,;=/.-]{0,24}"), 0..6),
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(method, host, path, query, extra_headers, keep_alive, body)| Spec {
            method,
            host,
            path,
            query,
            extra_headers,
            keep_alive,
            body,
        })
}

/// Parse `buf` the way a server loop does: request after request until Partial, checking each
/// against `specs` and that each call consumes exactly one request. Returns how many parsed.
fn drain(buf: &[u8], specs: &[Spec], lens: &[usize]) -> usize {
    let mut off = 0;
    let mut n = 0;
    loop {
        match parse_request(&buf[off..], &Limits::default()) {
            Ok(Parse::Complete { request, consumed }) => {
                assert!(n < specs.len(), "more requests than were written");
                assert_eq!(consumed, lens[n], "request {n} consumed");
                specs[n].check(&request);
                off += consumed;
                n += 1;
            }
            Ok(Parse::Partial | Parse::ExpectsContinue) => return n,
            Err(e) => panic!("valid request refused: {e:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// (a) Any valid request written by the client writer parses back to the same fields.
    #[test]
    fn written_requests_parse_back(s in spec()) {
        let bytes = s.bytes();
        match parse_request(&bytes, &Limits::default()) {
            Ok(Parse::Complete { request, consumed }) => {
                prop_assert_eq!(consumed, bytes.len());
                s.check(&request);
            }
            other => panic!("{other:?}"),
        }
    }

    /// (b) Split reads at every byte boundary, single and pipelined: a prefix yields exactly
    /// the requests wholly inside it (one per call, each consuming exactly its own bytes) and
    /// then Partial; the full buffer yields them all.
    #[test]
    fn every_split_point(specs in proptest::collection::vec(spec(), 1..=3)) {
        let parts: Vec<Vec<u8>> = specs.iter().map(Spec::bytes).collect();
        let lens: Vec<usize> = parts.iter().map(Vec::len).collect();
        let buf = parts.concat();
        for cut in 0..=buf.len() {
            let mut end = 0;
            let whole = lens.iter().take_while(|&&l| { end += l; end <= cut }).count();
            prop_assert_eq!(drain(&buf[..cut], &specs, &lens), whole, "cut {}", cut);
        }
    }

    /// (d) A pipelined buffer of k requests yields exactly k requests.
    #[test]
    fn pipelined_k_requests(specs in proptest::collection::vec(spec(), 1..=12)) {
        let parts: Vec<Vec<u8>> = specs.iter().map(Spec::bytes).collect();
        let lens: Vec<usize> = parts.iter().map(Vec::len).collect();
        prop_assert_eq!(drain(&parts.concat(), &specs, &lens), specs.len());
    }

    /// (c) Random bytes never panic, in either parser, also with small limits.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), max_head in 0usize..700) {
        let _ = parse_request(&bytes, &Limits::default());
        let _ = parse_request(&bytes, &Limits { max_header_bytes: max_head, max_body_bytes: 16 });
        let _ = parse_response_head(&bytes);
    }

    /// (c) Random bytes after a valid-looking prefix (where the parsers do real work) never panic,
    /// and whatever is Complete consumed no more than the buffer.
    #[test]
    fn random_tails_never_panic(
        prefix in prop_oneof![
            Just(&b"GET / HTTP/1.1\r\n"[..]),
            Just(&b"POST /echo HTTP/1.1\r\nContent-Length: "[..]),
            Just(&b"GET / HTTP/1.1\r\nConnection:"[..]),
            Just(&b"HTTP/1.1 200 OK\r\n"[..]),
        ],
        tail in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'\r'), Just(b'\n'), Just(b':'), Just(b' ')], 0..300),
    ) {
        let mut buf = prefix.to_vec();
        buf.extend_from_slice(&tail);
        if let Ok(Parse::Complete { consumed, request }) = parse_request(&buf, &Limits::default()) {
            prop_assert!(consumed <= buf.len());
            prop_assert!(request.body.len() <= consumed);
        }
        if let Ok(Some(head)) = parse_response_head(&buf) {
            prop_assert!(head.head_len <= buf.len());
        }
    }

    /// Responses written by the server writer parse back (status, length, keep-alive, body).
    #[test]
    fn response_round_trip(
        status in proptest::sample::select(&Status::ALL[..]),
        keep_alive in any::<bool>(),
        body in proptest::collection::vec(any::<u8>(), 0..2000),
    ) {
        let mut out = Vec::new();
        write_response(&mut out, status, keep_alive, &body);
        let head = parse_response_head(&out).unwrap().unwrap();
        prop_assert_eq!(head.status, status.code());
        prop_assert_eq!(head.keep_alive, keep_alive);
        prop_assert_eq!(head.body_len, body.len());
        prop_assert_eq!(&out[head.head_len..], &body[..]);
        for cut in 0..head.head_len {
            prop_assert_eq!(parse_response_head(&out[..cut]), Ok(None));
        }
    }
}
