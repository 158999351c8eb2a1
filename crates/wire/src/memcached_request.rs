//! memcached text protocol, server side: an incremental reader of what a client sends to the
//! memcached middleware of seed 002 (its subset, §1.2: `set` with `noreply`, `get`, `gets`,
//! one or many keys), with the error answers of memcached's own parser for everything else.
//!
//! Mechanism: one [`RequestReader`] per client connection owns the bytes received and not yet
//! consumed. Bytes are appended as they arrive ([`RequestReader::extend`], or read straight
//! into [`RequestReader::spare`] and [`RequestReader::commit`]), then [`RequestReader::next_item`]
//! yields complete items one at a time, borrowed from the buffer: a [`Request`] or a [`Reject`]
//! (the error line to answer). It is a state machine with three states - reading a command
//! line, waiting for the data block of a `set` whose header is parsed, swallowing the data block
//! of a refused storage command - and a final one, closed ([`RequestReader::closed`]), after
//! which it takes nothing more - so a request split across reads is scanned once, a
//! pipelined read yields several items, and each client has its own state (interleaved clients
//! never mix). Data blocks are framed by the length in their header, never by searching for
//! CR LF, so values may hold any bytes. Memory is bounded: a command line longer than
//! [`RequestLimits::max_line_bytes`] (`get`/`gets` lines: `max_retrieval_line_bytes`) is
//! refused and the connection must be closed (memcached closes too), a value larger than
//! `max_value_bytes` is refused with `SERVER_ERROR object too large for cache` and swallowed
//! as it arrives, without being buffered.
//!
//! Answers follow memcached (`doc/protocol.txt`, `proto_text.c`): an unknown command gets
//! `ERROR` and the connection stays usable; a storage command outside the subset (`add`,
//! `replace`, `append`, `prepend`, `cas`, and the meta set `ms <key> <datalen> ...`) gets
//! `ERROR` and its data block is swallowed, so one request gets one answer; a malformed line
//! gets `CLIENT_ERROR <why>`; a data block not followed by CR LF gets `CLIENT_ERROR bad data
//! chunk`. Unlike memcached, a `set` refused for its key or flags still has its data block
//! swallowed whenever its length is readable, so the block is never read as commands. A
//! refused `set ... noreply` is answered with nothing (memcached's `noreply` suppresses its
//! error strings too), but counted by the caller through [`Reject`]. Two inputs end the
//! connection's requests without an item: `quit` (memcached answers what came before and
//! closes), and a command starting with the binary protocol's magic byte 0x80, which this
//! text-only reader cannot frame ([`Closed`] says which; the caller closes the connection).

use crate::memcached::{is_valid_key, Retrieval, MAX_KEY_BYTES};
use std::borrow::Cow;

/// memcached's guard on a command line (`proto_text.c`: no `\n` within 2048 bytes closes the
/// connection unless the line is a `get`/`gets`).
pub const MAX_COMMAND_LINE_BYTES: usize = 2048;
/// The longer bound of a `get`/`gets` line: 64 KiB holds 260 keys of the maximum 250 bytes, or
/// about 4,000 of memtier's `memtier-NNNNNNN`.
pub const MAX_RETRIEVAL_LINE_BYTES: usize = 64 * 1024;
/// memcached's default item size limit (`-I`, 1 MiB).
pub const DEFAULT_MAX_VALUE_BYTES: usize = 1024 * 1024;
/// Largest data block length memcached reads at all (`vlen > INT_MAX - 2` is a bad command
/// line): beyond it the length is not trusted, and the block is not swallowed.
const MAX_SWALLOW_BYTES: u64 = i32::MAX as u64 - 2;
/// Initial buffer capacity of a connection: a few typical requests.
const INITIAL_CAPACITY: usize = 4 * 1024;

