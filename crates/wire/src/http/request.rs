//! Server side, requests in: [`parse_request`] turns the bytes at the start of a read buffer
//! into a borrowed [`Request`], `Partial`, or a refusal, applying the lab's limits as early as
//! the bytes allow. No allocation: header slots live on the stack and every field borrows the
//! buffer.

use super::headers::{self, ConnectionTokens};
use super::{HttpError, Limits, Method, Parse, Request, MAX_HEADERS};

/// Reasons carried by [`HttpError::BadRequest`]. Each has a pre-built 400 response naming it
/// (see `response.rs`), so the list is closed and lives here, next to the code that uses it.
pub(crate) mod reason {
    pub(crate) const BAD_METHOD_OR_TARGET: &str = "invalid method or request target";
    pub(crate) const BAD_VERSION: &str = "invalid HTTP version (HTTP/1.0 and HTTP/1.1 only)";
    pub(crate) const BAD_HEADER_NAME: &str = "invalid header name";
    pub(crate) const BAD_HEADER_VALUE: &str = "invalid header value";
    pub(crate) const BAD_NEW_LINE: &str = "invalid line ending";
    pub(crate) const MALFORMED: &str = "malformed request line";
    pub(crate) const NON_NUMERIC_CONTENT_LENGTH: &str = super::headers::NON_NUMERIC_CONTENT_LENGTH;
    pub(crate) const CONFLICTING_CONTENT_LENGTH: &str = super::headers::CONFLICTING_CONTENT_LENGTH;
    pub(crate) const LENGTH_AND_ENCODING: &str = "both Content-Length and Transfer-Encoding";
    pub(crate) const TRANSFER_ENCODING: &str =
        "Transfer-Encoding is not supported (chunked request bodies are not implemented; send Content-Length)";
    pub(crate) const CONNECTION_NAMES_FRAMING: &str = super::headers::CONNECTION_NAMES_FRAMING;
    pub(crate) const MISSING_HOST: &str = "HTTP/1.1 request without Host";
    pub(crate) const DUPLICATE_HOST: &str = "more than one Host field";
    pub(crate) const BAD_HOST: &str = "invalid Host value";
    pub(crate) const HOST_MISMATCH: &str = "absolute-form target whose authority differs from Host";
    pub(crate) const BAD_AUTHORITY: &str = "invalid authority in an absolute-form target";

    /// Every reason, for the response table and the tests.
    pub(crate) const ALL: [&str; 16] = [
        BAD_METHOD_OR_TARGET,
        BAD_VERSION,
        BAD_HEADER_NAME,
        BAD_HEADER_VALUE,
        BAD_NEW_LINE,
        MALFORMED,
        NON_NUMERIC_CONTENT_LENGTH,
        CONFLICTING_CONTENT_LENGTH,
        LENGTH_AND_ENCODING,
        TRANSFER_ENCODING,
        CONNECTION_NAMES_FRAMING,
        MISSING_HOST,
        DUPLICATE_HOST,
        BAD_HOST,
        HOST_MISMATCH,
        BAD_AUTHORITY,
    ];
}

fn reason_for(e: httparse::Error) -> &'static str {
    match e {
        // httparse reports bad bytes in the method and in the request target alike as `Token`.
        httparse::Error::Token => reason::BAD_METHOD_OR_TARGET,
        httparse::Error::Version => reason::BAD_VERSION,
        httparse::Error::HeaderName => reason::BAD_HEADER_NAME,
        httparse::Error::HeaderValue => reason::BAD_HEADER_VALUE,
        httparse::Error::NewLine => reason::BAD_NEW_LINE,
        // `Status` only occurs for responses, `TooManyHeaders` is handled by the caller (431).
        httparse::Error::Status | httparse::Error::TooManyHeaders => reason::MALFORMED,
    }
}

