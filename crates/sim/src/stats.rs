//! Output analysis. Confidence intervals: a point estimate from n independent observations
//! (replications or batch means) gets the Student-t interval mean +- t(1 - alpha/2, n - 1)
//! s / sqrt(n); the t quantile is computed here (regularised incomplete beta by Lentz's
//! continued fraction, inverted by bisection) so that the stop rules on interval width run
//! inside the core. Warm-up: MSER-m truncation (White 1997; Franklin & White 2008) chooses from
//! the data where the initial transient ends.

use serde::Serialize;

/// A mean with its confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub mean: f64,
    /// Half-width of the interval; NaN with fewer than two observations.
    pub half_width: f64,
    /// Sample standard deviation of the observations.
    pub std_dev: f64,
    pub n: u32,
    pub confidence: f64,
}

impl Estimate {
    /// From observations; NaN observations (e.g. no completion in a replication) are skipped.
    pub fn from_values(values: impl IntoIterator<Item = f64>, confidence: f64) -> Estimate {
        let xs: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
        let n = xs.len();
        let mean = if n == 0 { f64::NAN } else { xs.iter().sum::<f64>() / n as f64 };
        if n < 2 {
            return Estimate { mean, half_width: f64::NAN, std_dev: f64::NAN, n: n as u32, confidence };
        }
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        let t = student_t_quantile(0.5 + confidence / 2.0, (n - 1) as f64);
        Estimate { mean, half_width: t * (var / n as f64).sqrt(), std_dev: var.sqrt(), n: n as u32, confidence }
    }

    /// half_width / |mean|.
    pub fn relative_half_width(&self) -> f64 {
        self.half_width / self.mean.abs()
    }
}

/// Where MSER truncates a series (see [`mser`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Truncation {
    /// Observations per batch (5 for MSER-5).
    pub batch_size: u32,
    /// Complete batches formed (a trailing partial batch is left out).
    pub batches: u32,
    /// Batches deleted from the start, d*.
    pub batches_deleted: u32,
    /// Observations deleted from the start: batch_size x d*.
    pub observations_deleted: u64,
    /// The minimised statistic MSER(d*).
    pub statistic: f64,
    /// d* fell on the search limit (half the batches): the series may still be in its transient,
    /// and White (1997) advises a longer run rather than trusting the point.
    pub at_limit: bool,
}

/// MSER-m (White 1997, "An effective truncation heuristic for bias reduction in simulation
/// output", Simulation 69(6); Franklin & White 2008, WSC): average the series in batches of
/// `batch_size` consecutive observations Y_1..Y_k, and delete the d batches minimising
/// MSER(d) = sum_{j>d} (Y_j - mean_{j>d} Y)^2 / (k - d)^2, i.e. the squared half-width of the
/// truncated mean's interval up to a constant, over 0 <= d <= k/2 (the rule's search limit).
/// Ties go to the smaller d. `None` with fewer than two batches.
pub fn mser(series: &[f64], batch_size: usize) -> Option<Truncation> {
    assert!(batch_size >= 1, "MSER needs batches of at least one observation");
    let y: Vec<f64> = series.chunks_exact(batch_size).map(|c| c.iter().sum::<f64>() / batch_size as f64).collect();
    mser_of_batch_means(&y, batch_size)
}

/// [`mser`] on a series already averaged in batches of `batch_size` observations (the kernel
/// keeps only these, not every response time).
pub fn mser_of_batch_means(y: &[f64], batch_size: usize) -> Option<Truncation> {
    let k = y.len();
    if k < 2 {
        return None;
    }
    // Sums of squared deviations of every suffix, by Welford's update run backwards (no
    // cancellation, unlike sum(y^2) - sum(y)^2 / m on a series with a large mean).
    let mut stat = vec![0.0; k];
    let (mut mean, mut m2) = (0.0, 0.0);
    for d in (0..k).rev() {
        let m = (k - d) as f64;
        let delta = y[d] - mean;
        mean += delta / m;
        m2 += delta * (y[d] - mean);
        stat[d] = m2 / (m * m);
    }
    let limit = k / 2;
    let mut best = 0;
    for d in 1..=limit {
        if stat[d] < stat[best] {
            best = d;
        }
    }
    Some(Truncation {
        batch_size: batch_size as u32,
        batches: k as u32,
        batches_deleted: best as u32,
        observations_deleted: (best * batch_size) as u64,
        statistic: stat[best],
        at_limit: best == limit,
    })
}

/// ln Gamma(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error ~1e-15).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..500 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// Regularised incomplete beta I_x(a, b).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    // The continued fraction converges fast on this side of the mean; use the symmetry otherwise.
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_cf(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_cf(b, a, 1.0 - x) / b
    }
}

