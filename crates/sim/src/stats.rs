//! Confidence intervals. A point estimate from n independent observations (replications or
//! batch means) gets the Student-t interval mean +- t(1 - alpha/2, n - 1) s / sqrt(n). The t
//! quantile is computed here (regularised incomplete beta by Lentz's continued fraction,
//! inverted by bisection) so that the stop rule on interval width can run inside the core.

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

    #[test]
    fn estimate_of_known_values() {
        let e = Estimate::from_values([1.0, 2.0, 3.0, 4.0, f64::NAN], 0.95);
        assert_eq!(e.n, 4);
        assert!((e.mean - 2.5).abs() < 1e-15);
        // s = sqrt(5/3); t(0.975, 3) = 3.182446 (table); half-width = t s / 2.
        assert!((e.half_width - 3.182446 * (5.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-5);
    }
}
