//! A client connection as every thread of the middleware sees it: the socket (non-blocking,
//! read only by the net thread, written by whichever thread answers), and the order of its
//! requests.
//!
//! memcached answers a connection's requests in order, but the hand-off may give two requests
//! of one client to two workers. So a client has at most one request in the hand-off or at the
//! servers (it is `busy`); the others it pipelined wait in its `pending` FIFO, in order, and
//! the next one is handed off when the answer to the current one is written (memcached itself
//! runs one connection's requests one after another). A worker that finishes a request whose
//! client has more pending passes the client back to the net thread ([`Client::finish`]
//! returns true), so that only the net thread ever puts work on the hand-off. A client with
//! [`MAX_PENDING`] requests waiting is not read until half of them are answered, so a client
//! that pipelines without reading cannot make the middleware buffer without bound.
//!
//! Writes: a worker writes the whole answer, waiting (poll) while the socket buffer is full,
//! for at most the server timeout ([`Client::write_blocking`]); the event loop writes what the
//! socket takes and keeps the rest in the client's output buffer, flushed on writability
//! ([`Client::write_or_buffer`], [`Client::flush`]); while more than
//! [`MAX_UNWRITTEN_BYTES`] wait there, the client's next request is held back, and a client
//! whose buffered answers make no progress for the server timeout is disconnected, as a worker
//! disconnects it.

use super::request::{Op, Timeline};
use archlab_netio::{Interest, Poller, Trigger};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Requests a client may have waiting behind its current one before it is no longer read.
pub const MAX_PENDING: usize = 256;
/// Unwritten answer bytes (event loop) above which a client's next request is held back.
pub const MAX_UNWRITTEN_BYTES: usize = 1024 * 1024;

/// A request waiting for its client's earlier requests.
#[derive(Debug)]
pub(crate) struct Pending {
    pub op: Op,
    pub t: Timeline,
}

/// A request on its way: to the hand-off, a worker, the servers.
#[derive(Debug)]
pub(crate) struct Job {
    pub client: Arc<Client>,
    pub op: Op,
    pub t: Timeline,
}

#[derive(Debug, Default)]
struct State {
    busy: bool,
    pending: VecDeque<Pending>,
    /// Not read: too many requests wait.
    paused: bool,
    /// The client will send nothing more (or is gone).
    eof: bool,
    /// Answer bytes the socket did not take yet (event loop).
    out: Vec<u8>,
    out_at: usize,
    /// Close once `out` is written (after `CLIENT_ERROR line too long`).
    close_after_flush: bool,
    /// The next request is held back until `out` drains below [`MAX_UNWRITTEN_BYTES`].
    held: bool,
    /// When the socket last took bytes of `out` (or `out` began), for the write timeout.
    out_progress_ns: u64,
}

#[derive(Debug)]
pub(crate) struct Client {
    pub stream: TcpStream,
    /// The net thread's poller token.
    pub token: u64,
    state: Mutex<State>,
}

/// A client after the answer to its current request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    /// Nothing waits: the next request read will be dispatched at once.
    Idle,
    /// Another request waits (the client stays busy).
    More,
    /// Nothing waits and the input has ended: the connection can be closed.
    Ended,
}

/// What a flush of buffered answers left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flushed {
    /// Bytes remain: wait for writability.
    pub more: bool,
    /// A held-back request may go now ([`Client::take_next`]).
    pub release: bool,
}

/// What the net thread does with a request it has just read.
pub(crate) enum Admit {
    /// Hand it off now.
    Dispatch(Pending),
    /// It waits; `waiting` requests wait now.
    Queued { waiting: usize },
}

