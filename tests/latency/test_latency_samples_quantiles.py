"""Samples construction, quantile definitions and percentile intervals."""

import numpy as np
import pytest

from archlab.errors import ArchlabError
from archlab.latency import ParameterError, Samples, quantile, summarize
from archlab.latency.intervals import binomial_quantile
from archlab.latency.quantiles import QuantileMethod


def test_from_values_and_from_counts_give_the_same_canonical_form():
    raw = np.array([5, 1, 3, 3, 5, 5, 2])
    a = Samples.from_values(raw)
    b = Samples.from_counts([3, 1, 5, 2, 5], [2, 1, 2, 1, 1])
    assert a.values.tolist() == b.values.tolist() == [1, 2, 3, 5]
    assert a.counts.tolist() == b.counts.tolist() == [1, 1, 2, 3]
    assert a.n == 7 and a.mean == pytest.approx(raw.mean()) and a.std == pytest.approx(raw.std(ddof=1))


def test_errors_name_parameter_allowed_and_received():
    with pytest.raises(ParameterError, match=r"values: expected finite numbers, got \[nan\]"):
        Samples.from_values([1.0, float("nan")])
    with pytest.raises(ArchlabError, match=r"unit: expected one of 'ns', 'us', 'ms', 's', got 'min'"):
        Samples.from_values([1.0], unit="min")
    with pytest.raises(ParameterError, match=r"method: expected one of .*'linear'.*got 'type7'"):
        quantile(Samples.from_values([1.0, 2.0]), 0.5, "type7")


@pytest.mark.parametrize("method", list(QuantileMethod))
def test_every_definition_equals_numpy_on_raw_data(method):
    # Reference: numpy.quantile(method=...) (NumPy >= 1.22) implements Hyndman & Fan (1996).
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 37, 1000):
        x = rng.integers(0, 50, n).astype(float)  # heavy ties, like integer milliseconds
        q = np.concatenate([[0, 1, 0.5, 0.9, 0.99], rng.random(20)])
        # Equal up to floating-point rounding of the interpolation (a few ulps).
        assert np.allclose(quantile(Samples.from_values(x), q, method), np.quantile(x, q, method=method.value),
                           rtol=1e-12, atol=0)


def test_nearest_rank_is_hdrhistogram_java_ceil_rule():
    # HdrHistogram Java/Rust: count at percentile = ceil(p/100 * N); for N = 10 and p = 91 that is
    # rank 10, where the Python port's int(x + 0.5) gives rank 9 (notes/latency-analysis.md §3.3).
    s = Samples.from_values(np.arange(1, 11))
    assert quantile(s, 0.91, "nearest_rank") == 10
    # 0.9 * 10 is 9.000000000000002 in binary floating point; the rank must still be 9.
    assert quantile(s, 0.9, "nearest_rank") == 9


def test_binomial_interval_covers_at_least_its_level():
    # Distribution-free order-statistic interval: coverage >= level by construction; check on
    # 400 exponential samples of n = 200 for the 0.9 quantile (true value ln 10).
    rng = np.random.default_rng(3)
    truth = np.log(10.0)
    covered = 0
    for _ in range(400):
        bounds = binomial_quantile(Samples.from_values(rng.exponential(1.0, 200)), np.array([0.9]), level=0.9)
        covered += bounds.low[0] <= truth <= bounds.high[0]
    # Binomial(400, 0.9) has sd 6; 0.9 * 400 - 4 sd = 336.
    assert covered >= 336


def test_summary_bootstrap_interval_brackets_the_estimate_and_mean_is_student_t():
    rng = np.random.default_rng(11)
    x = np.round(rng.lognormal(2, 0.7, 5000))
    summary = summarize(Samples.from_values(x), [50, 99], n_boot=300)
    for estimate in summary.percentiles:
        assert estimate.low <= estimate.value <= estimate.high
    assert summary.percentile(99).value == np.percentile(x, 99)
    from scipy import stats

    t = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    assert summary.mean.low == pytest.approx(x.mean() - t) and summary.mean.high == pytest.approx(x.mean() + t)
