//! Response bodies produced in parts, so that a server never holds a large body whole.
//!
//! The bodies that can be large (`/echo?size=N` up to 64 MiB, `/response?size=N` and
//! `/file?size=N` up to 16 MiB) are each a function of the byte offset (the echo pattern, the
//! file) or of a small state carried from part to part (`/response`'s generator), so a
//! [`BodyStream`] produces the next part when the server has room for it, and the parts
//! concatenated are exactly the body [`crate::Workload::execute`] appends at once (which goes
//! through the same code with one part). The cost per byte is the same either way: a
//! `/response` part is whole rounds of 100 bytes, a `/file` part the same `pread`s. Nothing here
//! blocks except `/file`'s reads of the page cache.

use crate::{echo, file, response};

/// What produces the bytes of a [`BodyStream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The echo pattern (byte i is `b'a' + i % 26`).
    Pattern,
    /// `/response`'s rounds, with the generator's state after the rounds produced so far.
    Rounds { state: u64 },
    /// The process's data file.
    File,
}

/// A response body still to be produced: its length, and what produced so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyStream {
    source: Source,
    len: usize,
    produced: usize,
}

impl BodyStream {
    pub(crate) fn pattern(len: usize) -> BodyStream {
        BodyStream { source: Source::Pattern, len, produced: 0 }
    }

    pub(crate) fn rounds(len: usize) -> BodyStream {
        BodyStream { source: Source::Rounds { state: response::SEED }, len, produced: 0 }
    }

    pub(crate) fn file(len: usize) -> BodyStream {
        BodyStream { source: Source::File, len, produced: 0 }
    }

    /// The whole body's length (the response's Content-Length).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes not produced yet.
    pub fn remaining(&self) -> usize {
        self.len - self.produced
    }

    /// Append the next part, of at most `max` bytes (a `/response` part is rounded down to whole
    /// rounds, and is one round when `max` is smaller), and return its length. The error is a
    /// `/file` read that failed: the body cannot be completed.
    pub fn fill(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, String> {
        let remaining = self.remaining();
        let mut n = remaining.min(max);
        match &mut self.source {
            Source::Pattern => echo::pattern(self.produced, n, out),
            Source::Rounds { state } => {
                if n < remaining {
                    n = (n - n % response::ROUND_BYTES).max(response::ROUND_BYTES.min(remaining));
                }
                response::rounds_into(state, n, out)
            }
            Source::File => file::read_part(self.produced, n, out)?,
        }
        self.produced += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Workload};

    /// The body produced in parts of `part` bytes, and at once by `execute`.
    fn both(target: &str, part: usize) -> (Vec<u8>, Vec<u8>) {
        let (path, query) = target.split_once('?').unwrap();
        let work = Workload::from_target(path, query).unwrap();
        let mut whole = Vec::new();
        work.execute(&mut Context::default(), b"", &mut whole).unwrap();
        let mut stream = work.body_stream(b"").expect("a streamable workload");
        assert_eq!(stream.len(), whole.len(), "{target}");
        let mut parts = Vec::new();
        while stream.remaining() > 0 {
            let before = parts.len();
            let n = stream.fill(part, &mut parts).unwrap();
            assert!(n > 0 && parts.len() - before == n, "{target}: a part of {n} bytes");
            assert!(n <= part.max(response::ROUND_BYTES), "{target}: {n} > {part}");
        }
        (parts, whole)
    }

    #[test]
    fn parts_make_the_body_that_execute_makes_at_once() {
        for target in ["/echo?size=300001", "/response?size=102400", "/response?size=1001", "/file?size=200000"] {
            for part in [1, 99, 100, 4096, 65536, 1 << 20] {
                let (parts, whole) = both(target, part);
                assert!(parts == whole, "{target} in parts of {part}");
            }
        }
    }

    #[test]
    fn only_large_bodies_stream() {
        assert!(Workload::Echo { size: 10 }.body_stream(b"posted").is_none(), "an echoed request body is not produced");
        assert!(Workload::Prime { n: 7 }.body_stream(b"").is_none());
        assert_eq!(Workload::File { size: 5 }.body_stream(b"").map(|s| s.len()), Some(5));
    }
}
