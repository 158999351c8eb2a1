//! Service-time, think-time and inter-arrival distributions. The raw form ([`DistSpec`]) is what
//! a model file says (`{ dist = "lognormal", mean = 0.01, cv = 2 }`); [`Dist`] is the validated
//! form with its sampling parameters precomputed, so the hot loop never re-derives them.
//! Every distribution is parameterised by its mean where it has one, because a performance model
//! is written in mean demands; shape enters as the coefficient of variation `cv`.

use serde::Deserialize;

use crate::error::{non_negative, positive, SimError};
use crate::field_path::{check, Shape, NUMBER, NUMBERS};
use crate::rng::Stream;

/// A distribution as written in a model.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum DistSpec {
    /// Always `value`.
    Deterministic { value: f64 },
    /// Exponential with mean `mean` (Poisson arrivals when used between arrivals).
    Exponential { mean: f64 },
    /// Log-normal with mean `mean` and coefficient of variation `cv`.
    Lognormal { mean: f64, cv: f64 },
    /// Gamma with mean `mean` and coefficient of variation `cv` (Erlang-k: cv = 1/sqrt(k)).
    Gamma { mean: f64, cv: f64 },
    /// Uniform on [low, high].
    Uniform { low: f64, high: f64 },
    /// Resampled uniformly from measured `samples` (the empirical distribution).
    Empirical { samples: Vec<f64> },
}

/// The fields of [`DistSpec`], to name the field of a parse error ([`crate::field_path`]).
pub static DIST: Shape = Shape::Tagged {
    check: check::<DistSpec>,
    tag: "dist",
    variants: &[
        ("deterministic", &[("value", &NUMBER)]),
        ("exponential", &[("mean", &NUMBER)]),
        ("lognormal", &[("mean", &NUMBER), ("cv", &NUMBER)]),
        ("gamma", &[("mean", &NUMBER), ("cv", &NUMBER)]),
        ("uniform", &[("low", &NUMBER), ("high", &NUMBER)]),
        ("empirical", &[("samples", &NUMBERS)]),
    ],
};

/// A validated distribution, ready to sample.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Deterministic(f64),
    Exponential { mean: f64 },
    LogNormal { mu: f64, sigma: f64 },
    Gamma { shape: f64, scale: f64 },
    Uniform { low: f64, width: f64 },
    Empirical(Vec<f64>),
}

impl DistSpec {
    /// Validate; `field` names this distribution in error messages.
    pub fn build(&self, field: &str) -> Result<Dist, SimError> {
        let f = |name: &str| format!("{field}.{name}");
        Ok(match self {
            DistSpec::Deterministic { value } => Dist::Deterministic(non_negative(&f("value"), *value)?),
            DistSpec::Exponential { mean } => Dist::Exponential { mean: positive(&f("mean"), *mean)? },
            DistSpec::Lognormal { mean, cv } => {
                let (mean, cv) = (positive(&f("mean"), *mean)?, positive(&f("cv"), *cv)?);
                let var_log = (1.0 + cv * cv).ln();
                if !var_log.is_finite() {
                    return Err(SimError::invalid(f("cv"), "a number > 0 whose square is finite (below 1e154)", cv));
                }
                Dist::LogNormal { mu: mean.ln() - var_log / 2.0, sigma: var_log.sqrt() }
            }
            DistSpec::Gamma { mean, cv } => {
                let (mean, cv) = (positive(&f("mean"), *mean)?, positive(&f("cv"), *cv)?);
                let (shape, scale) = (1.0 / (cv * cv), mean * cv * cv);
                // The sampler needs both parameters finite and > 0; cv^2 can overflow or vanish.
                if !(shape.is_finite() && shape > 0.0 && scale.is_finite() && scale > 0.0) {
                    return Err(SimError::invalid(
                        f("cv"),
                        format!("a number > 0 with 1/cv^2 and mean * cv^2 finite and > 0 (mean {mean})"),
                        cv,
                    ));
                }
                Dist::Gamma { shape, scale }
            }
            DistSpec::Uniform { low, high } => {
                let low = non_negative(&f("low"), *low)?;
                if !(high.is_finite() && *high >= low) {
                    return Err(SimError::invalid(f("high"), format!("a finite number >= low ({low})"), high));
                }
                Dist::Uniform { low, width: high - low }
            }
            DistSpec::Empirical { samples } => {
                if samples.is_empty() {
                    return Err(SimError::invalid(f("samples"), "at least one sample", samples));
                }
                for (i, &x) in samples.iter().enumerate() {
                    non_negative(&format!("{field}.samples[{i}]"), x)?;
                }
                Dist::Empirical(samples.clone())
            }
        })
    }
}