/// The head of a request at the start of a buffer, for a proxy that forwards the headers and
/// streams the body ([`parse_request_head`]). Borrows the buffer and the caller's header slots.
#[derive(Debug)]
pub struct RequestHead<'b, 'h> {
    /// The method token as received (case-sensitive, RFC 9110 §9.1).
    pub method: &'b str,
    /// The request target as received, query included.
    pub target: &'b str,
    /// HTTP/1.x minor version.
    pub version_minor: u8,
    /// Whether the connection stays open after the response (rules of [`parse_request`]).
    pub keep_alive: bool,
    /// Bytes of request line, headers and blank line.
    pub head_len: usize,
    /// The body's Content-Length (0 without one), already checked against the limit.
    pub body_len: usize,
    /// Whether the head had a Content-Length field (all of them agreeing on `body_len`).
    pub has_content_length: bool,
    /// The Host field's value, trimmed (one at most: a second is refused).
    pub host: Option<&'b [u8]>,
    /// The authority of an absolute-form target (`http://authority/path`), which then equals
    /// `host` when there is one.
    pub authority: Option<&'b str>,
    /// `Expect: 100-continue` on an HTTP/1.1 request (an HTTP/1.0 one's is ignored, RFC 9110
    /// §10.1.1).
    pub expects_continue: bool,
    /// Every header as received, in order.
    pub headers: &'h [httparse::Header<'b>],
}

/// Header slots for [`parse_request_head`].
pub type HeaderSlots<'b> = [httparse::Header<'b>; MAX_HEADERS];

/// Empty header slots for [`parse_request_head`].
pub fn header_slots<'b>() -> HeaderSlots<'b> {
    [httparse::EMPTY_HEADER; MAX_HEADERS]
}

/// Parse the head of one request at the start of `buf`, with every rule and limit of
/// [`parse_request`] (the same refusals, decided as early), without waiting for the body:
/// `Ok(None)` until the head is complete.
pub fn parse_request_head<'b, 'h>(
    buf: &'b [u8],
    limits: &Limits,
    slots: &'h mut HeaderSlots<'b>,
) -> Result<Option<RequestHead<'b, 'h>>, HttpError> {
    // Parse only the first max_header_bytes: a head that does not end in there is too large
    // whatever follows, and bounding the window also bounds the work spent on re-parsing a
    // head that arrives in many small reads.
    let window = &buf[..buf.len().min(limits.max_header_bytes)];
    let mut req = httparse::Request::new(slots);
    let head_len = match req.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if !buf.is_empty() && buf.len() >= limits.max_header_bytes {
                Err(HttpError::HeaderTooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeaderTooLarge),
        Err(e) => return Err(HttpError::BadRequest(reason_for(e))),
    };
    let (Some(method), Some(target), Some(version_minor)) = (req.method, req.path, req.version) else {
        // httparse fills all three on Complete; kept as an error rather than a panic.
        return Err(HttpError::BadRequest(reason::MALFORMED));
    };

    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut connection = ConnectionTokens::default();
    let mut host: Option<&[u8]> = None;
    let mut expects_continue = false;
    for h in req.headers.iter() {
        if headers::name_is(h.name, "content-length") {
            headers::merge_content_length(&mut content_length, h.value).map_err(HttpError::BadRequest)?;
        } else if headers::name_is(h.name, "transfer-encoding") {
            transfer_encoding = true;
        } else if headers::name_is(h.name, "connection") {
            connection.add(h.value);
        } else if headers::name_is(h.name, "host") {
            // RFC 9112 §3.2: more than one Host, or an invalid one, is a 400.
            if host.is_some() {
                return Err(HttpError::BadRequest(reason::DUPLICATE_HOST));
            }
            let value = h.value.trim_ascii();
            if !value.iter().all(|&b| is_host_byte(b)) {
                return Err(HttpError::BadRequest(reason::BAD_HOST));
            }
            host = Some(value);
        } else if headers::name_is(h.name, "expect") {
            expects_continue |= h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    connection.check().map_err(HttpError::BadRequest)?;
    let authority = absolute_form_authority(target);
    if authority.is_some_and(|a| !a.bytes().all(is_host_byte)) {
        // A userinfo part (`user@host`, RFC 9110 §4.2.4) or anything else a Host cannot hold:
        // a proxy could not name the host it forwards to (RFC 9112 §3.2.2).
        return Err(HttpError::BadRequest(reason::BAD_AUTHORITY));
    }
    match (host, authority) {
        (None, _) if version_minor >= 1 => return Err(HttpError::BadRequest(reason::MISSING_HOST)),
        // RFC 9112 §3.2.2 lets a recipient take the target's authority over Host; refusing the
        // disagreement instead (as HAProxy does) leaves no two hops a way to see different hosts.
        (Some(h), Some(a)) if !h.eq_ignore_ascii_case(a.as_bytes()) => {
            return Err(HttpError::BadRequest(reason::HOST_MISMATCH))
        }
        _ => {}
    }
    if transfer_encoding {
        return Err(HttpError::BadRequest(if content_length.is_some() {
            reason::LENGTH_AND_ENCODING
        } else {
            reason::TRANSFER_ENCODING
        }));
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > limits.max_body_bytes as u64 {
        return Err(HttpError::PayloadTooLarge);
    }
    Ok(Some(RequestHead {
        method,
        target,
        version_minor,
        keep_alive: connection.keep_alive(version_minor),
        head_len,
        // Fits: body_len <= max_body_bytes, a usize.
        body_len: body_len as usize,
        has_content_length: content_length.is_some(),
        host,
        authority,
        expects_continue: expects_continue && version_minor >= 1,
        headers: req.headers,
    }))
}

/// A byte of a Host value: `uri-host [":" port]` of RFC 3986 (reg-name, IPv4, or an IP literal
/// in brackets). Anything else (`@`, `/`, space, ...) would let two parsers read two hosts.
fn is_host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b)
}

/// The authority of an absolute-form request target (`scheme://authority[/path]`), None for
/// any other form. A userinfo part (`user@host`) is kept in it, so that it is refused.
fn absolute_form_authority(target: &str) -> Option<&str> {
    let (scheme, rest) = target.split_once("://")?;
    let mut chars = scheme.bytes();
    let starts_alpha = chars.next().is_some_and(|b| b.is_ascii_alphabetic());
    if !starts_alpha || !chars.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return None;
    }
    Some(rest.split(['/', '?', '#']).next().unwrap_or(""))
}

