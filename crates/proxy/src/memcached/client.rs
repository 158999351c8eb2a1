//! A client connection as every thread of the middleware sees it: the socket (non-blocking,
//! read only by the net thread, written by whichever thread answers, never waited on), the
//! order of its requests, and its unwritten answers.
//!
//! memcached answers a connection's requests in order, but the hand-off may give two requests
//! of one client to two workers. So a client has at most one request in the hand-off or at the
//! servers (it is `busy`); the others it pipelined wait in its `pending` FIFO, in order, and
//! the next one is handed off when the answer to the current one is written (memcached itself
//! runs one connection's requests one after another). A thread that finishes a request whose
//! client has more pending passes the client back to the net thread ([`Client::finish`]
//! returns true; the next request is then `due`), so that only the net thread ever puts work
//! on the hand-off. A client with [`MAX_PENDING`] requests waiting is not read until half of
//! them are answered.
//!
//! Writes never wait: the answering thread (a worker, or the net thread in the event loop)
//! writes what the socket takes now and appends the rest to the client's output buffer
//! ([`Client::write_or_buffer`]); the net thread writes that buffer when the socket becomes
//! writable ([`Client::flush`]). So a client that does not read costs no thread any time, and
//! cannot hold a worker from the other clients. Its memory stays bounded: while more than
//! [`MAX_UNWRITTEN_BYTES`] of its answers wait unwritten, its next request is held back (it
//! stays `due`, and is handed off when a flush brings the backlog under the bound), so a
//! client buffers at most that bound plus one answer, plus [`MAX_PENDING`] requests read; and a
//! client whose buffered answers make no progress for the server timeout is disconnected by
//! the net thread ([`Client::stuck_since`], [`Client::abandon`]).

use super::request::{Op, Timeline};
use archlab_netio::{Interest, Poller, Trigger};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};

/// Requests a client may have waiting behind its current one before it is no longer read.
pub const MAX_PENDING: usize = 256;
/// Unwritten answer bytes above which a client's next request is held back.
pub const MAX_UNWRITTEN_BYTES: usize = 1024 * 1024;
/// Output buffer capacity a client keeps once its answers are written.
const KEPT_OUTPUT_CAPACITY: usize = 64 * 1024;

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
    /// A request is under way (handed off, at the servers, being answered) or `due`.
    busy: bool,
    /// The net thread owes the client the hand-off of its next request (the first of
    /// `pending`): the one before is answered, or the next waits for `out` to drain under
    /// [`MAX_UNWRITTEN_BYTES`].
    due: bool,
    pending: VecDeque<Pending>,
    /// Not read: too many requests wait.
    paused: bool,
    /// The client will send nothing more (or is gone).
    eof: bool,
    /// Answer bytes the socket did not take yet: `out[out_at..]`.
    out: Vec<u8>,
    out_at: usize,
    /// Close once `out` is written (after `CLIENT_ERROR line too long`).
    close_after_flush: bool,
    /// When the socket last took bytes of `out` (or `out` began), for the write timeout.
    out_progress_ns: u64,
    /// The poller registration: None while the net thread waits for nothing from the socket
    /// (not registered, so that a peer's hang-up cannot wake it in a loop).
    armed: Option<(Interest, Trigger)>,
}

impl State {
    fn unwritten(&self) -> usize {
        self.out.len() - self.out_at
    }
}

#[derive(Debug)]
pub(crate) struct Client {
    pub stream: TcpStream,
    /// The net thread's poller token.
    pub token: u64,
    state: Mutex<State>,
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

    /// A request read from the client: dispatch it if none is under way and the client's
    /// unwritten answers are under the bound, else queue it (held back: it is `due`, and goes
    /// when a flush releases it).
    pub fn admit(&self, p: Pending) -> Admit {
        let mut s = self.state();
        if !s.busy && s.unwritten() <= MAX_UNWRITTEN_BYTES {
            s.busy = true;
            return Admit::Dispatch(p);
        }
        if !s.busy {
            s.busy = true;
            s.due = true;
        }
        s.pending.push_back(p);
        Admit::Queued { waiting: s.pending.len() }
    }

    /// The current request is answered (written or buffered). True when the net thread must
    /// see the client again: to hand off its next request ([`Client::take_next`]), to watch
    /// its buffered answers, or to close a connection whose input has ended.
    pub fn finish(&self) -> bool {
        let mut s = self.state();
        if s.pending.is_empty() {
            s.busy = false;
        } else {
            s.due = true;
        }
        s.due || s.eof || s.unwritten() > 0
    }

