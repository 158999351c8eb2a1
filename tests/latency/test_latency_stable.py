"""McCulloch's (1986) alpha-stable quantile estimator: its table against closed forms and fresh
scipy quantiles, recovery on scipy.stats.levy_stable samples of known parameters, and the MLE
refinement."""

import math

import numpy as np
import pytest
from scipy import stats

from archlab.latency import InsufficientData, Samples
from archlab.latency import _stable_table as table
from archlab.latency.stable import ALPHA_GRID, BETA_GRID, PROBABILITIES, mcculloch, stable_mle

NU_ALPHA = np.array(table.NU_ALPHA)
NU_BETA = np.array(table.NU_BETA)
MEDIAN0 = np.array(table.MEDIAN0)


def test_table_matches_closed_forms():
    # alpha = 2 is N(0, 2): nu_alpha = (z95 - z05) / (z75 - z25) = 2.4387 (McCulloch 1986, table I,
    # first entry 2.439) for every beta. alpha = 1, beta = 0 is the Cauchy: tan(0.45 pi) = 6.3138.
    # alpha = 1/2, beta = 1 (S1, scale 1) is the Levy law with c = 1: x_p = 1 / Phi^-1(1 - p/2)^2.
    z = stats.norm.ppf
    assert np.allclose(NU_ALPHA[-1], (z(0.95) - z(0.05)) / (z(0.75) - z(0.25)), rtol=1e-6)
    assert np.allclose(NU_BETA[-1], 0.0, atol=1e-6)
    assert NU_ALPHA[list(ALPHA_GRID).index(1.0), 0] == pytest.approx(math.tan(0.45 * math.pi), rel=1e-5)
    levy = [1 / z(1 - p / 2) ** 2 for p in PROBABILITIES]
    assert NU_ALPHA[0, -1] == pytest.approx((levy[4] - levy[0]) / (levy[3] - levy[1]), rel=1e-4)
    assert NU_BETA[0, -1] == pytest.approx((levy[4] + levy[0] - 2 * levy[2]) / (levy[4] - levy[0]), rel=1e-4)
    # The S0 location of that Levy law is delta1 + beta tan(pi alpha / 2) = 1 (Nolan's eq. 1.7).
    assert MEDIAN0[0, -1] == pytest.approx(levy[2] - 1.0, rel=1e-4)


def test_table_is_what_scipy_gives_today():
    # Two interior entries recomputed (python -m archlab.latency.stable regenerates the table).
    for i, j in ((7, 3), (12, 8)):
        q05, q25, q50, q75, q95 = stats.levy_stable.ppf(PROBABILITIES, ALPHA_GRID[i], BETA_GRID[j])
        assert NU_ALPHA[i, j] == pytest.approx((q95 - q05) / (q75 - q25), rel=1e-6)
        assert NU_BETA[i, j] == pytest.approx((q95 + q05 - 2 * q50) / (q95 - q05), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("alpha,beta", [(1.5, 0.0), (1.2, 0.5), (1.8, -0.3), (0.8, 0.9)])
def test_recovers_parameters_of_scipy_samples(alpha, beta):
    # 20,000 draws; McCulloch's estimator has asymptotic SD(alpha) ~ 1.5/sqrt(n) ~ 0.01 here
    # (his table 7), so 0.05 is about 5 SD; beta is less precise, the scale and location within 5%.
    gamma, delta1 = 2.0, 3.0
    x = stats.levy_stable.rvs(alpha, beta, loc=delta1, scale=gamma, size=20000, random_state=np.random.default_rng(3))
    fit = mcculloch(Samples.from_values(x))
    assert fit.alpha == pytest.approx(alpha, abs=0.05) and fit.beta == pytest.approx(beta, abs=0.12)
    assert fit.gamma == pytest.approx(gamma, rel=0.05)
    delta0 = delta1 + beta * gamma * math.tan(math.pi * alpha / 2)
    assert fit.delta == pytest.approx(delta0, abs=0.1 * gamma)


def test_normal_and_cauchy_samples():
    rng = np.random.default_rng(4)
    normal = mcculloch(Samples.from_values(rng.normal(10, 3, 20000)))
    assert normal.alpha >= 1.95 and normal.gamma == pytest.approx(3 / math.sqrt(2), rel=0.05)
    cauchy = mcculloch(Samples.from_values(stats.cauchy.rvs(size=20000, random_state=rng)))
    assert cauchy.alpha == pytest.approx(1.0, abs=0.05) and cauchy.gamma == pytest.approx(1.0, rel=0.05)


def test_mle_refinement_does_not_lower_the_likelihood():
    x = stats.levy_stable.rvs(1.5, 0.2, size=5000, random_state=np.random.default_rng(5))
    samples = Samples.from_values(x)
    refined = stable_mle(samples, subsample=20, seed=1)
    data = samples.draw(np.random.default_rng(1), 20)  # the same seeded subsample
    start = mcculloch(samples)
    assert refined.distribution.logpdf(data).sum() >= start.distribution.logpdf(data).sum() - 1e-6


def test_needs_a_spread():
    with pytest.raises(InsufficientData, match="stable fit"):
        mcculloch(Samples.from_values([1.0] * 30 + [2.0]))
