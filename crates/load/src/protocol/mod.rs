//! The protocols a load connection speaks: HTTP/1.1 (`http.rs`: framing responses to the
//! requests the run sends) and the memcached text protocol (`memcached.rs`: building each
//! request of the workload's cycle and framing, counting and verifying its reply). [`Codec`]
//! puts them behind one interface for the connection machinery (`run/worker.rs`), which never
//! looks at the protocol; both report what each piece of input did as a [`Progress`].

pub(crate) mod http;
pub(crate) mod memcached;

use crate::stats::Outcome;
use http::ResponseReader;
use memcached::McClient;

/// What one piece of input did to the response being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The response is not complete yet.
    More,
    /// The response ended exactly at the end of the piece.
    Done { outcome: Outcome, keep_alive: bool },
    /// The bytes are not a response the generator can frame.
    Invalid(&'static str),
}

/// The protocol of one connection: writes its requests and frames its responses. HTTP sends
/// the one request built for the whole run; memcached builds each request.
pub(crate) enum Codec {
    Http(ResponseReader),
    Memcached(Box<McClient>),
}

impl Codec {
    #[inline]
    pub(crate) fn feed(&mut self, data: &[u8]) -> Progress {
        match self {
            Codec::Http(r) => r.feed(data),
            Codec::Memcached(m) => m.feed(data),
        }
    }

    pub(crate) fn reset(&mut self) {
        match self {
            Codec::Http(r) => r.reset(),
            Codec::Memcached(m) => m.reset(),
        }
    }
}
