//! Rates and user counts that change inside one run: a [`Profile`] is a list of segments,
//! each held (`1000@10s`) or linear (`1000-5000@30s`), laid over the measurement window; the
//! warm-up holds the first segment's starting value. An open or partly-open run turns a rate
//! profile into an [`Intensity`] λ(t) whose arrivals `dist::ArrivalStream` draws; a closed
//! run turns a user profile into the times at which users start and stop ([`user_changes`]).
//!
//! Poisson arrivals under a varying rate are drawn by inverting the cumulative intensity
//! Λ(t) = ∫λ: if E_1 < E_2 < ... are the points of a unit-rate Poisson process (sums of
//! Exp(1) gaps), then Λ^-1(E_k) are the points of a Poisson process of intensity λ (the time
//! change theorem; Çinlar, Introduction to Stochastic Processes, 1975, §4.7). Inversion is
//! chosen over thinning (Lewis & Shedler 1979) because it uses exactly one uniform draw per
//! arrival, so arrival k of a seed stays the same whatever the threads (the sharding of
//! `dist.rs` needs that), it needs no bound on λ and wastes no draws, and Λ^-1 has a closed
//! form here: λ is piecewise linear, so Λ is piecewise quadratic. Constant spacing uses the
//! same map on the points 0, 1, 2, ...: arrivals are one unit of intensity apart.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// One segment: `from` at its start, `to` at its end, linear in between.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    pub from: f64,
    pub to: f64,
    pub duration: Duration,
}

/// Piecewise-linear values over the measurement window (rates per second, or users).
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    segments: Vec<Segment>,
}

/// Parses `1000@10s,2000@10s` (held steps) and `1000-5000@30s` (a linear ramp), mixed freely.
impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |item: &str, why: &str| {
            format!("{item:?}: {why} (expected VALUE@DURATION or FROM-TO@DURATION items separated by commas, e.g. 1000@10s,1000-5000@30s)")
        };
        let mut segments = Vec::new();
        for item in s.split(',') {
            let (values, duration) = item.split_once('@').ok_or_else(|| bad(item, "no @DURATION"))?;
            let duration = crate::units::parse_duration(duration).map_err(|e| bad(item, &e))?;
            let number = |v: &str| -> Result<f64, String> {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| bad(item, "not a number >= 0"))
            };
            let (from, to) = match values.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(values)?, number(values)?),
            };
            if duration.is_zero() {
                return Err(bad(item, "a segment must last > 0"));
            }
            segments.push(Segment { from, to, duration });
        }
        Ok(Profile { segments })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            if s.from == s.to {
                write!(f, "{sep}{}@{:?}", s.from, s.duration)?;
            } else {
                write!(f, "{sep}{}-{}@{:?}", s.from, s.to, s.duration)?;
            }
        }
        Ok(())
    }
}