/// What a reader accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest value of a `set`, in bytes.
    pub max_value_bytes: usize,
    /// Longest command line (without its line end) other than `get`/`gets`.
    pub max_line_bytes: usize,
    /// Longest `get`/`gets` line (without its line end).
    pub max_retrieval_line_bytes: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_line_bytes: MAX_COMMAND_LINE_BYTES,
            max_retrieval_line_bytes: MAX_RETRIEVAL_LINE_BYTES,
        }
    }
}

/// A request of the subset, borrowed from the reader's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets` with one or more keys; `keys` is the part of the line that holds them
    /// (iterate with [`Request::keys`]).
    Retrieval {
        cmd: Retrieval,
        keys: &'a [u8],
        key_count: usize,
    },
    Set(SetRequest<'a>),
}

/// `set <key> <flags> <exptime> <bytes> [noreply]` and its data block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetRequest<'a> {
    pub key: &'a [u8],
    pub flags: u32,
    /// Seconds (relative up to 30 days, else a Unix time); negative means already expired.
    pub exptime: i64,
    /// The data block, CR LF stripped.
    pub data: &'a [u8],
    pub noreply: bool,
}

/// The keys of a retrieval line (separated by one or more spaces).
pub fn split_keys(keys: &[u8]) -> impl Iterator<Item = &[u8]> {
    keys.split(|&b| b == b' ').filter(|k| !k.is_empty())
}

impl<'a> Request<'a> {
    /// The keys of a retrieval, in request order (nothing for a `set`).
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> {
        let keys: &'a [u8] = match self {
            Request::Retrieval { keys, .. } => keys,
            Request::Set(_) => b"",
        };
        split_keys(keys)
    }
}

/// Why a line was malformed (`CLIENT_ERROR <why>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Wrong number of fields, or a field that is not a number where one is required.
    BadFormat,
    /// A key longer than 250 bytes.
    KeyTooLong { bytes: usize },
    /// A key with a control character.
    BadKeyByte,
    /// A data block whose last two bytes are not CR LF.
    BadDataChunk,
}

/// An item the reader refuses, with the answer memcached would give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Not a command of the subset: `ERROR`.
    UnknownCommand,
    /// `CLIENT_ERROR <why>`.
    Malformed(Malformed),
    /// A value above `max_value_bytes`: `SERVER_ERROR object too large for cache`.
    TooLarge { bytes: u64 },
    /// A command line longer than its limit: `CLIENT_ERROR line too long`; the stream cannot be
    /// resynchronised, so the connection must be closed after the answer.
    LineTooLong,
}

impl Reject {
    /// The answer line, CR LF included.
    pub fn reply(&self) -> Cow<'static, [u8]> {
        match self {
            Reject::UnknownCommand => Cow::Borrowed(b"ERROR\r\n"),
            Reject::Malformed(Malformed::BadFormat) => Cow::Borrowed(b"CLIENT_ERROR bad command line format\r\n"),
            Reject::Malformed(Malformed::KeyTooLong { bytes }) => {
                Cow::Owned(format!("CLIENT_ERROR key of {bytes} bytes is longer than {MAX_KEY_BYTES}\r\n").into_bytes())
            }
            Reject::Malformed(Malformed::BadKeyByte) => {
                Cow::Borrowed(b"CLIENT_ERROR key contains a control character\r\n")
            }
            Reject::Malformed(Malformed::BadDataChunk) => Cow::Borrowed(b"CLIENT_ERROR bad data chunk\r\n"),
            Reject::TooLarge { .. } => Cow::Borrowed(b"SERVER_ERROR object too large for cache\r\n"),
            Reject::LineTooLong => Cow::Borrowed(b"CLIENT_ERROR line too long\r\n"),
        }
    }

    /// The connection must be closed after the answer.
    pub fn closes(&self) -> bool {
        matches!(self, Reject::LineTooLong)
    }
}

/// The request magic byte of memcached's binary protocol (`protocol_binary.h`). No text command
/// starts with it (commands are ASCII), so at a command's start it can only be a binary client.
pub const BINARY_REQUEST_MAGIC: u8 = 0x80;

