//! The random parts of a load model, seeded and reproducible: the arrival schedule of the open
//! and partly-open models ([`ArrivalStream`], constant or Poisson, sharded over load threads),
//! think times ([`ThinkTime`]) and session lengths ([`SessionLength`]).
//!
//! The generator is the lab's own (`archlab-prng`, xoshiro256++ seeded through SplitMix64), so
//! that a seed names the same schedule forever, whatever crate versions come. Planned
//! times are absolute offsets from the run start accumulated in f64 seconds and rounded to
//! nanoseconds only when read, so rounding never accumulates and a late wake-up never shifts
//! the schedule (the gap oha has, see notes/load-generators.md §3). Sharding follows the
//! notes' design for distributed agents: every shard walks the same global stream and keeps
//! every k-th arrival, so the union of the shards is exactly the one-thread schedule whatever
//! the number of threads.

use crate::schedule::Intensity;
#[cfg(test)]
use crate::units::parse_duration;
use crate::units::{duration_of, format_duration, parse_seconds};
use archlab_prng::Xoshiro256pp;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The lab's seeded generator (`archlab-prng`): xoshiro256++ seeded through SplitMix64.
pub type Rng = Xoshiro256pp;

/// An independent stream of `seed` for one purpose (the schedule, think times of thread 3...).
pub fn stream(seed: u64, purpose: u64) -> Rng {
    Xoshiro256pp::keyed(seed, &[purpose])
}

/// Think time between a response and the next request of the same user or session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinkTime {
    Constant(Duration),
    Exponential { mean: Duration },
    Uniform { min: Duration, max: Duration },
}

impl Default for ThinkTime {
    fn default() -> Self {
        ThinkTime::Constant(Duration::ZERO)
    }
}

impl ThinkTime {
    pub fn mean(&self) -> Duration {
        match *self {
            ThinkTime::Constant(d) | ThinkTime::Exponential { mean: d } => d,
            ThinkTime::Uniform { min, max } => (min + max) / 2,
        }
    }

    pub fn is_zero(&self) -> bool {
        matches!(self, ThinkTime::Constant(d) if d.is_zero())
    }

    pub fn is_random(&self) -> bool {
        !matches!(self, ThinkTime::Constant(_))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            ThinkTime::Constant(_) => "constant",
            ThinkTime::Exponential { .. } => "exponential",
            ThinkTime::Uniform { .. } => "uniform",
        }
    }

    #[inline]
    pub fn sample_ns(&self, rng: &mut Rng) -> u64 {
        match *self {
            ThinkTime::Constant(d) => d.as_nanos() as u64,
            ThinkTime::Exponential { mean } => rng.exponential(mean.as_nanos() as f64) as u64,
            ThinkTime::Uniform { min, max } => {
                let (lo, hi) = (min.as_nanos() as u64, max.as_nanos() as u64);
                lo + ((hi - lo) as f64 * (1.0 - rng.uniform_open0())) as u64
            }
        }
    }
}

/// A think time as written, in seconds: the distribution (`constant`, `exponential`,
/// `uniform`) and its constant or mean (or minimum), and the uniform's maximum; each the exact
/// product of number and unit ([`parse_seconds`]), for a control plane that keeps seconds.
pub fn think_time_seconds(s: &str) -> Result<(&'static str, f64, Option<f64>), String> {
    let (kind, value) = s.split_once(':').unwrap_or(("constant", s));
    match kind {
        "constant" => Ok(("constant", parse_seconds(value)?, None)),
        "exp" | "exponential" => Ok(("exponential", parse_seconds(value)?, None)),
        "uniform" => {
            let (lo, hi) = value.split_once('-').ok_or_else(|| format!("{s:?}: uniform needs MIN-MAX"))?;
            Ok(("uniform", parse_seconds(lo)?, Some(parse_seconds(hi)?)))
        }
        other => Err(format!("{s:?}: unknown think-time distribution {other:?}")),
    }
}

/// Parses `5ms` (constant), `exp:5ms` (exponential, mean 5 ms), `uniform:2ms-8ms`.
impl FromStr for ThinkTime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, a, b) = think_time_seconds(s)?;
        let d = |seconds: f64| duration_of(seconds).ok_or_else(|| format!("{s:?}: a duration too long to represent"));
        Ok(match (kind, b) {
            ("uniform", Some(b)) => ThinkTime::Uniform { min: d(a)?, max: d(b)? },
            ("exponential", _) => ThinkTime::Exponential { mean: d(a)? },
            _ => ThinkTime::Constant(d(a)?),
        })
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThinkTime::Constant(d) => f.write_str(&format_duration(*d)),
            ThinkTime::Exponential { mean } => write!(f, "exp:{}", format_duration(*mean)),
            ThinkTime::Uniform { min, max } => write!(f, "uniform:{}-{}", format_duration(*min), format_duration(*max)),
        }
    }
}

/// Requests per session of the partly-open model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SessionLength {
    Fixed(u32),
    /// Geometric on {1, 2, ...} with this mean: after each request the user stays with
    /// probability 1 - 1/mean (Schroeder et al., NSDI'06, the partly-open model).
    Geometric {
        mean: f64,
    },
}

