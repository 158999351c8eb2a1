//! memcached text protocol, client side, for the load generator (and later the memcached
//! middleware of seed 002): request writers for `get`, `gets` (one or many keys) and `set`,
//! and a reply parser.
//!
//! Mechanism: replies are parsed one element at a time in place ([`parse_reply`]): a `VALUE`
//! header and its data block, `END`, a storage reply, or one of the three error lines of
//! seed 002 §1.2 (`ERROR`, `CLIENT_ERROR <msg>`, `SERVER_ERROR <msg>`). Each [`Reply`] borrows
//! its key, data and message from the caller's buffer, and [`Parse::Complete`] says how many
//! bytes it used, so a multi-get reply of k values is walked with k + 1 calls and no copy.
//! Data blocks are framed by the byte count of their header, never by searching for CR LF,
//! so values that contain `\r\n` are read whole. A line that has not ended within
//! [`MAX_LINE_BYTES`] is refused, so a broken server cannot make a client buffer without
//! bound; a data block larger than [`MAX_VALUE_BYTES`] likewise.
//!
//! Protocol reference: memcached `doc/protocol.txt` (commands, reply lines, 250-byte keys
//! without spaces or control characters).

use crate::http::format_usize;

/// Longest key memcached accepts (protocol.txt: "the length limit of a key is set at 250
/// characters").
pub const MAX_KEY_BYTES: usize = 250;
/// A reply line (header or status) not ended within this many bytes is malformed.
pub const MAX_LINE_BYTES: usize = 2048;
/// memcached's default item size limit is 1 MiB (`-I`); the parser accepts up to 128 MiB, the
/// largest `-I` memcached allows.
pub const MAX_VALUE_BYTES: usize = 128 * 1024 * 1024;

/// `get` or `gets` (the latter also returns the CAS unique of each value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retrieval {
    Get,
    Gets,
}

/// Whether `key` can be sent: 1..=250 bytes, no space or control character.
pub fn is_valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_BYTES && key.iter().all(|&b| b > b' ' && b != 0x7f)
}

/// Append `get k1 k2 ...\r\n` (or `gets`). Keys must satisfy [`is_valid_key`] (checked in
/// debug builds: the generator validates its key pattern once, not per request).
pub fn write_retrieval<'k>(out: &mut Vec<u8>, cmd: Retrieval, keys: impl IntoIterator<Item = &'k [u8]>) {
    out.extend_from_slice(match cmd {
        Retrieval::Get => b"get",
        Retrieval::Gets => b"gets",
    });
    for k in keys {
        debug_assert!(is_valid_key(k), "invalid memcached key {k:?}");
        out.push(b' ');
        out.extend_from_slice(k);
    }
    out.extend_from_slice(b"\r\n");
}

