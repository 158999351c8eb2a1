//! HTTP/1.1 codec for every server, proxy and the load generator of archlab.
//!
//! Mechanism: requests are parsed in place with `httparse` ([`parse_request`]); the returned
//! [`Request`] borrows method, path, query and body from the caller's read buffer, so parsing
//! allocates nothing. Parsing is incremental in the simplest way: the caller appends bytes to its
//! buffer and calls again; [`Parse::Partial`] means "read more", [`Parse::Complete`] says how
//! many bytes one request occupied so pipelined requests are consumed one at a time. Limits are
//! decided as early as the bytes allow (an oversized head is refused before its end arrives, an
//! oversized Content-Length as soon as the head is parsed), so a slow or hostile client cannot
//! make a server buffer without bound. Responses are written from pre-built static header
//! blocks ([`write_response`], [`write_response_head`]): the only per-response work is copying
//! those bytes and formatting one integer, because this code runs on every request of every
//! architecture being measured and must not be what the measurement sees. The client half
//! ([`write_request`], [`parse_response_head`]) serves the load generator with the same rules;
//! a reverse proxy reads request heads alone ([`parse_request_head`], same rules and limits, the
//! body streamed after) and relays responses with [`parse_relayed_response_head`] and
//! [`ChunkedFraming`].
//!
//! Deliberately unsupported: `Transfer-Encoding` (chunked bodies) on requests, which is refused
//! with 400 and a reason saying so; no workload of the seeds sends chunked requests, and
//! refusing is safer than half-supporting it (request smuggling). Responses carry no `Date`
//! header so that every response to the same request has the same size: byte counts per
//! request, write() sizes and link-emulation results stay comparable across runs and
//! architectures, and no server pays for a clock read and date formatting on its hot path
//! (RFC 9110 §6.6.1 lets an origin without a reliable clock omit `Date`).

mod client;
mod relay;
mod request;
mod response;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use client::{parse_response_head, write_request};
/// Header slots are httparse's: a proxy reads names and values from them.
pub use httparse::Header;
pub use relay::{
    parse_relayed_response_head, Chunk, ChunkedFraming, RelayedResponse, ResponseFraming, MAX_CHUNK_LINE_BYTES,
    MAX_TRAILER_BYTES,
};
pub use request::{header_slots, parse_request, parse_request_head, HeaderSlots, RequestHead};
pub(crate) use response::format_usize;
pub use response::{error_response, request_timeout_response, write_response, write_response_head};

/// The interim response that invites a client to send the body it announced with
/// `Expect: 100-continue` ([`Parse::ExpectsContinue`]).
pub const CONTINUE_RESPONSE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Whether `name` is a framing field (`Content-Length`, `Transfer-Encoding`, `Host`): one that
/// no `Connection` header can make hop-by-hop. Every parser here refuses a message whose
/// `Connection` names one, so a relay that drops the fields `Connection` names never drops one
/// of these.
pub fn is_framing_field(name: &str) -> bool {
    headers::is_framing_field(name.as_bytes())
}

/// Size limits enforced while parsing a request.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Request line + headers + blank line; larger -> 431.
    pub max_header_bytes: usize,
    /// Content-Length above this -> 413.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_header_bytes: 8 * 1024, max_body_bytes: 1024 * 1024 }
    }
}

/// Request method. Methods other than the five the lab uses are kept apart as `Other` rather
/// than refused, so the application layer can answer 405 instead of the codec answering 400.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    /// Any other syntactically valid method. [`write_request`] writes it as `OPTIONS`.
    Other,
}

impl Method {
    /// Map a method token (case-sensitive, as RFC 9110 §9.1 says) to the enum.
    pub fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            _ => Method::Other,
        }
    }

    /// The token written on the wire; `Other` is written as `OPTIONS`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Other => "OPTIONS",
        }
    }
}

