//! Per-connection buffers shared by every front-end.
//!
//! [`InBuf`] holds received bytes until whole requests can be parsed (requests may arrive
//! split across reads or pipelined several per read); it is allocated once per connection,
//! compacted rather than reallocated, and grows only up to what the request limits allow.
//! [`OutBuf`] holds response bytes not yet accepted by the kernel, with a write cursor so that
//! a partial write never copies. [`linger_close_blocking`] and the constants beside it define
//! how a server closes a connection after its last response.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// How long a closing connection keeps reading (and discarding) what the client still sends.
///
/// Closing a socket whose receive queue holds unread bytes makes Linux send RST instead of
/// FIN, and an RST can destroy the response the client has not read yet (a 413 refused before
/// its body was read, a 431 whose header is still arriving). So a server closes like nginx's
/// lingering close: shut down the write side, then discard input until the client closes or
/// this deadline passes.
pub const LINGER: Duration = Duration::from_millis(500);
/// At most this many bytes are discarded before closing regardless.
pub const LINGER_MAX_BYTES: usize = 1024 * 1024;

/// Lingering close of a blocking socket (see [`LINGER`]).
pub fn linger_close_blocking(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 16 * 1024];
    let mut discarded = 0;
    while discarded < LINGER_MAX_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        archlab_metrics::counters::count_read();
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => discarded += n,
        }
    }
}

/// Initial capacity: a few typical requests; grows on demand up to `max`.
const INITIAL_IN: usize = 4 * 1024;

pub struct InBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl InBuf {
    /// `max`: the largest buffer a valid request can need (header limit + body limit).
    pub fn new(max: usize) -> InBuf {
        InBuf { buf: vec![0; INITIAL_IN.min(max.max(1))], start: 0, end: 0, max: max.max(1) }
    }

    pub fn filled(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Free space the next read may fill without growing or compacting.
    pub fn room(&self) -> usize {
        self.buf.len() - self.end
    }

    pub fn consume(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.end);
        if self.start == self.end {
            // Cheap reset keeps the next read at the front of the buffer.
            self.start = 0;
            self.end = 0;
        }
    }

    /// Make room at the end; false when the buffer is at its maximum and full (the request in
    /// it cannot be valid: the parser will have refused it already).
    fn reserve(&mut self) -> bool {
        if self.end < self.buf.len() {
            return true;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            return true;
        }
        if self.buf.len() < self.max {
            let n = (self.buf.len() * 2).min(self.max);
            self.buf.resize(n, 0);
            return true;
        }
        false
    }

    /// One `read` into the free space. Ok(0) means end of stream (or no room left).
    pub fn read_from(&mut self, r: &mut impl Read) -> io::Result<usize> {
        if !self.reserve() {
            return Ok(0);
        }
        archlab_metrics::counters::count_read();
        let n = r.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }
}

#[derive(Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl OutBuf {
    /// The buffer to append responses to.
    pub fn vec(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Write as much as the socket takes. Ok(true) when everything went out; Ok(false) on
    /// `WouldBlock` with bytes left (non-blocking sockets only).
    pub fn flush_to(&mut self, w: &mut impl Write) -> io::Result<bool> {
        while self.pos < self.buf.len() {
            archlab_metrics::counters::count_write();
            match w.write(&self.buf[self.pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.pos = 0;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_compacts_and_stops_at_max() {
        let mut b = InBuf::new(8 * 1024);
        let data = vec![7u8; 5000];
        let mut r: &[u8] = &data;
        while b.read_from(&mut r).unwrap() > 0 {}
        assert_eq!(b.filled().len(), 5000);
        b.consume(4000);
        let more = vec![8u8; 4000];
        let mut r: &[u8] = &more;
        while b.read_from(&mut r).unwrap() > 0 {}
        assert_eq!(b.filled().len(), 5000);
        assert_eq!(b.filled()[999], 7);
        assert_eq!(b.filled()[1000], 8);
        let big = vec![9u8; 10_000];
        let mut r: &[u8] = &big;
        while b.read_from(&mut r).unwrap() > 0 {}
        assert_eq!(b.filled().len(), 8 * 1024);
    }
}
