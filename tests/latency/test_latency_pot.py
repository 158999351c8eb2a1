"""Peaks over threshold: the GPD fit against Coles (2001)'s published rainfall analysis
(tests/latency/data/coles2001, see its README), parameter recovery, the observed information
against the closed-form Fisher information, return levels, and the threshold-stability choice."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from archlab.latency import InsufficientData, ParameterError, Samples
from archlab.latency.pot import fit_gpd, gpd_qq_points, threshold_stability

RAIN = Path(__file__).parent / "data" / "coles2001" / "rain.txt"


def test_coles_rainfall_example():
    # Coles (2001), An Introduction to Statistical Modeling of Extreme Values, §4.4.1: daily rainfall
    # (south-west England, 1914-1962, n = 17531), threshold u = 30 mm: 152 exceedances,
    # sigma = 7.44, xi = 0.184, maximised log-likelihood -485.1, covariance of (sigma, xi)
    # [[0.9188, -0.0655], [-0.0655, 0.0102]], 100-year return level (365 observations a year) 106.3.
    # The same values are the reference of Extremes.jl's test/reproducingColesResults.jl.
    rain = Samples.from_values(np.loadtxt(RAIN), "ms")
    fit = fit_gpd(rain, 30.0)
    assert fit.n_exceed == 152 and fit.n == 17531
    assert round(fit.sigma, 2) == 7.44 and round(fit.xi, 3) == 0.184
    assert round(fit.loglik, 1) == -485.1
    assert np.allclose(fit.cov, [[0.9188, -0.0655], [-0.0655, 0.0102]], rtol=0.01, atol=5e-5)
    assert round(fit.return_level(100 * 365).value, 1) == 106.3


def test_mle_agrees_with_scipy_genpareto_fit():
    rain = np.loadtxt(RAIN)
    xi, _, sigma = stats.genpareto.fit(rain[rain > 30] - 30, floc=0)
    fit = fit_gpd(Samples.from_values(rain), 30.0)
    assert fit.xi == pytest.approx(xi, abs=1e-4) and fit.sigma == pytest.approx(sigma, rel=1e-4)


@pytest.mark.parametrize("xi", [0.4, 0.0, -0.25])
def test_recovery_and_information_match_the_closed_form(xi):
    # Expected information of the GPD (Smith 1985; Coles 2001 §4.3.2): n Var(xi) = (1 + xi)^2,
    # n Var(sigma) = 2 sigma^2 (1 + xi), n Cov = -sigma (1 + xi). The observed information at the
    # MLE must agree to sampling error; the estimates must lie within 4 standard errors.
    n, sigma = 20000, 3.0
    x = 50 + stats.genpareto.rvs(xi, scale=sigma, size=n, random_state=np.random.default_rng(11))
    fit = fit_gpd(Samples.from_values(np.concatenate([x, np.full(500, 10.0)])), 50.0)
    assert fit.n_exceed == n
    assert fit.xi == pytest.approx(xi, abs=4 * fit.xi_se) and fit.sigma == pytest.approx(sigma, abs=4 * fit.sigma_se)
    expected = np.array([[2 * sigma ** 2 * (1 + xi), -sigma * (1 + xi)], [-sigma * (1 + xi), (1 + xi) ** 2]]) / n
    assert np.allclose(fit.cov, expected, rtol=0.12)


def test_exponential_limit_and_quantiles():
    # xi = 0 exactly when the data are an exponential's quantiles; then x_p = u + sigma ln(zeta_u / p).
    y = stats.expon.ppf((np.arange(1, 4001) - 0.5) / 4000, scale=2.0)
    fit = fit_gpd(Samples.from_values(100 + y), 100.0)
    assert abs(fit.xi) < 0.02
    q = fit.quantile(1e-3)
    assert q.value == pytest.approx(fit.threshold + fit.excess_distribution.ppf(1 - 1e-3 / fit.rate), rel=1e-9)
    assert q.low < q.value < q.high
    rain = fit_gpd(Samples.from_values(np.loadtxt(RAIN)), 30.0)  # exceedance rate 152/17531
    with pytest.raises(ParameterError, match="exceedance: expected a probability below"):
        rain.quantile(0.05)


def test_quantile_interval_covers_the_truth():
    # Delta-method intervals (Coles §4.3.3) of p99.99 on Pareto(alpha = 2) data, 40 replicates:
    # coverage of the 95% interval must be at least 80% (binomial 40 draws at 0.95: P(< 33) < 1e-3).
    covered = 0
    for seed in range(40):
        x = (1 - np.random.default_rng(seed).random(20000)) ** -0.5  # P(X > x) = x^-2
        fit = fit_gpd(Samples.from_values(x), float(np.quantile(x, 0.95)))
        q = fit.quantile(1e-4)
        covered += q.low <= 100.0 <= q.high  # truth: (1e-4)^(-1/2)
    assert covered >= 33


def test_threshold_stability_on_an_exact_gpd_and_a_lognormal():
    # Pareto(alpha = 2) excesses are GPD(xi = 0.5) over every threshold: the lowest candidate holds.
    rng = np.random.default_rng(12)
    pareto = Samples.from_values((1 - rng.random(50000)) ** -0.5)
    stability = threshold_stability(pareto)
    assert stability.chosen == stability.threshold[0]
    assert np.all(np.abs(stability.xi - 0.5) <= 4 * stability.xi_se)
    # Known truth with a wrong body: 60% uniform on (0, 10), 40% GPD(xi = 0.5, sigma = 5) above 10.
    # The GPD holds from 10 only; from the median (about 8) the fits mix in the uniform body.
    body = rng.uniform(0, 10, 60000)
    tail = 10 + stats.genpareto.rvs(0.5, scale=5, size=40000, random_state=rng)
    mixed = threshold_stability(Samples.from_values(np.concatenate([body, tail])), highest_fraction=0.5)
    assert mixed.threshold[0] < 9 and 10 <= mixed.chosen <= 12
    assert abs(mixed.xi[mixed.threshold == mixed.chosen][0] - 0.5) < 0.1


def test_qq_points_and_errors():
    rain = Samples.from_values(np.loadtxt(RAIN))
    fit = fit_gpd(rain, 30.0)
    model, empirical = gpd_qq_points(fit, rain)
    assert model.size == 152 and np.all(np.diff(empirical) >= 0) and empirical[-1] == pytest.approx(86.6 - 30)
    with pytest.raises(InsufficientData, match="gpd: 0 observation"):
        fit_gpd(rain, 1000.0)
