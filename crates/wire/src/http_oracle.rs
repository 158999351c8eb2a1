//! An independent reading of HTTP/1.1 message framing, for the tests and the fuzz target that
//! check that no relay of the lab desynchronises (feature `oracle`; never used to serve).
//!
//! It answers one question the way a strict origin server or client would (RFC 9112 §6): where
//! does each message of a byte stream end? It shares no code with the parsers it checks (no
//! `httparse`, none of [`crate::http`]), and it is stricter than they are wherever two readers
//! could disagree: a `Content-Length` must be one field of plain digits (a list or a repeat is
//! ambiguous, even when its values agree), `Transfer-Encoding` with `Content-Length` is
//! ambiguous, a request `Transfer-Encoding` must end in `chunked`, line endings are CRLF only.
//! What a proxy forwards must read as exactly the messages it accounted for under these rules,
//! so a relay that drops or copies framing loosely is caught here even where its own parser
//! would agree with itself.

/// One message as the oracle read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The request line or the status line, without CRLF.
    pub start_line: String,
    /// Header fields in order: names as received, values trimmed.
    pub headers: Fields,
    /// The payload: the body with any chunked framing removed.
    pub body: Vec<u8>,
    /// Bytes of the whole message in the stream.
    pub len: usize,
}

impl Message {
    /// The method of a request (the first word of its start line).
    pub fn method(&self) -> &str {
        self.start_line.split(' ').next().unwrap_or("")
    }

    /// The target of a request (the second word).
    pub fn target(&self) -> &str {
        self.start_line.split(' ').nth(1).unwrap_or("")
    }

    /// The status code of a response (0 when it is not one).
    pub fn status(&self) -> u16 {
        self.start_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// Every value of the header `name` (case-insensitive).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice())
    }
}

/// Why a stream does not read as whole messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// The stream ends inside a message.
    Incomplete,
    /// No reader could agree on where the message ends.
    Ambiguous(&'static str),
}

/// How a body is delimited.
enum Framing {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

/// The lines of `text` split at CRLF.
fn crlf_lines(mut text: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    while let Some(i) = text.windows(2).position(|w| w == b"\r\n") {
        lines.push(&text[..i]);
        text = &text[i + 2..];
    }
    lines.push(text);
    lines
}

/// Header fields as the oracle keeps them: names as received, values trimmed.
pub type Fields = Vec<(String, Vec<u8>)>;

/// The head at the start of `s`: start line, fields, and its length with the blank line.
fn head(s: &[u8]) -> Result<(String, Fields, usize), Unreadable> {
    let end = s.windows(4).position(|w| w == b"\r\n\r\n").ok_or(Unreadable::Incomplete)?;
    let lines = crlf_lines(&s[..end]);
    if lines.iter().any(|l| l.contains(&b'\r') || l.contains(&b'\n')) {
        return Err(Unreadable::Ambiguous("bare CR or LF"));
    }
    let start = lines[0];
    if start.is_empty() {
        return Err(Unreadable::Ambiguous("bad start line"));
    }
    let mut headers = Vec::new();
    for line in &lines[1..] {
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err(Unreadable::Ambiguous("folded header line"));
        }
        let colon = line.iter().position(|&b| b == b':').ok_or(Unreadable::Ambiguous("header line without colon"))?;
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|&b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b)) {
            return Err(Unreadable::Ambiguous("bad header name"));
        }
        let value = line[colon + 1..].trim_ascii().to_vec();
        headers.push((String::from_utf8_lossy(name).into_owned(), value));
    }
    Ok((String::from_utf8_lossy(start).into_owned(), headers, end + 4))
}

/// The last element of a comma-separated field value, trimmed; empty elements do not count
/// (RFC 9110 §5.6.1: a recipient must accept and ignore them, so `chunked,` is chunked).
fn last_element(value: &[u8]) -> &[u8] {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii).rfind(|e| !e.is_empty()).unwrap_or(b"")
}

