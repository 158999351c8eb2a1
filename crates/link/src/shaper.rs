//! The decision for each packet of one direction, as a pure function of its arrival time and
//! size: dropped (loss, full queue) or the time it leaves. No clock and no I/O here, so the
//! arithmetic is tested exactly and the forwarder only carries the decisions out.
//!
//! A packet goes through three stages, in the order netem and tbf apply them on a Linux
//! egress: random loss on arrival (independent draws, probability `loss`); the rate limiter,
//! a token bucket filled at `rate_bps` holding at most `burst_bytes`, in front of which a FIFO
//! queue holds at most `queue_bytes` (a packet that would overflow it is dropped at the tail,
//! as tbf's `limit` does); then the propagation delay, `delay` plus a uniform draw in
//! `±jitter`. Without `reorder` a packet never leaves before the packet ahead of it (its
//! departure is raised to the previous one), so jitter stretches gaps but keeps order.
//!
//! Because the queue is FIFO and its service does not depend on later arrivals, a packet's
//! release from the bucket is known when it arrives: the bucket is kept as a virtual clock
//! (`t_ns`, tokens at `t_ns`) in exact integer units of bit-nanoseconds, so that no rounding
//! accumulates over millions of packets and timer lateness in the forwarder never shifts the
//! schedule of later packets.

use crate::params::{Direction, DirectionParams, RateLimit};
use archlab_prng::Xoshiro256pp;
use std::collections::VecDeque;

/// Why a packet was not forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// The random loss draw.
    Loss,
    /// The rate limiter's queue was full.
    Queue,
}

/// What becomes of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Drop(DropCause),
    /// Leaves at this CLOCK_MONOTONIC time, in nanoseconds.
    Depart {
        at_ns: u64,
    },
}

/// Tokens are counted in bit-nanoseconds (bits x 10^9): `dt` ns at `rate_bps` add
/// `dt * rate_bps` of them, and a packet of `len` bytes costs `len * 8 * 10^9`.
const SCALE: u128 = 8 * 1_000_000_000;

/// The token bucket with its FIFO queue, on a virtual clock.
#[derive(Debug)]
struct TokenBucket {
    rate_bps: u128,
    capacity: u128,
    queue_limit_bytes: u64,
    /// Tokens available at `t_ns`.
    tokens: u128,
    /// The last instant the bucket was brought up to date: the release of the packet last
    /// admitted, or its arrival if it did not wait.
    t_ns: u64,
    /// Packets still waiting for tokens: (release time, bytes).
    waiting: VecDeque<(u64, u32)>,
    waiting_bytes: u64,
}

impl TokenBucket {
    fn new(limit: &RateLimit) -> Self {
        let capacity = limit.burst_bytes as u128 * SCALE;
        TokenBucket {
            rate_bps: limit.rate_bps as u128,
            capacity,
            queue_limit_bytes: limit.queue_bytes,
            tokens: capacity,
            t_ns: 0,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        }
    }

    /// The release time of a packet of `len` bytes arriving at `arrival_ns` (arrivals in
    /// non-decreasing order), or `None` if the queue cannot hold it.
    fn admit(&mut self, arrival_ns: u64, len: u32) -> Option<u64> {
        while let Some(&(release, bytes)) = self.waiting.front() {
            if release > arrival_ns {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= bytes as u64;
        }
        if self.waiting_bytes + len as u64 > self.queue_limit_bytes {
            return None;
        }
        // FIFO: the packet competes for tokens once the one ahead of it has been released.
        let start = arrival_ns.max(self.t_ns);
        let refill = (start - self.t_ns) as u128 * self.rate_bps;
        self.tokens = (self.tokens + refill).min(self.capacity);
        self.t_ns = start;
        let cost = len as u128 * SCALE;
        let release = if self.tokens >= cost {
            self.tokens -= cost;
            start
        } else {
            // Wait until the deficit is filled, rounded up so the rate is never exceeded; the
            // remainder of the rounding stays in the bucket.
            let wait_ns = (cost - self.tokens).div_ceil(self.rate_bps);
            self.tokens = self.tokens + wait_ns * self.rate_bps - cost;
            self.t_ns = start + wait_ns as u64;
            self.t_ns
        };
        if release > arrival_ns {
            self.waiting.push_back((release, len));
            self.waiting_bytes += len as u64;
        }
        Some(release)
    }
}

/// The per-packet decisions of one direction.
#[derive(Debug)]
pub struct Shaper {
    delay_ns: u64,
    jitter_ns: u64,
    loss: f64,
    reorder: bool,
    bucket: Option<TokenBucket>,
    loss_draws: Xoshiro256pp,
    jitter_draws: Xoshiro256pp,
    last_departure_ns: u64,
}

impl Shaper {
    /// A shaper for `direction` of a link seeded with `seed`: loss and jitter draw from their
    /// own streams (keyed by direction and purpose), so that changing the jitter does not change
    /// which packets are lost.
    pub fn new(params: &DirectionParams, seed: u64, direction: Direction) -> Self {
        let d = direction.index() as u64;
        Shaper {
            delay_ns: params.delay.as_nanos() as u64,
            jitter_ns: params.jitter.as_nanos() as u64,
            loss: params.loss,
            reorder: params.reorder,
            bucket: params.rate.as_ref().map(TokenBucket::new),
            loss_draws: Xoshiro256pp::keyed(seed, &[d, 0]),
            jitter_draws: Xoshiro256pp::keyed(seed, &[d, 1]),
            last_departure_ns: 0,
        }
    }

