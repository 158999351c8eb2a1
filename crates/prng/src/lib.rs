//! The lab's one seeded random generator: xoshiro256++ (Blackman and Vigna 2019), with its
//! 256-bit state expanded from a 64-bit seed by SplitMix64, the seeding procedure the
//! xoshiro authors recommend. The load generator draws its arrival schedules and think times
//! from it and the simulator its service times and routing choices.
//!
//! It is written here rather than taken from a crate so that a seed names the same numbers
//! forever: a crate's "standard" generator may change between versions, which would make a
//! stored run or a published simulation impossible to replay.

/// SplitMix64 step: a bijective mixer with good avalanche, used only to derive states.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A xoshiro256++ generator: period 2^256 - 1, 32 bytes of state.
#[derive(Clone, Debug)]
pub struct Xoshiro256pp {
    s: [u64; 4],
}

impl Xoshiro256pp {
    /// The generator whose state is four SplitMix64 outputs from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        // All-zero is xoshiro's one fixed point; consecutive SplitMix64 outputs are never all 0.
        debug_assert!(s.iter().any(|&w| w != 0));
        Xoshiro256pp { s }
    }

    /// An independent stream selected by `seed` and a key (replication, purpose, index, ...):
    /// each key word is absorbed through SplitMix64, so keys that differ in any word give
    /// unrelated states.
    pub fn keyed(seed: u64, key: &[u64]) -> Self {
        let mut h = seed;
        for &word in key {
            h = splitmix64(&mut h) ^ word;
        }
        Xoshiro256pp::new(h)
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

    /// Exponential with the given mean (inversion).
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -self.uniform_open0().ln() * mean
    }

    /// A standard normal variate (Marsaglia's polar method; the second variate is discarded
    /// so that the generator's state is the only state).
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
    fn matches_the_reference_implementation() {
        // First outputs of xoshiro256++ from the state {1, 2, 3, 4}, as computed by the
        // authors' reference C code (prng.di.unimi.it/xoshiro256plusplus.c).
        let mut g = Xoshiro256pp { s: [1, 2, 3, 4] };
        assert_eq!(g.next_u64(), 41943041);
        assert_eq!(g.next_u64(), 58720359);
        assert_eq!(g.next_u64(), 3588806011781223);
    }

    #[test]
    fn splitmix64_matches_the_reference() {
        // SplitMix64 from state 0: first output 0xE220A8397B1DCDAF (Steele, Lea and Flood 2014;
        // the value quoted with the reference code at prng.di.unimi.it/splitmix64.c).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn same_key_same_numbers_and_different_keys_differ() {
        let draw = |g: &mut Xoshiro256pp| (0..8).map(|_| g.next_u64()).collect::<Vec<_>>();
        let a = draw(&mut Xoshiro256pp::keyed(42, &[0, 3, 3, 0]));
        let b = draw(&mut Xoshiro256pp::keyed(42, &[0, 3, 3, 0]));
        let c = draw(&mut Xoshiro256pp::keyed(42, &[1, 3, 3, 0]));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn uniform_and_exponential_moments() {
        // Uniform: mean 1/2, variance 1/12; with n = 10^6 the standard error of the mean is
        // 2.9e-4, so 5 standard errors is 1.5e-3. Exponential(mean 2): standard error of the
        // mean 2/sqrt(n) = 2e-3, 5 standard errors = 1e-2.
        let mut g = Xoshiro256pp::new(7);
        let n = 1_000_000;
        let (mut sum, mut sq, mut exp_sum) = (0.0, 0.0, 0.0);
        for _ in 0..n {
            let u = g.uniform_open0();
            assert!(u > 0.0 && u <= 1.0);
            sum += u;
            sq += u * u;
            exp_sum += g.exponential(2.0);
        }
        let mean = sum / n as f64;
        assert!((mean - 0.5).abs() < 1.5e-3, "{mean}");
        assert!((sq / n as f64 - mean * mean - 1.0 / 12.0).abs() < 1e-3);
        assert!((exp_sum / n as f64 - 2.0).abs() < 1e-2);
    }
}
