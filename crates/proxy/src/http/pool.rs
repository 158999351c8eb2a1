//! Keep-alive connections to backends: a [`BackendConn`] holds one of the backend's
//! `max_conns` reservations for as long as it is open; idle ones wait in a pool until a request
//! takes them or they have been idle for `backend_idle_timeout_ms`.
//!
//! Two pools, one per way of waiting: [`SharedPool`] (one per proxy, a short mutex per
//! backend) for threads that may block, which take any idle connection; [`LoopPool`] (one per
//! event loop, no lock) for loops, whose connections are registered in their own poller. A
//! connection is taken last-in first-out (the warmest), and checked on the way out: the
//! backend may have closed it while it was idle (the keep-alive race of Envoy's issues #1979 and
//! #14981: a request written to such a connection fails, and only an idempotent one may be
//! retried), so [`BackendConn::still_open`] asks the kernel with a non-blocking `MSG_PEEK`
//! whether the peer has closed or sent unsolicited bytes, and such a connection is dropped
//! instead of used.

use crate::http::backend::Backend;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An open connection to a backend, counted against its limit until dropped.
pub struct BackendConn {
    pub stream: TcpStream,
    pub backend: Arc<Backend>,
    /// Whether it has carried a request before (a failure before the response may then be the
    /// keep-alive race rather than the backend's fault).
    pub reused: bool,
    /// The poller token it is registered under, in an event loop.
    pub token: Option<u64>,
}

impl BackendConn {
    /// A connection made under a reservation taken with `Backend::try_open`.
    pub fn new(stream: TcpStream, backend: Arc<Backend>) -> BackendConn {
        BackendConn { stream, backend, reused: false, token: None }
    }

    /// Whether the peer has neither closed the connection nor sent anything unasked.
    pub fn still_open(&self) -> bool {
        let mut byte = 0u8;
        archlab_metrics::counters::count_read();
        // SAFETY: plain syscall on a descriptor the stream owns, into a one-byte buffer.
        let n = unsafe {
            libc::recv(self.stream.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
    }
}

impl Drop for BackendConn {
    fn drop(&mut self) {
        self.backend.closed();
    }
}

struct Idle {
    conn: BackendConn,
    since: Instant,
}

/// Idle connections of every backend, shared by the threads of a proxy that may block.
pub struct SharedPool {
    idle: Vec<Mutex<Vec<Idle>>>,
    idle_timeout: Duration,
}

impl SharedPool {
    pub fn new(backends: usize, idle_timeout: Duration) -> SharedPool {
        SharedPool { idle: (0..backends).map(|_| Mutex::new(Vec::new())).collect(), idle_timeout }
    }

    /// The warmest idle connection to backend `i` that is still open.
    pub fn take(&self, i: usize) -> Option<BackendConn> {
        loop {
            let idle = self.idle[i].lock().unwrap().pop()?;
            if idle.since.elapsed() < self.idle_timeout && idle.conn.still_open() {
                return Some(idle.conn);
            }
        }
    }

    /// Keep a connection whose last response ended cleanly.
    pub fn put(&self, mut conn: BackendConn) {
        conn.reused = true;
        let backend = conn.backend.clone();
        self.idle[backend.index].lock().unwrap().push(Idle { conn, since: Instant::now() });
        backend.notify_released();
    }

    /// Close the connections idle for longer than the timeout (the health thread calls it).
    pub fn expire(&self) {
        for idle in &self.idle {
            let expired: Vec<Idle> = {
                let mut idle = idle.lock().unwrap();
                let keep = idle.iter().position(|c| c.since.elapsed() < self.idle_timeout).unwrap_or(idle.len());
                idle.drain(..keep).collect()
            };
            drop(expired); // closed outside the lock
        }
    }
}

/// Idle connections of one event loop, per backend, oldest first.
pub struct LoopPool {
    idle: Vec<VecDeque<Idle>>,
    idle_timeout: Duration,
}

impl LoopPool {
    pub fn new(backends: usize, idle_timeout: Duration) -> LoopPool {
        LoopPool { idle: (0..backends).map(|_| VecDeque::new()).collect(), idle_timeout }
    }

    /// The warmest idle connection to backend `i` that is still open.
    pub fn take(&mut self, i: usize) -> Option<BackendConn> {
        while let Some(idle) = self.idle[i].pop_back() {
            if idle.since.elapsed() < self.idle_timeout && idle.conn.still_open() {
                return Some(idle.conn);
            }
        }
        None
    }

    pub fn put(&mut self, mut conn: BackendConn) {
        conn.reused = true;
        let i = conn.backend.index;
        self.idle[i].push_back(Idle { conn, since: Instant::now() });
    }

    /// Close connections idle for longer than the timeout; returns when the next one expires.
    pub fn expire(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for idle in &mut self.idle {
            while idle.front().is_some_and(|c| now.duration_since(c.since) >= self.idle_timeout) {
                idle.pop_front();
            }
            if let Some(c) = idle.front() {
                let t = c.since + self.idle_timeout;
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        next
    }
}
