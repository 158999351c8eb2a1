"""Tail-index estimators: Pareto MLE, LLCD, Hill (+ automatic k), CSN xmin, heavy-tail checks."""

import math

import numpy as np
import pytest

from archlab.latency import HillEstimator, ParameterError, PowerLawTail, Samples, aggregate, heavy_tail_check, hill, llcd, pareto_tail


def pareto(rng, alpha, n, xmin=1.0):
    return xmin * (1.0 - rng.random(n)) ** (-1.0 / alpha)


def test_pareto_tail_mle_recovers_the_index():
    # Truth alpha = 1.5; the MLE's standard error is alpha / sqrt(n) (Clauset et al. 2009 eq. 3.2).
    rng = np.random.default_rng(1)
    n = 50000
    estimate = pareto_tail(Samples.from_values(pareto(rng, 1.5, n, xmin=2.0)), 2.0)
    assert estimate.alpha == pytest.approx(1.5, abs=4 * 1.5 / math.sqrt(n))
    assert estimate.n_tail == n and estimate.se == pytest.approx(estimate.alpha / math.sqrt(n))


def test_hill_matches_the_textbook_formula_on_raw_order_statistics():
    # Hill (1975): gamma_k = (1/k) sum_{i<=k} ln X_(i) - ln X_(k+1), descending order statistics.
    rng = np.random.default_rng(2)
    x = np.ceil(pareto(rng, 1.2, 3000, xmin=5))  # integer data: ties inside and across the top k
    ordered = np.sort(x)[::-1]
    ks = np.array([1, 2, 10, 57, 500, 2999])
    expected = [1.0 / (np.mean(np.log(ordered[:k])) - np.log(ordered[k])) for k in ks]
    assert np.allclose(hill(Samples.from_values(x), ks), expected)
    with pytest.raises(ParameterError, match=r"k: expected integers in \[1, 2999\]"):
        hill(Samples.from_values(x), 3000)


def test_hill_double_bootstrap_on_a_second_order_tail():
    # |Student t(3)| has tail index 3 with a second-order term, so k matters; the AMSE choice
    # (Danielsson et al. 2001) should land within 15% (the Hill SE at the chosen k is ~ alpha/sqrt(k)).
    rng = np.random.default_rng(3)
    s = Samples.from_values(np.abs(rng.standard_t(3, 20000)))
    estimator = HillEstimator(n_boot=60, seed=1).fit(s)
    assert 10 < estimator.k_ < 20000 * 0.5
    assert estimator.alpha_ == pytest.approx(3.0, rel=0.15)
    assert estimator.curve_k_.size == estimator.curve_alpha_.size > 50


def test_llcd_slope_over_top_percent_of_a_pareto():
    rng = np.random.default_rng(4)
    line = llcd(Samples.from_values(pareto(rng, 1.5, 200000)), 0.01)
    assert line.alpha == pytest.approx(1.5, rel=0.1) and line.slope == -line.alpha
    assert line.threshold == pytest.approx(100 ** (1 / 1.5), rel=0.05)  # the 0.99 quantile of Pareto(1.5)


def test_csn_finds_the_start_of_a_power_law_tail():
    # Body: uniform on [1, 10) (70%); tail: Pareto(alpha = 2) above xmin = 10 (30%).
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(1, 10, 7000), pareto(rng, 2.0, 3000, xmin=10.0)])
    tail = PowerLawTail().fit(Samples.from_values(x))
    assert tail.xmin_ == pytest.approx(10.0, rel=0.1)
    assert tail.alpha_ == pytest.approx(2.0, abs=4 * 2.0 / math.sqrt(3000))
    assert tail.scan_ks_.min() == tail.ks_


def test_csn_bootstrap_pvalue_accepts_a_power_law_and_rejects_an_exponential():
    rng = np.random.default_rng(6)
    power = Samples.from_values(pareto(rng, 1.8, 600))
    assert PowerLawTail().fit(power).gof(power, n_boot=30, seed=2) > 0.1
    light = Samples.from_values(1 + rng.exponential(1.0, 600))
    assert PowerLawTail().fit(light).gof(light, n_boot=30, seed=2) < 0.1


def test_aggregation_and_heavy_tail_verdicts():
    assert aggregate(np.arange(1, 8), 3).tolist() == [6, 15]  # thesis eq. 4.16, incomplete block dropped
    rng = np.random.default_rng(7)
    heavy = heavy_tail_check(Samples.from_values(pareto(rng, 1.2, 40000)), seed=1)
    assert heavy.index_in_0_2 and heavy.aggregation_stable and heavy.heavy_tailed
    light = heavy_tail_check(Samples.from_values(rng.exponential(1.0, 40000)), seed=1)
    assert not light.index_in_0_2 and not light.aggregation_stable
    # Alpha of the sums grows with m when the variance is finite.
    alphas = [level.alpha for level in light.aggregation]
    assert alphas[-1] > 2 * alphas[0]


def test_mean_excess_is_exact_and_matches_closed_forms():
    from archlab.latency import mean_excess

    # Exactness: direct computation on the raw values at every threshold.
    raw = np.round(np.random.default_rng(3).lognormal(3, 0.6, 3000))
    result = mean_excess(Samples.from_values(raw), min_exceed=10)
    direct = [np.mean(raw[raw > u] - u) for u in result.threshold]
    assert result.mean_excess == pytest.approx(direct)
    assert result.exceedances.tolist() == [int(np.sum(raw > u)) for u in result.threshold]
    # Closed forms (Embrechts et al. 1997, §6.2.2): exponential e(u) = mean (memoryless);
    # Pareto(xmin, alpha) e(u) = u / (alpha - 1).
    rng = np.random.default_rng(4)
    exponential = mean_excess(Samples.from_values(rng.exponential(20.0, 200_000)), min_exceed=5000)
    assert exponential.mean_excess == pytest.approx(20.0, rel=0.05)
    pareto = mean_excess(Samples.from_values(10.0 * (1 - rng.random(200_000)) ** (-1 / 3.0)), min_exceed=5000)
    assert pareto.mean_excess == pytest.approx(pareto.threshold / 2.0, rel=0.1)
