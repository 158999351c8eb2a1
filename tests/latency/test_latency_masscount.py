"""Mass-count disparity against closed forms (definitions: Feitelson 2015, Workload Modeling, ch. 5)."""

import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from archlab.latency import Samples, mass_count


def test_exponential_gini_joint_ratio_n_half_w_half():
    # Exponential(lambda): F_c = 1 - e^-y and F_m = 1 - (1 + y) e^-y with y = lambda x.
    # Joint point: F_c + F_m = 1  <=>  (2 + y) e^-y = 1; the largest e^-y of the items hold
    # (1 + y) e^-y of the mass (y* = 1.146193, joint ratio 31.78/68.22).
    # N1/2: F_m = 1/2  <=>  (1 + y) e^-y = 1/2, N1/2 = e^-y. W1/2: F_c = 1/2 at y = ln 2, W1/2 = (1 - ln 2)/2.
    # Gini of the exponential = 1/2 (mean absolute difference 1/lambda over twice the mean 1/lambda).
    y_joint = optimize.brentq(lambda y: (2 + y) * math.exp(-y) - 1, 0.1, 5)
    y_half = optimize.brentq(lambda y: (1 + y) * math.exp(-y) - 0.5, 0.1, 5)
    rng = np.random.default_rng(0)
    n = 1_000_000
    result = mass_count(Samples.from_values(rng.exponential(7.0, n)))
    # Sampling sd of these estimates at n = 10^6 is about 1e-3 (absolute) or 0.1 points (percent);
    # the tolerances are about 5 sd.
    assert result.gini == pytest.approx(0.5, abs=0.003)
    assert result.joint_ratio == pytest.approx(100 * math.exp(-y_joint), abs=0.3)
    assert result.n_half == pytest.approx(100 * math.exp(-y_half), abs=0.3)
    assert result.w_half == pytest.approx(100 * (1 - math.log(2)) / 2, abs=0.3)


def test_pareto_gini_and_joint_ratio():
    # Pareto(alpha > 1): Gini = 1 / (2 alpha - 1); joint ratio: u^alpha + u^(alpha-1) = 1 with
    # u = x_m / x*, the top u^alpha of items hold u^(alpha-1) of the mass (alpha = 3: 43.02/56.98).
    alpha = 3.0
    u = optimize.brentq(lambda u: u ** alpha + u ** (alpha - 1) - 1, 1e-9, 1)
    rng = np.random.default_rng(1)
    result = mass_count(Samples.from_values((1 - rng.random(1_000_000)) ** (-1 / alpha)))
    assert result.gini == pytest.approx(1 / (2 * alpha - 1), abs=0.004)
    assert result.joint_ratio == pytest.approx(100 * u ** alpha, abs=0.3)


def test_lognormal_gini_is_erf_sigma_over_two():
    # Lognormal(mu, sigma): Gini = erf(sigma / 2) (Feitelson 2015; notes §5.4).
    rng = np.random.default_rng(2)
    result = mass_count(Samples.from_values(rng.lognormal(3, 1.0, 1_000_000)))
    assert result.gini == pytest.approx(special.erf(0.5), abs=0.004)
    assert result.n_half == pytest.approx(100 * (1 - stats.norm.cdf(1.0)), abs=0.3)


def test_sample_gini_is_the_population_mean_difference_form():
    rng = np.random.default_rng(3)
    x = np.round(rng.exponential(5, 400))  # with ties
    direct = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size ** 2 * x.mean())
    assert mass_count(Samples.from_values(x)).gini == pytest.approx(direct)
    assert mass_count(Samples.from_values(x), unbiased=True).gini == pytest.approx(direct * 400 / 399)


def test_equal_values_have_no_disparity():
    result = mass_count(Samples.from_values([4.0] * 10))
    assert result.gini == pytest.approx(0.0) and result.joint_ratio == pytest.approx(50.0)
    assert result.w_half == pytest.approx(50.0) and result.n_half == pytest.approx(50.0)


def test_bootstrap_intervals_of_gini_and_tail_index_cover_the_truth():
    # Truth (closed forms): the Gini coefficient of an exponential is 1/2; Pareto(10, 1.5) has
    # tail index 1.5 above every threshold.
    from archlab.latency import analyze

    rng = np.random.default_rng(11)
    exponential = analyze(Samples.from_values(rng.exponential(20.0, 10000)), n_boot=20, tail_boot=100, seed=1)
    gini = exponential.to_dict()["bootstrap_intervals"]["Gini"]
    assert gini["low"] < 0.5 < gini["high"] and gini["high"] - gini["low"] < 0.02
    pareto = analyze(Samples.from_values(10.0 * (1.0 - rng.random(8000)) ** (-1.0 / 1.5)), n_boot=20, tail_boot=100,
                     seed=1)
    intervals = pareto.to_dict()["bootstrap_intervals"]
    for prefix in ("Hill", "CSN"):
        (name,) = [name for name in intervals if name.startswith(prefix)]
        assert intervals[name]["low"] < 1.5 < intervals[name]["high"]
        assert intervals[name]["high"] - intervals[name]["low"] < 0.3
    assert "bootstrap CI" in pareto.to_table()
    assert analyze(Samples.from_values(rng.exponential(20.0, 500)), n_boot=20).intervals == {}
