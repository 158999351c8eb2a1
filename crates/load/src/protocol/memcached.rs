//! The memcached text protocol on one connection (seed 002 §1.2, memtier's client): the next
//! request of the workload's `set`:`get` cycle, keys drawn by the key patterns of `keys.rs`, a
//! multi-get of k keys, and the reply read element by element
//! (`archlab_wire::memcached::parse_reply`), with optional verification of every value read
//! back against `values.rs`. A reply is complete at `END` (retrievals), at a storage reply
//! (`set`) or at one of the three error lines, which are counted by class (`mc_error`,
//! `mc_client_error`, `mc_server_error`) and leave the connection usable; a verification
//! failure counts `mc_verify`.

use super::Progress;
use crate::config::memcached::{KeyPattern, McWorkload, Ratio};
use crate::dist::{stream, Rng};
use crate::keys::{gaussian_key, parallel_slice, Zipf};
use crate::stats::{ErrorClass, McCounts, Outcome};
use crate::values::{value_byte, value_len};
use archlab_wire::memcached::{parse_reply, write_retrieval, write_set, Parse, Reply};

/// What the request in flight expects back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Nothing,
    Storage,
    Values,
}

/// One connection's memcached client: its command cycle, key iterators and random stream,
/// the request being sent, and the reply being read. Public so that the fuzz targets
/// (`fuzz/`) drive the generator's own reply handling.
pub struct McClient {
    w: McWorkload,
    seed: u64,
    rng: Rng,
    /// Position in the set:get cycle: commands (keys for gets) issued in it so far.
    cycle: u32,
    next_set: u64,
    next_get: u64,
    /// Key range of the S and P iterators: the whole range, or this connection's P slice.
    walk_min: u64,
    walk_max: u64,
    zipf: Option<Zipf>,
    request: Vec<u8>,
    /// Key indices of the retrieval in flight, in request order.
    keys: Vec<u64>,
    /// Index in `keys` after the last value matched.
    matched: usize,
    expect: Expect,
    /// A value of the reply in flight failed verification.
    bad_value: Option<&'static str>,
    /// Bytes of an element split across reads.
    pending: Vec<u8>,
    /// Reused for building keys and values, so that steady state allocates nothing.
    scratch: Vec<u8>,
    bounds: Vec<std::ops::Range<usize>>,
    /// Counts of the reply that completed last (read by the connection machinery at completion).
    pub(crate) last: McCounts,
}

impl McClient {
    /// The client of connection `slot` of thread `thread`, connection `global` of `total` in
    /// the run: its own random stream and its own sequential iterators starting at the
    /// minimum (of its slice for P), like memtier's per-client iterators.
    pub fn new(w: &McWorkload, seed: u64, thread: usize, slot: usize, global: u64, total: u64) -> McClient {
        let (walk_min, walk_max) =
            if w.is_parallel() { parallel_slice(w.key_min, w.key_max, global, total) } else { (w.key_min, w.key_max) };
        let zipf = [w.keys.set, w.keys.get]
            .contains(&KeyPattern::Zipf)
            .then(|| Zipf::new(w.key_max - w.key_min + 1, w.key_zipf_exp));
        McClient {
            walk_min,
            walk_max,
            zipf,
            rng: stream(seed, 0x6d63_0000_0000_0000 | ((thread as u64) << 24) | slot as u64),
            seed,
            cycle: 0,
            next_set: walk_min,
            next_get: walk_min,
            request: Vec::with_capacity(64),
            keys: Vec::with_capacity(w.multi_get as usize),
            matched: 0,
            expect: Expect::Nothing,
            bad_value: None,
            pending: Vec::new(),
            scratch: Vec::new(),
            bounds: Vec::new(),
            last: McCounts::default(),
            w: w.clone(),
        }
    }

    fn draw(&mut self, pattern: KeyPattern, is_set: bool) -> u64 {
        let (min, max) = (self.w.key_min, self.w.key_max);
        match pattern {
            KeyPattern::Random => min + (self.rng.next_u64() % (max - min + 1)),
            KeyPattern::Sequential | KeyPattern::Parallel => {
                let it = if is_set { &mut self.next_set } else { &mut self.next_get };
                let k = *it;
                *it = if k >= self.walk_max { self.walk_min } else { k + 1 };
                k
            }
            KeyPattern::Gaussian => gaussian_key(&mut self.rng, min, max, self.w.key_median, self.w.key_stddev),
            KeyPattern::Zipf => {
                let z = self.zipf.as_ref().expect("built for the Z pattern");
                min + z.sample(&mut self.rng) - 1
            }
        }
    }