impl SessionLength {
    pub fn mean(&self) -> f64 {
        match *self {
            SessionLength::Fixed(n) => f64::from(n),
            SessionLength::Geometric { mean } => mean,
        }
    }

    pub fn sample(&self, rng: &mut Rng) -> u32 {
        match *self {
            SessionLength::Fixed(n) => n,
            SessionLength::Geometric { mean } => {
                // Inversion: N = 1 + floor(ln U / ln(1 - p)), p = 1/mean.
                let p = 1.0 / mean;
                if p >= 1.0 {
                    return 1;
                }
                let n = 1.0 + (rng.uniform_open0().ln() / (1.0 - p).ln()).floor();
                n.min(f64::from(u32::MAX)) as u32
            }
        }
    }
}

impl fmt::Display for SessionLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionLength::Fixed(n) => write!(f, "fixed:{n}"),
            SessionLength::Geometric { mean } => write!(f, "geometric:{mean}"),
        }
    }
}

/// Parses `fixed:5` (or `5`) and `geometric:4` (mean 4).
impl FromStr for SessionLength {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, value) = s.split_once(':').unwrap_or(("fixed", s));
        match kind {
            "fixed" => {
                value.trim().parse().map(SessionLength::Fixed).map_err(|_| format!("{s:?}: fixed needs an integer"))
            }
            "geometric" | "geo" => value
                .trim()
                .parse()
                .map(|mean| SessionLength::Geometric { mean })
                .map_err(|_| format!("{s:?}: geometric needs a mean, e.g. geometric:4")),
            other => Err(format!("{s:?}: unknown session length {other:?} (allowed: fixed:N, geometric:MEAN)")),
        }
    }
}

/// Spacing of planned arrivals (requests of the open model, sessions of the partly-open one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// Exactly 1/rate apart.
    Constant { rate_per_s: f64 },
    /// Exponential gaps of mean 1/rate: a Poisson process.
    Poisson { rate_per_s: f64 },
}

impl Arrivals {
    pub fn rate_per_s(&self) -> f64 {
        match *self {
            Arrivals::Constant { rate_per_s } | Arrivals::Poisson { rate_per_s } => rate_per_s,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Arrivals::Constant { .. } => "constant",
            Arrivals::Poisson { .. } => "poisson",
        }
    }
}

/// Planned arrival offsets (ns from the run start) of one shard of the global schedule.
#[derive(Clone, Debug)]
pub struct ArrivalStream {
    arrivals: Arrivals,
    rng: Rng,
    /// Global index of the next arrival this shard will yield.
    next_index: u64,
    /// Offset in seconds of global arrival `generated` (the last one drawn).
    offset_s: f64,
    generated: u64,
    shard: u64,
    shards: u64,
    /// A varying rate: unit-rate points mapped through the inverse cumulative intensity
    /// (`schedule.rs`); `None` for the constant rate of `arrivals`.
    intensity: Option<Arc<Intensity>>,
}

impl ArrivalStream {
    /// Shard `shard` of `shards`: global arrivals shard, shard + shards, ... The first global
    /// arrival is at offset 0.
    pub fn new(arrivals: Arrivals, seed: u64, shard: usize, shards: usize) -> ArrivalStream {
        assert!(shard < shards, "shard {shard} of {shards}");
        ArrivalStream {
            arrivals,
            rng: stream(seed, 0xa5a5),
            next_index: shard as u64,
            offset_s: 0.0,
            generated: 0,
            shard: shard as u64,
            shards: shards as u64,
            intensity: None,
        }
    }

    /// The same shard under a varying rate: the spacing (constant or Poisson) of `arrivals`
    /// applied to the unit-rate clock, mapped to time through Λ^-1 of `intensity`.
    pub fn with_intensity(mut self, intensity: Arc<Intensity>) -> ArrivalStream {
        self.intensity = Some(intensity);
        self
    }

    /// The planned offset (ns) of this shard's next arrival, and advance.
    pub fn next_offset_ns(&mut self) -> u64 {
        let k = self.next_index;
        self.next_index += self.shards;
        if let Some(intensity) = &self.intensity {
            let u = match self.arrivals {
                Arrivals::Constant { .. } => k as f64,
                Arrivals::Poisson { .. } => {
                    while self.generated < k {
                        self.offset_s += self.rng.exponential(1.0);
                        self.generated += 1;
                    }
                    self.offset_s
                }
            };
            // No arrival after the schedule's end.
            return intensity.inverse(u).map_or(u64::MAX, |s| (s * 1e9).round() as u64);
        }
        let s = match self.arrivals {
            Arrivals::Constant { rate_per_s } => k as f64 / rate_per_s,
            Arrivals::Poisson { rate_per_s } => {
                // Every shard draws every global gap so that shards agree on the stream.
                while self.generated < k {
                    self.offset_s += self.rng.exponential(1.0 / rate_per_s);
                    self.generated += 1;
                }
                self.offset_s
            }
        };
        (s * 1e9).round() as u64
    }

