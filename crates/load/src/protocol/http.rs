//! Framing of one HTTP/1.1 response that arrives in pieces of any size: the head is parsed
//! with `archlab_wire::http::parse_response_head`, then the body is skipped by counting
//! Content-Length bytes. Body bytes are never copied out of the receive buffer; only a head
//! split across reads is accumulated (rare: heads are small), in a buffer kept per connection
//! so that steady state allocates nothing.
//!
//! With one request in flight per connection any byte after the end of the response is a
//! protocol violation ([`ResponseReader::feed`]); with pipelining it is the start of the next
//! response, in request order ([`ResponseReader::feed_prefix`] says where one ends). `protocol/mod.rs` puts this
//! reader and the memcached client behind one interface.

use super::Progress;
use crate::stats::Outcome;
use archlab_wire::http::{parse_response_head, ResponseError};

/// A head that has not ended after this many bytes is refused (servers use 8-64 KiB limits).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The framing state of one HTTP connection, fed the bytes as they arrive. Public so that
/// the fuzz targets (`fuzz/`) drive the generator's own framing, not a copy of it.
#[derive(Debug, Default)]
pub struct ResponseReader {
    /// Bytes of a head split across reads; empty otherwise.
    head: Vec<u8>,
    /// The head has been parsed and this many body bytes are still expected.
    body_left: Option<usize>,
    status: u16,
    keep_alive: bool,
}

fn describe(e: ResponseError) -> &'static str {
    match e {
        ResponseError::Malformed(why) => why,
        ResponseError::NoContentLength => {
            "response without Content-Length (chunked and close-delimited bodies are not supported)"
        }
    }
}

impl ResponseReader {
    /// Forget any partial response (a new request, or a new connection).
    pub fn reset(&mut self) {
        self.head.clear();
        self.body_left = None;
    }

    /// Whether some bytes of a response have arrived but not all of them.
    #[cfg(test)]
    pub(crate) fn is_partial(&self) -> bool {
        self.body_left.is_some() || !self.head.is_empty()
    }

    /// Take the next piece of input, which must not go past the end of the response (one
    /// request in flight).
    pub fn feed(&mut self, data: &[u8]) -> Progress {
        match self.feed_prefix(data) {
            (Progress::Done { .. }, used) if used < data.len() => {
                Progress::Invalid("bytes after the end of the response (only one request was in flight)")
            }
            (p, _) => p,
        }
    }

    /// Take the next piece of input, which may go on with the next responses (pipelining);
    /// returns the progress and how many bytes belong to this response.
    pub fn feed_prefix(&mut self, data: &[u8]) -> (Progress, usize) {
        let body_bytes = match self.body_left {
            Some(_) => data.len(),
            None => match self.parse_head(data) {
                Ok(Some(body_bytes)) => body_bytes,
                Ok(None) => return (Progress::More, data.len()),
                Err(why) => return (Progress::Invalid(why), data.len()),
            },
        };
        let left = self.body_left.expect("head parsed above");
        if body_bytes < left {
            self.body_left = Some(left - body_bytes);
            return (Progress::More, data.len());
        }
        let done = Progress::Done { outcome: Outcome::Status(self.status), keep_alive: self.keep_alive };
        self.reset();
        // The head and body bytes of this response all came from `data`'s start.
        (done, data.len() - (body_bytes - left))
    }

