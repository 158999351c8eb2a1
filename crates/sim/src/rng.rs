//! Random streams. Every entity draws from its own stream (a client's think times, a station's
//! service times, a routing site's choices), so a run's randomness does not depend on the order
//! in which events happen to interleave, and two configurations that share an entity share its
//! draws (common random numbers). Streams are xoshiro256++ generators whose 256-bit states come
//! from hashing (seed, replication, purpose, index) through SplitMix64, the seeding procedure the
//! xoshiro authors recommend. The generator is written here, not taken from a crate, so that a
//! dependency upgrade can never change the numbers a seed produces.

/// What a stream is used for; part of the key that selects the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    /// Think times of one client (index = source, client).
    Think = 1,
    /// Inter-arrival times of an open source or session source.
    Arrival = 2,
    /// Service times drawn at one station.
    Service = 3,
    /// Choices of one routing, repeat or balancing site.
    Routing = 4,
    /// Session lengths of a partly-open source.
    Session = 5,
}

/// SplitMix64 step: a bijective mixer with good avalanche, used only to derive seeds.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A xoshiro256++ generator (Blackman and Vigna 2019): period 2^256 - 1, 32 bytes of state.
#[derive(Clone, Debug)]
pub struct Stream {
    s: [u64; 4],
}

impl Stream {
    /// The stream selected by `(seed, replication, purpose, a, b)`; distinct keys give
    /// statistically independent streams.
    pub fn new(seed: u64, replication: u64, purpose: Purpose, a: u64, b: u64) -> Self {
        // Absorb the key word by word: each word is mixed into the running state, so keys that
        // differ in any word give unrelated states.
        let mut h = seed;
        for word in [replication, purpose as u64, a, b] {
            h = splitmix64(&mut h) ^ word;
        }
        let mut sm = h;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        // An all-zero state is the one fixed point of xoshiro; SplitMix64 outputs cannot all be
        // zero for consecutive states, but keep the guard explicit.
        debug_assert!(s.iter().any(|&w| w != 0));
        Self { s }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform on (0, 1]: never 0, so that `-ln(u)` is finite.
    #[inline]
    pub fn uniform_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform on [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in 0..n (n > 0), by Lemire's multiply-shift (bias below 2^-64 * n).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A standard normal variate (Marsaglia's polar method; the second variate is discarded
    /// so that the stream's state is the only state).
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_numbers_and_different_keys_differ() {
        let mut a = Stream::new(42, 0, Purpose::Service, 3, 0);
        let mut b = Stream::new(42, 0, Purpose::Service, 3, 0);
        let mut c = Stream::new(42, 1, Purpose::Service, 3, 0);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn uniform_moments() {
        // Mean 1/2 and variance 1/12; with n = 10^6 the standard error of the mean is
        // sqrt(1/12 / 10^6) = 2.9e-4, so 5 standard errors is 1.5e-3.
        let mut s = Stream::new(7, 0, Purpose::Think, 0, 0);
        let n = 1_000_000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..n {
            let u = s.uniform_open0();
            assert!(u > 0.0 && u <= 1.0);
            sum += u;
            sq += u * u;
        }
        let mean = sum / n as f64;
        assert!((mean - 0.5).abs() < 1.5e-3, "{mean}");
        assert!((sq / n as f64 - mean * mean - 1.0 / 12.0).abs() < 1e-3);
    }
}