/// Parse one request at the start of `buf`.
///
/// Returns `Partial` until the head and the whole Content-Length body are in `buf`
/// (`ExpectsContinue` instead once a head with `Expect: 100-continue` waits for its body); then
/// `Complete` with `consumed` = head + body bytes, so the caller drops exactly one request and
/// calls again for the next pipelined one. Refusals (all of which end the connection):
/// - no end of head within the first `limits.max_header_bytes` bytes, or more than 64 header
///   lines -> [`HttpError::HeaderTooLarge`] (431), decided as soon as that many bytes are
///   buffered, without waiting for the end of the head;
/// - Content-Length over `limits.max_body_bytes` -> [`HttpError::PayloadTooLarge`] (413),
///   decided as soon as the head is parsed, before the body arrives;
/// - malformed request line or headers, non-numeric or conflicting Content-Length, any
///   Transfer-Encoding (chunked is not supported), or both Content-Length and
///   Transfer-Encoding -> [`HttpError::BadRequest`] (400) with a reason;
/// - a `Connection` header naming Content-Length, Transfer-Encoding or Host (framing fields
///   are never hop-by-hop) -> 400;
/// - Host as RFC 9112 §3.2 requires: missing on HTTP/1.1, more than one, an invalid value, or
///   an absolute-form target whose authority differs from it, or is not a valid host -> 400.
///
/// Keep-alive: HTTP/1.1 defaults to persistent, HTTP/1.0 to close; `Connection` tokens
/// `close` / `keep-alive` (case-insensitive, comma lists, any number of headers) override,
/// `close` winning if both appear. The target is split into path and query at the first '?'.
pub fn parse_request<'a>(buf: &'a [u8], limits: &Limits) -> Result<Parse<'a>, HttpError> {
    let mut slots = header_slots();
    let Some(head) = parse_request_head(buf, limits, &mut slots)? else {
        return Ok(Parse::Partial);
    };
    // Cannot overflow: body_len <= max_body_bytes (a usize) and head_len <= buf.len().
    let consumed = head.head_len.saturating_add(head.body_len);
    if buf.len() < consumed {
        return Ok(if head.expects_continue { Parse::ExpectsContinue } else { Parse::Partial });
    }
    let (path, query) = head.target.split_once('?').unwrap_or((head.target, ""));
    Ok(Parse::Complete {
        request: Request {
            method: Method::from_token(head.method),
            path,
            query,
            version_minor: head.version_minor,
            keep_alive: head.keep_alive,
            body: &buf[head.head_len..consumed],
        },
        consumed,
    })
}
