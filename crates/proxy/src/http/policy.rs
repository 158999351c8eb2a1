//! Picking a backend for a request ([`Balancer::pick`]), under each [`Policy`], among the
//! healthy backends and never the one a retry is moving away from.
//!
//! Shared by every thread: round-robin positions are one atomic counter, loads are the
//! backends' in-flight counts, random draws come from the calling thread's own generator. No
//! policy takes a lock.
//!
//! * round-robin: request i goes to healthy backend i mod n (exact while all are healthy);
//! * weighted round-robin: a fixed schedule of length sum(weights) in which each backend
//!   appears as often as its weight, spread as nginx's smooth weighted round-robin spreads it
//!   (weights 5, 1, 1 give a a b a c a a), walked by the same counter;
//! * random: uniform over the healthy backends;
//! * least requests: fewest in flight, ties broken in turn so that idle backends share;
//! * p2c: two distinct healthy backends drawn uniformly, the one with fewer in flight
//!   (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing", IEEE TPDS 2001);
//! * consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, "Consistent
//!   Hashing with Bounded Loads", SODA 2018): each backend owns `POINTS_PER_WEIGHT` x weight
//!   points of a 64-bit ring; a key goes to the owner of the first point at or after its hash,
//!   unless that backend already has its capacity in flight, ceil(c x (m + 1) x w / W) for m
//!   requests in flight over the healthy backends of total weight W, in which case it goes on
//!   clockwise to the first backend under its capacity. The capacities sum to more than m, so
//!   one is always found; adding a backend moves only the keys whose points it takes.

use crate::http::backend::Backend;
use crate::http::options::Policy;
use archlab_prng::Xoshiro256pp;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Ring points per unit of weight (ketama's 160 per server, as nginx's `hash ... consistent`).
pub const POINTS_PER_WEIGHT: usize = 160;

pub struct Balancer {
    policy: Policy,
    backends: Vec<Arc<Backend>>,
    next: AtomicUsize,
    /// Weighted round-robin: backend indices in schedule order.
    schedule: Vec<usize>,
    /// Consistent hashing: (point, backend index), sorted by point.
    ring: Vec<(u64, usize)>,
    /// Consistent hashing's load factor c >= 1.
    balance: f64,
}

impl Balancer {
    pub fn new(policy: Policy, backends: Vec<Arc<Backend>>, balance: f64) -> Balancer {
        let weights: Vec<u32> = backends.iter().map(|b| b.weight).collect();
        let schedule = if policy == Policy::WeightedRoundRobin { smooth_schedule(&weights) } else { Vec::new() };
        let ring = if policy == Policy::ConsistentHash { ring(&backends) } else { Vec::new() };
        Balancer { policy, backends, next: AtomicUsize::new(0), schedule, ring, balance }
    }