/// Why a reader takes nothing more from its connection ([`RequestReader::closed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// After the item [`Reject::LineTooLong`] (answered, then the connection is closed).
    LineTooLong,
    /// The client sent `quit`: the requests before it are answered, then the connection is
    /// closed, as memcached does (`close_after_write`); nothing after it is read.
    Quit,
    /// A command began with [`BINARY_REQUEST_MAGIC`]: the client speaks the binary protocol,
    /// which the middleware does not. The connection is closed without an answer (see
    /// [`RequestReader::closed`] for why).
    BinaryProtocol,
}

/// One item read from a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    Request(Request<'a>),
    /// A refused item; `silent` when it was a `noreply` storage command, which gets no answer.
    Reject {
        reject: Reject,
        silent: bool,
    },
}

/// A parsed `set` header waiting for its data block.
#[derive(Clone, Copy, Debug)]
struct SetHeader {
    /// Bytes of the command line, line end included.
    line_len: usize,
    key_at: usize,
    key_len: usize,
    flags: u32,
    exptime: i64,
    bytes: usize,
    noreply: bool,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// Looking for the end of a command line; `scanned` bytes (from the line's start) hold no `\n`.
    Line {
        scanned: usize,
    },
    Data(SetHeader),
    /// Discarding the data block of a refused storage command.
    Swallow {
        remaining: u64,
    },
    /// Everything is ignored from here on.
    Closed(Closed),
}

/// What one step of the line state found, as positions (items are built from them afterwards,
/// so that the buffer is borrowed only once).
enum Found {
    Retrieval { cmd: Retrieval, keys_at: usize, keys_len: usize, key_count: usize },
    Set(SetHeader),
    Reject { reject: Reject, silent: bool, swallow: Option<u64> },
    Quit,
}

/// The per-connection request reader (see the module documentation).
#[derive(Debug)]
pub struct RequestReader {
    /// `buf[start..end]` holds the bytes received and not yet consumed; `buf[end..]` is free.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    state: State,
    limits: RequestLimits,
    /// Stamp of the oldest unconsumed byte (see [`RequestReader::commit`]).
    oldest_stamp: u64,
    /// Where the bytes of the last commit begin, and their stamp.
    last_at: usize,
    last_stamp: u64,
}

impl RequestReader {
    pub fn new(limits: RequestLimits) -> RequestReader {
        RequestReader {
            buf: Vec::new(),
            start: 0,
            end: 0,
            state: State::Line { scanned: 0 },
            limits,
            oldest_stamp: 0,
            last_at: 0,
            last_stamp: 0,
        }
    }

    pub fn limits(&self) -> &RequestLimits {
        &self.limits
    }

    /// Bytes received and not yet consumed.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// True inside a request: bytes of an unfinished command line or data block are buffered,
    /// or a data block is still being swallowed (a client closing now closes mid-request).
    pub fn in_request(&self) -> bool {
        match self.state {
            State::Line { .. } => self.buffered() > 0,
            State::Data(_) => true,
            State::Swallow { remaining } => remaining > 0,
            State::Closed(_) => false,
        }
    }

    /// True after [`Reject::LineTooLong`], `quit` or a binary-protocol request: the reader
    /// ignores everything from then on.
    pub fn is_closed(&self) -> bool {
        self.closed().is_some()
    }

    /// Why the reader takes nothing more, once it does not. [`Closed::Quit`] and
    /// [`Closed::BinaryProtocol`] yield no item: a caller that has taken every item checks this
    /// and ends the connection once the requests before are answered.
    ///
    /// A binary request is not answered, for three reasons: an answer this text-only reader
    /// could frame (`ERROR`) would be read by a binary client as a garbled 24-byte header; a
    /// binary error frame needs the request's 24-byte header (opcode, opaque), and waiting for
    /// it would leave a client that sent less hanging; and a closed connection is what every
    /// client library reports at once as a failed request. memcached with `-B ascii` instead
    /// reads the bytes as a text line and stays silent until 2048 bytes without an end, so such
    /// a client hangs until its own timeout.
    pub fn closed(&self) -> Option<Closed> {
        match self.state {
            State::Closed(why) => Some(why),
            _ => None,
        }
    }

