//! Server side, responses out. Every byte that does not depend on the request is built at
//! compile time: one head prefix per (status, keep-alive) pair up to `Content-Length: `, and
//! whole responses for refusals. Writing a response is then two or three `extend_from_slice`
//! calls and formatting one integer, with at most one reservation in the output buffer.

use super::request::reason;
use super::{HttpError, Status};

/// The head of every response up to and including `Content-Length: `; the length digits and
/// the blank line follow.
macro_rules! head_prefix {
    ($status_line:literal, $connection:literal) => {
        concat!(
            "HTTP/1.1 ",
            $status_line,
            "\r\nServer: archlab\r\nContent-Type: text/plain\r\nConnection: ",
            $connection,
            "\r\nContent-Length: "
        )
        .as_bytes()
    };
}

/// One `[close, keep-alive]` pair per status line, in the declaration order of [`Status`].
macro_rules! head_table {
    ($($status_line:literal),* $(,)?) => {
        [$([head_prefix!($status_line, "close"), head_prefix!($status_line, "keep-alive")]),*]
    };
}

/// Indexed by `Status as usize`, then by `keep_alive as usize`. The unit test
/// `head_table_matches_status` checks that every row names its status's code and phrase.
static HEADS: [[&[u8]; 2]; Status::ALL.len()] = head_table!(
    "200 OK",
    "400 Bad Request",
    "404 Not Found",
    "405 Method Not Allowed",
    "413 Payload Too Large",
    "431 Request Header Fields Too Large",
    "500 Internal Server Error",
    "503 Service Unavailable",
);

#[inline]
pub(crate) fn head_prefix(status: Status, keep_alive: bool) -> &'static [u8] {
    HEADS[status as usize][keep_alive as usize]
}

/// Decimal digits of `n` in the tail of `buf`, without allocating (what the `itoa` crate does,
/// minus its lookup table: response lengths are short numbers).
#[inline]
pub(crate) fn format_usize(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Append only the head of a response whose body of `content_length` bytes the caller appends.
#[inline]
pub fn write_response_head(out: &mut Vec<u8>, status: Status, keep_alive: bool, content_length: usize) {
    let prefix = head_prefix(status, keep_alive);
    let mut digits = [0u8; 20];
    let digits = format_usize(content_length, &mut digits);
    out.reserve(prefix.len() + digits.len() + 4);
    out.extend_from_slice(prefix);
    out.extend_from_slice(digits);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Append a whole response: status line and pre-built headers, Content-Length, body.
#[inline]
pub fn write_response(out: &mut Vec<u8>, status: Status, keep_alive: bool, body: &[u8]) {
    // Reserve for the whole response at once so the body copy never reallocates.
    out.reserve(head_prefix(status, keep_alive).len() + 20 + 4 + body.len());
    write_response_head(out, status, keep_alive, body.len());
    out.extend_from_slice(body);
}

// ---- refusals: whole responses built at compile time ----------------------------------------

const ERROR_A: &[u8] = b"HTTP/1.1 ";
const ERROR_B: &[u8] = b"\r\nServer: archlab\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ";
const ERROR_C: &[u8] = b"\r\n\r\n";

const fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

const fn parts_len(parts: &[&[u8]]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

const fn error_len(status_line: &str, body: &[&[u8]]) -> usize {
    let body_len = parts_len(body);
    ERROR_A.len() + status_line.len() + ERROR_B.len() + decimal_len(body_len) + ERROR_C.len() + body_len
}

/// Copy `src` into `out` at `at`; by value because `&mut` in `const fn` needs Rust 1.83 and
/// the workspace supports 1.80.
const fn put<const N: usize>(mut out: [u8; N], at: usize, src: &[u8]) -> ([u8; N], usize) {
    let mut i = 0;
    while i < src.len() {
        out[at + i] = src[i];
        i += 1;
    }
    (out, at + src.len())
}

/// A whole `Connection: close` response whose body is the concatenation of `body`, as a
/// compile-time array (the Content-Length is computed, never typed by hand).
const fn build_error<const N: usize>(status_line: &str, body: &[&[u8]]) -> [u8; N] {
    let out = [0u8; N];
    let (out, at) = put(out, 0, ERROR_A);
    let (out, at) = put(out, at, status_line.as_bytes());
    let (mut out, at) = put(out, at, ERROR_B);
    let body_len = parts_len(body);
    let digits = decimal_len(body_len);
    let mut i = 0;
    let mut rest = body_len;
    while i < digits {
        out[at + digits - 1 - i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        i += 1;
    }
    let (mut out, mut at) = put(out, at + digits, ERROR_C);
    let mut part = 0;
    while part < body.len() {
        (out, at) = put(out, at, body[part]);
        part += 1;
    }
    assert!(at == N, "error response length mismatch");
    out
}

/// `$name: &'static [u8]`, the whole response for `$status_line` with the body parts `$body`.
macro_rules! static_response {
    ($name:ident, $status_line:expr, $body:expr) => {
        const $name: &[u8] = {
            const LEN: usize = error_len($status_line, $body);
            const BYTES: [u8; LEN] = build_error::<LEN>($status_line, $body);
            &BYTES
        };
    };
}

static_response!(HEADER_TOO_LARGE, "431 Request Header Fields Too Large", &[b"431 Request Header Fields Too Large\n"]);
static_response!(PAYLOAD_TOO_LARGE, "413 Payload Too Large", &[b"413 Payload Too Large\n"]);
static_response!(BAD_REQUEST, "400 Bad Request", &[b"400 Bad Request\n"]);
static_response!(
    REQUEST_TIMEOUT,
    "408 Request Timeout",
    &[b"408 Request Timeout: the request did not arrive within the server's request_timeout_ms\n"]
);

/// The complete, pre-built response to a request that did not arrive in time
/// (`Connection: close`; RFC 9110 §15.5.9).
pub fn request_timeout_response() -> &'static [u8] {
    REQUEST_TIMEOUT
}

/// One 400 response per known reason, with the body `400 Bad Request: <reason>\n`.
macro_rules! bad_request_table {
    ($($reason:ident),* $(,)?) => {
        [$(
            (reason::$reason, {
                static_response!(R, "400 Bad Request", &[b"400 Bad Request: ", reason::$reason.as_bytes(), b"\n"]);
                R
            }),
        )*]
    };
}

static BAD_REQUESTS: [(&str, &[u8]); reason::ALL.len()] = bad_request_table!(
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
);

/// The complete, pre-built response for a refused request (`Connection: close`).
///
/// The body is one line naming the problem, e.g. `431 Request Header Fields Too Large` or
/// `400 Bad Request: both Content-Length and Transfer-Encoding`. A `BadRequest` reason that
/// did not come from this codec gets the plain `400 Bad Request` body.
pub fn error_response(e: HttpError) -> &'static [u8] {
    match e {
        HttpError::HeaderTooLarge => HEADER_TOO_LARGE,
        HttpError::PayloadTooLarge => PAYLOAD_TOO_LARGE,
        // A linear scan over sixteen entries, on the error path only.
        HttpError::BadRequest(r) => {
            BAD_REQUESTS.iter().find(|(known, _)| *known == r).map_or(BAD_REQUEST, |(_, resp)| resp)
        }
    }
}