    pub fn backends(&self) -> &[Arc<Backend>] {
        &self.backends
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    fn eligible(&self, i: usize, exclude: Option<usize>) -> bool {
        Some(i) != exclude && self.backends[i].healthy()
    }

    /// The backend for a request whose key hashes to `key_hash` (consistent hashing only),
    /// drawing from `rng` (random, p2c); `exclude` is a backend that just failed this request.
    /// None when no healthy backend is left.
    pub fn pick(&self, key_hash: u64, rng: &mut Xoshiro256pp, exclude: Option<usize>) -> Option<usize> {
        let n = self.backends.len();
        match self.policy {
            Policy::RoundRobin => {
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n).map(|i| (start + i) % n).find(|&i| self.eligible(i, exclude))
            }
            Policy::WeightedRoundRobin => {
                let len = self.schedule.len();
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..len).map(|i| self.schedule[(start + i) % len]).find(|&i| self.eligible(i, exclude))
            }
            Policy::Random => {
                let healthy = (0..n).filter(|&i| self.eligible(i, exclude)).count();
                (healthy > 0).then(|| self.nth_eligible(rng.below(healthy), exclude))
            }
            Policy::LeastRequests => {
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                (0..n)
                    .map(|i| (start + i) % n)
                    .filter(|&i| self.eligible(i, exclude))
                    .min_by_key(|&i| self.backends[i].in_flight())
            }
            Policy::P2c => {
                let healthy = (0..n).filter(|&i| self.eligible(i, exclude)).count();
                match healthy {
                    0 => None,
                    1 => Some(self.nth_eligible(0, exclude)),
                    _ => {
                        let a = rng.below(healthy);
                        // A second draw among the others: distinct from the first.
                        let b = (a + 1 + rng.below(healthy - 1)) % healthy;
                        let (a, b) = (self.nth_eligible(a, exclude), self.nth_eligible(b, exclude));
                        Some(if self.backends[b].in_flight() < self.backends[a].in_flight() { b } else { a })
                    }
                }
            }
            Policy::ConsistentHash => self.bounded_owner(key_hash, exclude),
        }
    }

    /// The `k`-th eligible backend in list order.
    fn nth_eligible(&self, k: usize, exclude: Option<usize>) -> usize {
        (0..self.backends.len()).filter(|&i| self.eligible(i, exclude)).nth(k).expect("k < number of eligible backends")
    }

    fn bounded_owner(&self, key_hash: u64, exclude: Option<usize>) -> Option<usize> {
        let (mut in_flight, mut weight) = (0usize, 0u64);
        for (i, b) in self.backends.iter().enumerate() {
            if self.eligible(i, exclude) {
                in_flight += b.in_flight();
                weight += u64::from(b.weight);
            }
        }
        if weight == 0 {
            return None;
        }
        let demand = self.balance * (in_flight + 1) as f64 / weight as f64;
        let capacity = |i: usize| (demand * f64::from(self.backends[i].weight)).ceil() as usize;
        let start = self.ring.partition_point(|&(point, _)| point < key_hash);
        let len = self.ring.len();
        (0..len)
            .map(|k| self.ring[(start + k) % len].1)
            .find(|&i| self.eligible(i, exclude) && self.backends[i].in_flight() < capacity(i))
    }
}

/// The owner of `key_hash` on a ring of these backends with no load (for tests and docs).
pub fn ring_owner(backends: &[Arc<Backend>], key_hash: u64) -> usize {
    let r = ring(backends);
    let at = r.partition_point(|&(p, _)| p < key_hash) % r.len();
    r[at].1
}

fn ring(backends: &[Arc<Backend>]) -> Vec<(u64, usize)> {
    let mut points = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        for k in 0..POINTS_PER_WEIGHT * b.weight as usize {
            points.push((hash_bytes(format!("{}#{k}", b.addr).as_bytes()), i));
        }
    }
    points.sort_unstable();
    points
}

/// nginx's smooth weighted round-robin, unrolled into one period: each step every backend's
/// current weight grows by its weight, the largest is chosen and loses the total.
fn smooth_schedule(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut schedule = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &w) in current.iter_mut().zip(weights) {
            *c += i64::from(w);
        }
        let best = (0..weights.len()).max_by_key(|&i| (current[i], std::cmp::Reverse(i))).expect("a backend");
        current[best] -= total;
        schedule.push(best);
    }
    schedule
}