    /// Free space of at least `min` bytes at the end of the buffer, for a read to fill; then
    /// call [`RequestReader::commit`] with the number of bytes read.
    pub fn spare(&mut self, min: usize) -> &mut [u8] {
        self.make_room(min.max(1));
        &mut self.buf[self.end..]
    }

    /// Keep `n` bytes read into the last [`RequestReader::spare`]. `stamp` is the caller's time
    /// of arrival (e.g. the lab clock at the read): every item carries the stamp of the commit
    /// that brought its first byte. That is exact for the first item in the buffer and for items
    /// that start in the last commit; an item that starts in an earlier commit without being the
    /// first gets the oldest unconsumed byte's stamp (an earlier time, never a later one).
    pub fn commit(&mut self, n: usize, stamp: u64) {
        assert!(self.end + n <= self.buf.len(), "commit beyond the space handed out");
        if self.is_closed() {
            return;
        }
        let at = self.end;
        self.end += n;
        self.note_arrival(at, stamp);
    }

    /// Append bytes received (a copy; [`RequestReader::spare`] avoids it).
    pub fn extend(&mut self, bytes: &[u8], stamp: u64) {
        self.spare(bytes.len())[..bytes.len()].copy_from_slice(bytes);
        self.commit(bytes.len(), stamp);
    }

    fn note_arrival(&mut self, at: usize, stamp: u64) {
        if at == self.start {
            self.oldest_stamp = stamp;
        }
        self.last_at = at;
        self.last_stamp = stamp;
    }