/// Student-t cumulative distribution with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The p-quantile (0.5 <= p < 1) of Student's t with `df` degrees of freedom.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 1.0);
    while student_t_cdf(hi, df) < p {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-13 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_published_tables() {
        // Reference values: any t table, e.g. NIST/SEMATECH e-Handbook, Table 1.4.2.7.
        for (p, df, t) in
            [(0.975, 1.0, 12.706), (0.975, 9.0, 2.262), (0.975, 29.0, 2.045), (0.995, 4.0, 4.604), (0.95, 120.0, 1.658)]
        {
            let q = student_t_quantile(p, df);
            assert!((q - t).abs() < 5e-4, "t({p}, {df}) = {q}, table {t}");
        }
    }

    /// An AR(1) series X_t = mu + phi (X_{t-1} - mu) + e_t started far from its mean: the bias of
    /// observation t is (x_0 - mu) phi^t, so the transient is known exactly.
    fn ar1(n: usize, phi: f64, start: f64, seed: u64) -> Vec<f64> {
        let mut rng = crate::rng::Stream::new(seed, 0, crate::rng::Purpose::Service, 0, 0);
        let mut x = start;
        (0..n)
            .map(|_| {
                // A standard normal by Box-Muller from the lab's generator.
                let (u1, u2) = (1.0 - rng.uniform(), rng.uniform());
                let e = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                x = phi * x + e;
                x
            })
            .collect()
    }

    #[test]
    fn mser_cuts_after_the_transient_of_an_ar1_and_removes_its_bias() {
        // mu = 0, phi = 0.9, x_0 = 100, n = 2000: observation t (from 1) has bias 100 * 0.9^t.
        // The untruncated mean's bias is 900 (1 - 0.9^n) / n = 0.45 against a standard error of
        // about sigma / (1 - phi) / sqrt(n) = 0.22. For each of 20 seeds the truncated mean's
        // remaining bias must be under a fifth of that standard error (0.05) and the cut within
        // the first half; over the seeds, the truncated means average near 0 (|mean| < 3 x
        // 0.22 / sqrt(20) = 0.15) while the untruncated ones keep their bias (mean > 0.25).
        let (n, phi, start) = (2000, 0.9f64, 100.0);
        let (mut truncated_sum, mut whole_sum) = (0.0, 0.0);
        let seeds = 20;
        for seed in 0..seeds {
            let x = ar1(n, phi, start, seed);
            let t = mser(&x, 5).unwrap();
            let cut = t.observations_deleted as usize;
            let kept = n - cut;
            let residual = start * phi.powi(cut as i32 + 1) * (1.0 - phi.powi(kept as i32)) / (1.0 - phi) / kept as f64;
            assert!(residual < 0.05, "seed {seed}: cut at {cut} leaves a bias of {residual}");
            assert!(!t.at_limit && cut < n / 2, "seed {seed}: {t:?}");
            truncated_sum += x[cut..].iter().sum::<f64>() / kept as f64;
            whole_sum += x.iter().sum::<f64>() / n as f64;
        }
        let (truncated, whole) = (truncated_sum / seeds as f64, whole_sum / seeds as f64);
        assert!(truncated.abs() < 0.15, "truncated means average {truncated}");
        assert!(whole > 0.25, "untruncated means average {whole}: the transient should show");
    }

    #[test]
    fn mser_keeps_a_stationary_series_and_flags_a_trend() {
        // Started at its mean, an AR(1) has no transient: MSER deletes little.
        let x = ar1(4000, 0.5, 0.0, 7);
        let t = mser(&x, 5).unwrap();
        assert!(t.observations_deleted < 400, "{t:?}");
        // A series that never settles (a linear trend) drives d* to the search limit.
        let trend: Vec<f64> = (0..1000).map(|i| -(i as f64)).collect();
        let t = mser(&trend, 5).unwrap();
        assert!(t.at_limit && t.batches_deleted == 100, "{t:?}");
        assert_eq!(mser(&[1.0; 9], 5), None);
    }

    #[test]
    fn mser_statistic_matches_its_definition() {
        // Batches of 1: y = [9, 1, 2, 3, 2, 1]. MSER(d) for d = 0..3 (the limit) is 46/36,
        // 2.8/25, 2/16, 2/9: the minimum is at d = 1. Batches of 2 average pairs first.
        let t = mser(&[9.0, 1.0, 2.0, 3.0, 2.0, 1.0], 1).unwrap();
        assert_eq!((t.batches, t.batches_deleted, t.at_limit), (6, 1, false));
        assert!((t.statistic - 2.8 / 25.0).abs() < 1e-15);
        let t = mser(&[9.0, 9.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 7.0], 2).unwrap();
        assert_eq!((t.batches, t.observations_deleted), (6, 2));
    }

    #[test]
    fn estimate_of_known_values() {
        let e = Estimate::from_values([1.0, 2.0, 3.0, 4.0, f64::NAN], 0.95);
        assert_eq!(e.n, 4);
        assert!((e.mean - 2.5).abs() < 1e-15);
        // s = sqrt(5/3); t(0.975, 3) = 3.182446 (table); half-width = t s / 2.
        assert!((e.half_width - 3.182446 * (5.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-5);
    }
}