    fn push_key(out: &mut Vec<u8>, prefix: &str, index: u64) {
        out.extend_from_slice(prefix.as_bytes());
        // Writing to a Vec cannot fail.
        let _ = std::io::Write::write_fmt(out, format_args!("{index}"));
    }

    /// Build the next request of the cycle; returns its bytes.
    pub fn next_request(&mut self) -> &[u8] {
        let Ratio { sets, gets } = self.w.ratio;
        if self.cycle >= sets + gets {
            self.cycle = 0;
        }
        self.request.clear();
        self.keys.clear();
        self.matched = 0;
        self.bad_value = None;
        self.last = McCounts::default();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        if self.cycle < sets {
            self.cycle += 1;
            let index = self.draw(self.w.keys.set, true);
            Self::push_key(&mut scratch, &self.w.key_prefix, index);
            let key_len = scratch.len();
            let len = value_len(self.w.value_size, self.seed, index);
            scratch.extend((0..len).map(|j| value_byte(index, j)));
            write_set(&mut self.request, &scratch[..key_len], 0, 0, &scratch[key_len..], false);
            self.expect = Expect::Storage;
        } else {
            // memtier: a multi-get carries min(k, gets left in the cycle) keys.
            let n = self.w.multi_get.min(sets + gets - self.cycle);
            self.cycle += n;
            self.bounds.clear();
            for _ in 0..n {
                let index = self.draw(self.w.keys.get, false);
                self.keys.push(index);
                let start = scratch.len();
                Self::push_key(&mut scratch, &self.w.key_prefix, index);
                self.bounds.push(start..scratch.len());
            }
            write_retrieval(&mut self.request, self.w.retrieval, self.bounds.iter().map(|r| &scratch[r.clone()]));
            self.expect = Expect::Values;
        }
        self.scratch = scratch;
        &self.request
    }

    /// The counts of the reply that completed last.
    pub fn last_counts(&self) -> McCounts {
        self.last
    }

    /// The request built last.
    #[inline]
    pub(crate) fn request(&self) -> &[u8] {
        &self.request
    }