    /// Make `min` bytes free after `end`: move the unconsumed bytes to the front, else grow.
    fn make_room(&mut self, min: usize) {
        if self.start == self.end {
            self.last_at = 0;
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end >= min {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.last_at = self.last_at.saturating_sub(self.start);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < min {
            let want = (self.end + min).max(INITIAL_CAPACITY).max(self.buf.len() * 2);
            self.buf.resize(want, 0);
        }
    }

    /// Consume `n` bytes; the next unconsumed byte's stamp follows (see `commit`).
    fn consume(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.end);
        if self.start >= self.last_at {
            self.oldest_stamp = self.last_stamp;
        }
    }

    /// The next complete item and the stamp of its first byte, or None until more bytes come.
    /// Call it until it returns None after every commit: that keeps swallowed data blocks out
    /// of the buffer.
    pub fn next_item(&mut self) -> Option<(Item<'_>, u64)> {
        loop {
            let avail = self.end - self.start;
            match self.state {
                State::Closed(_) => return None,
                State::Swallow { remaining } => {
                    let n = remaining.min(avail as u64);
                    self.consume(n as usize);
                    if n < remaining {
                        self.state = State::Swallow { remaining: remaining - n };
                        return None;
                    }
                    self.state = State::Line { scanned: 0 };
                }
                State::Data(h) => {
                    let total = h.line_len + h.bytes + 2;
                    if avail < total {
                        return None;
                    }
                    let stamp = self.oldest_stamp;
                    let at = self.start;
                    self.consume(total);
                    self.state = State::Line { scanned: 0 };
                    let block = &self.buf[at + h.line_len..at + total];
                    if &block[h.bytes..] != b"\r\n" {
                        let reject = Reject::Malformed(Malformed::BadDataChunk);
                        return Some((Item::Reject { reject, silent: h.noreply }, stamp));
                    }
                    let set = SetRequest {
                        key: &self.buf[at + h.key_at..at + h.key_at + h.key_len],
                        flags: h.flags,
                        exptime: h.exptime,
                        data: &block[..h.bytes],
                        noreply: h.noreply,
                    };
                    return Some((Item::Request(Request::Set(set)), stamp));
                }
                State::Line { scanned } => {
                    let window = &self.buf[self.start..self.end];
                    if window.first() == Some(&BINARY_REQUEST_MAGIC) {
                        self.close(Closed::BinaryProtocol);
                        return None;
                    }
                    let Some(nl) = window[scanned..].iter().position(|&b| b == b'\n').map(|i| i + scanned) else {
                        if self.line_too_long(window, window.len()) {
                            return Some(self.close_too_long());
                        }
                        self.state = State::Line { scanned: window.len() };
                        return None;
                    };
                    let line_len = nl + 1;
                    let content = if nl > 0 && window[nl - 1] == b'\r' { nl - 1 } else { nl };
                    if self.line_too_long(window, content) {
                        return Some(self.close_too_long());
                    }
                    let found = parse_line(&window[..content], line_len, &self.limits);
                    let stamp = self.oldest_stamp;
                    let at = self.start;
                    self.state = State::Line { scanned: 0 };
                    match found {
                        Found::Set(h) => {
                            self.state = State::Data(h);
                        }
                        Found::Retrieval { cmd, keys_at, keys_len, key_count } => {
                            self.consume(line_len);
                            let keys = &self.buf[at + keys_at..at + keys_at + keys_len];
                            return Some((Item::Request(Request::Retrieval { cmd, keys, key_count }), stamp));
                        }
                        Found::Reject { reject, silent, swallow } => {
                            self.consume(line_len);
                            if let Some(bytes) = swallow {
                                self.state = State::Swallow { remaining: bytes + 2 };
                            }
                            return Some((Item::Reject { reject, silent }, stamp));
                        }
                        Found::Quit => {
                            self.close(Closed::Quit);
                            return None;
                        }
                    }
                }
            }
        }
    }

    /// Whether a line of `content` bytes so far (at the start of `window`) exceeds its limit.
    /// Without its end yet, a trailing CR may still be part of the line end.
    fn line_too_long(&self, window: &[u8], content: usize) -> bool {
        let content = if content == window.len() && window.last() == Some(&b'\r') { content - 1 } else { content };
        let limit = if window.starts_with(b"get ") || window.starts_with(b"gets ") {
            self.limits.max_retrieval_line_bytes
        } else {
            self.limits.max_line_bytes
        };
        content > limit
    }

    fn close_too_long(&mut self) -> (Item<'static>, u64) {
        let stamp = self.oldest_stamp;
        self.close(Closed::LineTooLong);
        (Item::Reject { reject: Reject::LineTooLong, silent: false }, stamp)
    }

    /// Take nothing more; what is buffered is dropped (it is never read).
    fn close(&mut self, why: Closed) {
        self.state = State::Closed(why);
        self.start = self.end;
    }
}

/// Parse one command line (`line` without its line end; `line_len` with it).
fn parse_line(line: &[u8], line_len: usize, limits: &RequestLimits) -> Found {
    let mut tokens = Tokens { line, at: 0 };
    let Some((_, cmd)) = tokens.next() else { return unknown(None) };
    match cmd {
        b"get" | b"gets" => {
            let cmd = if cmd == b"get" { Retrieval::Get } else { Retrieval::Gets };
            let Some((keys_at, _)) = tokens.clone().next() else {
                // memcached answers a retrieval without keys as an unknown command.
                return unknown(None);
            };
            let mut key_count = 0;
            for (_, key) in tokens {
                if let Err(m) = check_key(key) {
                    return malformed(m, false, None);
                }
                key_count += 1;
            }
            let keys_len = line.len() - keys_at;
            Found::Retrieval { cmd, keys_at, keys_len, key_count }
        }
        b"set" => parse_set(tokens, line_len, limits),
        // Storage commands outside the subset: ERROR, and their data block is not a command.
        b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            unknown(tokens.nth(3).and_then(|(_, b)| swallowable(b)))
        }
        // The meta set, `ms <key> <datalen> <flag>*`: its length is the 3rd token. memcached
        // swallows the block of an `ms` it refuses whenever it read the length; so do we.
        b"ms" => unknown(tokens.nth(1).and_then(|(_, b)| swallowable(b))),
        // memcached's `quit` takes any further tokens.
        b"quit" => Found::Quit,
        _ => unknown(None),
    }
}

