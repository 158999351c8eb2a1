//! Per-connection buffers shared by every front-end.
//!
//! [`InBuf`] holds received bytes until whole requests can be parsed (requests may arrive
//! split across reads or pipelined several per read); it is allocated once per connection,
//! compacted rather than reallocated, and grows only up to what the request limits allow.
//! [`OutBuf`] holds response bytes not yet accepted by the kernel, with a write cursor so that
//! a partial write never copies; [`OutBuf::flush`] writes it under a [`WritePolicy`] (seed
//! 001's write-spin: SingleT-Async spins on a full send buffer, Netty bounds its write loop).
//! A response body larger than the server's `max_output_bytes` is not held whole: the OutBuf
//! keeps its [`BodyStream`] and produces the next part (at most `max_output_bytes`) each time
//! the kernel has taken everything before it, so a client that does not read holds at most one
//! part of the server's memory.
//! [`linger_close_blocking`] and the constants beside it define how a server closes a
//! connection after its last response.

use archlab_workload::BodyStream;
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
    /// Bytes consumed since the connection opened (moves on with every request answered).
    consumed: u64,
    /// `consumed` when a `100 Continue` was last sent: equal to it while the request it was
    /// sent for is still the one at the front.
    continued_at: Option<u64>,
}

impl InBuf {
    /// `max`: the largest buffer a valid request can need (header limit + body limit).
    pub fn new(max: usize) -> InBuf {
        InBuf {
            buf: vec![0; INITIAL_IN.min(max.max(1))],
            start: 0,
            end: 0,
            max: max.max(1),
            consumed: 0,
            continued_at: None,
        }
    }

    /// Whether the request at the front was already sent its `100 Continue`.
    pub fn continue_sent(&self) -> bool {
        self.continued_at == Some(self.consumed)
    }

    /// Note that the request at the front was sent its `100 Continue` (once per request).
    pub fn mark_continue_sent(&mut self) {
        self.continued_at = Some(self.consumed);
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

    /// Bytes consumed since the connection opened: a change tells that a request was answered
    /// (the request timeout of the next one starts then).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    pub fn consume(&mut self, n: usize) {
        self.consumed += n as u64;
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
        let Some(spare) = self.spare() else { return Ok(0) };
        archlab_metrics::counters::count_read();
        let n = r.read(spare)?;
        self.commit(n);
        Ok(n)
    }

    /// The free space the next read may fill (made by compacting or growing), or None when the
    /// buffer is at its maximum and full. A completion-based front-end hands this space to the
    /// kernel and must not touch the buffer until the read completes ([`InBuf::commit`]).
    pub fn spare(&mut self) -> Option<&mut [u8]> {
        if !self.reserve() {
            return None;
        }
        Some(&mut self.buf[self.end..])
    }

    /// Record that `n` bytes were read into the [`InBuf::spare`] space.
    pub fn commit(&mut self, n: usize) {
        debug_assert!(self.end + n <= self.buf.len());
        self.end += n;
    }

    /// Forget what was received (a lingering close discards input into the buffer).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}

#[derive(Default)]
pub struct OutBuf {
    buf: Vec<u8>,
    pos: usize,
    last: FlushReport,
    /// The rest of a streamed response body, produced in parts of `part_bytes` once `buf` has
    /// gone out.
    stream: Option<BodyStream>,
    part_bytes: usize,
}

/// What the last [`OutBuf::flush`] did (HybridNetty's profiling reads it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// `write` calls made.
    pub calls: usize,
    /// Whether any call returned `EAGAIN` (the send buffer was full).
    pub would_block: bool,
}

impl OutBuf {
    /// The buffer to append responses to (not while a body is streamed: what is appended
    /// would overtake the rest of it).
    pub fn vec(&mut self) -> &mut Vec<u8> {
        debug_assert!(self.stream.is_none(), "a response appended while a body is streamed");
        &mut self.buf
    }

