"""Goodness of fit: exact statistics from counts, and p-values calibrated with fitted parameters."""

import math

import numpy as np
import pytest
from scipy import stats

from archlab.latency import DistributionFit, Samples, chi2_statistic, goodness_of_fit, ks_statistic


def test_ks_statistic_equals_scipy_on_raw_data():
    rng = np.random.default_rng(0)
    x = rng.exponential(2.0, 500)
    dist = stats.expon(scale=2.1)
    assert ks_statistic(Samples.from_values(x), dist.cdf) == pytest.approx(stats.kstest(x, dist.cdf).statistic)


def test_chi2_uses_equiprobable_bins_and_matches_scipy_chisquare():
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, 1000)
    dist = stats.norm()
    value, bins = chi2_statistic(Samples.from_values(x), dist, bins=10)
    observed = np.histogram(x, bins=np.concatenate([[-np.inf], dist.ppf(np.arange(1, 10) / 10), [np.inf]]))[0]
    assert value == pytest.approx(stats.chisquare(observed).statistic)


def _uniformity_tolerance(replications: int, n_boot: int, alpha: float = 0.001) -> float:
    # DKW: P(sup|F_R - U| > e) <= 2 exp(-2 R e^2) gives e = sqrt(ln(2/alpha) / (2R)); the bootstrap
    # p-value lives on the grid k/(B+1), which moves its CDF by at most 1/(B+1) from the uniform.
    return math.sqrt(math.log(2 / alpha) / (2 * replications)) + 1 / (n_boot + 1)


def test_ks_bootstrap_pvalues_are_uniform_under_the_null_and_naive_ones_are_not():
    # Lilliefors (1969): with the exponential rate estimated, the naive KS p-value is far from
    # uniform; the parametric bootstrap (refit per replicate) restores the null distribution.
    rng = np.random.default_rng(2024)
    replications, n_boot = 120, 99
    bootstrap_p, naive_p = [], []
    for r in range(replications):
        s = Samples.from_values(rng.exponential(3.0, 40))
        result = goodness_of_fit(DistributionFit("exponential").fit(s), s, "ks", n_boot=n_boot, seed=r)
        bootstrap_p.append(result.pvalue)
        naive_p.append(result.naive_pvalue)
    tolerance = _uniformity_tolerance(replications, n_boot)
    assert stats.kstest(bootstrap_p, "uniform").statistic < tolerance
    assert stats.kstest(naive_p, "uniform").statistic > tolerance  # the defect this library fixes


def test_chi2_bootstrap_rejects_a_wrong_family():
    rng = np.random.default_rng(5)
    s = Samples.from_values(rng.lognormal(0, 1.2, 400))
    result = goodness_of_fit(DistributionFit("exponential").fit(s), s, "chi2", n_boot=50, seed=1)
    assert result.pvalue == pytest.approx(1 / 51) and result.bins == math.ceil(2 * 400 ** 0.4)