/// A parsed request borrowing from the read buffer.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: Method,
    /// Path without the query, e.g. "/prime".
    pub path: &'a str,
    /// Query without the '?', e.g. "n=27059"; empty when absent.
    pub query: &'a str,
    /// HTTP/1.x minor version.
    pub version_minor: u8,
    /// Whether the connection stays open after the response (HTTP/1.1 default yes,
    /// HTTP/1.0 default no, `Connection: close` / `keep-alive` override).
    pub keep_alive: bool,
    pub body: &'a [u8],
}

#[derive(Debug)]
pub enum Parse<'a> {
    /// More bytes are needed.
    Partial,
    /// More bytes are needed, and the head that arrived asks for `100 Continue` before its
    /// body (`Expect: 100-continue` on an HTTP/1.1 request whose body is not all here): a
    /// server sends [`CONTINUE_RESPONSE`] once (RFC 9110 §10.1.1), or its client waits for it.
    ExpectsContinue,
    /// A whole request (head and body) occupying `consumed` bytes at the start of the buffer.
    Complete { request: Request<'a>, consumed: usize },
}

/// A request that must be refused; the connection is closed after the error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// Malformed request line or headers, bad Content-Length, or both Content-Length and
    /// Transfer-Encoding, or any Transfer-Encoding (not supported) -> 400.
    BadRequest(&'static str),
    /// Header block over `Limits::max_header_bytes` (or more than 64 header lines) -> 431.
    HeaderTooLarge,
    /// Body over `Limits::max_body_bytes` -> 413.
    PayloadTooLarge,
}

impl HttpError {
    pub fn status(&self) -> Status {
        match self {
            HttpError::BadRequest(_) => Status::BadRequest,
            HttpError::HeaderTooLarge => Status::HeaderFieldsTooLarge,
            HttpError::PayloadTooLarge => Status::PayloadTooLarge,
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.status();
        write!(f, "{} {}", status.code(), status.reason_phrase())?;
        if let HttpError::BadRequest(reason) = self {
            write!(f, ": {reason}")?;
        }
        Ok(())
    }
}

impl std::error::Error for HttpError {}

/// Response status. The declaration order indexes the pre-built header table in `response.rs`
/// (a unit test checks every entry), so add new variants there too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    HeaderFieldsTooLarge,
    InternalServerError,
    ServiceUnavailable,
}

impl Status {
    /// Every status, in declaration order.
    pub const ALL: [Status; 8] = [
        Status::Ok,
        Status::BadRequest,
        Status::NotFound,
        Status::MethodNotAllowed,
        Status::PayloadTooLarge,
        Status::HeaderFieldsTooLarge,
        Status::InternalServerError,
        Status::ServiceUnavailable,
    ];

    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PayloadTooLarge => 413,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::ServiceUnavailable => 503,
        }
    }

    /// The reason phrase written on the status line (RFC 9110 §15).
    pub fn reason_phrase(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::PayloadTooLarge => "Payload Too Large",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::ServiceUnavailable => "Service Unavailable",
        }
    }
}

/// The head of a response (client side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Bytes of status line + headers + blank line.
    pub head_len: usize,
    /// Content-Length of the body.
    pub body_len: usize,
    pub keep_alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    Malformed(&'static str),
    /// No Content-Length (chunked or close-delimited bodies are not supported by the generator).
    NoContentLength,
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseError::Malformed(reason) => write!(f, "malformed HTTP response: {reason}"),
            ResponseError::NoContentLength => f.write_str(
                "HTTP response without Content-Length (chunked and close-delimited bodies are not supported)",
            ),
        }
    }
}

impl std::error::Error for ResponseError {}

/// Header slots given to httparse. 64 is far above what any client of the lab sends; a request
/// with more is treated like an oversized head (431), which is what it is.
pub(crate) const MAX_HEADERS: usize = 64;

/// Helpers shared by the request and response parsers: both sides follow the same rules.
pub(crate) mod headers {
    /// Error text for a Content-Length that is not a list of decimal digits.
    pub(crate) const NON_NUMERIC_CONTENT_LENGTH: &str = "Content-Length is not a decimal number";
    /// Error text for Content-Length values that disagree with each other.
    pub(crate) const CONFLICTING_CONTENT_LENGTH: &str = "conflicting Content-Length values";

