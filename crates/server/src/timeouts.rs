//! The request and idle timeouts, defined once for every front-end.
//!
//! A connection is at any moment waiting for one of three things, which [`Watch`] tracks from
//! what the server holds for it after serving it: a request in progress (its input holds part
//! of a request: the *request timeout* runs from the first byte the server saw of that request,
//! so a client that trickles a header one byte at a time, slowloris, is answered 408 when it
//! runs out, nginx's `client_header_timeout`), nothing (input and output empty: the *idle
//! timeout* runs from the moment the connection became idle, nginx's `keepalive_timeout`), or
//! the client taking a response (output unsent: no timeout; the output bound
//! `max_output_bytes` limits what such a client holds). The clock of a request restarts with
//! every request answered, so a pipelining client that always has the next request in flight
//! is never timed out.
//!
//! How the deadline is kept depends on who waits: blocking front-ends turn it into the socket's
//! read timeout (`SO_RCVTIMEO`) and tokio into a timer on the read; loops that hold many
//! connections (the epoll [`crate::frontend::reactor::EventLoop`], the io_uring rings) do not
//! keep one timer per connection but [`Sweep`] them: each change of a connection's deadline is
//! one comparison with the loop's next sweep, and a sweep, at the earliest deadline, looks at
//! every connection once. Sweeps are at least [`Timeouts::slack`] apart (1/64 of the shorter
//! timeout), so a timeout fires at most that late and a loop sweeps at most 64 times per timeout
//! however many connections expire, and the hot path pays one clock read per change of state
//! (a request answered, a connection gone idle), not one per event.

use crate::conn::InBuf;
use std::time::{Duration, Instant};

/// The two timeouts of a server; `None` is off (`0` in the options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    pub request: Option<Duration>,
    pub idle: Option<Duration>,
}

fn millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

impl Timeouts {
    /// The timeouts of `request_timeout_ms` and `idle_timeout_ms` (0: off), as the options
    /// give them (`ServerOptions::timeouts`).
    pub fn new(request_timeout_ms: u64, idle_timeout_ms: u64) -> Timeouts {
        Timeouts { request: millis(request_timeout_ms), idle: millis(idle_timeout_ms) }
    }

    /// How late a sweep may fire: 1/64 of the shorter timeout, at least 1 ms.
    pub fn slack(&self) -> Duration {
        let shortest = [self.request, self.idle].into_iter().flatten().min().unwrap_or(Duration::ZERO);
        (shortest / 64).max(Duration::from_millis(1))
    }
}

/// Which timeout ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// A request did not arrive whole in time: answer 408 and close.
    Request,
    /// Nothing happened on the connection for the idle timeout: close.
    Idle,
}

/// What a connection waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// The client to take unsent output, or the server to answer: no timeout.
    Output,
    /// Anything: the idle timeout runs.
    Idle,
    /// The rest of a request: the request timeout runs.
    Request,
}

/// A connection's timeout state: what it waits for and since when.
#[derive(Clone, Copy, Debug)]
pub struct Watch {
    waiting: Waiting,
    since: Instant,
    /// `InBuf::consumed` when the request being waited for began.
    consumed: u64,
}

impl Watch {
    /// A new connection: idle since now.
    pub fn new() -> Watch {
        Watch { waiting: Waiting::Idle, since: Instant::now(), consumed: 0 }
    }

    /// Take note of what the server holds for the connection after serving it: `input` as
    /// it is, `pending_output` bytes unsent, and whether the server is still `answering` a
    /// request whose head it has taken (a proxy's exchange, which keeps its own deadlines: a
    /// slow backend must end in the proxy's 504, not in a 408 for a request that did arrive).
    /// Reads the clock only when the state changes.
    pub fn observe(&mut self, input: &InBuf, pending_output: usize, answering: bool) {
        let waiting = if pending_output > 0 || answering {
            Waiting::Output
        } else if input.is_empty() {
            Waiting::Idle
        } else {
            Waiting::Request
        };
        let next_request = waiting == Waiting::Request && input.consumed() != self.consumed;
        if waiting != self.waiting || next_request {
            self.waiting = waiting;
            self.consumed = input.consumed();
            if waiting != Waiting::Output {
                self.since = Instant::now();
            }
        }
    }