/// The framing fields of a head: the one Content-Length, and the last coding of
/// Transfer-Encoding.
fn framing_fields(headers: &Fields) -> Result<(Option<usize>, Option<Vec<u8>>), Unreadable> {
    let mut length = None;
    let mut coding = None;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(Unreadable::Ambiguous("more than one Content-Length"));
            }
            if value.is_empty() || !value.iter().all(u8::is_ascii_digit) || value.len() > 15 {
                return Err(Unreadable::Ambiguous("Content-Length is not one plain number"));
            }
            length = Some(value.iter().fold(0usize, |n, d| n * 10 + usize::from(d - b'0')));
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            coding = Some(last_element(value).to_ascii_lowercase());
        }
    }
    if length.is_some() && coding.is_some() {
        return Err(Unreadable::Ambiguous("both Content-Length and Transfer-Encoding"));
    }
    Ok((length, coding))
}

/// A chunked body at the start of `s`: (payload, bytes of framing and payload).
fn chunked(s: &[u8]) -> Result<(Vec<u8>, usize), Unreadable> {
    let mut at = 0;
    let mut payload = Vec::new();
    loop {
        let line_end = s[at..].windows(2).position(|w| w == b"\r\n").ok_or(Unreadable::Incomplete)?;
        let line = &s[at..at + line_end];
        let size_text = line.split(|&b| b == b';').next().unwrap_or(b"").trim_ascii();
        if size_text.is_empty() || size_text.len() > 15 || !size_text.iter().all(u8::is_ascii_hexdigit) {
            return Err(Unreadable::Ambiguous("bad chunk size"));
        }
        if line.contains(&b'\n') || line.contains(&b'\r') {
            return Err(Unreadable::Ambiguous("bare CR or LF in a chunk size line"));
        }
        let size = usize::from_str_radix(std::str::from_utf8(size_text).unwrap_or("0"), 16).unwrap_or(0);
        at += line_end + 2;
        if size == 0 {
            // Trailer lines up to the blank line.
            loop {
                let end = s[at..].windows(2).position(|w| w == b"\r\n").ok_or(Unreadable::Incomplete)?;
                if s[at..at + end].contains(&b'\n') {
                    return Err(Unreadable::Ambiguous("bare LF in a trailer"));
                }
                at += end + 2;
                if end == 0 {
                    return Ok((payload, at));
                }
            }
        }
        if s.len() < at + size + 2 {
            return Err(Unreadable::Incomplete);
        }
        payload.extend_from_slice(&s[at..at + size]);
        if &s[at + size..at + size + 2] != b"\r\n" {
            return Err(Unreadable::Ambiguous("chunk data not followed by CRLF"));
        }
        at += size + 2;
    }
}

/// The body at `s` framed by `framing`; `closed`: the stream ends there (the sender closed).
fn body(s: &[u8], framing: Framing, closed: bool) -> Result<(Vec<u8>, usize), Unreadable> {
    match framing {
        Framing::None => Ok((Vec::new(), 0)),
        Framing::Length(n) if s.len() >= n => Ok((s[..n].to_vec(), n)),
        Framing::Length(_) => Err(Unreadable::Incomplete),
        Framing::Chunked => chunked(s),
        Framing::UntilClose if closed => Ok((s.to_vec(), s.len())),
        Framing::UntilClose => Err(Unreadable::Incomplete),
    }
}

/// The request at the start of `s`.
pub fn request(s: &[u8]) -> Result<Message, Unreadable> {
    let (start_line, headers, head_len) = head(s)?;
    let words: Vec<&str> = start_line.split(' ').collect();
    if words.len() != 3 || words[0].is_empty() || words[1].is_empty() || !words[2].starts_with("HTTP/1.") {
        return Err(Unreadable::Ambiguous("bad request line"));
    }
    let framing = match framing_fields(&headers)? {
        (_, Some(coding)) if coding == b"chunked" => Framing::Chunked,
        (_, Some(_)) => return Err(Unreadable::Ambiguous("a request coding other than chunked last")),
        (Some(n), None) => Framing::Length(n),
        (None, None) => Framing::None,
    };
    let (body, body_len) = body(&s[head_len..], framing, false)?;
    Ok(Message { start_line, headers, body, len: head_len + body_len })
}

/// Every whole request of a stream, in order, and the bytes left after the last one (an
/// incomplete request); an ambiguous one is an error.
pub fn requests(mut s: &[u8]) -> Result<(Vec<Message>, usize), Unreadable> {
    let mut all = Vec::new();
    while !s.is_empty() {
        match request(s) {
            Ok(m) => {
                s = &s[m.len..];
                all.push(m);
            }
            Err(Unreadable::Incomplete) => break,
            Err(e) => return Err(e),
        }
    }
    Ok((all, s.len()))
}