/// FNV-1a over the bytes, then SplitMix64's finaliser so that close keys spread over the ring.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut z = h;
    archlab_prng::splitmix64(&mut z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::backend::InFlight;

    fn backends(n: usize) -> Vec<Arc<Backend>> {
        (0..n).map(|i| Arc::new(Backend::new(format!("127.0.0.1:{}", 9000 + i).parse().unwrap(), 1, i))).collect()
    }

    #[test]
    fn round_robin_is_exact_and_skips_the_ejected() {
        let b = backends(3);
        let lb = Balancer::new(Policy::RoundRobin, b.clone(), 1.25);
        let mut rng = Xoshiro256pp::new(1);
        let picks: Vec<usize> = (0..9).map(|_| lb.pick(0, &mut rng, None).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
        b[1].eject();
        assert!((0..30).all(|_| lb.pick(0, &mut rng, None).unwrap() != 1));
        assert_ne!(lb.pick(0, &mut rng, Some(0)), Some(0));
        b[0].eject();
        b[2].eject();
        assert_eq!(lb.pick(0, &mut rng, None), None);
    }

    #[test]
    fn weighted_round_robin_spreads_like_nginx() {
        // nginx's documentation of `upstream`: weights 5, 1, 1 -> "each 7 requests will be
        // distributed as follows: 5 requests go to backend1.example.com and one request to
        // each of the second and third servers"; the smooth order is a a b a c a a.
        assert_eq!(smooth_schedule(&[5, 1, 1]), [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn p2c_and_least_requests_avoid_the_loaded_backend() {
        let b = backends(2);
        let held: Vec<InFlight> = (0..5).map(|_| b[0].start()).collect();
        let mut rng = Xoshiro256pp::new(7);
        for policy in [Policy::P2c, Policy::LeastRequests] {
            let lb = Balancer::new(policy, b.clone(), 1.25);
            assert!((0..100).all(|_| lb.pick(0, &mut rng, None) == Some(1)), "{policy:?}");
        }
        drop(held);
    }

    #[test]
    fn consistent_hashing_moves_only_keys_to_a_new_backend() {
        let keys: Vec<u64> = (0..20_000).map(|k| hash_bytes(format!("/item/{k}").as_bytes())).collect();
        let three = backends(3);
        let mut four = three.clone();
        four.push(Arc::new(Backend::new("127.0.0.1:9003".parse().unwrap(), 1, 3)));
        let lb3 = Balancer::new(Policy::ConsistentHash, three, 1.25);
        let lb4 = Balancer::new(Policy::ConsistentHash, four, 1.25);
        let mut rng = Xoshiro256pp::new(1);
        let mut moved = 0;
        for &k in &keys {
            let (a, b) = (lb3.pick(k, &mut rng, None).unwrap(), lb4.pick(k, &mut rng, None).unwrap());
            if a != b {
                assert_eq!(b, 3, "a key moved between old backends");
                moved += 1;
            }
        }
        // The new backend takes about a quarter of the keys. With 160 points per backend the
        // share of the ring a backend owns has a standard deviation of about 1/sqrt(160) of
        // its mean (Karger et al. 1997; ketama's reason for 160 points): 0.25 +- 0.02, so
        // 0.15..0.35 is five standard deviations either way.
        let share = moved as f64 / keys.len() as f64;
        assert!((0.15..0.35).contains(&share), "moved share {share}");
    }

    #[test]
    fn consistent_hashing_respects_the_load_bound() {
        let b = backends(4);
        let lb = Balancer::new(Policy::ConsistentHash, b.clone(), 1.25);
        let mut rng = Xoshiro256pp::new(1);
        let hot = hash_bytes(b"/hot");
        let owner = ring_owner(&b, hot);
        let mut held = Vec::new();
        for m in 0..200usize {
            let i = lb.pick(hot, &mut rng, None).unwrap();
            // Capacity for the (m+1)-th request in flight: ceil(1.25 (m + 1) / 4).
            let cap = (1.25 * (m + 1) as f64 / 4.0).ceil() as usize;
            assert!(b[i].in_flight() < cap, "request {m}: backend {i} has {} in flight, cap {cap}", b[i].in_flight());
            held.push(b[i].start());
        }
        // The hot key's owner took its share and no more; every backend got some.
        let max = (1.25 * 200.0 / 4.0_f64).ceil() as usize;
        assert!(b.iter().all(|x| x.in_flight() <= max && x.in_flight() > 0));
        assert!(b[owner].in_flight() >= max - 1);
    }
}