impl Dist {
    /// Whether every variate is 0, however it is written (a step that takes no time);
    /// [`Dist::is_zero`] is the narrower test the kernel uses to skip scheduling.
    pub fn takes_no_time(&self) -> bool {
        match self {
            Dist::Deterministic(v) => *v == 0.0,
            Dist::Uniform { low, width } => *low == 0.0 && *width == 0.0,
            Dist::Empirical(samples) => samples.iter().all(|x| *x == 0.0),
            Dist::Exponential { .. } | Dist::LogNormal { .. } | Dist::Gamma { .. } => false,
        }
    }

    /// One variate.
    #[inline]
    pub fn sample(&self, rng: &mut Stream) -> f64 {
        match self {
            Dist::Deterministic(v) => *v,
            // Inversion: one uniform per variate keeps streams aligned across configurations.
            Dist::Exponential { mean } => -mean * rng.uniform_open0().ln(),
            Dist::LogNormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
            Dist::Gamma { shape, scale } => scale * standard_gamma(*shape, rng),
            Dist::Uniform { low, width } => low + width * rng.uniform(),
            Dist::Empirical(samples) => samples[rng.below(samples.len())],
        }
    }

    /// The mean of the distribution.
    pub fn mean(&self) -> f64 {
        match self {
            Dist::Deterministic(v) => *v,
            Dist::Exponential { mean } => *mean,
            Dist::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Dist::Gamma { shape, scale } => shape * scale,
            Dist::Uniform { low, width } => low + width / 2.0,
            Dist::Empirical(s) => {
                let n = s.len() as f64;
                let sum = s.iter().sum::<f64>();
                // Samples near f64::MAX overflow the sum, not the mean.
                if sum.is_finite() {
                    sum / n
                } else {
                    s.iter().map(|x| x / n).sum()
                }
            }
        }
    }

    /// True when every variate is 0 (a zero think time), which lets sources skip scheduling.
    pub fn is_zero(&self) -> bool {
        matches!(self, Dist::Deterministic(v) if *v == 0.0)
    }
}

/// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) * U^(1/shape).
fn standard_gamma(shape: f64, rng: &mut Stream) -> f64 {
    if shape < 1.0 {
        return standard_gamma(shape + 1.0, rng) * rng.uniform_open0().powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.uniform_open0();
        if u < 1.0 - 0.0331 * x * x * x * x || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    /// Sample mean and variance of 400 000 draws.
    fn moments(d: &Dist) -> (f64, f64) {
        let mut rng = Stream::new(1, 0, Purpose::Service, 0, 0);
        let n = 400_000;
        let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
        (m, v)
    }

    #[test]
    fn means_and_cvs_match_the_parameters() {
        // Standard error of the mean is cv * mean / sqrt(n) = cv * mean / 632; a tolerance of
        // 5 standard errors. The variance tolerance is looser (heavy fourth moments).
        for (spec, mean, cv) in [
            (DistSpec::Exponential { mean: 2.0 }, 2.0, 1.0),
            (DistSpec::Lognormal { mean: 1.0, cv: 0.5 }, 1.0, 0.5),
            (DistSpec::Gamma { mean: 3.0, cv: 0.5 }, 3.0, 0.5),
            (DistSpec::Gamma { mean: 1.0, cv: 2.0 }, 1.0, 2.0),
            (DistSpec::Uniform { low: 1.0, high: 3.0 }, 2.0, (1.0f64 / 3.0).sqrt() / 2.0),
        ] {
            let d = spec.build("d").unwrap();
            assert!((d.mean() - mean).abs() < 1e-12, "{spec:?}");
            let (m, v) = moments(&d);
            assert!((m - mean).abs() < 5.0 * cv * mean / 632.0, "{spec:?}: mean {m}");
            let sample_cv = v.sqrt() / m;
            assert!((sample_cv - cv).abs() < 0.03 * cv.max(1.0), "{spec:?}: cv {sample_cv}");
        }
    }

    #[test]
    fn empirical_resamples_the_samples() {
        let d = DistSpec::Empirical { samples: vec![1.0, 2.0, 6.0] }.build("d").unwrap();
        let mut rng = Stream::new(1, 0, Purpose::Service, 0, 0);
        for _ in 0..100 {
            assert!([1.0, 2.0, 6.0].contains(&d.sample(&mut rng)));
        }
        assert_eq!(d.mean(), 3.0);
    }

    #[test]
    fn invalid_parameters_name_the_field() {
        let e = DistSpec::Lognormal { mean: 1.0, cv: -1.0 }.build("stations[0].service").unwrap_err();
        assert_eq!(e.to_string(), "stations[0].service.cv: expected a finite number > 0, got -1.0");
    }
}
