"""ECDF/CCDF, histograms and the KDE."""

import math

import numpy as np
import pytest
from scipy import stats

from archlab.latency import Samples, ecdf, histogram, kde


def test_ecdf_sides_and_dkw_width():
    s = Samples.from_values([1, 2, 2, 4])
    curve = ecdf(s, level=0.95)
    assert curve.cdf.tolist() == [0.25, 0.75, 1.0]
    assert curve.ccdf.tolist() == [0.75, 0.25, 0.0]
    assert curve.survival_ge.tolist() == [1.0, 0.75, 0.25]
    # Massart (1990): P(sup|F_n - F| > e) <= 2 exp(-2 n e^2).
    assert curve.dkw_epsilon == pytest.approx(math.sqrt(math.log(2 / 0.05) / 8))


@pytest.mark.parametrize("scale", ["linear", "log"])
def test_histogram_density_integrates_to_one(scale):
    rng = np.random.default_rng(0)
    s = Samples.from_values(rng.lognormal(1, 1, 10000))
    h = histogram(s, scale=scale)
    assert h.counts.sum() == 10000 and h.excluded == 0
    assert np.sum(h.density * np.diff(h.edges)) == pytest.approx(1.0)
    if scale == "log":
        ratios = h.edges[1:] / h.edges[:-1]
        assert np.allclose(ratios, 10 ** 0.1)


def test_log_histogram_excludes_zeros_and_says_so():
    h = histogram(Samples.from_values([0, 0, 1, 10, 100]), scale="log")
    assert h.excluded == 2 and h.counts.sum() == 3


def test_kde_matches_direct_gaussian_kde():
    rng = np.random.default_rng(1)
    x = rng.gamma(2.0, 3.0, 3000)
    s = Samples.from_values(x)
    estimate = kde(s, bandwidth=0.8)
    # Reference: scipy.stats.gaussian_kde with the same absolute bandwidth (factor = h / sd).
    direct = stats.gaussian_kde(x, bw_method=0.8 / x.std(ddof=1))(estimate.x)
    # Linear binning on a 4096-point grid: error O(step^2 / h^2) relative (Wand 1994); step/h < 0.02 here.
    assert np.max(np.abs(estimate.density - direct)) < 1e-3 * direct.max()
    assert np.trapezoid(estimate.density, estimate.x) == pytest.approx(1.0, abs=1e-3)


def test_log_scale_kde_integrates_to_one_and_stays_positive():
    rng = np.random.default_rng(2)
    estimate = kde(Samples.from_values(rng.lognormal(0, 1, 5000)), log_scale=True, points=4000)
    assert estimate.x.min() > 0
    assert np.trapezoid(estimate.density, estimate.x) == pytest.approx(1.0, abs=5e-3)