    /// The next request to hand off, if one is due and the unwritten answers allow it, and
    /// whether the client should be read again (it was paused and few enough requests wait
    /// now). Harmless on a client that owes nothing: a client may be returned more than once.
    pub fn take_next(&self) -> (Option<Pending>, bool) {
        let mut s = self.state();
        let mut next = None;
        if s.due && s.unwritten() <= MAX_UNWRITTEN_BYTES {
            s.due = false;
            next = s.pending.pop_front();
            if next.is_none() {
                // Its requests were dropped (the connection failed): nothing is under way.
                s.busy = false;
            }
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

    /// The client sent its last byte (or failed, `drop_pending`: requests read but not handed
    /// off are dropped): requests under way are still answered. Returns true when nothing is
    /// under way or unwritten, so the connection can be closed now.
    pub fn end_of_input(&self, drop_pending: bool) -> bool {
        let mut s = self.state();
        s.eof = true;
        if drop_pending {
            s.pending.clear();
            if s.due {
                s.due = false;
                s.busy = false;
            }
        }
        !s.busy && s.unwritten() == 0
    }

    /// Whether the client's input has ended (it sent its last byte, `quit`, or failed).
    pub fn input_ended(&self) -> bool {
        self.state().eof
    }

    /// Whether the connection is done: no more input, nothing under way, nothing to write.
    pub fn is_done(&self) -> bool {
        let s = self.state();
        s.eof && !s.busy && s.unwritten() == 0
    }

    /// Write what the socket takes of `bytes` now and buffer the rest (behind anything already
    /// buffered, which must go first); true when bytes remain buffered. Never waits.
    pub fn write_or_buffer(&self, bytes: &[u8]) -> io::Result<bool> {
        let mut s = self.state();
        if s.unwritten() > 0 {
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
        while s.unwritten() > 0 {
            let n = write_some(&self.stream, &s.out[s.out_at..])?;
            if n == 0 {
                break;
            }
            s.out_at += n;
            s.out_progress_ns = super::stats::now();
        }
        let unwritten = s.unwritten();
        let release = s.due && unwritten <= MAX_UNWRITTEN_BYTES;
        if unwritten == 0 {
            s.out_at = 0;
            if s.out.capacity() > KEPT_OUTPUT_CAPACITY {
                // A client that once took a large answer does not keep its memory.
                s.out = Vec::new();
            } else {
                s.out.clear();
            }
            if s.close_after_flush {
                let _ = self.stream.shutdown(Shutdown::Both);
            }
        }
        Ok(Flushed { more: unwritten > 0, release })
    }

    /// Answers buffered and not taken by the socket since `since_ns`: the client does not read.
    pub fn stuck_since(&self, since_ns: u64) -> bool {
        let s = self.state();
        s.unwritten() > 0 && s.out_progress_ns < since_ns
    }

    /// Give up on a client that does not read, or whose socket failed: drop its buffered
    /// answers and waiting requests and close the connection. A request under way is still
    /// finished (its write fails); the net thread must see the client again to remove it.
    pub fn abandon(&self) {
        let mut s = self.state();
        s.out = Vec::new();
        s.out_at = 0;
        s.pending.clear();
        s.eof = true;
        if s.due {
            s.due = false;
            s.busy = false;
        }
        drop(s);
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Whether answers are buffered.
    pub fn has_unwritten(&self) -> bool {
        self.state().unwritten() > 0
    }

    /// Close the connection once buffered answers are written (now, if there are none).
    pub fn close_after_flush(&self) {
        let mut s = self.state();
        s.close_after_flush = true;
        if s.unwritten() == 0 {
            let _ = self.stream.shutdown(Shutdown::Both);
        }
    }

    /// Register with `poller` for what the client waits for now - reading unless paused or
    /// ended, writing while answers are buffered - or deregister when it waits for nothing.
    /// Level-triggered while it is read (a read takes a bounded share per event);
    /// edge-triggered while it is only written, which is exact because a flush writes until
    /// the socket is full, and keeps a peer that has shut down its side (a hang-up stays
    /// pending) from waking the net thread in a loop while its answers drain. Only the net
    /// thread calls it (it owns the poller).
    pub fn arm(&self, poller: &Poller) -> io::Result<()> {
        let mut s = self.state();
        let interest = Interest { readable: !s.paused && !s.eof, writable: s.unwritten() > 0 };
        let want = match interest {
            Interest { readable: true, .. } => Some((interest, Trigger::Level)),
            Interest { writable: true, .. } => Some((interest, Trigger::Edge)),
            _ => None,
        };
        if s.armed == want {
            return Ok(());
        }
        let fd = self.stream.as_raw_fd();
        match (s.armed, want) {
            (_, None) => poller.deregister(fd)?,
            (None, Some((interest, trigger))) => poller.register(fd, self.token, interest, trigger)?,
            (Some(_), Some((interest, trigger))) => poller.reregister(fd, self.token, interest, trigger)?,
        }
        s.armed = want;
        Ok(())
    }

    /// Forget the registration (the net thread deregistered the socket to drop the client).
    pub fn disarm(&self, poller: &Poller) {
        let mut s = self.state();
        if s.armed.take().is_some() {
            let _ = poller.deregister(self.stream.as_raw_fd());
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