impl Profile {
    pub fn new(segments: Vec<Segment>) -> Profile {
        Profile { segments }
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Total length: the measurement window of a run that follows this profile.
    pub fn duration(&self) -> Duration {
        self.segments.iter().map(|s| s.duration).sum()
    }

    /// Value at the start (held during the warm-up).
    pub fn first(&self) -> f64 {
        self.segments.first().map_or(0.0, |s| s.from)
    }

    pub fn peak(&self) -> f64 {
        self.segments.iter().map(|s| s.from.max(s.to)).fold(0.0, f64::max)
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// ∫ of the value over [0, t] (t in seconds from the start of the window; held at the
    /// last value past the end).
    pub fn integral_to(&self, t: f64) -> f64 {
        let (mut start, mut acc) = (0.0, 0.0);
        for s in &self.segments {
            let d = s.duration.as_secs_f64();
            let tau = (t - start).clamp(0.0, d);
            let slope = (s.to - s.from) / d;
            acc += s.from * tau + slope * tau * tau / 2.0;
            if t <= start + d {
                return acc;
            }
            start += d;
        }
        acc + self.segments.last().map_or(0.0, |s| s.to) * (t - start).max(0.0)
    }

    /// Mean of the value over [a, b] (seconds from the start of the window).
    pub fn mean_over(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        (self.integral_to(b) - self.integral_to(a)) / (b - a)
    }
}

/// An arrival intensity λ(t), t in seconds from the run start: the profile's first value
/// during the warm-up, then the profile; no arrivals after the profile's end.
#[derive(Clone, Debug, PartialEq)]
pub struct Intensity {
    warmup_s: f64,
    profile: Profile,
}

impl Intensity {
    pub fn new(warmup: Duration, profile: Profile) -> Intensity {
        Intensity { warmup_s: warmup.as_secs_f64(), profile }
    }

    /// Λ(t) = ∫_0^t λ, the expected number of arrivals by t.
    pub fn cumulative(&self, t: f64) -> f64 {
        let w = self.warmup_s;
        if t <= w {
            return self.profile.first() * t.max(0.0);
        }
        self.profile.first() * w + self.profile.integral_to(t - w)
    }

    /// Λ^-1(u): the time at which the cumulative intensity reaches u, or `None` when it never
    /// does before the profile ends.
    pub fn inverse(&self, u: f64) -> Option<f64> {
        let first = self.profile.first();
        let warm = first * self.warmup_s;
        if u <= warm && first > 0.0 {
            return Some(u / first);
        }
        let (mut start, mut acc) = (self.warmup_s, warm);
        for s in self.profile.segments() {
            let d = s.duration.as_secs_f64();
            let area = (s.from + s.to) / 2.0 * d;
            if u <= acc + area && area > 0.0 {
                // Solve from·τ + slope·τ²/2 = v for τ in [0, d]: the root
                // 2v / (from + sqrt(from² + 2·slope·v)), stable for any slope (also 0 and
                // for a ramp from 0).
                let v = u - acc;
                let slope = (s.to - s.from) / d;
                let root = (s.from * s.from + 2.0 * slope * v).max(0.0).sqrt();
                let tau = if s.from + root > 0.0 { 2.0 * v / (s.from + root) } else { 0.0 };
                return Some(start + tau.min(d));
            }
            acc += area;
            start += d;
        }
        None
    }
}

/// When the number of users of a closed run changes: (offset from the run start in ns, users
/// from then on), first entry at 0. A held segment keeps its count; a ramp from a to b spends
/// an equal share of its length at each of a, a±1, ..., b (so its mean is (a + b) / 2).
pub fn user_changes(warmup: Duration, profile: &Profile) -> Vec<(u64, usize)> {
    let mut out: Vec<(u64, usize)> = vec![(0, profile.first() as usize)];
    let mut push = |t: f64, n: usize| {
        let ns = (t * 1e9).round() as u64;
        match out.last_mut() {
            Some(last) if last.1 == n => {}
            Some(last) if last.0 == ns => last.1 = n,
            _ => out.push((ns, n)),
        }
    };
    let mut start = warmup.as_secs_f64();
    for s in profile.segments() {
        let d = s.duration.as_secs_f64();
        let (a, b) = (s.from as i64, s.to as i64);
        let levels = (b - a).unsigned_abs() + 1;
        for j in 0..levels {
            let n = if b >= a { a + j as i64 } else { a - j as i64 };
            push(start + d * j as f64 / levels as f64, n as usize);
        }
        start += d;
    }
    out
}

/// Users active on load thread `i` of `threads` when `n` users are active in all: global user
/// g runs on thread g mod T, so a thread's users are those k with k·T + i < n.
pub fn users_of_thread(n: usize, i: usize, threads: usize) -> usize {
    if n > i {
        (n - i).div_ceil(threads)
    } else {
        0
    }
}

/// Mean number of users over [a, b] (seconds from the run start), from the change list.
pub fn mean_users(changes: &[(u64, usize)], a: f64, b: f64) -> f64 {
    if b <= a {
        return 0.0;
    }
    let mut acc = 0.0;
    for (j, &(t, n)) in changes.iter().enumerate() {
        let lo = (t as f64 / 1e9).max(a);
        let hi = changes.get(j + 1).map_or(f64::INFINITY, |&(t, _)| t as f64 / 1e9).min(b);
        if hi > lo {
            acc += n as f64 * (hi - lo);
        }
    }
    acc / (b - a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn profiles_parse_print_and_integrate() {
        let p: Profile = "1000@10s,1000-5000@30s".parse().unwrap();
        assert_eq!(p.duration(), secs(40.0));
        assert_eq!(p.to_string(), "1000@10s,1000-5000@30s");
        assert_eq!(p.integral_to(10.0), 10_000.0);
        // Trapezoid: 10 s at 1000 + 30 s from 1000 to 5000 = 10 000 + 90 000.
        assert!((p.integral_to(40.0) - 100_000.0).abs() < 1e-6);
        assert!((p.mean_over(10.0, 40.0) - 3000.0).abs() < 1e-9);
        for bad in ["", "1000", "x@1s", "-5@1s", "10@0s", "10@3h"] {
            assert!(bad.parse::<Profile>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn inverse_inverts_the_cumulative_intensity() {
        let i = Intensity::new(secs(1.0), "100@2s,100-500@4s,0-300@1s,0@1s".parse().unwrap());
        for k in 0..2000 {
            let u = k as f64 * 0.7;
            match i.inverse(u) {
                Some(t) => assert!((i.cumulative(t) - u).abs() < 1e-6 * u.max(1.0), "u {u} t {t}"),
                None => assert!(u > i.cumulative(9.0) - 1e-9, "u {u}"),
            }
        }
        // Closed forms: 100 in the warm-up, 200 in the first step, then the ramp
        // Λ = 300 + 100τ + 50τ² reaches 450 at τ = 1.
        assert_eq!(i.inverse(100.0), Some(1.0));
        assert!((i.inverse(450.0).unwrap() - 4.0).abs() < 1e-12);
        // A ramp from 0: Λ = 150τ², so 37.5 more arrivals take τ = 0.5.
        let end_of_ramp = i.cumulative(7.0);
        assert!((i.inverse(end_of_ramp + 37.5).unwrap() - 7.5).abs() < 1e-12);
        assert_eq!(i.inverse(i.cumulative(9.0) + 1.0), None);
    }

    #[test]
    fn user_ramps_spend_equal_time_at_each_level() {
        let p: Profile = "2@1s,1-4@4s,4-2@3s".parse().unwrap();
        let c = user_changes(secs(0.5), &p);
        let s = 1_000_000_000;
        assert_eq!(
            c,
            [(0, 2), (s * 3 / 2, 1), (s * 5 / 2, 2), (s * 7 / 2, 3), (s * 9 / 2, 4), (s * 13 / 2, 3), (s * 15 / 2, 2)]
        );
        // The ramp 1-4 over 4 s has mean 2.5, the step 2.
        assert!((mean_users(&c, 1.5, 5.5) - 2.5).abs() < 1e-9);
        assert!((mean_users(&c, 0.0, 1.5) - 2.0).abs() < 1e-9);
        // Users interleave over threads: 5 users on 2 threads = 3 + 2.
        assert_eq!((users_of_thread(5, 0, 2), users_of_thread(5, 1, 2)), (3, 2));
        assert_eq!(users_of_thread(1, 1, 2), 0);
    }
}