    /// Parse the head from `data` (appended to an earlier partial head, if any). On success,
    /// returns how many bytes after the head — body bytes — the input held.
    fn parse_head(&mut self, data: &[u8]) -> Result<Option<usize>, &'static str> {
        let (parsed, available) = if self.head.is_empty() {
            (parse_response_head(data), data.len())
        } else {
            self.head.extend_from_slice(data);
            (parse_response_head(&self.head), self.head.len())
        };
        match parsed.map_err(describe)? {
            Some(h) => {
                self.status = h.status;
                self.keep_alive = h.keep_alive;
                self.body_left = Some(h.body_len);
                self.head.clear();
                Ok(Some(available - h.head_len))
            }
            None if available > MAX_HEAD_BYTES => Err("response head larger than 64 KiB"),
            None => {
                if self.head.is_empty() {
                    self.head.extend_from_slice(data);
                }
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

    #[test]
    fn whole_response_in_one_piece() {
        let mut r = ResponseReader::default();
        assert_eq!(r.feed(RESPONSE), Progress::Done { outcome: Outcome::Status(200), keep_alive: true });
        assert!(!r.is_partial());
    }

    #[test]
    fn any_split_gives_the_same_result() {
        for cut in 1..RESPONSE.len() {
            let mut r = ResponseReader::default();
            assert_eq!(r.feed(&RESPONSE[..cut]), Progress::More, "cut {cut}");
            assert!(r.is_partial());
            assert_eq!(
                r.feed(&RESPONSE[cut..]),
                Progress::Done { outcome: Outcome::Status(200), keep_alive: true },
                "cut {cut}"
            );
        }
        // Byte by byte.
        let mut r = ResponseReader::default();
        let (last, init) = RESPONSE.split_last().unwrap();
        for b in init {
            assert_eq!(r.feed(std::slice::from_ref(b)), Progress::More);
        }
        assert_eq!(
            r.feed(std::slice::from_ref(last)),
            Progress::Done { outcome: Outcome::Status(200), keep_alive: true }
        );
    }

    #[test]
    fn large_body_is_counted_not_stored() {
        let mut r = ResponseReader::default();
        let body = vec![b'x'; 100_000];
        let head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n";
        assert_eq!(r.feed(head), Progress::More);
        // Chunks of 30 000, 30 000, 30 000 and 10 000 bytes: the response ends with the last
        // one, exactly, and not before.
        let progress: Vec<Progress> = body.chunks(30_000).map(|chunk| r.feed(chunk)).collect();
        let done = Progress::Done { outcome: Outcome::Status(503), keep_alive: false };
        assert_eq!(progress, [Progress::More, Progress::More, Progress::More, done]);
        assert!(!r.is_partial());
        assert!(r.head.capacity() < 1024, "the body must not be buffered");
    }

    #[test]
    fn trailing_bytes_and_garbage_are_invalid() {
        let mut r = ResponseReader::default();
        let mut two = RESPONSE.to_vec();
        two.extend_from_slice(RESPONSE);
        assert!(matches!(r.feed(&two), Progress::Invalid(_)));
        let mut r = ResponseReader::default();
        assert!(matches!(r.feed(b"garbage\r\n\r\n"), Progress::Invalid(_)));
        let mut r = ResponseReader::default();
        assert!(matches!(r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), Progress::Invalid(_)));
    }

    #[test]
    fn pipelined_responses_split_anywhere_are_framed_one_by_one() {
        // Three responses of different lengths and statuses back to back, cut at every place.
        let stream = [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"[..],
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
        ]
        .concat();
        for cut in 0..=stream.len() {
            let mut r = ResponseReader::default();
            let mut statuses = Vec::new();
            for piece in [&stream[..cut], &stream[cut..]] {
                let mut at = 0;
                while at < piece.len() {
                    let (p, used) = r.feed_prefix(&piece[at..]);
                    assert!(used > 0 || piece[at..].is_empty(), "cut {cut}");
                    at += used;
                    match p {
                        Progress::Done { outcome: Outcome::Status(s), .. } => statuses.push(s),
                        Progress::More => {}
                        other => panic!("cut {cut}: {other:?}"),
                    }
                }
            }
            assert_eq!(statuses, [200, 404, 200], "cut {cut}");
            assert!(!r.is_partial());
        }
    }

    #[test]
    fn endless_head_is_refused() {
        let mut r = ResponseReader::default();
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\n"), Progress::More);
        let filler = vec![b'a'; 70 * 1024];
        assert!(matches!(r.feed(&filler), Progress::Invalid(_)));
    }
}