    /// Bytes still to send: buffered, and not yet produced of a streamed body.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos + self.stream.as_ref().map_or(0, BodyStream::remaining)
    }

    /// Send the rest of `body` after what is buffered (the head of its response, and maybe its
    /// first part), producing it in parts of at most `part_bytes` as the kernel takes them.
    pub fn stream_body(&mut self, body: BodyStream, part_bytes: usize) {
        debug_assert!(self.stream.is_none());
        if body.remaining() > 0 {
            self.stream = Some(body);
            self.part_bytes = part_bytes.max(1);
        }
    }

    /// Whether a streamed body is still being produced.
    pub fn is_streaming(&self) -> bool {
        self.stream.is_some()
    }

    /// Everything buffered went out: produce the next part of a streamed body, if any. An
    /// error (a `/file` read) means the response cannot be completed: the connection must close.
    fn refill(&mut self) -> io::Result<()> {
        let Some(stream) = self.stream.as_mut() else { return Ok(()) };
        self.buf.clear();
        self.pos = 0;
        stream.fill(self.part_bytes, &mut self.buf).map_err(io::Error::other)?;
        if stream.remaining() == 0 {
            self.stream = None;
        }
        Ok(())
    }

    /// The bytes not yet accepted by the kernel. A completion-based front-end hands them to
    /// the kernel and must not append until the send completes ([`OutBuf::advance`]).
    pub fn unsent(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Record that the kernel accepted `n` more bytes; the buffer empties (keeping its
    /// capacity) once everything went out, and the next part of a streamed body comes in.
    pub fn advance(&mut self, n: usize) -> io::Result<()> {
        self.pos += n;
        debug_assert!(self.pos <= self.buf.len());
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.refill()?;
        }
        Ok(())
    }

    /// Write as much as the socket takes. Ok(true) when everything went out; Ok(false) on
    /// `WouldBlock` with bytes left (non-blocking sockets only).
    pub fn flush_to(&mut self, w: &mut impl Write) -> io::Result<bool> {
        Ok(self.flush(w, WritePolicy::UntilBlocked)? == Flushed::Done)
    }

    /// Write under `policy`; every `write` call is counted, whatever it returned.
    pub fn flush(&mut self, w: &mut impl Write, policy: WritePolicy) -> io::Result<Flushed> {
        self.last = FlushReport::default();
        self.flush_inner(w, policy)
    }

    /// What the last flush did.
    pub fn last_flush(&self) -> FlushReport {
        self.last
    }

    fn flush_inner(&mut self, w: &mut impl Write, policy: WritePolicy) -> io::Result<Flushed> {
        let mut calls = 0usize;
        loop {
            if self.pos >= self.buf.len() {
                if self.stream.is_none() {
                    break;
                }
                self.refill()?;
            }
            if let WritePolicy::SpinLimit(limit) = policy {
                if calls >= limit {
                    return Ok(Flushed::SpinLimit);
                }
            }
            calls += 1;
            self.last.calls = calls;
            archlab_metrics::counters::count_write();
            match w.write(&self.buf[self.pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.last.would_block = true;
                    if policy != WritePolicy::Spin {
                        return Ok(Flushed::Blocked);
                    }
                    std::hint::spin_loop();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.pos = 0;
        Ok(Flushed::Done)
    }
}

/// How a non-blocking writer behaves when the kernel does not take a whole response at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritePolicy {
    /// Call `write` again until everything went out, through `EAGAIN` (seed 001's SingleT-Async
    /// and sTomcat workers: `while (buf.hasRemaining()) channel.write(buf)`, the write-spin).
    Spin,
    /// Stop at `EAGAIN` and wait for writability (Netty: a zero-byte write sets `OP_WRITE`),
    /// and stop after this many calls even when each made progress (Netty's `writeSpinCount`,
    /// default 16), so that other connections get a turn.
    ///
    /// The budget is per flush (one [`OutBuf::flush`] over everything buffered), as in Netty
    /// 4.1.6, the version seed 001's NettyServer ran (`lib/netty-all-4.1.6.Final.jar` in
    /// `sgzhang/AsynMessaging`): `NioSocketChannel.doWrite` gives one gathering write over all
    /// flushed buffers one budget of `writeSpinCount` calls (4.1.2x keeps this, counting
    /// "system calls ... instead of individual write operations"). Seed 001 §5.1 counts "the
    /// total number of socket.write() has been called to copy a single response": the same in
    /// its workload, where a flush holds one response; the two differ only for pipelined
    /// responses flushed together.
    SpinLimit(usize),
    /// Stop at `EAGAIN` and wait for writability; no call limit.
    UntilBlocked,
}

/// Why [`OutBuf::flush`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flushed {
    Done,
    /// `EAGAIN` with bytes left: wait for writability.
    Blocked,
    /// The spin limit was reached with bytes left and the socket still writable.
    SpinLimit,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepts `per_call` bytes per call; `would_block[i]` makes call i return `WouldBlock`.
    struct Trickle {
        per_call: usize,
        would_block: Vec<bool>,
        calls: usize,
        got: Vec<u8>,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.would_block.get(self.calls - 1).copied().unwrap_or(false) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.per_call);
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn out(n: usize) -> OutBuf {
        let mut o = OutBuf::default();
        o.vec().extend(std::iter::repeat_n(7u8, n));
        o
    }

    #[test]
    fn spin_limit_stops_after_that_many_calls_and_resumes() {
        let mut w = Trickle { per_call: 10, would_block: vec![], calls: 0, got: vec![] };
        let mut o = out(1000);
        assert_eq!(o.flush(&mut w, WritePolicy::SpinLimit(16)).unwrap(), Flushed::SpinLimit);
        assert_eq!((w.calls, o.pending()), (16, 840));
        while o.flush(&mut w, WritePolicy::SpinLimit(16)).unwrap() != Flushed::Done {}
        assert_eq!(w.got.len(), 1000);
    }

    #[test]
    fn would_block_stops_a_bounded_writer_but_not_a_spinning_one() {
        let blocks = vec![false, true, true, true, false];
        let mut w = Trickle { per_call: 10, would_block: blocks.clone(), calls: 0, got: vec![] };
        let mut o = out(30);
        assert_eq!(o.flush(&mut w, WritePolicy::SpinLimit(16)).unwrap(), Flushed::Blocked);
        assert_eq!(w.calls, 2);
        let mut w = Trickle { per_call: 10, would_block: blocks, calls: 0, got: vec![] };
        let mut o = out(30);
        assert_eq!(o.flush(&mut w, WritePolicy::Spin).unwrap(), Flushed::Done);
        assert_eq!(w.calls, 6, "three EAGAINs spun through");
        assert_eq!(o.last_flush(), FlushReport { calls: 6, would_block: true });
    }

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