impl Client {
    pub fn new(stream: TcpStream, token: u64) -> Client {
        Client { stream, token, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// A request read from the client: dispatch it if none is under way, else queue it.
    pub fn admit(&self, p: Pending) -> Admit {
        let mut s = self.state();
        if s.busy {
            s.pending.push_back(p);
            Admit::Queued { waiting: s.pending.len() }
        } else {
            s.busy = true;
            Admit::Dispatch(p)
        }
    }

    /// The current request is answered. Unless the client is [`Finished::Idle`] now, the net
    /// thread must see it again: to dispatch the next request ([`Client::take_next`]) or to
    /// close a connection whose input has ended.
    pub fn finish(&self) -> Finished {
        let mut s = self.state();
        if !s.pending.is_empty() {
            return Finished::More;
        }
        s.busy = false;
        if s.eof {
            Finished::Ended
        } else {
            Finished::Idle
        }
    }

    /// The next waiting request (after `finish` returned true), and whether the client should
    /// be read again (it was paused and few enough requests wait now).
    pub fn take_next(&self) -> (Option<Pending>, bool) {
        let mut s = self.state();
        if !s.pending.is_empty() && s.out.len() - s.out_at > MAX_UNWRITTEN_BYTES {
            // Answers pile up unread: the next request waits for the client to read.
            s.held = true;
            return (None, false);
        }
        let next = s.pending.pop_front();
        if next.is_none() {
            s.busy = false;
        }
        let resume = s.paused && !s.eof && s.pending.len() <= MAX_PENDING / 2;
        if resume {
            s.paused = false;
        }
        (next, resume)
    }

    pub fn pause(&self) {
        self.state().paused = true;
    }

    /// The client sent its last byte (or failed): requests already read are still answered.
    /// Returns true when nothing is under way, so the connection can be closed now.
    pub fn end_of_input(&self, drop_pending: bool) -> bool {
        let mut s = self.state();
        s.eof = true;
        if drop_pending {
            s.pending.clear();
        }
        !s.busy && s.out_at == s.out.len()
    }

    /// Whether the connection is done: no more input, nothing under way, nothing to write.
    pub fn is_done(&self) -> bool {
        let s = self.state();
        s.eof && !s.busy && s.out_at == s.out.len()
    }

    /// Write all of `bytes`, waiting while the socket buffer is full, at most `timeout` in all.
    pub fn write_blocking(&self, bytes: &[u8], timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut rest = bytes;
        while !rest.is_empty() {
            archlab_metrics::counters::count_write();
            match (&self.stream).write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !wait_writable(&self.stream, left)? {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Write what the socket takes now and buffer the rest (behind anything already
    /// buffered); true when bytes remain buffered (wait for writability, then [`Client::flush`]).
    pub fn write_or_buffer(&self, bytes: &[u8]) -> io::Result<bool> {
        let mut s = self.state();
        if s.out_at < s.out.len() {
            s.out.extend_from_slice(bytes);
            return Ok(true);
        }
        let n = write_some(&self.stream, bytes)?;
        if n < bytes.len() {
            s.out.clear();
            s.out.extend_from_slice(&bytes[n..]);
            s.out_at = 0;
            s.out_progress_ns = super::stats::now();
            return Ok(true);
        }
        Ok(false)
    }

    /// Write buffered bytes. Closes the connection once empty if an answer asked for it.
    pub fn flush(&self) -> io::Result<Flushed> {
        let mut s = self.state();
        while s.out_at < s.out.len() {
            let n = write_some(&self.stream, &s.out[s.out_at..])?;
            if n == 0 {
                break;
            }
            s.out_at += n;
            s.out_progress_ns = super::stats::now();
        }
        let unwritten = s.out.len() - s.out_at;
        let release = s.held && unwritten <= MAX_UNWRITTEN_BYTES;
        if release {
            s.held = false;
        }
        if unwritten == 0 {
            s.out.clear();
            s.out_at = 0;
            if s.close_after_flush {
                let _ = self.stream.shutdown(Shutdown::Both);
            }
        }
        Ok(Flushed { more: unwritten > 0, release })
    }

    /// Answers buffered and not taken by the socket since `since_ns`: the client does not read.
    pub fn stuck_since(&self, since_ns: u64) -> bool {
        let s = self.state();
        s.out_at < s.out.len() && s.out_progress_ns < since_ns
    }

    /// Give up on a client that does not read: drop its buffered answers and waiting requests
    /// and close the connection (the net thread then sees its end).
    pub fn abandon(&self) {
        let mut s = self.state();
        s.out.clear();
        s.out_at = 0;
        s.pending.clear();
        s.eof = true;
        if s.held {
            s.held = false;
            s.busy = false;
        }
        drop(s);
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Whether answers are buffered.
    pub fn has_unwritten(&self) -> bool {
        let s = self.state();
        s.out_at < s.out.len()
    }

    /// Close the connection once buffered answers are written (now, if there are none).
    pub fn close_after_flush(&self) {
        let mut s = self.state();
        s.close_after_flush = true;
        if s.out_at == s.out.len() {
            let _ = self.stream.shutdown(Shutdown::Both);
        }
    }

    /// Register or re-register with `poller` for what the client waits for now: reading
    /// unless paused or ended, writing while answers are buffered.
    pub fn arm(&self, poller: &Poller, first: bool) -> io::Result<()> {
        let s = self.state();
        let interest = Interest { readable: !s.paused && !s.eof, writable: s.out_at < s.out.len() };
        let fd = self.stream.as_raw_fd();
        if first {
            poller.register(fd, self.token, interest, Trigger::Level)
        } else {
            poller.reregister(fd, self.token, interest, Trigger::Level)
        }
    }
}

/// One non-blocking write: the bytes taken (0 when the socket buffer is full).
fn write_some(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    loop {
        archlab_metrics::counters::count_write();
        return match (&*stream).write(bytes) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// Wait until `stream` is writable, at most `timeout`; false on timeout.
fn wait_writable(stream: &TcpStream, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    match rc {
        rc if rc < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(true)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}