fn parse_set(tokens: Tokens<'_>, line_len: usize, limits: &RequestLimits) -> Found {
    let fields: Vec<(usize, &[u8])> = tokens.collect();
    // The length field, when readable, lets every refusal below keep the stream in sync.
    let swallow = fields.get(3).and_then(|(_, b)| swallowable(b));
    // memcached's rule (`set_noreply_maybe`): noreply when the last field says so, even if
    // the line is refused; then the refusal is not answered.
    let noreply = fields.len() > 4 && fields.last().is_some_and(|(_, t)| *t == b"noreply");
    if !(fields.len() == 4 || fields.len() == 5 && noreply) {
        return malformed(Malformed::BadFormat, noreply, swallow);
    }
    let (key_at, key) = fields[0];
    if let Err(m) = check_key(key) {
        return malformed(m, noreply, swallow);
    }
    let flags = decimal(fields[1].1).and_then(|f| u32::try_from(f).ok());
    let exptime = signed(fields[2].1);
    let (Some(flags), Some(exptime), Some(bytes)) = (flags, exptime, swallow) else {
        return malformed(Malformed::BadFormat, noreply, swallow);
    };
    if bytes > limits.max_value_bytes as u64 {
        return Found::Reject { reject: Reject::TooLarge { bytes }, silent: noreply, swallow: Some(bytes) };
    }
    Found::Set(SetHeader { line_len, key_at, key_len: key.len(), flags, exptime, bytes: bytes as usize, noreply })
}

fn unknown(swallow: Option<u64>) -> Found {
    Found::Reject { reject: Reject::UnknownCommand, silent: false, swallow }
}

fn malformed(m: Malformed, silent: bool, swallow: Option<u64>) -> Found {
    Found::Reject { reject: Reject::Malformed(m), silent, swallow }
}

fn check_key(key: &[u8]) -> Result<(), Malformed> {
    if key.len() > MAX_KEY_BYTES {
        Err(Malformed::KeyTooLong { bytes: key.len() })
    } else if !is_valid_key(key) {
        Err(Malformed::BadKeyByte)
    } else {
        Ok(())
    }
}

/// A data block length memcached would read (and so swallow when refusing).
fn swallowable(field: &[u8]) -> Option<u64> {
    decimal(field).filter(|&b| b <= MAX_SWALLOW_BYTES)
}

/// Digits only, fitting a u64.
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
}

/// An optional minus sign and digits, fitting an i64 (exptime may be negative).
fn signed(s: &[u8]) -> Option<i64> {
    match s.strip_prefix(b"-") {
        Some(digits) => decimal(digits).and_then(|n| i64::try_from(n).ok()).map(|n| -n),
        None => decimal(s).and_then(|n| i64::try_from(n).ok()),
    }
}

/// Space-separated tokens with their offsets; runs of spaces separate like one (memcached's
/// tokenizer skips empty tokens).
#[derive(Clone)]
struct Tokens<'a> {
    line: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = (usize, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        while self.at < self.line.len() && self.line[self.at] == b' ' {
            self.at += 1;
        }
        if self.at == self.line.len() {
            return None;
        }
        let begin = self.at;
        while self.at < self.line.len() && self.line[self.at] != b' ' {
            self.at += 1;
        }
        Some((begin, &self.line[begin..self.at]))
    }
}

#[cfg(test)]
mod tests;