/// Append `set <key> <flags> <exptime> <bytes>[ noreply]\r\n<data>\r\n`.
pub fn write_set(out: &mut Vec<u8>, key: &[u8], flags: u32, exptime: u32, data: &[u8], noreply: bool) {
    debug_assert!(is_valid_key(key), "invalid memcached key {key:?}");
    out.reserve(key.len() + data.len() + 48);
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    let mut digits = [0u8; 20];
    for n in [flags as usize, exptime as usize, data.len()] {
        out.push(b' ');
        out.extend_from_slice(format_usize(n, &mut digits));
    }
    if noreply {
        out.extend_from_slice(b" noreply");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// One element of a reply, borrowed from the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    /// `VALUE <key> <flags> <bytes>[ <cas>]` and its data block (CR LF stripped).
    Value {
        key: &'a [u8],
        flags: u32,
        cas: Option<u64>,
        data: &'a [u8],
    },
    /// End of a retrieval reply.
    End,
    Stored,
    NotStored,
    Exists,
    NotFound,
    /// `ERROR`: the server did not know the command.
    Error,
    /// `CLIENT_ERROR <message>`: the request was malformed.
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <message>`: the server failed (out of memory, value too large, ...).
    ServerError(&'a [u8]),
}

impl Reply<'_> {
    /// One of the three error replies of the protocol.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error | Reply::ClientError(_) | Reply::ServerError(_))
    }
}

/// Result of parsing the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// `T` and the number of bytes it occupied.
    Complete(T, usize),
    /// More bytes are needed.
    Partial,
}

/// Why bytes are not a memcached reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed memcached reply: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// Parse one reply element at the start of `buf`.
pub fn parse_reply(buf: &[u8]) -> Result<Parse<Reply<'_>>, Malformed> {
    let window = &buf[..buf.len().min(MAX_LINE_BYTES)];
    let Some(eol) = window.windows(2).position(|w| w == b"\r\n") else {
        return if buf.len() >= MAX_LINE_BYTES {
            Err(Malformed("line longer than 2048 bytes"))
        } else {
            Ok(Parse::Partial)
        };
    };
    let line = &buf[..eol];
    let after_line = eol + 2;
    let simple = |r| Ok(Parse::Complete(r, after_line));
    match line {
        b"END" => simple(Reply::End),
        b"STORED" => simple(Reply::Stored),
        b"NOT_STORED" => simple(Reply::NotStored),
        b"EXISTS" => simple(Reply::Exists),
        b"NOT_FOUND" => simple(Reply::NotFound),
        b"ERROR" => simple(Reply::Error),
        _ => {
            if let Some(msg) = line.strip_prefix(b"CLIENT_ERROR") {
                return simple(Reply::ClientError(trim_space(msg)));
            }
            if let Some(msg) = line.strip_prefix(b"SERVER_ERROR") {
                return simple(Reply::ServerError(trim_space(msg)));
            }
            let Some(header) = line.strip_prefix(b"VALUE ") else { return Err(Malformed("unknown reply line")) };
            parse_value(buf, header, after_line)
        }
    }
}

fn trim_space(s: &[u8]) -> &[u8] {
    s.strip_prefix(b" ").unwrap_or(s)
}

fn parse_value<'a>(buf: &'a [u8], header: &'a [u8], start: usize) -> Result<Parse<Reply<'a>>, Malformed> {
    let mut fields = header.split(|&b| b == b' ');
    let key = fields.next().filter(|k| is_valid_key(k)).ok_or(Malformed("VALUE without a valid key"))?;
    let flags = fields.next().and_then(decimal).ok_or(Malformed("VALUE flags not a number"))?;
    let flags = u32::try_from(flags).map_err(|_| Malformed("VALUE flags above 2^32"))?;
    let bytes = fields.next().and_then(decimal).ok_or(Malformed("VALUE length not a number"))?;
    let cas = match fields.next() {
        None => None,
        Some(c) => Some(decimal(c).ok_or(Malformed("VALUE cas not a number"))?),
    };
    if fields.next().is_some() {
        return Err(Malformed("VALUE with extra fields"));
    }
    let bytes =
        usize::try_from(bytes).ok().filter(|&b| b <= MAX_VALUE_BYTES).ok_or(Malformed("value above 128 MiB"))?;
    let end = start + bytes;
    if buf.len() < end + 2 {
        return Ok(Parse::Partial);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(Malformed("data block not followed by CR LF"));
    }
    Ok(Parse::Complete(Reply::Value { key, flags, cas, data: &buf[start..end] }, end + 2))
}

/// Digits only (no sign, no spaces), at most 20 of them, fitting a u64.
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walk a whole reply, element by element, as the generator does.
    fn walk(mut buf: &[u8]) -> Result<Vec<Reply<'_>>, Malformed> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            match parse_reply(buf)? {
                Parse::Complete(r, n) => {
                    out.push(r);
                    buf = &buf[n..];
                }
                Parse::Partial => return Err(Malformed("truncated")),
            }
        }
        Ok(out)
    }

    #[test]
    fn requests_are_written_as_protocol_txt_says() {
        let mut out = Vec::new();
        write_retrieval(&mut out, Retrieval::Get, [&b"a"[..], b"bb", b"c"]);
        write_retrieval(&mut out, Retrieval::Gets, [&b"k"[..]]);
        write_set(&mut out, b"key", 5, 0, b"x\r\ny", false);
        write_set(&mut out, b"k2", 0, 3600, b"", true);
        assert_eq!(out, b"get a bb c\r\ngets k\r\nset key 5 0 4\r\nx\r\ny\r\nset k2 0 3600 0 noreply\r\n\r\n");
        assert!(is_valid_key(&[b'k'; 250]) && !is_valid_key(&[b'k'; 251]));
        assert!(!is_valid_key(b"a b") && !is_valid_key(b"a\r\n") && !is_valid_key(b""));
    }

    #[test]
    fn multi_get_reply_keeps_order_and_values_with_crlf() {
        let reply = b"VALUE a 0 3\r\none\r\nVALUE c 7 6 99\r\nx\r\n\r\ny\r\nEND\r\n";
        let got = walk(reply).unwrap();
        assert_eq!(
            got,
            [
                Reply::Value { key: b"a", flags: 0, cas: None, data: b"one" },
                Reply::Value { key: b"c", flags: 7, cas: Some(99), data: b"x\r\n\r\ny" },
                Reply::End,
            ]
        );
        // Zero-copy: the data borrows the input.
        if let Reply::Value { data, .. } = got[1] {
            let at = reply.windows(6).position(|w| w == b"x\r\n\r\ny").unwrap();
            assert!(std::ptr::eq(data.as_ptr(), reply[at..].as_ptr()));
        }
    }

    #[test]
    fn every_split_is_partial_until_the_element_is_whole() {
        let reply = b"VALUE key 1 5\r\nab\r\nc\r\n";
        for cut in 0..reply.len() {
            assert_eq!(parse_reply(&reply[..cut]), Ok(Parse::Partial), "cut {cut}");
        }
        assert!(matches!(parse_reply(reply), Ok(Parse::Complete(Reply::Value { data: b"ab\r\nc", .. }, 22))));
    }

    #[test]
    fn statuses_and_the_three_errors_of_seed_002() {
        let got = walk(b"STORED\r\nNOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nEND\r\nERROR\r\nCLIENT_ERROR bad data chunk\r\nSERVER_ERROR out of memory storing object\r\n").unwrap();
        assert_eq!(got[..5], [Reply::Stored, Reply::NotStored, Reply::Exists, Reply::NotFound, Reply::End]);
        assert_eq!(got[5], Reply::Error);
        assert_eq!(got[6], Reply::ClientError(b"bad data chunk"));
        assert_eq!(got[7], Reply::ServerError(b"out of memory storing object"));
        assert!(got[5..].iter().all(Reply::is_error) && !got[0].is_error());
    }

    #[test]
    fn malformed_replies_are_refused() {
        for bad in [
            &b"HELLO\r\n"[..],
            b"VALUE k x 3\r\nabc\r\n",
            b"VALUE k 0 -1\r\n",
            b"VALUE k 0 3\r\nabcd\r\n",
            b"VALUE k 0 3 1 2\r\nabc\r\n",
            b"VALUE  0 3\r\nabc\r\n",
            b"VALUE k 4294967296 1\r\na\r\n",
            b"VALUE k 0 99999999999999999999999\r\n",
        ] {
            assert!(parse_reply(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse_reply(&[b'x'; MAX_LINE_BYTES]).is_err());
        assert_eq!(parse_reply(&[b'x'; MAX_LINE_BYTES - 1]), Ok(Parse::Partial));
    }
}
