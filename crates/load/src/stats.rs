//! What a load thread counts besides latency: completed requests, bytes, responses by status
//! code and errors by class. One [`Tally`] per phase (warm-up, measurement window) per thread,
//! summed after the run; counting is an array increment, never a map insertion.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// How a complete response ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An HTTP status (2xx counts as a success, 4xx/5xx as errors of their class).
    Status(u16),
    /// A protocol without status codes answered as asked.
    Ok,
    /// A complete reply that is an error of this class; the connection stays usable.
    Failed(ErrorClass),
}

/// Why a request did not complete with a 2xx response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    /// A connection could not be established (refused, unreachable, or not within the
    /// connect timeout).
    Connect,
    /// No complete response within the request timeout; the connection is reopened.
    Timeout,
    /// `recv` failed with an error other than a reset by the peer.
    Read,
    /// `send` failed with an error other than a reset or closed pipe.
    Write,
    /// The peer closed or reset the connection while a request was in flight (a close while
    /// idle, e.g. after `Connection: close`, is not an error).
    Closed,
    /// The bytes received are not a response the generator can frame.
    Parse,
    Status4xx,
    Status5xx,
    /// memcached `ERROR`: the server did not know the command (seed 002 §1.2).
    McError,
    /// memcached `CLIENT_ERROR <msg>`: the server found the request malformed.
    McClientError,
    /// memcached `SERVER_ERROR <msg>`: the server failed (out of memory, value too large).
    McServerError,
    /// A value read back is not the one written for its key, or multi-get order was broken.
    McVerify,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; CLASSES] = [
        ErrorClass::Connect,
        ErrorClass::Timeout,
        ErrorClass::Read,
        ErrorClass::Write,
        ErrorClass::Closed,
        ErrorClass::Parse,
        ErrorClass::Status4xx,
        ErrorClass::Status5xx,
        ErrorClass::McError,
        ErrorClass::McClientError,
        ErrorClass::McServerError,
        ErrorClass::McVerify,
    ];

    /// The name used in JSON summaries.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Read => "read",
            ErrorClass::Write => "write",
            ErrorClass::Closed => "closed",
            ErrorClass::Parse => "parse",
            ErrorClass::Status4xx => "status_4xx",
            ErrorClass::Status5xx => "status_5xx",
            ErrorClass::McError => "mc_error",
            ErrorClass::McClientError => "mc_client_error",
            ErrorClass::McServerError => "mc_server_error",
            ErrorClass::McVerify => "mc_verify",
        }
    }

    /// The class of a response status, if it is an error status.
    pub fn of_status(status: u16) -> Option<ErrorClass> {
        match status {
            400..=499 => Some(ErrorClass::Status4xx),
            500..=599 => Some(ErrorClass::Status5xx),
            _ => None,
        }
    }
}

const CLASSES: usize = 12;

/// Error counts by class; serializes as a JSON object with every class, in declaration order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; CLASSES]);

impl ErrorCounts {
    pub fn get(&self, class: ErrorClass) -> u64 {
        self.0[class as usize]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    pub(crate) fn bump(&mut self, class: ErrorClass) {
        self.0[class as usize] += 1;
    }
    pub(crate) fn add(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl Serialize for ErrorCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(ErrorClass::ALL.len()))?;
        for c in ErrorClass::ALL {
            m.serialize_entry(c.name(), &self.get(c))?;
        }
        m.end()
    }
}

/// What happened to the planned work of a phase, beyond responses: arrivals of the open and
/// partly-open models (requests or sessions) and their punctuality, and sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounts {
    /// Arrivals planned in the phase (open: requests; partly-open: sessions).
    pub arrivals: u64,
    /// Arrivals the generator itself took up more than the late threshold after their
    /// planned time (its own lag, before any wait for a connection).
    pub arrivals_taken_up_late: u64,
    /// Arrivals planned in the phase that never started: still waiting for a connection when
    /// the window closed, or never taken up.
    pub never_started: u64,
    /// Requests written (every model).
    pub sent: u64,
    /// Requests written more than the late threshold after their planned time.
    pub sent_late: u64,
    pub sessions_started: u64,
    pub sessions_completed: u64,
    /// Requests made by the sessions that completed (their drawn lengths, summed).
    pub session_requests: u64,
    /// Sessions ended by a failure of their connection or request.
    pub sessions_aborted: u64,
}

impl FlowCounts {
    fn add(&mut self, o: &FlowCounts) {
        self.arrivals += o.arrivals;
        self.arrivals_taken_up_late += o.arrivals_taken_up_late;
        self.never_started += o.never_started;
        self.sent += o.sent;
        self.sent_late += o.sent_late;
        self.sessions_started += o.sessions_started;
        self.sessions_completed += o.sessions_completed;
        self.session_requests += o.session_requests;
        self.sessions_aborted += o.sessions_aborted;
    }
}

