//! Key indices of the memcached workload, memtier_benchmark's `--key-pattern` (notes/
//! load-generators.md §4.3): R uniform over [min, max], S sequential (one iterator per
//! connection and command, wrapping), G gaussian (memtier's truncation: draws outside
//! [min, max + 1) are redrawn and the value is floored, so the range edges get no extra mass),
//! P parallel (connection c of C walks its own contiguous slice of the range, so the
//! connections together touch every key once per pass and never the same one) and Z Zipf
//! (rank r = index - min + 1 drawn with probability proportional to r^-s).
//!
//! Zipf is drawn by rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion
//! to generate variates from monotone discrete distributions", ACM TOMACS 6(3), 1996): exact
//! for any exponent s > 0, O(1) expected time and no table, so a range of 10^7 keys costs no
//! memory per connection (a CDF table would cost 80 MB).

use crate::dist::Rng;
use std::fmt;
use std::str::FromStr;

/// How keys are drawn for one command (memtier `--key-pattern SET:GET`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyPattern {
    /// R: uniform over [min, max].
    Random,
    /// S: each connection walks min..=max on its own iterator and wraps.
    Sequential,
    /// G: normal around `median` with `stddev` (memtier: centre and range/6), truncated.
    Gaussian,
    /// P: connection c of C walks its own slice of the range and wraps within it.
    Parallel,
    /// Z: Zipf over the ranks of the range with the workload's exponent (`key_zipf_exp`).
    Zipf,
}

impl KeyPattern {
    pub(crate) fn letter(self) -> char {
        match self {
            KeyPattern::Random => 'R',
            KeyPattern::Sequential => 'S',
            KeyPattern::Gaussian => 'G',
            KeyPattern::Parallel => 'P',
            KeyPattern::Zipf => 'Z',
        }
    }

    fn parse(s: &str) -> Result<KeyPattern, String> {
        match s {
            "R" => Ok(KeyPattern::Random),
            "S" => Ok(KeyPattern::Sequential),
            "G" => Ok(KeyPattern::Gaussian),
            "P" => Ok(KeyPattern::Parallel),
            "Z" => Ok(KeyPattern::Zipf),
            _ => Err(format!("unknown key pattern {s:?} (expected R, S, G, P or Z)")),
        }
    }

    /// Whether draws use the random stream (so that a seed means something).
    pub fn is_random(self) -> bool {
        matches!(self, KeyPattern::Random | KeyPattern::Gaussian | KeyPattern::Zipf)
    }
}

/// `--key-pattern SET:GET`, e.g. `R:R` (memtier's default), `S:G`, `P:P`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyPatterns {
    pub set: KeyPattern,
    pub get: KeyPattern,
}

impl FromStr for KeyPatterns {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, b) = s.split_once(':').ok_or_else(|| format!("expected SET:GET, e.g. R:R, got {s:?}"))?;
        let p = KeyPatterns { set: KeyPattern::parse(a)?, get: KeyPattern::parse(b)? };
        // memtier: P splits the range between the connections for loading every key once;
        // it means that only when both commands use it.
        if (p.set == KeyPattern::Parallel) != (p.get == KeyPattern::Parallel) {
            return Err(format!("{s:?}: P must be used for both commands (P:P), as in memtier"));
        }
        Ok(p)
    }
}

impl fmt::Display for KeyPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.set.letter(), self.get.letter())
    }
}

/// Slice `c` of `n` of [min, max]: contiguous, disjoint, covering the range, sizes differ by at
/// most one. Needs n <= max - min + 1 (every slice non-empty).
pub fn parallel_slice(min: u64, max: u64, c: u64, n: u64) -> (u64, u64) {
    let len = u128::from(max - min) + 1;
    let lo = min + (len * u128::from(c) / u128::from(n)) as u64;
    let hi = min + (len * u128::from(c + 1) / u128::from(n)) as u64 - 1;
    (lo, hi)
}

/// Gaussian key as memtier draws it: redraw outside [min, max + 1), then floor.
pub fn gaussian_key(rng: &mut Rng, min: u64, max: u64, median: f64, stddev: f64) -> u64 {
    if min == max || stddev == 0.0 {
        return (median.floor().clamp(min as f64, max as f64)) as u64;
    }
    let (lo, hi) = (min as f64, max as f64 + 1.0);
    loop {
        let x = median + stddev * rng.normal();
        if x >= lo && x < hi {
            return (x.floor() as u64).min(max);
        }
    }
}

