//! Client side, for the load generator: requests out, response heads in. The generator only
//! needs to know where a response ends and whether the connection stays open, so the parser
//! returns lengths and flags rather than a borrowed structure, and it accepts only bodies
//! delimited by Content-Length (what every server of the lab writes).

use super::headers::{self, ConnectionTokens};
use super::response::format_usize;
use super::{Method, ResponseError, ResponseHead, MAX_HEADERS};

/// A response head that has not ended after this many bytes is refused rather than buffered
/// without bound (a server sending that is broken, not slow).
pub(crate) const MAX_RESPONSE_HEAD_BYTES: usize = 64 * 1024;

/// Append a request (client side, for the load generator).
///
/// Writes `METHOD target HTTP/1.1`, `Host`, `Connection: close` when `!keep_alive` (HTTP/1.1
/// is persistent by default, so nothing is written otherwise), `Content-Length` when `body` is
/// non-empty, the blank line and the body. `target` is written as given (path and query,
/// already encoded). [`Method::Other`] is written as `OPTIONS`.
pub fn write_request(out: &mut Vec<u8>, method: Method, host: &str, target: &str, keep_alive: bool, body: &[u8]) {
    let method = method.as_str().as_bytes();
    out.reserve(method.len() + target.len() + host.len() + body.len() + 80);
    out.extend_from_slice(method);
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    if !body.is_empty() {
        let mut digits = [0u8; 20];
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(format_usize(body.len(), &mut digits));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

fn reason_for(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::Status => "invalid status code",
        httparse::Error::Version => "invalid HTTP version",
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Token => "invalid token in status line",
        httparse::Error::TooManyHeaders => "more than 64 header lines",
    }
}

/// Parse a response head at the start of `buf`; `Ok(None)` when more bytes are needed.
///
/// The body length comes from Content-Length (same validation as for requests: digits only,
/// duplicates must agree). Responses that have no body by definition (1xx, 204, 304;
/// RFC 9112 §6.3) get `body_len` 0 without one; any other response without Content-Length is
/// [`ResponseError::NoContentLength`], and so is a chunked one (Transfer-Encoding without
/// Content-Length; with both it is `Malformed`). Keep-alive follows the request rules: version default,
/// overridden by `Connection: close` / `keep-alive`; a `Connection` naming a framing field is
/// `Malformed`, as for requests. A head not ended within 64 KiB is `Malformed`.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<ResponseHead>, ResponseError> {
    let window = &buf[..buf.len().min(MAX_RESPONSE_HEAD_BYTES)];
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut slots);
    let head_len = match resp.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_RESPONSE_HEAD_BYTES => {
            return Err(ResponseError::Malformed("response head longer than 64 KiB"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(ResponseError::Malformed(reason_for(e))),
    };
    let (Some(status), Some(version_minor)) = (resp.code, resp.version) else {
        return Err(ResponseError::Malformed("incomplete status line"));
    };

    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut connection = ConnectionTokens::default();
    for h in resp.headers.iter() {
        if headers::name_is(h.name, "content-length") {
            headers::merge_content_length(&mut content_length, h.value).map_err(ResponseError::Malformed)?;
        } else if headers::name_is(h.name, "transfer-encoding") {
            transfer_encoding = true;
        } else if headers::name_is(h.name, "connection") {
            connection.add(h.value);
        }
    }
    connection.check().map_err(ResponseError::Malformed)?;
    if transfer_encoding {
        // Transfer-Encoding overrides Content-Length (RFC 9112 §6.3), and the generator cannot
        // decode chunked bodies: either way it cannot know where this body ends.
        return Err(if content_length.is_some() {
            ResponseError::Malformed("both Content-Length and Transfer-Encoding")
        } else {
            ResponseError::NoContentLength
        });
    }
    let body_len = match content_length {
        Some(n) => usize::try_from(n).map_err(|_| ResponseError::Malformed("Content-Length does not fit in memory"))?,
        None if (100..200).contains(&status) || status == 204 || status == 304 => 0,
        None => return Err(ResponseError::NoContentLength),
    };
    Ok(Some(ResponseHead { status, head_len, body_len, keep_alive: connection.keep_alive(version_minor) }))
}