/// Status codes are three digits; anything else is folded into 999 (and still counted).
const STATUS_SLOTS: usize = 1000;

/// Counters of one phase of one thread (or, after summing, of the whole run).
#[derive(Clone, PartialEq)]
pub struct Tally {
    /// Completed responses with a 2xx status.
    pub requests: u64,
    /// Completed responses with any status.
    pub responses: u64,
    /// Bytes returned by `recv`, heads and bodies.
    pub bytes_received: u64,
    /// Connections established (initial ones and reconnects).
    pub connections_opened: u64,
    pub errors: ErrorCounts,
    pub flow: FlowCounts,
    /// memcached commands, hits and misses (zero for HTTP).
    pub memcached: McCounts,
    status: Box<[u64; STATUS_SLOTS]>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: 0,
            responses: 0,
            bytes_received: 0,
            connections_opened: 0,
            errors: ErrorCounts::default(),
            flow: FlowCounts::default(),
            memcached: McCounts::default(),
            status: Box::new([0; STATUS_SLOTS]),
        }
    }
}

impl fmt::Debug for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tally")
            .field("requests", &self.requests)
            .field("responses", &self.responses)
            .field("bytes_received", &self.bytes_received)
            .field("connections_opened", &self.connections_opened)
            .field("errors", &self.errors)
            .field("flow", &self.flow)
            .field("status_codes", &self.status_codes())
            .finish()
    }
}

impl Tally {
    /// Count one complete response; returns its error class, if it is an error.
    pub(crate) fn outcome(&mut self, outcome: Outcome) -> Option<ErrorClass> {
        match outcome {
            Outcome::Status(status) => self.response(status),
            Outcome::Ok => {
                self.responses += 1;
                self.requests += 1;
                None
            }
            Outcome::Failed(class) => {
                self.responses += 1;
                self.errors.bump(class);
                Some(class)
            }
        }
    }

    /// Count one complete HTTP response; returns its error class for 4xx/5xx statuses.
    pub(crate) fn response(&mut self, status: u16) -> Option<ErrorClass> {
        self.responses += 1;
        self.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
        if (200..300).contains(&status) {
            self.requests += 1;
        }
        let class = ErrorClass::of_status(status);
        if let Some(c) = class {
            self.errors.bump(c);
        }
        class
    }

    pub fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.responses += other.responses;
        self.bytes_received += other.bytes_received;
        self.connections_opened += other.connections_opened;
        self.errors.add(&other.errors);
        self.flow.add(&other.flow);
        self.memcached.add(&other.memcached);
        for (a, b) in self.status.iter_mut().zip(other.status.iter()) {
            *a += b;
        }
    }

    /// Responses by status code, only codes seen.
    pub fn status_codes(&self) -> BTreeMap<u16, u64> {
        (0..STATUS_SLOTS).filter(|&c| self.status[c] > 0).map(|c| (c as u16, self.status[c])).collect()
    }
}

/// Counters of memcached commands, by phase (summed like the other tallies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct McCounts {
    /// `set` replies received.
    pub sets: u64,
    /// Retrieval replies received (one per request, whatever its number of keys).
    pub gets: u64,
    /// Keys asked for by those retrievals.
    pub get_keys: u64,
    pub hits: u64,
    pub misses: u64,
}

impl McCounts {
    pub(crate) fn add(&mut self, o: &McCounts) {
        self.sets += o.sets;
        self.gets += o.gets;
        self.get_keys += o.get_keys;
        self.hits += o.hits;
        self.misses += o.misses;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_classified_and_summed() {
        let mut a = Tally::default();
        assert_eq!(a.response(200), None);
        assert_eq!(a.response(302), None);
        assert_eq!(a.response(404), Some(ErrorClass::Status4xx));
        assert_eq!(a.response(503), Some(ErrorClass::Status5xx));
        let mut b = Tally::default();
        b.response(200);
        b.errors.bump(ErrorClass::Timeout);
        a.add(&b);
        assert_eq!((a.requests, a.responses), (2, 5));
        assert_eq!(a.errors.total(), 3);
        assert_eq!(a.status_codes(), BTreeMap::from([(200, 2), (302, 1), (404, 1), (503, 1)]));
        let json = serde_json::to_string(&a.errors).unwrap();
        assert_eq!(
            json,
            r#"{"connect":0,"timeout":1,"read":0,"write":0,"closed":0,"parse":0,"status_4xx":1,"status_5xx":1,"mc_error":0,"mc_client_error":0,"mc_server_error":0,"mc_verify":0}"#
        );
    }
}
