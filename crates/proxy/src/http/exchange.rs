//! One request's trip through the proxy, without I/O: what to send the backend, what to relay
//! to the client, and what a failure means. The blocking and the event-loop drivers
//! (`blocking.rs`, `event_loop.rs`) move the bytes; every rule lives here once.
//!
//! Request: the head is parsed with the server's own parser and limits
//! (`archlab_wire::http::parse_request_head`: the same 400/413/431 refusals, Transfer-Encoding
//! on requests refused as the server refuses it, and so are a `Connection` naming a framing
//! field and a missing, repeated or contradicted Host), then rewritten for the backend:
//! HTTP/1.1, hop-by-hop fields dropped (RFC 9110 §7.6.1: `Connection` and every field it names,
//! `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`), `Via: 1.x archlab`
//! and the client's address appended to `X-Forwarded-For`, `Host` added when an HTTP/1.0 client
//! sent none. Framing is the proxy's own: the body is forwarded as the one `Content-Length` the
//! proxy writes from the length it parsed, never a copy of the client's fields, so the bytes a
//! backend receives always split into exactly the requests the proxy counted. The body follows
//! as it arrives; the driver watches the backend meanwhile, so that an interim `100 Continue`
//! reaches a client waiting for it (`Expect: 100-continue`), and a final answer that comes
//! before the whole body ends the forwarding of the body ([`Exchange::body_cut`]).
//!
//! Response: the head is parsed with `parse_relayed_response_head` (a `Connection` naming a
//! framing field is a bad gateway answer) and rewritten the same way (hop-by-hop dropped, `Via`
//! added, `Content-Length` written by the proxy, `Connection` set to what the proxy does with
//! the client connection); interim 1xx responses are relayed to HTTP/1.1 clients and the final
//! one awaited. The body is relayed as it arrives: Content-Length bytes, chunked framing
//! verbatim to an HTTP/1.1 client (payload only, then close, to an HTTP/1.0 one), or everything
//! until the backend closes (then the client connection closes too: nothing else can delimit
//! it).
//!
//! Failures ([`Fault`]): a backend that refuses the connection or closes it before any byte of
//! its response fails an idempotent request (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT,
//! DELETE) over to one other backend, once; anything else is answered: 502 for a refused or
//! dropped connection or garbage, 504 for a backend that does not connect or answer in time,
//! 503 when no backend is healthy; once the response's head has gone to the client, a failure
//! can only close the client connection.

use crate::http::backend::Failure;
use crate::http::options::HashKey;
use crate::http::policy::hash_bytes;
use archlab_wire::http::{
    header_slots, is_framing_field, parse_relayed_response_head, parse_request_head, Chunk, ChunkedFraming, Header,
    HttpError, Limits, ResponseError, ResponseFraming,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// What the proxy calls itself in `Via` (RFC 9110 §7.6.3 allows a pseudonym).
pub const VIA_NAME: &str = "archlab";

/// A failure of an exchange and the answer it gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub failure: Failure,
    /// What the error response's body says (the backend's address is added).
    pub detail: String,
}

impl Fault {
    fn new(failure: Failure, detail: impl Into<String>) -> Fault {
        Fault { failure, detail: detail.into() }
    }

    pub fn status(&self) -> ErrorStatus {
        match self.failure {
            Failure::ConnectTimeout | Failure::Timeout => ErrorStatus::GatewayTimeout,
            _ => ErrorStatus::BadGateway,
        }
    }
}

/// The statuses the proxy answers itself with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorStatus {
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
}

impl ErrorStatus {
    fn line(self) -> &'static str {
        match self {
            ErrorStatus::BadGateway => "502 Bad Gateway",
            ErrorStatus::ServiceUnavailable => "503 Service Unavailable",
            ErrorStatus::GatewayTimeout => "504 Gateway Timeout",
        }
    }
}