    /// Whether every packet leaves the moment it arrives.
    pub fn is_transparent(&self) -> bool {
        self.delay_ns == 0 && self.bucket.is_none() && self.loss == 0.0
    }

    /// Decide for a packet of `len` bytes arriving at `arrival_ns`; calls must come in
    /// non-decreasing arrival order.
    pub fn admit(&mut self, arrival_ns: u64, len: usize) -> Verdict {
        if self.loss > 0.0 && self.loss_draws.uniform() < self.loss {
            return Verdict::Drop(DropCause::Loss);
        }
        let release_ns = match &mut self.bucket {
            Some(bucket) => match bucket.admit(arrival_ns, len as u32) {
                Some(t) => t,
                None => return Verdict::Drop(DropCause::Queue),
            },
            None => arrival_ns,
        };
        let mut depart_ns = release_ns + self.delay_ns;
        if self.jitter_ns > 0 {
            // Uniform on the integers of [-jitter, +jitter]; jitter <= delay, so never early.
            let offset = self.jitter_draws.below(2 * self.jitter_ns as usize + 1) as u64;
            depart_ns = depart_ns + offset - self.jitter_ns;
        }
        if !self.reorder {
            depart_ns = depart_ns.max(self.last_departure_ns);
        }
        self.last_departure_ns = self.last_departure_ns.max(depart_ns);
        Verdict::Depart { at_ns: depart_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn params(f: impl FnOnce(&mut DirectionParams)) -> DirectionParams {
        let mut p = DirectionParams::TRANSPARENT;
        f(&mut p);
        p
    }

    fn depart(v: Verdict) -> u64 {
        match v {
            Verdict::Depart { at_ns } => at_ns,
            other => panic!("expected a departure, got {other:?}"),
        }
    }

    #[test]
    fn a_constant_delay_is_added_exactly() {
        let mut s = Shaper::new(&params(|p| p.delay = Duration::from_micros(1500)), 1, Direction::Up);
        assert!(!s.is_transparent());
        assert_eq!(depart(s.admit(10, 100)), 1_500_010);
        assert_eq!(depart(s.admit(20, 1500)), 1_500_020);
        assert!(Shaper::new(&DirectionParams::TRANSPARENT, 1, Direction::Up).is_transparent());
    }

    #[test]
    fn the_bucket_serialises_packets_at_the_rate() {
        // 12 Mbit/s = 1.5 bytes/us: a 1500-byte packet takes exactly 1 ms.
        let limit = RateLimit { rate_bps: 12_000_000, queue_bytes: 1_000_000, burst_bytes: 1500 };
        let mut s = Shaper::new(&params(|p| p.rate = Some(limit)), 1, Direction::Down);
        // The bucket starts full: the first packet leaves at once, each next 1 ms later.
        let t: Vec<u64> = (0..5).map(|_| depart(s.admit(1_000, 1500))).collect();
        assert_eq!(t, [1_000, 1_001_000, 2_001_000, 3_001_000, 4_001_000]);
        // After an idle second the bucket is full again (capped at the burst).
        assert_eq!(depart(s.admit(1_005_000_000, 1500)), 1_005_000_000);
        assert_eq!(depart(s.admit(1_005_000_000, 750)), 1_005_500_000);
    }

    #[test]
    fn long_runs_keep_the_exact_rate() {
        // 7 Mbit/s does not divide a byte time into whole nanoseconds (8000/7 ns per byte):
        // the rounding remainder must stay in the bucket, not be lost or gained per packet.
        let limit = RateLimit { rate_bps: 7_000_000, queue_bytes: u64::MAX / 2, burst_bytes: 1500 };
        let mut s = Shaper::new(&params(|p| p.rate = Some(limit)), 1, Direction::Up);
        let n = 100_000u64;
        let mut last = 0;
        for _ in 0..n {
            last = depart(s.admit(0, 1499));
        }
        // The first packet left on the initial burst of 1500 bytes, leaving 1 byte of tokens;
        // the other n-1 packets waited for (n-1)*1499 - 1 bytes at 8/7e6 s per byte.
        let exact = ((n - 1) * 1499 - 1) as f64 * 8.0 / 7e6 * 1e9;
        assert!((last as f64 - exact).abs() <= 1.0, "{last} vs {exact}");
    }

    #[test]
    fn a_full_queue_drops_at_the_tail_and_drains_at_the_rate() {
        // 8 Mbit/s = 1 byte/us; queue 3000 bytes = two packets of 1500 waiting.
        let limit = RateLimit { rate_bps: 8_000_000, queue_bytes: 3000, burst_bytes: 1500 };
        let mut s = Shaper::new(&params(|p| p.rate = Some(limit)), 1, Direction::Up);
        let v: Vec<Verdict> = (0..4).map(|_| s.admit(0, 1500)).collect();
        assert_eq!(v[0], Verdict::Depart { at_ns: 0 });
        assert_eq!(v[1], Verdict::Depart { at_ns: 1_500_000 });
        assert_eq!(v[2], Verdict::Depart { at_ns: 3_000_000 });
        assert_eq!(v[3], Verdict::Drop(DropCause::Queue));
        // Once the first waiting packet has been released there is room for one more.
        assert_eq!(s.admit(1_500_000, 1500), Verdict::Depart { at_ns: 4_500_000 });
        assert_eq!(s.admit(1_500_000, 1500), Verdict::Drop(DropCause::Queue));
    }

    #[test]
    fn jitter_stays_in_its_range_and_keeps_order_unless_reordering_is_allowed() {
        let base = params(|p| {
            p.delay = Duration::from_millis(5);
            p.jitter = Duration::from_millis(2);
        });
        let run = |p: &DirectionParams| {
            let mut s = Shaper::new(p, 7, Direction::Up);
            (0..10_000u64).map(|i| (i * 10_000, depart(s.admit(i * 10_000, 100)))).collect::<Vec<_>>()
        };
        let kept = run(&base);
        assert!(kept.windows(2).all(|w| w[0].1 <= w[1].1), "order kept");
        let free = run(&DirectionParams { reorder: true, ..base });
        for &(a, d) in &free {
            assert!((3_000_000..=7_000_000).contains(&(d - a)), "{a} {d}");
        }
        // Packets 10 us apart with +-2 ms of jitter overtake one another all the time.
        let overtaken = free.windows(2).filter(|w| w[1].1 < w[0].1).count();
        assert!(overtaken > 1000, "{overtaken}");
        // Same seed, same draws: the ordered run is the free run with departures raised.
        let mut high = 0;
        for (k, f) in kept.iter().zip(&free) {
            high = high.max(f.1);
            assert_eq!(k.1, high);
        }
    }

    #[test]
    fn loss_draws_are_seeded_and_independent_of_jitter() {
        let lossy = |jitter_ms: u64, seed: u64| {
            let p = params(|p| {
                p.loss = 0.3;
                p.delay = Duration::from_millis(5);
                p.jitter = Duration::from_millis(jitter_ms);
            });
            let mut s = Shaper::new(&p, seed, Direction::Down);
            (0..2000).map(|i| matches!(s.admit(i, 100), Verdict::Drop(DropCause::Loss))).collect::<Vec<_>>()
        };
        let a = lossy(0, 5);
        assert_eq!(a, lossy(3, 5));
        assert_ne!(a, lossy(0, 6));
        // 2000 draws at p = 0.3: mean 600, standard deviation sqrt(2000*0.3*0.7) = 20.5; five
        // standard deviations either side.
        let lost = a.iter().filter(|&&x| x).count();
        assert!((498..=702).contains(&lost), "{lost}");
    }
}