/// The response at the start of `s` to a request of method HEAD (`head_request`) or not,
/// after any interim (1xx) ones, which are returned before it. `closed`: the stream ends
/// where the sender closed the connection, which is what ends a body without framing.
pub fn response(s: &[u8], head_request: bool, closed: bool) -> Result<(Vec<Message>, Message), Unreadable> {
    let mut interim = Vec::new();
    let mut at = 0;
    loop {
        let (start_line, headers, head_len) = head(&s[at..])?;
        let words: Vec<&str> = start_line.splitn(3, ' ').collect();
        let status: u16 = match (words.first(), words.get(1)) {
            (Some(v), Some(code)) if v.starts_with("HTTP/1.") && code.len() == 3 => {
                code.parse().map_err(|_| Unreadable::Ambiguous("bad status code"))?
            }
            _ => return Err(Unreadable::Ambiguous("bad status line")),
        };
        let (length, coding) = framing_fields(&headers)?;
        let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::None
        } else {
            match (length, coding) {
                (_, Some(c)) if c == b"chunked" => Framing::Chunked,
                (_, Some(_)) => Framing::UntilClose,
                (Some(n), None) => Framing::Length(n),
                (None, None) => Framing::UntilClose,
            }
        };
        let (body, body_len) = body(&s[at + head_len..], framing, closed)?;
        let m = Message { start_line, headers, body, len: head_len + body_len };
        at += m.len;
        if (100..200).contains(&status) {
            interim.push(m);
            continue;
        }
        return Ok((interim, m));
    }
}

/// Whether a response needs its connection closed to end (no length, no chunked framing).
pub fn ends_at_close(m: &Message, head_request: bool) -> bool {
    let status = m.status();
    if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        return false;
    }
    let chunked =
        m.values("transfer-encoding").last().is_some_and(|v| last_element(v).eq_ignore_ascii_case(b"chunked"));
    !chunked && m.values("content-length").next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_where_a_strict_server_splits_them() {
        let stream = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: h\r\n\r\n\
                       POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\nGET /d HTTP/1.1\r\n";
        let (all, left) = requests(stream).unwrap();
        let seen: Vec<_> = all.iter().map(|m| (m.method().to_owned(), m.target().to_owned(), m.body.clone())).collect();
        assert_eq!(
            seen,
            [
                ("POST".into(), "/a".into(), b"abc".to_vec()),
                ("GET".into(), "/b".into(), vec![]),
                ("POST".into(), "/c".into(), b"xy".to_vec())
            ]
        );
        assert_eq!(left, b"GET /d HTTP/1.1\r\n".len());
    }

    #[test]
    fn what_two_readers_could_read_differently_is_ambiguous() {
        for (bytes, why) in [
            (&b"POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc"[..], "Content-Length is not one plain number"),
            (b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "more than one Content-Length"),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                "both Content-Length and Transfer-Encoding",
            ),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "a request coding other than chunked last"),
            (b"GET / HTTP/1.1\nHost: h\r\n\r\n", "bare CR or LF"),
            (b"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "folded header line"),
        ] {
            assert_eq!(request(bytes), Err(Unreadable::Ambiguous(why)), "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn responses_end_by_length_chunks_or_close_and_interim_ones_come_first() {
        let s = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
        let (interim, m) = response(s, false, false).unwrap();
        assert_eq!((interim.len(), m.status(), m.body.as_slice()), (1, 200, &b"ok"[..]));
        let s = b"HTTP/1.1 200 OK\r\n\r\nuntil close";
        assert_eq!(response(s, false, false), Err(Unreadable::Incomplete));
        let (_, m) = response(s, false, true).unwrap();
        assert!(ends_at_close(&m, false) && m.body == b"until close");
        // Empty list elements are ignored: `chunked,` is chunked.
        let (_, m) =
            response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, \r\n\r\n0\r\n\r\n", false, false).unwrap();
        assert!(m.body.is_empty() && !ends_at_close(&m, false));
        let (_, m) = response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, false).unwrap();
        assert!(m.body.is_empty() && !ends_at_close(&m, true));
    }
}