/// Zipf sampler over ranks 1..=n with P(r) proportional to r^-s (rejection-inversion,
/// Hörmann & Derflinger 1996, with the hat H the integral of h(x) = x^-s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    squeeze: f64,
}

/// (e^x - 1) / x, continuous at 0.
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x / 2.0
    }
}

/// ln(1 + x) / x, continuous at 0.
fn ln1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x / 2.0
    }
}

impl Zipf {
    /// Ranks 1..=n, exponent s > 0.
    pub fn new(n: u64, s: f64) -> Zipf {
        assert!(n >= 1 && s > 0.0 && s.is_finite(), "Zipf({n}, {s})");
        let mut z = Zipf { n: n as f64, s, h_x1: 0.0, h_n: 0.0, squeeze: 0.0 };
        z.h_x1 = z.big_h(1.5) - 1.0;
        z.h_n = z.big_h(z.n + 0.5);
        z.squeeze = 2.0 - z.big_h_inv(z.big_h(2.5) - z.h(2.0));
        z
    }

    /// h(x) = x^-s.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// H(x) = (x^(1-s) - 1) / (1 - s), ln x at s = 1: an antiderivative of h.
    fn big_h(&self, x: f64) -> f64 {
        let l = x.ln();
        expm1_over_x((1.0 - self.s) * l) * l
    }

    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (y * (1.0 - self.s)).max(-1.0);
        (ln1p_over_x(t) * y).exp()
    }

    /// A rank in 1..=n.
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.uniform() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            // Accept at once inside the squeeze, else compare with the exact mass.
            if k - x <= self.squeeze || u >= self.big_h(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pearson's chi-squared statistic of observed counts against expected ones.
    fn chi_squared(observed: &[u64], expected: &[f64]) -> f64 {
        observed.iter().zip(expected).map(|(&o, &e)| (o as f64 - e).powi(2) / e).sum()
    }

    /// Upper alpha = 0.001 critical value of chi-squared with k degrees of freedom, by the
    /// Wilson-Hilferty cube-root approximation (Johnson, Kotz & Balakrishnan, Continuous
    /// Univariate Distributions vol. 1, 2nd ed., eq. 18.24), z_0.999 = 3.0902; within 1 % of the
    /// tabulated values for k >= 10 (e.g. k = 99: 148.23 vs table 148.23).
    fn critical_0001(k: f64) -> f64 {
        let z = 3.0902;
        k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
    }

    /// Standard normal CDF by composite Simpson integration of the density from -12 (the
    /// mass below is < 1e-32), 4000 panels: error far below what a chi-squared test sees.
    fn phi(x: f64) -> f64 {
        let (a, n) = (-12.0, 4000);
        if x <= a {
            return 0.0;
        }
        let h = (x - a) / n as f64;
        let f = |t: f64| (-t * t / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let inner: f64 = (1..n).map(|i| f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 }).sum();
        (f(a) + f(x) + inner) * h / 3.0
    }

    #[test]
    fn normal_cdf_matches_tabulated_values() {
        // Abramowitz & Stegun, Table 26.1: Phi(1) = 0.8413447461, Phi(1.96) = 0.9750021049.
        assert!((phi(1.0) - 0.841_344_746_1).abs() < 1e-8);
        assert!((phi(1.96) - 0.975_002_104_9).abs() < 1e-8);
        assert!((phi(-1.0) - 0.158_655_253_9).abs() < 1e-8);
    }

    #[test]
    fn zipf_passes_chi_squared_against_its_mass_function() {
        let n = 100u64;
        for s in [0.5, 1.0, 1.5] {
            let z = Zipf::new(n, s);
            let mut rng = Rng::new(2024);
            let draws = 200_000;
            let mut counts = vec![0u64; n as usize];
            for _ in 0..draws {
                let r = z.sample(&mut rng);
                assert!((1..=n).contains(&r));
                counts[r as usize - 1] += 1;
            }
            let norm: f64 = (1..=n).map(|r| (r as f64).powf(-s)).sum();
            let expected: Vec<f64> = (1..=n).map(|r| draws as f64 * (r as f64).powf(-s) / norm).collect();
            let chi = chi_squared(&counts, &expected);
            let crit = critical_0001((n - 1) as f64);
            assert!(chi < crit, "s {s}: chi2 {chi:.1} >= {crit:.1}");
            // Not vacuous: the same counts against a neighbouring exponent fail.
            let norm2: f64 = (1..=n).map(|r| (r as f64).powf(-(s + 0.1))).sum();
            let wrong: Vec<f64> = (1..=n).map(|r| draws as f64 * (r as f64).powf(-(s + 0.1)) / norm2).collect();
            assert!(chi_squared(&counts, &wrong) > crit, "s {s}");
        }
    }

    #[test]
    fn gaussian_keys_pass_chi_squared_against_the_truncated_normal() {
        // Keys 0..=49, memtier's defaults: median = len/2 + min + 0.5, stddev = len/6.
        let (min, max) = (0u64, 49u64);
        let len = (max - min) as f64;
        let (median, sd) = (len / 2.0 + min as f64 + 0.5, len / 6.0);
        let mut rng = Rng::new(99);
        let draws = 200_000;
        let mut counts = vec![0u64; (max - min + 1) as usize];
        for _ in 0..draws {
            counts[(gaussian_key(&mut rng, min, max, median, sd) - min) as usize] += 1;
        }
        // P(key = k) = (Phi((k+1-m)/sd) - Phi((k-m)/sd)) / (Phi((max+1-m)/sd) - Phi((min-m)/sd)).
        let cdf = |x: f64| phi((x - median) / sd);
        let mass = cdf(max as f64 + 1.0) - cdf(min as f64);
        let expected: Vec<f64> =
            (min..=max).map(|k| draws as f64 * (cdf(k as f64 + 1.0) - cdf(k as f64)) / mass).collect();
        // Pool the sparse tails (expected < 5) into their neighbours, as Pearson's test needs.
        let (mut obs, mut exp) = (Vec::new(), Vec::new());
        let (mut o_acc, mut e_acc) = (0u64, 0.0);
        for (o, e) in counts.iter().zip(&expected) {
            o_acc += o;
            e_acc += e;
            if e_acc >= 5.0 {
                obs.push(o_acc);
                exp.push(e_acc);
                (o_acc, e_acc) = (0, 0.0);
            }
        }
        *obs.last_mut().unwrap() += o_acc;
        *exp.last_mut().unwrap() += e_acc;
        let chi = chi_squared(&obs, &exp);
        let crit = critical_0001((obs.len() - 1) as f64);
        assert!(chi < crit, "chi2 {chi:.1} >= {crit:.1}");
        // The old clamp-to-the-edges draw would pile mass on 0 and 49; this one does not.
        assert!((counts[0] as f64) < 3.0 * expected[0] + 10.0, "{counts:?}");
    }

    #[test]
    fn uniform_keys_pass_chi_squared() {
        let mut rng = Rng::new(5);
        let (min, max) = (10u64, 59u64);
        let draws = 100_000;
        let mut counts = vec![0u64; 50];
        for _ in 0..draws {
            // The draw of the R pattern (protocol/memcached.rs).
            counts[(min + rng.next_u64() % (max - min + 1) - min) as usize] += 1;
        }
        let expected = vec![draws as f64 / 50.0; 50];
        assert!(chi_squared(&counts, &expected) < critical_0001(49.0));
    }

    #[test]
    fn parallel_slices_are_disjoint_and_cover_the_range() {
        for (min, max, n) in [(0u64, 9u64, 3u64), (5, 1004, 7), (0, 15, 16), (3, 3, 1)] {
            let slices: Vec<(u64, u64)> = (0..n).map(|c| parallel_slice(min, max, c, n)).collect();
            assert_eq!(slices[0].0, min);
            assert_eq!(slices.last().unwrap().1, max);
            for w in slices.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0, "{slices:?}");
            }
            let sizes: Vec<u64> = slices.iter().map(|(a, b)| b - a + 1).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
        }
    }

    #[test]
    fn patterns_parse() {
        assert_eq!("Z:R".parse::<KeyPatterns>().unwrap().to_string(), "Z:R");
        assert_eq!("P:P".parse::<KeyPatterns>().unwrap().to_string(), "P:P");
        assert!("P:R".parse::<KeyPatterns>().unwrap_err().contains("P:P"));
        assert!("X:R".parse::<KeyPatterns>().unwrap_err().contains("R, S, G, P or Z"));
    }
}
