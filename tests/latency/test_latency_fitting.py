"""Maximum-likelihood fits, ranking and likelihood-ratio comparison."""

import math

import numpy as np
import pytest
from scipy import stats

from archlab.latency import DistributionFit, ParameterError, Samples, compare_fits, rank_fits
from archlab.latency.errors import InsufficientData


def test_lognormal_parameters_are_recovered():
    # Truth mu = 2, sigma = 0.5; the MLE's standard errors are sigma/sqrt(n) and sigma/sqrt(2n).
    rng = np.random.default_rng(10)
    n = 20000
    fit = DistributionFit("lognormal").fit(Samples.from_values(rng.lognormal(2.0, 0.5, n)))
    assert math.log(fit.params_["scale"]) == pytest.approx(2.0, abs=4 * 0.5 / math.sqrt(n))
    assert fit.params_["s"] == pytest.approx(0.5, abs=4 * 0.5 / math.sqrt(2 * n))


@pytest.mark.parametrize("family, scipy_dist", [("gamma", stats.gamma), ("weibull", stats.weibull_min),
                                                ("lognormal", stats.lognorm), ("exponential", stats.expon)])
def test_closed_form_mle_is_at_least_as_good_as_scipy_fit(family, scipy_dist):
    # Reference: scipy.stats.<dist>.fit with floc=0 maximises the same likelihood numerically.
    rng = np.random.default_rng(4)
    x = rng.gamma(2.5, 4.0, 3000)
    ours = DistributionFit(family).fit(Samples.from_values(x))
    theirs = np.sum(scipy_dist(*scipy_dist.fit(x, floc=0)).logpdf(x))
    assert ours.loglik_ >= theirs - 1e-6 * abs(theirs)
    assert ours.loglik_ == pytest.approx(np.sum(ours.dist_.logpdf(x)))


def test_shifted_exponential_location_is_the_minimum_and_shifted_fits_nest():
    rng = np.random.default_rng(5)
    s = Samples.from_values(3.0 + rng.exponential(2.0, 5000))
    fit = DistributionFit("exponential", shifted=True).fit(s)
    assert fit.params_["loc"] == s.min and fit.params_["scale"] == pytest.approx(2.0, rel=0.05)
    for family in ("lognormal", "gamma", "weibull"):
        shifted = DistributionFit(family, shifted=True).fit(s)
        assert shifted.params_["loc"] < s.min
        assert shifted.loglik_ >= DistributionFit(family).fit(s).loglik_ - 1e-6


def test_shifted_pareto_is_lomax_from_the_minimum():
    # Lomax(alpha=3, sigma=10) shifted to start at 5: survival (1 + (x-5)/10)^-3.
    rng = np.random.default_rng(6)
    x = 5 + stats.lomax(3.0, scale=10.0).rvs(20000, random_state=rng)
    fit = DistributionFit("pareto", shifted=True).fit(Samples.from_values(x))
    assert fit.params_["b"] == pytest.approx(3.0, rel=0.1)
    assert fit.params_["scale"] == pytest.approx(10.0, rel=0.15)


def test_ranking_prefers_the_true_family_and_vuong_agrees():
    rng = np.random.default_rng(8)
    s = Samples.from_values(rng.lognormal(1.0, 0.8, 4000))
    ranking = rank_fits(s, shifted=(False,))
    assert ranking.best.name == "lognormal"
    assert sum(r.akaike_weight for r in ranking.ranked) == pytest.approx(1.0)
    exponential = next(r.fit for r in ranking.ranked if r.fit.name == "exponential")
    result = compare_fits(ranking.best, exponential, s)
    assert result.favoured == "lognormal" and result.pvalue < 1e-6


def test_vuong_is_inconclusive_between_equivalent_models():
    # Normal vs shifted lognormal with a huge shift: nearly the same model, so |z| must be small.
    rng = np.random.default_rng(9)
    s = Samples.from_values(rng.normal(100.0, 1.0, 2000))
    p = compare_fits(DistributionFit("normal").fit(s), DistributionFit("lognormal").fit(s), s).pvalue
    assert p > 0.01


def test_nested_wilks_test_uses_parameter_difference():
    rng = np.random.default_rng(12)
    s = Samples.from_values(rng.exponential(1.0, 3000))
    result = compare_fits(DistributionFit("gamma").fit(s), DistributionFit("exponential").fit(s), s, nested=True)
    assert result.statistic == pytest.approx(2 * abs(result.loglik_ratio))
    assert result.pvalue == pytest.approx(stats.chi2.sf(result.statistic, 1))


def test_fit_errors_are_precise():
    with pytest.raises(ParameterError, match="family: expected one of exponential, normal"):
        DistributionFit("cauchy")
    with pytest.raises(ParameterError, match="shifted: expected False for the normal family"):
        DistributionFit("normal", shifted=True)
    with pytest.raises(InsufficientData, match="lognormal fit: needs positive values"):
        DistributionFit("lognormal").fit(Samples.from_values([0, 1, 2, 3]))