/// Append the proxy's own error response.
pub fn write_error(out: &mut Vec<u8>, status: ErrorStatus, keep_alive: bool, message: &str) {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let body_len = status.line().len() + 2 + message.len() + 1;
    out.extend_from_slice(
        format!(
            "HTTP/1.1 {}\r\nServer: {VIA_NAME}\r\nContent-Type: text/plain\r\nVia: 1.1 {VIA_NAME}\r\nConnection: \
             {connection}\r\nContent-Length: {body_len}\r\n\r\n{}: {message}\n",
            status.line(),
            status.line()
        )
        .as_bytes(),
    );
}

/// RFC 9110 §9.2.2: the methods a proxy may send again after a failure.
pub fn idempotent(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE")
}

/// Header names that are hop-by-hop whatever `Connection` says (RFC 9110 §7.6.1). Framing
/// fields never are: a message whose `Connection` names one never gets this far (the parsers
/// of `archlab_wire::http` refuse it), and [`hop_by_hop`] keeps them regardless.
fn always_hop_by_hop(name: &str) -> bool {
    const NAMES: [&str; 6] = ["connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade"];
    NAMES.iter().any(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
}

/// Whether `name` is one of the tokens of the `Connection` fields of `headers`.
fn named_by_connection(headers: &[Header<'_>], name: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .any(|h| h.value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(name.as_bytes())))
}

fn hop_by_hop(headers: &[Header<'_>], name: &str) -> bool {
    always_hop_by_hop(name) || (named_by_connection(headers, name) && !is_framing_field(name))
}

/// `Content-Length: n`, written by the proxy from the length it framed the body with.
fn push_length(out: &mut Vec<u8>, n: u64) {
    push_header(out, "Content-Length", n.to_string().as_bytes());
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Where a response stands.
enum Response {
    /// Waiting for the (final) head; bytes of an incomplete head kept here.
    Head(Vec<u8>),
    Body(Body),
    Done,
}

enum Body {
    Length(u64),
    Chunked { framing: ChunkedFraming, payload_only: bool },
    UntilClose,
}

/// What relaying a piece of a response did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// More of the response is to come.
    More,
    /// The response is complete.
    Done,
}

/// One request from its head to the end of its response.
pub struct Exchange {
    /// Bytes of the request in the client's input: head and body.
    pub request_len: usize,
    /// Bytes of the request's head in the client's input.
    pub head_len: usize,
    /// The head as sent to backends.
    pub backend_head: Vec<u8>,
    pub idempotent: bool,
    head_request: bool,
    client_minor: u8,
    /// Whether the client may keep the connection after this response (its wish and the
    /// front-end's policy; the response's framing may still close it).
    client_keep_alive: bool,
    /// Hash of the consistent-hashing key.
    pub key_hash: u64,
    /// Backends tried so far (at most two).
    pub attempts: u8,
    /// The backend the first attempt failed on.
    pub failed_on: Option<usize>,
    /// When the request was (last) sent to a backend.
    pub sent_at: Instant,
    response: Response,
    /// Any byte of a response has been received.
    pub response_started: bool,
    /// The final response's head went to the client: a failure now can only close it.
    pub head_relayed: bool,
    /// Status of the final response.
    pub status: u16,
    /// Whether the client connection stays open after this response.
    pub keep_client: bool,
    /// Whether the backend connection may carry another request after this response.
    pub keep_backend: bool,
    /// The whole body has gone to the backend on this attempt (the driver says so).
    body_forwarded: bool,
    /// The final answer came before the whole body went to the backend: the rest is never
    /// forwarded, and neither connection carries another request.
    body_cut: bool,
}

impl Exchange {
    /// The exchange of the request at the start of `input`, or None while its head is
    /// incomplete. `keep_alive`: whether the front-end lets the client connection live on.
    pub fn begin(
        input: &[u8],
        limits: &Limits,
        client: Option<SocketAddr>,
        hash_key: &HashKey,
        keep_alive: bool,
    ) -> Result<Option<Exchange>, HttpError> {
        let mut slots = header_slots();
        let Some(head) = parse_request_head(input, limits, &mut slots)? else { return Ok(None) };
        let mut out = Vec::with_capacity(head.head_len + 64);
        out.extend_from_slice(head.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(head.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let mut forwarded_for: Vec<u8> = Vec::new();
        let mut key: &[u8] = b"";
        let mut length_written = false;
        if *hash_key == HashKey::Path {
            key = head.target.split_once('?').map_or(head.target, |(p, _)| p).as_bytes();
        }
        for h in head.headers {
            if hop_by_hop(head.headers, h.name) {
                continue;
            }
            if let HashKey::Header(name) = hash_key {
                if h.name.eq_ignore_ascii_case(name) {
                    key = h.value;
                }
            }
            if h.name.eq_ignore_ascii_case("x-forwarded-for") {
                if !forwarded_for.is_empty() {
                    forwarded_for.extend_from_slice(b", ");
                }
                forwarded_for.extend_from_slice(h.value.trim_ascii());
                continue;
            }
            if h.name.eq_ignore_ascii_case("content-length") {
                // The framing the proxy forwards is the length it framed the body with, written
                // by the proxy: one field, one number (`5, 5` and repeats fold into it).
                if !length_written {
                    push_length(&mut out, head.body_len as u64);
                    length_written = true;
                }
                continue;
            }
            if head.version_minor == 0 && h.name.eq_ignore_ascii_case("expect") {
                // An HTTP/1.0 request's expectation means nothing (RFC 9110 §10.1.1); forwarded
                // as HTTP/1.1 it would ask the backend for a `100` no one waits for.
                continue;
            }
            push_header(&mut out, h.name, h.value);
        }
        if head.host.is_none() {
            // Only HTTP/1.0 gets here (the parser refuses HTTP/1.1 without Host); an
            // absolute-form target names its host (RFC 9112 §3.2.2).
            let host = head.authority.map_or(&b"archlab-backend"[..], str::as_bytes);
            push_header(&mut out, "Host", host);
        }
        if let Some(ip) = client.map(|c| c.ip()) {
            if !forwarded_for.is_empty() {
                forwarded_for.extend_from_slice(b", ");
            }
            forwarded_for.extend_from_slice(ip_text(ip).as_bytes());
        }
        if !forwarded_for.is_empty() {
            push_header(&mut out, "X-Forwarded-For", &forwarded_for);
        }
        let via = format!("1.{} {VIA_NAME}", head.version_minor);
        push_header(&mut out, "Via", via.as_bytes());
        out.extend_from_slice(b"\r\n");
        Ok(Some(Exchange {
            request_len: head.head_len + head.body_len,
            head_len: head.head_len,
            backend_head: out,
            idempotent: idempotent(head.method),
            head_request: head.method == "HEAD",
            client_minor: head.version_minor,
            client_keep_alive: head.keep_alive && keep_alive,
            key_hash: hash_bytes(key),
            attempts: 0,
            failed_on: None,
            sent_at: Instant::now(),
            response: Response::Head(Vec::new()),
            response_started: false,
            head_relayed: false,
            status: 0,
            keep_client: false,
            keep_backend: false,
            body_forwarded: head.body_len == 0,
            body_cut: false,
        }))
    }

    /// The whole body of this attempt has been written to the backend.
    pub fn mark_body_forwarded(&mut self) {
        self.body_forwarded = true;
    }

    /// Whether the final answer came before the whole body went to the backend (RFC 9110
    /// §10.1.1: a server may answer an `Expect: 100-continue` request, or any request, before
    /// reading its body). The driver then stops forwarding the body; the client connection
    /// closes after the answer, lingering, since part of its body was never read; the backend
    /// connection is not reused.
    pub fn body_cut(&self) -> bool {
        self.body_cut
    }

    /// Whether the client connection may stay open after an error response of the proxy's own.
    pub fn keeps_client_on_error(&self) -> bool {
        self.client_keep_alive
    }

    /// Whether a failure before any response byte may send the request to another backend:
    /// idempotent, not retried yet.
    pub fn may_retry(&self) -> bool {
        self.idempotent && self.attempts < 2 && !self.response_started
    }

    /// Start an attempt on a backend (`attempts` counts it).
    pub fn attempt(&mut self) {
        self.attempts += 1;
        self.sent_at = Instant::now();
        self.response = Response::Head(Vec::new());
        self.response_started = false;
        self.body_forwarded = self.request_len == self.head_len;
        self.body_cut = false;
    }

    /// Relay `bytes` received from the backend, appending what the client gets to `out`.
    /// Bytes after the end of the response make the backend connection unusable.
    pub fn relay(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) -> Result<Relay, Fault> {
        if !bytes.is_empty() {
            self.response_started = true;
        }
        loop {
            match &mut self.response {
                Response::Done => {
                    if !bytes.is_empty() {
                        self.keep_backend = false;
                    }
                    return Ok(Relay::Done);
                }
                Response::Head(pending) => {
                    if bytes.is_empty() {
                        return Ok(Relay::More);
                    }
                    // `head` sets the next state; an incomplete head is kept here meanwhile.
                    let pending = std::mem::take(pending);
                    if pending.is_empty() {
                        match self.head(bytes, out)? {
                            None => {
                                self.response = Response::Head(bytes.to_vec());
                                return Ok(Relay::More);
                            }
                            Some(n) => bytes = &bytes[n..],
                        }
                    } else {
                        let before = pending.len();
                        let mut joined = pending;
                        joined.extend_from_slice(bytes);
                        match self.head(&joined, out)? {
                            None => {
                                self.response = Response::Head(joined);
                                return Ok(Relay::More);
                            }
                            // The kept bytes were an incomplete head: it ends in the new ones.
                            Some(n) => bytes = &bytes[n - before..],
                        }
                    }
                }
                Response::Body(body) => {
                    let (used, done) = relay_body(body, bytes, out)?;
                    bytes = &bytes[used..];
                    if done {
                        self.response = Response::Done;
                    } else {
                        return Ok(Relay::More);
                    }
                }
            }
        }
    }

    /// Parse and relay a head at the start of `bytes`: None while incomplete, else its length.
    /// An interim (1xx) head leaves the exchange waiting for the next head.
    fn head(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<Option<usize>, Fault> {
        let mut slots = header_slots();
        let parsed = parse_relayed_response_head(bytes, &mut slots);
        let r = match parsed {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(ResponseError::Malformed(why)) => {
                return Err(Fault::new(Failure::BadResponse, format!("invalid response ({why})")))
            }
            Err(e) => return Err(Fault::new(Failure::BadResponse, e.to_string())),
        };
        if r.status == 101 {
            return Err(Fault::new(
                Failure::BadResponse,
                "the backend switched protocols, which the proxy does not relay",
            ));
        }
        if (100..200).contains(&r.status) {
            if self.client_minor >= 1 {
                write_head(out, &r, None, "keep-alive");
            }
            self.response = Response::Head(Vec::new());
            return Ok(Some(r.head_len));
        }
        let framing = r.framing_for(self.head_request);
        let payload_only = framing == ResponseFraming::Chunked && self.client_minor == 0;
        self.body_cut = !self.body_forwarded;
        self.keep_client =
            self.client_keep_alive && framing != ResponseFraming::UntilClose && !payload_only && !self.body_cut;
        self.keep_backend = r.keep_alive && !r.length_and_encoding && !self.body_cut;
        self.status = r.status;
        let chunked = (framing == ResponseFraming::Chunked && !payload_only).then_some(r.length_and_encoding);
        write_head(out, &r, chunked, if self.keep_client { "keep-alive" } else { "close" });
        self.head_relayed = true;
        self.response = match framing {
            ResponseFraming::None | ResponseFraming::Length(0) => Response::Done,
            ResponseFraming::Length(n) => Response::Body(Body::Length(n)),
            ResponseFraming::Chunked => {
                Response::Body(Body::Chunked { framing: ChunkedFraming::default(), payload_only })
            }
            ResponseFraming::UntilClose => Response::Body(Body::UntilClose),
        };
        Ok(Some(r.head_len))
    }

    /// The backend closed the connection (or it failed): the end of a close-delimited body,
    /// else a failure.
    pub fn backend_closed(&mut self) -> Result<Relay, Fault> {
        match &self.response {
            Response::Done => Ok(Relay::Done),
            Response::Body(Body::UntilClose) => {
                self.response = Response::Done;
                self.keep_backend = false;
                Ok(Relay::Done)
            }
            Response::Head(pending) if pending.is_empty() && !self.response_started => {
                Err(Fault::new(Failure::ClosedBeforeResponse, "the backend closed the connection before answering"))
            }
            _ => Err(Fault::new(
                Failure::ClosedMidResponse,
                "the backend closed the connection in the middle of its response",
            )),
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.response, Response::Done)
    }
}

/// The client address as `X-Forwarded-For` writes it (IPv6 without brackets, RFC 7239 style
/// lists aside: the de-facto header takes bare addresses).
fn ip_text(ip: IpAddr) -> String {
    ip.to_string()
}

/// Append the rewritten head of a response. `chunked`: the body goes on chunked (Some(true)
/// when the backend also sent a Content-Length, which is then dropped).
fn write_head(
    out: &mut Vec<u8>,
    r: &archlab_wire::http::RelayedResponse<'_, '_>,
    chunked: Option<bool>,
    connection: &str,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    // Three digits, as received (a status below 100 keeps its leading zero).
    out.extend_from_slice(format!("{:03}", r.status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut length_written = false;
    for h in r.headers {
        if hop_by_hop(r.headers, h.name) {
            continue;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            // As for requests: the length the proxy relays the body by, written once by the
            // proxy, never the backend's field(s) copied; none when the body goes on chunked.
            if let (None, ResponseFraming::Length(n), false) = (chunked, r.framing, length_written) {
                push_length(out, n);
                length_written = true;
            }
            continue;
        }
        push_header(out, h.name, h.value);
    }
    let via = format!("1.{} {VIA_NAME}", r.version_minor);
    push_header(out, "Via", via.as_bytes());
    if chunked.is_some() {
        push_header(out, "Transfer-Encoding", b"chunked");
    }
    push_header(out, "Connection", connection.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Relay body bytes: (bytes used, whether the body ended).
fn relay_body(body: &mut Body, bytes: &[u8], out: &mut Vec<u8>) -> Result<(usize, bool), Fault> {
    match body {
        Body::Length(left) => {
            let n = (*left).min(bytes.len() as u64) as usize;
            out.extend_from_slice(&bytes[..n]);
            *left -= n as u64;
            Ok((n, *left == 0))
        }
        Body::UntilClose => {
            out.extend_from_slice(bytes);
            Ok((bytes.len(), false))
        }
        Body::Chunked { framing, payload_only } => {
            let mut at = 0;
            loop {
                let step = framing.step(&bytes[at..]).map_err(|e| Fault::new(Failure::BadResponse, e.to_string()))?;
                match step {
                    Chunk::NeedMore => return Ok((at, false)),
                    Chunk::Data(n) => {
                        out.extend_from_slice(&bytes[at..at + n]);
                        at += n;
                    }
                    Chunk::Framing(n) => {
                        if !*payload_only {
                            out.extend_from_slice(&bytes[at..at + n]);
                        }
                        at += n;
                    }
                    Chunk::End(n) => {
                        if !*payload_only {
                            out.extend_from_slice(&bytes[at..at + n]);
                        }
                        return Ok((at + n, true));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(req: &[u8]) -> Exchange {
        let client = "10.0.0.7:5555".parse().ok();
        Exchange::begin(req, &Limits::default(), client, &HashKey::Path, true).unwrap().unwrap()
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn requests_lose_hop_by_hop_fields_and_gain_via_and_forwarded_for() {
        let req = b"POST /echo?size=3 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\n\
                    Keep-Alive: 5\r\nTE: trailers\r\nUpgrade: websocket\r\nX-Forwarded-For: 1.2.3.4\r\n\
                    Content-Length: 3\r\n\r\nabc";
        let x = begin(req);
        let head = text(&x.backend_head);
        assert_eq!(x.request_len, req.len());
        assert!(head.starts_with("POST /echo?size=3 HTTP/1.1\r\nHost: h\r\n"), "{head}");
        for gone in ["Connection", "X-Secret", "Keep-Alive", "TE:", "Upgrade"] {
            assert!(!head.contains(gone), "{gone} in {head}");
        }
        assert!(head.contains("X-Forwarded-For: 1.2.3.4, 10.0.0.7\r\n"), "{head}");
        assert!(head.contains("Via: 1.1 archlab\r\n"), "{head}");
        assert!(head.contains("Content-Length: 3\r\n"), "{head}");
        assert!(!x.idempotent);
        assert!(begin(b"DELETE /x HTTP/1.1\r\nHost: h\r\n\r\n").idempotent);
        let x = begin(b"GET /x HTTP/1.0\r\n\r\n");
        assert!(text(&x.backend_head)
            .contains("Host: archlab-backend\r\nX-Forwarded-For: 10.0.0.7\r\nVia: 1.0 archlab\r\n"));
    }

    #[test]
    fn framing_is_written_by_the_proxy_as_one_length() {
        for lengths in ["Content-Length: 3, 3\r\n", "Content-Length: 3\r\ncontent-length: 003\r\n"] {
            let req = format!("POST /x HTTP/1.1\r\nHost: h\r\n{lengths}X: y\r\n\r\nabc");
            let head = text(&begin(req.as_bytes()).backend_head);
            assert_eq!(head.matches("Content-Length").count(), 1, "{head}");
            assert!(head.contains("Host: h\r\nContent-Length: 3\r\nX: y\r\n"), "{head}");
        }
        // No length field, no body: none is invented.
        assert!(!text(&begin(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n").backend_head).contains("Content-Length"));
        // Responses alike.
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut out = Vec::new();
        let r = x.relay(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok", &mut out);
        assert_eq!(r.unwrap(), Relay::Done);
        assert_eq!(text(&out).matches("Content-Length: 2\r\n").count(), 1, "{}", text(&out));
        // A response whose Connection names its framing is a bad gateway answer.
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let e = x.relay(b"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello", &mut out);
        assert_eq!(e.unwrap_err().failure, Failure::BadResponse);
    }

    #[test]
    fn host_and_expect_are_forwarded_as_the_request_means_them() {
        // HTTP/1.0 without Host: the absolute-form target's authority, else a placeholder.
        let head = text(&begin(b"GET http://a.test/x HTTP/1.0\r\n\r\n").backend_head);
        assert!(head.contains("\r\nHost: a.test\r\n"), "{head}");
        // An HTTP/1.0 expectation is dropped (nobody waits for its 100); HTTP/1.1's goes on.
        let req = b"PUT /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
        assert!(!text(&begin(req).backend_head).contains("Expect"));
        let req = b"PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
        assert!(text(&begin(req).backend_head).contains("Expect: 100-continue\r\n"));
    }

    #[test]
    fn a_final_answer_before_the_whole_body_ends_both_connections() {
        let req = b"POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 900000\r\n\r\n";
        // The backend invites the body, which is then forwarded: the exchange goes on normally.
        let mut x = Exchange::begin(req, &Limits::default(), None, &HashKey::Path, true).unwrap().unwrap();
        x.attempt();
        let mut out = Vec::new();
        assert_eq!(x.relay(b"HTTP/1.1 100 Continue\r\n\r\n", &mut out).unwrap(), Relay::More);
        assert!(text(&out).starts_with("HTTP/1.1 100 Continue\r\n") && !x.head_relayed && !x.body_cut());
        x.mark_body_forwarded();
        assert_eq!(x.relay(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &mut out).unwrap(), Relay::Done);
        assert!(!x.body_cut() && x.keep_client && x.keep_backend);
        // The backend answers at once: the body is cut, neither connection is reused.
        let mut x = Exchange::begin(req, &Limits::default(), None, &HashKey::Path, true).unwrap().unwrap();
        x.attempt();
        let mut out = Vec::new();
        let r = x.relay(b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n", &mut out);
        assert_eq!(r.unwrap(), Relay::Done);
        assert!(x.body_cut() && !x.keep_client && !x.keep_backend);
        assert!(text(&out).contains("Connection: close\r\n"), "{}", text(&out));
        // A retry forwards the body again: nothing is cut yet.
        x.attempt();
        assert!(!x.body_cut());
    }

    #[test]
    fn responses_are_relayed_byte_for_byte_in_any_split() {
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\nhello";
        for split in 1..response.len() {
            let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
            x.attempt();
            let mut out = Vec::new();
            assert_eq!(x.relay(&response[..split], &mut out).unwrap(), Relay::More, "split {split}");
            assert_eq!(x.relay(&response[split..], &mut out).unwrap(), Relay::Done, "split {split}");
            assert_eq!(
                text(&out),
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nVia: 1.1 archlab\r\nConnection: keep-alive\r\n\r\nhello"
            );
            assert!(x.keep_client && x.keep_backend);
        }
    }

    #[test]
    fn chunked_responses_pass_verbatim_or_lose_their_framing_for_http_1_0() {
        let body = "4\r\nwiki\r\n5\r\npedia\r\n0\r\n\r\n";
        let response = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut out = Vec::new();
        assert_eq!(x.relay(response.as_bytes(), &mut out).unwrap(), Relay::Done);
        assert!(text(&out).ends_with(&format!("Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n{body}")));
        let mut x = begin(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let mut out = Vec::new();
        assert_eq!(x.relay(response.as_bytes(), &mut out).unwrap(), Relay::Done);
        assert!(text(&out).ends_with("Connection: close\r\n\r\nwikipedia"), "{}", text(&out));
        assert!(!x.keep_client);
    }

    #[test]
    fn close_delimited_bodies_end_with_the_backend_and_close_the_client() {
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut out = Vec::new();
        assert_eq!(x.relay(b"HTTP/1.1 200 OK\r\n\r\npart", &mut out).unwrap(), Relay::More);
        assert_eq!(x.backend_closed().unwrap(), Relay::Done);
        assert!(!x.keep_client && !x.keep_backend);
        assert!(text(&out).ends_with("Connection: close\r\n\r\npart"));
    }

    #[test]
    fn failures_are_classified() {
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(x.backend_closed().unwrap_err().failure, Failure::ClosedBeforeResponse);
        assert!(x.may_retry());
        let mut out = Vec::new();
        let e = x.relay(b"SSH-2.0-OpenSSH\r\n\r\n", &mut out).unwrap_err();
        assert_eq!((e.failure, e.status()), (Failure::BadResponse, ErrorStatus::BadGateway));
        assert!(!x.may_retry(), "a response byte was received");
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        x.relay(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", &mut out).unwrap();
        assert_eq!(x.backend_closed().unwrap_err().failure, Failure::ClosedMidResponse);
        assert!(x.head_relayed);
        // Bytes after the end of a response: the backend connection is not reused.
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        x.relay(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naGARBAGE", &mut out).unwrap();
        assert!(x.is_done() && !x.keep_backend);
        // An interim response is relayed, then the final one.
        let mut x = begin(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut out = Vec::new();
        let r = x.relay(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", &mut out).unwrap();
        assert_eq!((r, x.status), (Relay::Done, 204));
        assert!(text(&out).starts_with("HTTP/1.1 100 Continue\r\n"));
    }

    #[test]
    fn error_responses_are_well_formed() {
        let mut out = Vec::new();
        write_error(&mut out, ErrorStatus::GatewayTimeout, false, "backend 127.0.0.1:1 did not answer");
        let t = text(&out);
        let (head, body) = t.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 504 Gateway Timeout\r\n") && head.contains("Connection: close"));
        assert!(head.ends_with(&format!("Content-Length: {}", body.len())), "{t}");
    }
}