    /// Parse one Content-Length field value. RFC 9112 §6.3 lets a recipient accept a
    /// comma-separated list of identical values (what some proxies produce when they merge
    /// duplicated headers), so `5, 5` is 5 and `5, 6` is an error. A number too large for u64 is
    /// saturated to `u64::MAX`: it is a well-formed length, just over any limit, so the caller
    /// answers 413 rather than 400.
    pub(crate) fn content_length(value: &[u8]) -> Result<u64, &'static str> {
        let mut result: Option<u64> = None;
        for item in value.split(|&b| b == b',') {
            let item = item.trim_ascii();
            if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
                return Err(NON_NUMERIC_CONTENT_LENGTH);
            }
            let n = item
                .iter()
                .try_fold(0u64, |acc, &d| acc.checked_mul(10)?.checked_add(u64::from(d - b'0')))
                .unwrap_or(u64::MAX);
            match result {
                Some(prev) if prev != n => return Err(CONFLICTING_CONTENT_LENGTH),
                _ => result = Some(n),
            }
        }
        result.ok_or(NON_NUMERIC_CONTENT_LENGTH)
    }

    /// Fold another Content-Length header into what was seen so far.
    pub(crate) fn merge_content_length(seen: &mut Option<u64>, value: &[u8]) -> Result<(), &'static str> {
        let n = content_length(value)?;
        match *seen {
            Some(prev) if prev != n => Err(CONFLICTING_CONTENT_LENGTH),
            _ => {
                *seen = Some(n);
                Ok(())
            }
        }
    }

    /// Error text for a `Connection` header that names a framing field.
    pub(crate) const CONNECTION_NAMES_FRAMING: &str =
        "Connection names Content-Length, Transfer-Encoding or Host (framing fields are never hop-by-hop)";

    /// The fields that say where a message ends or what it is for: `Content-Length`,
    /// `Transfer-Encoding` and `Host`. A recipient that dropped one of them because
    /// `Connection` named it, while still framing the message with it, would forward a body
    /// the next hop reads as another message (request smuggling), so a message whose
    /// `Connection` names one is refused whole, requests and responses alike.
    pub(crate) fn is_framing_field(name: &[u8]) -> bool {
        [&b"content-length"[..], b"transfer-encoding", b"host"].iter().any(|f| name.eq_ignore_ascii_case(f))
    }

    /// What the `Connection` headers of a message said, accumulated over all of them.
    #[derive(Default, Clone, Copy)]
    pub(crate) struct ConnectionTokens {
        close: bool,
        keep_alive: bool,
        names_framing: bool,
    }

    impl ConnectionTokens {
        /// Record the tokens of one `Connection` field value (comma list, case-insensitive).
        pub(crate) fn add(&mut self, value: &[u8]) {
            for token in value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    self.close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    self.keep_alive = true;
                } else if is_framing_field(token) {
                    self.names_framing = true;
                }
            }
        }

        /// The one rule for requests and responses: `Connection` may not name a framing
        /// field ([`is_framing_field`]); the error names what was wrong.
        pub(crate) fn check(self) -> Result<(), &'static str> {
            if self.names_framing {
                Err(CONNECTION_NAMES_FRAMING)
            } else {
                Ok(())
            }
        }

        /// Persistence of the connection: `close` wins over everything (it is the safe answer
        /// when a message says both), then `keep-alive`, then the version default
        /// (HTTP/1.1 persistent, HTTP/1.0 not; RFC 9112 §9.3).
        pub(crate) fn keep_alive(self, version_minor: u8) -> bool {
            if self.close {
                false
            } else if self.keep_alive {
                true
            } else {
                version_minor >= 1
            }
        }
    }

    /// ASCII case-insensitive comparison of a header name with a lower-case constant.
    #[inline]
    pub(crate) fn name_is(name: &str, lower: &str) -> bool {
        name.len() == lower.len() && name.as_bytes().eq_ignore_ascii_case(lower.as_bytes())
    }
}
