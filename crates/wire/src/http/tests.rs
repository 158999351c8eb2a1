//! Unit tests: one per rule of the request parser, per status of the writers, and for the
//! client side. Property tests live in `proptests.rs`.

use super::request::reason;
use super::response::{format_usize, head_prefix};
use super::*;

fn parse(buf: &[u8]) -> Result<Parse<'_>, HttpError> {
    parse_request(buf, &Limits::default())
}

/// The request and consumed length of a Complete parse; panics otherwise.
fn complete(buf: &[u8]) -> (Request<'_>, usize) {
    match parse(buf) {
        Ok(Parse::Complete { request, consumed }) => (request, consumed),
        other => panic!("expected Complete for {:?}, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

fn is_partial(r: Result<Parse<'_>, HttpError>) -> bool {
    matches!(r, Ok(Parse::Partial))
}

fn bad(buf: &[u8]) -> &'static str {
    match parse(buf) {
        Err(HttpError::BadRequest(r)) => r,
        other => panic!("expected BadRequest for {:?}, got {other:?}", String::from_utf8_lossy(buf)),
    }
}

// ---- request line, path, query, method -------------------------------------------------------

#[test]
fn simple_get() {
    let buf = b"GET /prime?n=27059 HTTP/1.1\r\nHost: x\r\n\r\n";
    let (r, consumed) = complete(buf);
    assert_eq!(consumed, buf.len());
    assert_eq!(r.method, Method::Get);
    assert_eq!(r.path, "/prime");
    assert_eq!(r.query, "n=27059");
    assert_eq!(r.version_minor, 1);
    assert!(r.keep_alive);
    assert!(r.body.is_empty());
}

#[test]
fn path_without_query_has_empty_query() {
    let (r, _) = complete(b"GET /echo HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.path, r.query), ("/echo", ""));
}

#[test]
fn query_split_at_first_question_mark() {
    let (r, _) = complete(b"GET /a?b=1?c=2 HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.path, r.query), ("/a", "b=1?c=2"));
    let (r, _) = complete(b"GET /a? HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.path, r.query), ("/a", ""));
}

#[test]
fn parsed_fields_borrow_the_buffer() {
    let buf = b"POST /echo?size=3 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
    let (r, _) = complete(buf);
    let range = buf.as_ptr_range();
    assert!(range.contains(&r.path.as_ptr()));
    assert!(range.contains(&r.query.as_ptr()));
    assert!(range.contains(&r.body.as_ptr()));
}

#[test]
fn method_mapping() {
    for (token, method) in [
        ("GET", Method::Get),
        ("HEAD", Method::Head),
        ("POST", Method::Post),
        ("PUT", Method::Put),
        ("DELETE", Method::Delete),
        ("OPTIONS", Method::Other),
        ("PATCH", Method::Other),
        // Methods are case-sensitive (RFC 9110 §9.1).
        ("get", Method::Other),
    ] {
        let buf = format!("{token} / HTTP/1.1\r\nHost: h\r\n\r\n");
        let (r, _) = complete(buf.as_bytes());
        assert_eq!(r.method, method, "{token}");
    }
}

#[test]
fn method_tokens_round_trip() {
    for m in [Method::Get, Method::Head, Method::Post, Method::Put, Method::Delete, Method::Other] {
        assert_eq!(Method::from_token(m.as_str()), m);
    }
}

#[test]
fn bad_request_line_is_400() {
    assert_eq!(bad(b"GET / HTTP/2.0\r\n\r\n"), reason::BAD_VERSION);
    assert_eq!(bad(b"GET / FOO/1.1\r\n\r\n"), reason::BAD_VERSION);
    assert_eq!(bad(b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), reason::BAD_METHOD_OR_TARGET);
    assert_eq!(bad(b"GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n"), reason::BAD_METHOD_OR_TARGET);
    assert_eq!(bad(b"GET / HTTP/1.1\rX\n\r\n"), reason::BAD_NEW_LINE);
}

#[test]
fn bad_headers_are_400() {
    assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n"), reason::BAD_HEADER_NAME);
    assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: h\r\nName: a\x00b\r\n\r\n"), reason::BAD_HEADER_VALUE);
}

#[test]
fn leading_empty_lines_are_skipped_and_consumed() {
    // RFC 9112 §2.2: a server should ignore at least one empty line before the request line.
    let buf = b"\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    let (r, consumed) = complete(buf);
    assert_eq!(r.path, "/");
    assert_eq!(consumed, buf.len());
}

// ---- keep-alive ------------------------------------------------------------------------------

fn keep_alive(buf: &[u8]) -> bool {
    complete(buf).0.keep_alive
}

#[test]
fn keep_alive_defaults_by_version() {
    assert!(keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
    assert!(!keep_alive(b"GET / HTTP/1.0\r\n\r\n"));
    assert_eq!(complete(b"GET / HTTP/1.0\r\n\r\n").0.version_minor, 0);
}

#[test]
fn connection_header_overrides_default() {
    assert!(!keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
    assert!(keep_alive(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

#[test]
fn connection_tokens_case_insensitive_and_lists() {
    assert!(!keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nconnection: CLOSE\r\n\r\n"));
    assert!(!keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade ,  Close\r\n\r\n"));
    assert!(keep_alive(b"GET / HTTP/1.0\r\nCONNECTION: foo, Keep-Alive\r\n\r\n"));
    assert!(keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n"));
    assert!(!keep_alive(b"GET / HTTP/1.0\r\nConnection: upgrade\r\n\r\n"));
    // Tokens are whole words, not substrings.
    assert!(keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n"));
}

#[test]
fn close_wins_over_keep_alive() {
    assert!(!keep_alive(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"));
    assert!(!keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"));
}

// ---- bodies and Content-Length ---------------------------------------------------------------

#[test]
fn content_length_body() {
    let buf = b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
    let (r, consumed) = complete(buf);
    assert_eq!(r.body, b"hello");
    assert_eq!(consumed, buf.len());
}

#[test]
fn body_must_be_fully_buffered() {
    let buf = b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
    for cut in 0..buf.len() {
        assert!(is_partial(parse(&buf[..cut])), "cut {cut}");
    }
}

#[test]
fn bytes_after_the_body_are_not_consumed() {
    let buf = b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\nHost: h\r\n\r\n";
    let (r, consumed) = complete(buf);
    assert_eq!(r.body, b"hi");
    assert_eq!(&buf[consumed..], b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
}

#[test]
fn content_length_zero_and_whitespace() {
    let (r, _) = complete(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    assert!(r.body.is_empty());
    let (r, _) = complete(b"POST / HTTP/1.1\r\nHost: h\r\ncontent-length:   3  \r\n\r\nabc");
    assert_eq!(r.body, b"abc");
}

#[test]
fn non_numeric_content_length_is_400() {
    for v in ["abc", "-1", "+1", "1.5", "0x10", "", "1 2", "5,"] {
        let buf = format!("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {v}\r\n\r\n");
        assert_eq!(bad(buf.as_bytes()), reason::NON_NUMERIC_CONTENT_LENGTH, "{v:?}");
    }
}

#[test]
fn duplicate_content_length() {
    // Identical duplicates are accepted (RFC 9112 §6.3), as headers or as a list.
    let (r, _) = complete(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(r.body, b"ok");
    let (r, _) = complete(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 2\r\n\r\nok");
    assert_eq!(r.body, b"ok");
    // Differing ones are refused: which one frames the body is ambiguous (request smuggling).
    assert_eq!(
        bad(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"),
        reason::CONFLICTING_CONTENT_LENGTH
    );
    assert_eq!(
        bad(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 3\r\n\r\nabc"),
        reason::CONFLICTING_CONTENT_LENGTH
    );
}

#[test]
fn transfer_encoding_is_400_and_says_chunked_is_unsupported() {
    let r = bad(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    assert_eq!(r, reason::TRANSFER_ENCODING);
    assert!(r.contains("chunked") && r.contains("not"), "{r}");
    assert_eq!(bad(b"POST / HTTP/1.1\r\nHost: h\r\ntransfer-encoding: gzip\r\n\r\n"), reason::TRANSFER_ENCODING);
}

#[test]
fn content_length_with_transfer_encoding_is_400() {
    assert_eq!(
        bad(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc"),
        reason::LENGTH_AND_ENCODING
    );
    assert_eq!(
        bad(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc"),
        reason::LENGTH_AND_ENCODING
    );
}

#[test]
fn a_connection_header_naming_a_framing_field_is_400() {
    // The smuggle of the proxy finding: a relay that dropped the fields `Connection` names
    // would drop the length it framed the body with.
    for named in ["Content-Length", "transfer-encoding", "HOST", "keep-alive, Content-Length"] {
        let buf = format!("POST / HTTP/1.1\r\nHost: h\r\nConnection: {named}\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!(bad(buf.as_bytes()), reason::CONNECTION_NAMES_FRAMING, "{named}");
    }
    // Other names stay hop-by-hop fields a relay may drop.
    assert!(keep_alive(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Content-Length, Hosts\r\n\r\n"));
}

#[test]
fn host_is_one_valid_field_and_agrees_with_an_absolute_target() {
    // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, with more
    // than one Host, or with an invalid one.
    assert_eq!(bad(b"GET / HTTP/1.1\r\n\r\n"), reason::MISSING_HOST);
    assert_eq!(bad(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), reason::DUPLICATE_HOST);
    for host in ["a b", "a/b", "user@a", "a?b", "a#b", "a\u{e9}"] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_eq!(bad(buf.as_bytes()), reason::BAD_HOST, "{host:?}");
    }
    for host in ["", "a", "a.b-c_d~e:8080", "[::1]:80", "127.0.0.1", "%41!$&'()*+,;="] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        complete(buf.as_bytes());
    }
    // HTTP/1.0 may leave it out.
    complete(b"GET / HTTP/1.0\r\n\r\n");
    // An absolute-form target's authority must be the Host (case-insensitively).
    assert_eq!(bad(b"GET http://a/x HTTP/1.1\r\nHost: b\r\n\r\n"), reason::HOST_MISMATCH);
    assert_eq!(bad(b"GET http://u@a/x HTTP/1.1\r\nHost: a\r\n\r\n"), reason::BAD_AUTHORITY);
    assert_eq!(bad(b"GET http://u@a/x HTTP/1.0\r\n\r\n"), reason::BAD_AUTHORITY);
    assert_eq!(bad(b"GET http://a:81/x HTTP/1.1\r\nHost: a\r\n\r\n"), reason::HOST_MISMATCH);
    assert_eq!(bad(b"GET http://a/x HTTP/1.1\r\n\r\n"), reason::MISSING_HOST);
    complete(b"GET HTTP://A:81?q HTTP/1.1\r\nHost: a:81\r\n\r\n");
    complete(b"GET http://a/x HTTP/1.0\r\n\r\n");
    // An origin-form target that merely contains "://" is not absolute-form.
    complete(b"GET /r?u=http://b/ HTTP/1.1\r\nHost: a\r\n\r\n");
    let mut slots = header_slots();
    let head = parse_request_head(b"GET http://a.test/x HTTP/1.0\r\n\r\n", &Limits::default(), &mut slots);
    let head = head.unwrap().unwrap();
    assert_eq!((head.authority, head.host), (Some("a.test"), None));
}

#[test]
fn expect_100_continue_is_reported_while_the_body_is_awaited() {
    let head = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n";
    assert!(matches!(parse(head.as_bytes()), Ok(Parse::ExpectsContinue)));
    assert!(matches!(parse(format!("{head}ab").as_bytes()), Ok(Parse::ExpectsContinue)));
    let whole = format!("{head}abc");
    let (r, _) = complete(whole.as_bytes());
    assert_eq!(r.body, b"abc");
    // HTTP/1.0 expectations are ignored (RFC 9110 §10.1.1), and so are other expectations.
    assert!(is_partial(parse(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")));
    assert!(is_partial(parse(b"POST / HTTP/1.1\r\nHost: h\r\nExpect: x\r\nContent-Length: 3\r\n\r\n")));
    // Without a body there is nothing to wait for.
    complete(b"GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n");
}

#[test]
fn response_parsers_apply_the_framing_rule_too() {
    let head = b"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello";
    assert!(matches!(parse_response_head(head), Err(ResponseError::Malformed(_))));
    let mut slots = header_slots();
    assert!(matches!(parse_relayed_response_head(head, &mut slots), Err(ResponseError::Malformed(_))));
}

// ---- limits ----------------------------------------------------------------------------------

#[test]
fn body_over_limit_is_413_before_the_body_arrives() {
    let limits = Limits { max_header_bytes: 8192, max_body_bytes: 10 };
    let ok = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789";
    assert!(matches!(parse_request(ok, &limits), Ok(Parse::Complete { .. })));
    // Only the head is buffered: 413 is decided now.
    let big = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
    assert_eq!(parse_request(big, &limits).unwrap_err(), HttpError::PayloadTooLarge);
    // Default limit is 1 MiB.
    let big = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n";
    assert_eq!(parse(big).unwrap_err(), HttpError::PayloadTooLarge);
    // A length beyond u64 is a number, just too large: 413, not 400.
    let huge = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999999\r\n\r\n";
    assert_eq!(parse(huge).unwrap_err(), HttpError::PayloadTooLarge);
}

/// A request whose head is exactly `len` bytes (padding in one header value).
fn request_with_head_len(len: usize) -> Vec<u8> {
    let mut v = b"GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ".to_vec();
    v.resize(len - 4, b'p');
    v.extend_from_slice(b"\r\n\r\n");
    assert_eq!(v.len(), len);
    v
}

#[test]
fn head_at_limit_is_accepted_one_more_byte_is_431() {
    let limit = Limits::default().max_header_bytes;
    let at = request_with_head_len(limit);
    assert!(matches!(parse(&at), Ok(Parse::Complete { consumed, .. }) if consumed == limit));
    let over = request_with_head_len(limit + 1);
    assert_eq!(parse(&over).unwrap_err(), HttpError::HeaderTooLarge);
}

#[test]
fn oversized_head_is_431_while_still_partial() {
    let limits = Limits { max_header_bytes: 64, max_body_bytes: 1024 };
    let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: ".to_vec();
    while buf.len() < 63 {
        buf.push(b'a');
        assert!(is_partial(parse_request(&buf, &limits)), "{} bytes", buf.len());
    }
    // 64 bytes buffered and no end of head within them: refuse now, do not wait for more.
    buf.push(b'a');
    assert_eq!(parse_request(&buf, &limits).unwrap_err(), HttpError::HeaderTooLarge);
    buf.extend_from_slice(&[b'a'; 1000]);
    assert_eq!(parse_request(&buf, &limits).unwrap_err(), HttpError::HeaderTooLarge);
}

#[test]
fn body_does_not_count_towards_header_limit() {
    let limits = Limits { max_header_bytes: 64, max_body_bytes: 1024 };
    let mut buf = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 500\r\n\r\n".to_vec();
    buf.extend_from_slice(&[b'b'; 500]);
    let Ok(Parse::Complete { request, .. }) = parse_request(&buf, &limits) else { panic!() };
    assert_eq!(request.body.len(), 500);
}

#[test]
fn too_many_headers_is_431() {
    let mut buf = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
    for i in 1..MAX_HEADERS {
        buf.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    let mut ok = buf.clone();
    ok.extend_from_slice(b"\r\n");
    assert!(matches!(parse(&ok), Ok(Parse::Complete { .. })));
    buf.extend_from_slice(b"X-last: v\r\n\r\n");
    assert_eq!(parse(&buf).unwrap_err(), HttpError::HeaderTooLarge);
}

#[test]
fn empty_buffer_is_partial() {
    assert!(is_partial(parse(b"")));
}

// ---- errors and statuses ---------------------------------------------------------------------

#[test]
fn http_error_status() {
    assert_eq!(HttpError::BadRequest("x").status(), Status::BadRequest);
    assert_eq!(HttpError::HeaderTooLarge.status().code(), 431);
    assert_eq!(HttpError::PayloadTooLarge.status().code(), 413);
    assert_eq!(HttpError::BadRequest("x").to_string(), "400 Bad Request: x");
}

#[test]
fn status_codes() {
    let codes: Vec<u16> = Status::ALL.iter().map(|s| s.code()).collect();
    assert_eq!(codes, [200, 400, 404, 405, 413, 431, 500, 503]);
}

#[test]
fn head_table_matches_status() {
    for status in Status::ALL {
        for keep_alive in [false, true] {
            let head = std::str::from_utf8(head_prefix(status, keep_alive)).unwrap();
            let line = format!("HTTP/1.1 {} {}\r\n", status.code(), status.reason_phrase());
            assert!(head.starts_with(&line), "{status:?}: {head:?}");
            let conn = if keep_alive { "Connection: keep-alive\r\n" } else { "Connection: close\r\n" };
            assert!(head.contains(conn), "{status:?}: {head:?}");
            assert!(head.ends_with("\r\nContent-Length: "));
            assert!(!head.contains("Date:"));
        }
    }
}

#[test]
fn format_usize_matches_std() {
    let mut buf = [0u8; 20];
    for n in [0usize, 1, 9, 10, 99, 100, 12345, 1 << 20, usize::MAX] {
        assert_eq!(format_usize(n, &mut buf), n.to_string().as_bytes());
    }
}

#[test]
fn write_response_exact_bytes() {
    let mut out = Vec::new();
    write_response(&mut out, Status::Ok, true, b"true");
    assert_eq!(
        out,
        b"HTTP/1.1 200 OK\r\nServer: archlab\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\ntrue"
    );
    out.clear();
    write_response(&mut out, Status::NotFound, false, b"");
    assert_eq!(
        out,
        b"HTTP/1.1 404 Not Found\r\nServer: archlab\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
}

#[test]
fn write_response_appends() {
    let mut out = b"previous".to_vec();
    write_response(&mut out, Status::Ok, true, b"x");
    assert!(out.starts_with(b"previous"));
    let head = parse_response_head(&out[8..]).unwrap().unwrap();
    assert_eq!(head.body_len, 1);
}

#[test]
fn write_response_head_then_body_equals_write_response() {
    for status in Status::ALL {
        for keep_alive in [false, true] {
            let body = vec![b'z'; 1234];
            let mut a = Vec::new();
            write_response(&mut a, status, keep_alive, &body);
            let mut b = Vec::new();
            write_response_head(&mut b, status, keep_alive, body.len());
            b.extend_from_slice(&body);
            assert_eq!(a, b);
        }
    }
}

#[test]
fn every_status_round_trips_through_the_client_parser() {
    for status in Status::ALL {
        for keep_alive in [false, true] {
            let mut out = Vec::new();
            write_response(&mut out, status, keep_alive, b"body!");
            let head = parse_response_head(&out).unwrap().unwrap();
            assert_eq!(head.status, status.code());
            assert_eq!(head.keep_alive, keep_alive);
            assert_eq!(head.body_len, 5);
            assert_eq!(&out[head.head_len..], b"body!");
        }
    }
}

/// Check an error response: status line, Connection: close, Content-Length = body length, body.
fn check_error_response(resp: &[u8], code: u16, body: &str) {
    let head = parse_response_head(resp).unwrap().unwrap();
    assert_eq!(head.status, code);
    assert!(!head.keep_alive);
    assert_eq!(head.head_len + head.body_len, resp.len());
    assert_eq!(std::str::from_utf8(&resp[head.head_len..]).unwrap(), body);
    assert!(std::str::from_utf8(resp).unwrap().contains("\r\nConnection: close\r\n"));
}

#[test]
fn error_responses() {
    check_error_response(error_response(HttpError::HeaderTooLarge), 431, "431 Request Header Fields Too Large\n");
    check_error_response(error_response(HttpError::PayloadTooLarge), 413, "413 Payload Too Large\n");
    for r in reason::ALL {
        check_error_response(error_response(HttpError::BadRequest(r)), 400, &format!("400 Bad Request: {r}\n"));
    }
    check_error_response(error_response(HttpError::BadRequest("someone else's reason")), 400, "400 Bad Request\n");
    check_error_response(
        request_timeout_response(),
        408,
        "408 Request Timeout: the request did not arrive within the server's request_timeout_ms\n",
    );
}

#[test]
fn error_response_for_what_the_parser_returns() {
    let buf = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    let e = parse(buf).unwrap_err();
    let resp = std::str::from_utf8(error_response(e)).unwrap();
    assert!(resp.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert!(resp.ends_with("400 Bad Request: Transfer-Encoding is not supported (chunked request bodies are not implemented; send Content-Length)\n"));
}

// ---- client side -----------------------------------------------------------------------------

#[test]
fn write_request_exact_bytes() {
    let mut out = Vec::new();
    write_request(&mut out, Method::Get, "localhost:8080", "/prime?n=11", true, b"");
    assert_eq!(out, b"GET /prime?n=11 HTTP/1.1\r\nHost: localhost:8080\r\n\r\n");
    out.clear();
    write_request(&mut out, Method::Post, "h", "/echo", false, b"abc");
    assert_eq!(out, b"POST /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc");
}

#[test]
fn written_request_parses() {
    let mut out = Vec::new();
    write_request(&mut out, Method::Put, "h", "/echo?size=0", false, b"xyz");
    let (r, consumed) = complete(&out);
    assert_eq!(consumed, out.len());
    assert_eq!((r.method, r.path, r.query, r.keep_alive, r.body), (Method::Put, "/echo", "size=0", false, &b"xyz"[..]));
}

#[test]
fn response_head_partial_and_complete() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
    let head_len = resp.len() - 3;
    for cut in 0..head_len {
        assert_eq!(parse_response_head(&resp[..cut]), Ok(None), "cut {cut}");
    }
    let expected = ResponseHead { status: 200, head_len, body_len: 3, keep_alive: true };
    assert_eq!(parse_response_head(&resp[..head_len]), Ok(Some(expected)));
    assert_eq!(parse_response_head(resp), Ok(Some(expected)));
}

#[test]
fn response_keep_alive_rules() {
    let ka = |b: &[u8]| parse_response_head(b).unwrap().unwrap().keep_alive;
    assert!(ka(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    assert!(!ka(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
    assert!(!ka(b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n"));
    assert!(ka(b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\nContent-Length: 0\r\n\r\n"));
}

#[test]
fn response_without_content_length() {
    assert_eq!(parse_response_head(b"HTTP/1.1 200 OK\r\n\r\n"), Err(ResponseError::NoContentLength));
    assert_eq!(
        parse_response_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(ResponseError::NoContentLength)
    );
    assert!(matches!(
        parse_response_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"),
        Err(ResponseError::Malformed(_))
    ));
    // Bodiless statuses need no Content-Length.
    for code in [100, 204, 304] {
        let buf = format!("HTTP/1.1 {code} X\r\n\r\n");
        let head = parse_response_head(buf.as_bytes()).unwrap().unwrap();
        assert_eq!((head.status, head.body_len), (code, 0));
    }
}

#[test]
fn malformed_responses() {
    for buf in [
        &b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"[..],
        b"HTTP/3.0 200 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    ] {
        assert!(
            matches!(parse_response_head(buf), Err(ResponseError::Malformed(_))),
            "{:?}",
            String::from_utf8_lossy(buf)
        );
    }
}

#[test]
fn endless_response_head_is_refused() {
    let mut buf = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    buf.resize(client::MAX_RESPONSE_HEAD_BYTES - 1, b'a');
    assert_eq!(parse_response_head(&buf), Ok(None));
    buf.push(b'a');
    assert!(matches!(parse_response_head(&buf), Err(ResponseError::Malformed(_))));
}
