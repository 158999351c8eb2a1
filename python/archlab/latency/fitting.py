"""Maximum-likelihood fits of the classic latency families, their ranking by AIC/BIC and
likelihood-ratio (Vuong / Wilks) comparison between two fits.

Families: exponential, normal, lognormal, gamma, Weibull and Pareto, each also "shifted" (a free
location below the minimum; shifted Pareto is the Lomax / Pareto II that starts at the minimum).
Fits are weighted by the counts, so they run on distinct values. Unshifted fits use the closed
forms or the one-dimensional score equations (gamma: ln k - digamma(k) = ln mean - mean ln x;
Weibull: the usual profile equation in the shape), which are exact MLEs, not SciPy's generic
optimiser with a free location (the thesis script fitted ``loc`` freely on positive data, which is
ill-posed for Pareto). Shifted fits maximise the profile likelihood over the location, reusing the
unshifted MLE at each candidate. The location of a shifted fit is bounded away from the minimum by
a small margin, because for shapes below one the likelihood is unbounded there (Cheng & Amin 1983).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from archlab.latency.errors import InsufficientData, LatencyError, ParameterError
from archlab.latency.samples import Samples


class Family(str, enum.Enum):
    EXPONENTIAL = "exponential"
    NORMAL = "normal"
    LOGNORMAL = "lognormal"
    GAMMA = "gamma"
    WEIBULL = "weibull"
    PARETO = "pareto"


SHIFTABLE = (Family.EXPONENTIAL, Family.LOGNORMAL, Family.GAMMA, Family.WEIBULL, Family.PARETO)
# Free parameters of the unshifted family (Pareto's xmin = sample minimum counts as one).
_BASE_PARAMETERS = {Family.EXPONENTIAL: 1, Family.NORMAL: 2, Family.LOGNORMAL: 2, Family.GAMMA: 2,
                    Family.WEIBULL: 2, Family.PARETO: 2}


def parse_family(family: Family | str) -> Family:
    try:
        return Family(family)
    except ValueError:
        raise ParameterError("family", "one of " + ", ".join(f.value for f in Family), family) from None


def _weighted_mean(x: np.ndarray, w: np.ndarray) -> float:
    return float(np.dot(w, x) / w.sum())


def _frozen_unshifted(family: Family, x: np.ndarray, w: np.ndarray):
    """The MLE (loc fixed at 0, or free for normal) of ``family`` on values ``x`` with counts ``w``."""
    if family is Family.NORMAL:
        mean = _weighted_mean(x, w)
        sd = math.sqrt(_weighted_mean((x - mean) ** 2, w))
        if sd == 0:
            raise InsufficientData("normal fit: all values are equal")
        return sps.norm(loc=mean, scale=sd)
    if x[0] <= 0:
        raise InsufficientData(f"{family.value} fit: needs positive values (min {x[0]!r}); use shifted=True")
    if family is Family.EXPONENTIAL:
        return sps.expon(scale=_weighted_mean(x, w))
    logs = np.log(x)
    mean_log = _weighted_mean(logs, w)
    if family is Family.LOGNORMAL:
        sigma = math.sqrt(_weighted_mean((logs - mean_log) ** 2, w))
        if sigma == 0:
            raise InsufficientData("lognormal fit: all values are equal")
        return sps.lognorm(s=sigma, scale=math.exp(mean_log))
    if family is Family.PARETO:
        total = float(np.dot(w, logs - logs[0]))
        if total == 0:
            raise InsufficientData("pareto fit: all values are equal")
        return sps.pareto(b=w.sum() / total, scale=float(x[0]))
    if family is Family.GAMMA:
        mean = _weighted_mean(x, w)
        s = math.log(mean) - mean_log
        if s <= 1e-12:
            raise InsufficientData("gamma fit: all values are equal")
        shape = _solve_positive(lambda k: math.log(k) - special.digamma(k) - s,
                                (3 - s + math.sqrt((s - 3) ** 2 + 24 * s)) / (12 * s))  # Minka's start
        return sps.gamma(a=shape, scale=mean / shape)
    if family is Family.WEIBULL:
        return _weibull_mle(x, w, mean_log)
    raise AssertionError(family)


def _weibull_mle(x: np.ndarray, w: np.ndarray, mean_log: float):
    # Values scaled by the maximum so x^k neither overflows nor underflows for large shapes.
    top = x[-1]
    if x[0] == top:
        raise InsufficientData("weibull fit: all values are equal")
    logs = np.log(x / top)
    centred_mean_log = mean_log - math.log(top)

    def score(k: float) -> float:
        powers = w * np.exp(k * logs)
        return float(np.dot(powers, logs) / powers.sum()) - 1.0 / k - centred_mean_log

    shape = _solve_positive(score, 1.2)
    scale = top * _weighted_mean(np.exp(shape * logs), w) ** (1.0 / shape)
    return sps.weibull_min(c=shape, scale=scale)


def _solve_positive(f, start: float) -> float:
    """Root of a monotone score equation in a positive parameter, bracketing outwards from ``start``."""
    low, high = start / 2, start * 2
    for _ in range(60):
        if f(low) * f(high) < 0:
            return float(optimize.brentq(f, low, high, xtol=1e-12, rtol=1e-12))
        low, high = low / 2, high * 2
    raise LatencyError(f"maximum-likelihood equation has no root near {start!r}")


def weighted_loglik(dist, samples: Samples) -> float:
    return float(np.dot(samples.counts, dist.logpdf(samples.values)))


class DistributionFit:
    """Maximum-likelihood fit of one family (scikit-learn style: construct, ``fit``, read ``*_``).

    Learned attributes: ``dist_`` (a frozen scipy.stats distribution), ``params_`` (its shape, loc
    and scale by name), ``loglik_``, ``n_params_``, ``aic_``, ``bic_``, ``n_``.
    """

    def __init__(self, family: Family | str, shifted: bool = False):
        self.family = parse_family(family)
        if shifted and self.family not in SHIFTABLE:
            raise ParameterError("shifted", "False for the normal family (its location is already free)", shifted)
        self.shifted = bool(shifted)

    @property
    def name(self) -> str:
        return ("shifted " if self.shifted else "") + self.family.value

    def fit(self, samples: Samples) -> DistributionFit:
        if samples.distinct < 2:
            raise InsufficientData(f"{self.name} fit: needs at least two distinct values")
        if not self.shifted:
            dist = _frozen_unshifted(self.family, samples.values, samples.counts.astype(float))
        elif self.family is Family.EXPONENTIAL:
            # The MLE of the location is the minimum (the likelihood increases up to it).
            dist = sps.expon(loc=samples.min, scale=samples.mean - samples.min)
        else:
            dist = _profile_location(self.family, samples)
        self.dist_ = dist
        named = {**dict(zip(_shape_names(dist), dist.args)), **dist.kwds}
        self.params_ = {"loc": 0.0, **{key: float(value) for key, value in named.items()}}
        self.n_ = samples.n
        self.n_params_ = _BASE_PARAMETERS[self.family] + int(self.shifted)
        self.loglik_ = weighted_loglik(dist, samples)
        self.aic_ = 2 * self.n_params_ - 2 * self.loglik_
        self.bic_ = self.n_params_ * math.log(self.n_) - 2 * self.loglik_
        return self

    def __repr__(self) -> str:
        fitted = f", loglik={self.loglik_:.6g}" if hasattr(self, "loglik_") else ""
        return f"DistributionFit({self.name!r}{fitted})"


def _shape_names(dist) -> list[str]:
    return [name.strip() for name in (dist.dist.shapes or "").split(",") if name.strip()]


def _profile_location(family: Family, samples: Samples):
    """Shifted fit: maximise over loc < min the likelihood of the unshifted MLE of (x - loc)."""
    x, w = samples.values, samples.counts.astype(float)
    span = samples.max - samples.min
    # Gap between the minimum and the location, searched on a log scale from a millionth of the
    # range (the margin that keeps the unbounded spike at loc = min out) to a hundred ranges.
    lowest, highest = math.log(span * 1e-6), math.log(span * 100 + abs(samples.min))

    def negative_profile(log_gap: float) -> float:
        loc = samples.min - math.exp(log_gap)
        try:
            dist = _frozen_unshifted(family, x - loc, w)
        except (InsufficientData, LatencyError):
            return math.inf
        value = -float(np.dot(w, dist.logpdf(x - loc)))
        return value if math.isfinite(value) else math.inf

    grid = np.linspace(lowest, highest, 41)
    scores = np.array([negative_profile(g) for g in grid])
    best = int(np.argmin(scores))
    if not math.isfinite(scores[best]):
        raise InsufficientData(f"shifted {family.value} fit: no location gives a finite likelihood")
    bracket = (grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)])
    refined = optimize.minimize_scalar(negative_profile, bounds=bracket, method="bounded",
                                       options={"xatol": 1e-10})
    log_gap = refined.x if refined.fun <= scores[best] else grid[best]
    loc = samples.min - math.exp(log_gap)
    base = _frozen_unshifted(family, x - loc, w)
    return base.dist(*base.args, **{**base.kwds, "loc": loc})


DEFAULT_FAMILIES = tuple(Family)


@dataclass(frozen=True)
class RankedFit:
    fit: DistributionFit
    delta_aic: float
    delta_bic: float
    akaike_weight: float


@dataclass(frozen=True)
class FitRanking:
    """Fits ordered by AIC (best first); ``skipped`` names the fits that could not be made and why."""

    ranked: tuple[RankedFit, ...]
    skipped: tuple[tuple[str, str], ...]

    @property
    def best(self) -> DistributionFit:
        return self.ranked[0].fit


def rank_fits(samples: Samples, families: Iterable[Family | str] = DEFAULT_FAMILIES,
              shifted: Sequence[bool] = (False, True)) -> FitRanking:
    """Fit every (family, shifted) combination that applies and rank by AIC (BIC also reported)."""
    fits, skipped = [], []
    for family in map(parse_family, families):
        for shift in shifted:
            if shift and family not in SHIFTABLE:
                continue
            estimator = DistributionFit(family, shift)
            try:
                fits.append(estimator.fit(samples))
            except LatencyError as error:
                skipped.append((estimator.name, str(error)))
    if not fits:
        raise InsufficientData("rank_fits: no family could be fitted: " + "; ".join(r for _, r in skipped))
    fits.sort(key=lambda f: f.aic_)
    best_aic, best_bic = fits[0].aic_, min(f.bic_ for f in fits)
    relative = np.exp(-0.5 * (np.array([f.aic_ for f in fits]) - best_aic))
    weights = relative / relative.sum()
    ranked = tuple(RankedFit(f, f.aic_ - best_aic, f.bic_ - best_bic, float(wt)) for f, wt in zip(fits, weights))
    return FitRanking(ranked, tuple(skipped))


@dataclass(frozen=True)
class LikelihoodRatio:
    """Log-likelihood ratio R = l_a - l_b (positive favours a) and the p-value of its sign."""

    first: str
    second: str
    loglik_ratio: float
    statistic: float  # Vuong's normalised z, or Wilks' 2R for nested fits
    pvalue: float
    nested: bool

    @property
    def favoured(self) -> str:
        return self.first if self.loglik_ratio > 0 else self.second


def compare_fits(first: DistributionFit, second: DistributionFit, samples: Samples, *,
                 nested: bool = False) -> LikelihoodRatio:
    """Vuong's (1989) test for non-nested fits: z = R / (sqrt(n) s), two-sided p = erfc(|z|/sqrt 2)
    with s the standard deviation of the pointwise log-likelihood ratios; for nested fits Wilks'
    theorem, p = P(chi2_df > 2|R|) with df the difference in parameter counts. As in Clauset et
    al. (2009, §5), a small p says the sign of R is meaningful, not that either model is right."""
    pointwise = first.dist_.logpdf(samples.values) - second.dist_.logpdf(samples.values)
    if not np.all(np.isfinite(pointwise)):
        raise InsufficientData(f"compare_fits: {first.name} or {second.name} gives zero density to some data")
    weights, n = samples.counts, samples.n
    ratio = float(np.dot(weights, pointwise))
    if nested:
        df = abs(first.n_params_ - second.n_params_)
        if df == 0:
            raise ParameterError("nested", "fits with different numbers of parameters", (first.name, second.name))
        statistic = 2 * abs(ratio)
        pvalue = float(sps.chi2.sf(statistic, df))
    else:
        spread = math.sqrt(float(np.dot(weights, (pointwise - ratio / n) ** 2)) / n)
        statistic = ratio / (math.sqrt(n) * spread) if spread > 0 else 0.0
        pvalue = float(special.erfc(abs(statistic) / math.sqrt(2)))
    return LikelihoodRatio(first.name, second.name, ratio, float(statistic), pvalue, nested)