    /// When the connection times out, and why; None while no timeout runs for it.
    pub fn deadline(&self, timeouts: &Timeouts) -> Option<(Instant, Expiry)> {
        match self.waiting {
            Waiting::Output => None,
            Waiting::Idle => timeouts.idle.map(|t| (self.since + t, Expiry::Idle)),
            Waiting::Request => timeouts.request.map(|t| (self.since + t, Expiry::Request)),
        }
    }

    /// Whether the connection holds part of a request (a 408 is due when its time runs out).
    pub fn in_request(&self) -> bool {
        self.waiting == Waiting::Request
    }
}

impl Default for Watch {
    fn default() -> Self {
        Watch::new()
    }
}

/// When a loop that holds many connections next looks for expired ones (see the module
/// comment).
#[derive(Debug)]
pub struct Sweep {
    /// The earliest deadline scheduled since the last sweep.
    next: Option<Instant>,
    last: Instant,
    slack: Duration,
}

impl Sweep {
    pub fn new(timeouts: &Timeouts) -> Sweep {
        Sweep { next: None, last: Instant::now(), slack: timeouts.slack() }
    }

    /// A connection's deadline is now `deadline`: sweep no later than it (plus the slack).
    pub fn schedule(&mut self, deadline: Instant) {
        if self.next.is_none_or(|n| deadline < n) {
            self.next = Some(deadline);
        }
    }

    /// When the loop must wake up for the next sweep; None while no connection has a deadline.
    pub fn wake_at(&self) -> Option<Instant> {
        self.next.map(|n| n.max(self.last + self.slack))
    }

    /// Whether a sweep is due at `now`; if so it begins: the sweep schedules again every
    /// deadline it leaves running.
    pub fn begin(&mut self, now: Instant) -> bool {
        match self.wake_at() {
            Some(at) if at <= now => {
                self.next = None;
                self.last = now;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input_with(bytes: &[u8]) -> InBuf {
        let mut b = InBuf::new(1024);
        let mut r = bytes;
        b.read_from(&mut r).unwrap();
        b
    }

    const T: Timeouts = Timeouts { request: Some(Duration::from_secs(60)), idle: Some(Duration::from_secs(75)) };

    #[test]
    fn each_state_runs_its_own_timeout() {
        let mut w = Watch::new();
        let (_, why) = w.deadline(&T).unwrap();
        assert_eq!(why, Expiry::Idle, "a new connection is idle");
        let mut input = input_with(b"GET / HT");
        w.observe(&input, 0, false);
        let (started, why) = w.deadline(&T).unwrap();
        assert_eq!(why, Expiry::Request);
        assert!(w.in_request());
        // More of the same request: the clock does not restart (slowloris).
        w.observe(&input, 0, false);
        assert_eq!(w.deadline(&T).unwrap().0, started);
        // The request was answered and the next one began: its clock starts anew.
        input.consume(4);
        w.observe(&input, 0, false);
        assert!(w.deadline(&T).unwrap().0 >= started);
        assert_ne!(w.consumed, 0);
        // A response unsent: no timeout; then idle.
        w.observe(&input, 10, false);
        assert_eq!(w.deadline(&T), None);
        input.consume(input.filled().len());
        w.observe(&input, 0, false);
        assert_eq!(w.deadline(&T).unwrap().1, Expiry::Idle);
        assert_eq!(w.deadline(&Timeouts::default()), None, "0 turns both off");
    }

    #[test]
    fn sweeps_come_at_the_earliest_deadline_but_never_closer_than_the_slack() {
        let t = Timeouts { request: Some(Duration::from_millis(640)), idle: None };
        assert_eq!(t.slack(), Duration::from_millis(10));
        let mut s = Sweep::new(&t);
        assert_eq!(s.wake_at(), None);
        let now = s.last;
        s.schedule(now + Duration::from_millis(50));
        s.schedule(now + Duration::from_millis(30));
        s.schedule(now + Duration::from_millis(40));
        assert_eq!(s.wake_at(), Some(now + Duration::from_millis(30)));
        assert!(!s.begin(now + Duration::from_millis(29)));
        assert!(s.begin(now + Duration::from_millis(30)));
        assert_eq!(s.wake_at(), None, "the sweep schedules what is left");
        s.schedule(now + Duration::from_millis(31));
        assert_eq!(s.wake_at(), Some(now + Duration::from_millis(40)), "10 ms after the last sweep");
    }
}