    /// Forget the reply being read (the connection was closed).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.expect = Expect::Nothing;
    }

    /// Take the next piece of the reply.
    pub fn feed(&mut self, data: &[u8]) -> Progress {
        if self.pending.is_empty() {
            let (progress, used) = self.walk(data);
            if progress == Progress::More {
                self.pending.extend_from_slice(&data[used..]);
            }
            return progress;
        }
        self.pending.extend_from_slice(data);
        let pending = std::mem::take(&mut self.pending);
        let (progress, used) = self.walk(&pending);
        self.pending = pending;
        if progress == Progress::More {
            self.pending.drain(..used);
        } else {
            self.pending.clear();
        }
        progress
    }

    /// Parse whole elements from `buf`; returns the progress and the bytes consumed.
    fn walk(&mut self, buf: &[u8]) -> (Progress, usize) {
        let mut at = 0;
        loop {
            let (reply, n) = match parse_reply(&buf[at..]) {
                Ok(Parse::Complete(r, n)) => (r, n),
                Ok(Parse::Partial) => return (Progress::More, at),
                Err(e) => return (Progress::Invalid(e.0), at),
            };
            at += n;
            let done = match self.element(reply) {
                Ok(None) => continue,
                Ok(Some(outcome)) => Progress::Done { outcome, keep_alive: true },
                Err(why) => Progress::Invalid(why),
            };
            self.expect = Expect::Nothing;
            if at != buf.len() && matches!(done, Progress::Done { .. }) {
                return (Progress::Invalid("bytes after the end of the reply (only one request was in flight)"), at);
            }
            return (done, at);
        }
    }

    /// One element of the reply: `Ok(Some(_))` when the reply is complete.
    fn element(&mut self, reply: Reply<'_>) -> Result<Option<Outcome>, &'static str> {
        let failed = |class| Ok(Some(Outcome::Failed(class)));
        if reply.is_error() {
            // An error ends the reply: it counts as that error, not as hits of the values
            // before it (no retrieval reply was completed, so hits + misses = keys holds).
            self.last = McCounts::default();
        }
        match (self.expect, reply) {
            (_, Reply::Error) => failed(ErrorClass::McError),
            (_, Reply::ClientError(_)) => failed(ErrorClass::McClientError),
            (_, Reply::ServerError(_)) => failed(ErrorClass::McServerError),
            (Expect::Storage, Reply::Stored) => {
                self.last.sets = 1;
                Ok(Some(Outcome::Ok))
            }
            (Expect::Values, Reply::Value { key, data, .. }) => {
                if self.last.hits as usize >= self.keys.len() {
                    return Err("more values than keys requested");
                }
                self.last.hits += 1;
                if self.w.verify && self.bad_value.is_none() {
                    self.bad_value = self.verify(key, data).err();
                }
                Ok(None)
            }
            (Expect::Values, Reply::End) => {
                let n = self.keys.len() as u64;
                self.last.gets = 1;
                self.last.get_keys = n;
                self.last.misses = n - self.last.hits;
                Ok(Some(match self.bad_value {
                    Some(_) => Outcome::Failed(ErrorClass::McVerify),
                    None => Outcome::Ok,
                }))
            }
            (Expect::Nothing, _) => Err("reply while no request was in flight"),
            _ => Err("reply that does not answer the request (e.g. END to a set)"),
        }
    }

    /// The value `data` returned for `key` is the one this generator writes for it, and the
    /// key comes after the previous one in the request (memcached keeps the request's order).
    fn verify(&mut self, key: &[u8], data: &[u8]) -> Result<(), &'static str> {
        let digits = key.strip_prefix(self.w.key_prefix.as_bytes()).ok_or("key without the key prefix")?;
        let index: u64 = std::str::from_utf8(digits).ok().and_then(|d| d.parse().ok()).ok_or("key not generated")?;
        let pos = self.keys[self.matched..].iter().position(|&k| k == index).ok_or("value out of request order")?;
        self.matched += pos + 1;
        if data.len() != value_len(self.w.value_size, self.seed, index) {
            return Err("value of the wrong length");
        }
        if !data.iter().enumerate().all(|(j, &b)| b == value_byte(index, j)) {
            return Err("value with the wrong bytes");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use archlab_wire::memcached::Retrieval;

    fn workload(ratio: &str, multi: u32, keys: &str, size: &str) -> McWorkload {
        McWorkload::new(
            Retrieval::Get,
            multi,
            ratio.parse().unwrap(),
            keys.parse().unwrap(),
            "k-".into(),
            0,
            9,
            None,
            None,
            size.parse().unwrap(),
            true,
        )
        .unwrap()
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn cycle_ratio_multiget_and_sequential_keys_follow_memtier() {
        let w = workload("1:4", 3, "S:S", "4");
        let mut c = McClient::new(&w, 1, 0, 0, 0, 1);
        let reqs: Vec<String> = (0..6).map(|_| text(c.next_request())).collect();
        // 1 set, then gets of min(3, gets left) keys: 3 then 1; the cycle restarts.
        assert_eq!(reqs[0], "set k-0 0 0 4\r\n0123\r\n");
        assert_eq!(reqs[1], "get k-0 k-1 k-2\r\n");
        assert_eq!(reqs[2], "get k-3\r\n");
        assert_eq!(reqs[3], "set k-1 0 0 4\r\n1234\r\n");
        assert_eq!(reqs[4], "get k-4 k-5 k-6\r\n");
        assert_eq!(reqs[5], "get k-7\r\n");
    }

    #[test]
    fn random_and_gaussian_keys_stay_in_range_and_are_seeded() {
        let w = workload("0:1", 1, "G:G", "1");
        let mut a = McClient::new(&w, 7, 0, 0, 0, 1);
        let mut b = McClient::new(&w, 7, 0, 0, 0, 1);
        let mut seen = [0u32; 10];
        for _ in 0..2000 {
            let k = a.draw(KeyPattern::Gaussian, false);
            assert_eq!(k, b.draw(KeyPattern::Gaussian, false));
            seen[k as usize] += 1;
        }
        // Centred on 4.5 with stddev 1.5: the middle keys are the most frequent.
        assert!(seen[4] + seen[5] > seen[0] + seen[9] + seen[1] + seen[8]);
        for _ in 0..1000 {
            assert!(a.draw(KeyPattern::Random, true) <= 9);
        }
    }

    #[test]
    fn parallel_pattern_gives_each_connection_its_own_slice() {
        // Keys 0..=9 over 3 connections: slices 0..=2, 3..=5, 6..=9; each connection walks its
        // slice and wraps, set and get iterators apart.
        let w = workload("1:1", 1, "P:P", "1");
        let mut seen: Vec<Vec<u64>> = Vec::new();
        for c in 0..3u64 {
            let mut client = McClient::new(&w, 1, 0, c as usize, c, 3);
            let keys: Vec<u64> = (0..8).map(|_| client.draw(KeyPattern::Parallel, true)).collect();
            seen.push(keys);
        }
        assert_eq!(seen[0], [0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(seen[1], [3, 4, 5, 3, 4, 5, 3, 4]);
        assert_eq!(seen[2], [6, 7, 8, 9, 6, 7, 8, 9]);
        // Disjoint and, together, every key of the range.
        let mut all: Vec<u64> = seen.iter().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        for (i, a) in seen.iter().enumerate() {
            for b in &seen[i + 1..] {
                assert!(a.iter().all(|k| !b.contains(k)));
            }
        }
    }

    #[test]
    fn zipf_keys_start_at_the_minimum_and_need_a_z_pattern() {
        let w = workload("0:1", 1, "R:Z", "1").with_zipf_exponent(1.2).unwrap();
        let mut c = McClient::new(&w, 3, 0, 0, 0, 1);
        let mut counts = [0u32; 10];
        for _ in 0..5000 {
            counts[c.draw(KeyPattern::Zipf, false) as usize] += 1;
        }
        // Rank 1 (key 0) is the most frequent, rank 2 about 2^-1.2 = 0.44 of it.
        assert!(counts.windows(2).take(3).all(|p| p[0] > p[1]), "{counts:?}");
        let e = workload("1:1", 1, "R:R", "1").with_zipf_exponent(1.0).unwrap_err();
        assert_eq!(e.parameter, "key_zipf_exp");
        assert!(workload("0:1", 1, "Z:Z", "1").with_zipf_exponent(5.0).is_err());
    }

    #[test]
    fn replies_are_framed_counted_and_verified_in_any_split() {
        let w = workload("0:3", 3, "S:S", "uniform:0-40");
        let mut c = McClient::new(&w, 3, 0, 0, 0, 1);
        assert_eq!(text(c.next_request()), "get k-0 k-1 k-2\r\n");
        let value = |i: u64| -> Vec<u8> { (0..value_len(w.value_size, 3, i)).map(|j| value_byte(i, j)).collect() };
        let mut reply = Vec::new();
        for i in [0u64, 2] {
            reply.extend_from_slice(format!("VALUE k-{i} 0 {}\r\n", value(i).len()).as_bytes());
            reply.extend_from_slice(&value(i));
            reply.extend_from_slice(b"\r\n");
        }
        reply.extend_from_slice(b"END\r\n");
        for cut in 0..reply.len() {
            c.reset();
            c.expect = Expect::Values;
            c.last = McCounts::default();
            c.matched = 0;
            let first = c.feed(&reply[..cut]);
            assert_eq!(first, Progress::More, "cut {cut}");
            assert_eq!(c.feed(&reply[cut..]), Progress::Done { outcome: Outcome::Ok, keep_alive: true });
            assert_eq!((c.last.hits, c.last.misses, c.last.get_keys), (2, 1, 3));
        }
        // Out of order, wrong bytes, errors.
        let mut c2 = McClient::new(&w, 3, 0, 0, 0, 1);
        c2.next_request();
        let mut bad = format!("VALUE k-2 0 {}\r\n", value(2).len()).into_bytes();
        bad.extend_from_slice(&value(2));
        bad.extend_from_slice(format!("\r\nVALUE k-0 0 {}\r\n", value(0).len()).as_bytes());
        bad.extend_from_slice(&value(0));
        bad.extend_from_slice(b"\r\nEND\r\n");
        assert_eq!(c2.feed(&bad), Progress::Done { outcome: Outcome::Failed(ErrorClass::McVerify), keep_alive: true });
        c2.next_request();
        assert_eq!(
            c2.feed(b"SERVER_ERROR out of memory\r\n"),
            Progress::Done { outcome: Outcome::Failed(ErrorClass::McServerError), keep_alive: true }
        );
        // Found by the memcached_reply fuzz target: values then an error line counted hits
        // without the retrieval they belong to.
        c2.next_request();
        let mut values_then_error = format!("VALUE k-0 0 {}\r\n", value(0).len()).into_bytes();
        values_then_error.extend_from_slice(&value(0));
        values_then_error.extend_from_slice(b"\r\nCLIENT_ERROR bad\r\n");
        assert_eq!(
            c2.feed(&values_then_error),
            Progress::Done { outcome: Outcome::Failed(ErrorClass::McClientError), keep_alive: true }
        );
        assert_eq!(c2.last_counts(), McCounts::default());
        c2.next_request();
        assert!(matches!(c2.feed(b"END\r\nEND\r\n"), Progress::Invalid(_)));
        c2.next_request();
        assert!(matches!(c2.feed(b"STORED\r\n"), Progress::Invalid(_)));
    }
}