    pub fn shard(&self) -> (u64, u64) {
        (self.shard, self.shards)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(a: Arrivals, seed: u64, shard: usize, shards: usize, n: usize) -> Vec<u64> {
        let mut s = ArrivalStream::new(a, seed, shard, shards);
        (0..n).map(|_| s.next_offset_ns()).collect()
    }

    /// Kolmogorov-Smirnov statistic of a sample against the exponential CDF of rate `rate`.
    fn ks_exponential(mut xs: Vec<f64>, rate: f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = 1.0 - (-rate * x).exp();
                (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn poisson_gaps_pass_a_kolmogorov_smirnov_test() {
        let rate = 10_000.0;
        let n = 20_000;
        let o = offsets(Arrivals::Poisson { rate_per_s: rate }, 42, 0, 1, n + 1);
        let gaps: Vec<f64> = o.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e9).collect();
        let d = ks_exponential(gaps.clone(), rate);
        // Asymptotic KS critical value at alpha = 0.001: sqrt(-ln(alpha/2) / 2) / sqrt(n)
        // (Smirnov's limiting distribution; accurate for n this large).
        let alpha: f64 = 0.001;
        let critical = (-(alpha / 2.0).ln() / 2.0).sqrt() / (n as f64).sqrt();
        assert!(d < critical, "D = {d}, critical {critical}");
        // And it is not a vacuous test: constant gaps, or gaps of the wrong rate, fail it.
        assert!(ks_exponential(vec![1.0 / rate; n], rate) > critical);
        assert!(ks_exponential(gaps, rate * 1.1) > critical);
        // Mean gap within 4 standard errors (exponential: sd = mean).
        let mean = o[n] as f64 / 1e9 / n as f64;
        assert!((mean - 1.0 / rate).abs() < 4.0 / rate / (n as f64).sqrt(), "{mean}");
    }

    #[test]
    fn same_seed_same_schedule_and_shards_partition_it() {
        let a = Arrivals::Poisson { rate_per_s: 1000.0 };
        let whole = offsets(a, 7, 0, 1, 300);
        assert_eq!(whole, offsets(a, 7, 0, 1, 300));
        assert_ne!(whole, offsets(a, 8, 0, 1, 300));
        let mut merged: Vec<u64> = (0..3).flat_map(|s| offsets(a, 7, s, 3, 100)).collect();
        merged.sort_unstable();
        assert_eq!(merged, whole);
        assert_eq!(whole[0], 0);
        // Constant spacing is exact and never drifts.
        let c = offsets(Arrivals::Constant { rate_per_s: 3.0 }, 0, 1, 2, 3);
        assert_eq!(c, [333_333_333, 1_000_000_000, 1_666_666_667]);
    }

    #[test]
    fn think_times_and_session_lengths_have_their_means() {
        let mut rng = Rng::new(1);
        let n = 50_000;
        let exp = ThinkTime::Exponential { mean: Duration::from_millis(2) };
        let mean = (0..n).map(|_| exp.sample_ns(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!((mean - 2e6).abs() < 4.0 * 2e6 / (n as f64).sqrt(), "{mean}");
        let uni = ThinkTime::Uniform { min: Duration::from_millis(1), max: Duration::from_millis(3) };
        let xs: Vec<u64> = (0..n).map(|_| uni.sample_ns(&mut rng)).collect();
        assert!(xs.iter().all(|&x| (1_000_000..=3_000_000).contains(&x)));
        let geo = SessionLength::Geometric { mean: 4.0 };
        let ks: Vec<u32> = (0..n).map(|_| geo.sample(&mut rng)).collect();
        assert!(ks.iter().all(|&k| k >= 1));
        let mean = ks.iter().map(|&k| f64::from(k)).sum::<f64>() / n as f64;
        // Geometric(p = 1/4): sd = sqrt(1 - p) / p = 3.46.
        assert!((mean - 4.0).abs() < 4.0 * 3.47 / (n as f64).sqrt(), "{mean}");
        // P(N = 1) = p.
        let ones = ks.iter().filter(|&&k| k == 1).count() as f64 / n as f64;
        assert!((ones - 0.25).abs() < 0.01, "{ones}");
        assert_eq!(SessionLength::Fixed(3).sample(&mut rng), 3);
    }

    #[test]
    fn text_forms_parse() {
        assert_eq!("5ms".parse(), Ok(ThinkTime::Constant(Duration::from_millis(5))));
        assert_eq!("exp:2ms".parse(), Ok(ThinkTime::Exponential { mean: Duration::from_millis(2) }));
        assert_eq!(
            "uniform:1ms-3ms".parse(),
            Ok(ThinkTime::Uniform { min: Duration::from_millis(1), max: Duration::from_millis(3) })
        );
        assert!("gauss:1ms".parse::<ThinkTime>().unwrap_err().contains("gauss"));
        assert_eq!("geometric:4".parse(), Ok(SessionLength::Geometric { mean: 4.0 }));
        assert_eq!("7".parse(), Ok(SessionLength::Fixed(7)));
        assert!("zipf:2".parse::<SessionLength>().is_err());
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("3h").unwrap_err().contains("unknown unit"));
    }
}
