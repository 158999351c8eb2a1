"""Peaks over threshold: the generalized Pareto distribution (GPD) of the excesses above a
threshold, its tail index, extreme quantiles (return levels) with intervals, and a threshold
choice by parameter stability (Coles 2001, *An Introduction to Statistical Modeling of Extreme
Values*, Springer, ch. 4; the mean-excess plot is :func:`archlab.latency.tails.mean_excess`).

Model: for X > u the excess Y = X - u has P(Y > y) = (1 + xi y / sigma)^(-1/xi) (xi = 0: the
exponential). xi > 0 is a Pareto-type (heavy) tail with tail index 1/xi, xi = 0 an exponential-type
tail, xi < 0 a bounded one. Exceedances are the observations strictly above u (Coles §4.3).

Fitting is maximum likelihood on the counts of the distinct excesses. The two-parameter likelihood
is maximised through its profile in theta = xi / sigma (Grimshaw 1993, Technometrics 35(2)):
for fixed theta, xi(theta) = mean ln(1 + theta y) and sigma = xi / theta in closed form, so only a
one-dimensional search remains (a log-spaced scan, then a bounded Brent refinement). xi is kept
>= -1, where the likelihood is bounded. Standard errors come from the observed information
(analytic second derivatives), as in Coles §4.3.2; return levels use his delta method (§4.3.3),
including the uncertainty of the exceedance rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from archlab.latency.errors import InsufficientData, ParameterError, check_positive_int, check_probability
from archlab.latency.samples import Samples

_SMALL_XI = 1e-6  # below this |xi| the exponential limit (and series expansions) are used


@dataclass(frozen=True)
class Quantile:
    """An extreme quantile x with P(X > x) = ``exceedance``, and its delta-method interval."""
    exceedance: float
    value: float
    se: float
    low: float
    high: float
    level: float


@dataclass(frozen=True)
class GPDFit:
    threshold: float
    sigma: float
    xi: float
    n_exceed: int
    n: int  # all observations, for the exceedance rate zeta_u = n_exceed / n
    loglik: float
    cov: np.ndarray = field(repr=False)  # inverse observed information of (sigma, xi)

    @property
    def sigma_se(self) -> float:
        return float(math.sqrt(self.cov[0, 0])) if self.cov[0, 0] >= 0 else math.nan

    @property
    def xi_se(self) -> float:
        return float(math.sqrt(self.cov[1, 1])) if self.cov[1, 1] >= 0 else math.nan

    @property
    def rate(self) -> float:
        """zeta_u = P(X > u), estimated by n_exceed / n."""
        return self.n_exceed / self.n

    @property
    def tail_index(self) -> float:
        """alpha = 1 / xi for a heavy (xi > 0) tail, else inf (all moments finite)."""
        return 1.0 / self.xi if self.xi > 0 else math.inf

    @property
    def tail_index_se(self) -> float:
        return self.xi_se / self.xi ** 2 if self.xi > 0 else math.nan

    @property
    def excess_distribution(self):
        """The fitted excess law Y = X - u as a frozen ``scipy.stats.genpareto``."""
        return stats.genpareto(c=self.xi, scale=self.sigma)

    def quantile(self, exceedance: float, level: float = 0.95) -> Quantile:
        """x with P(X > x) = ``exceedance`` (< zeta_u): u + sigma/xi ((zeta_u/p)^xi - 1), the
        return level for m = 1/p observations (Coles eq. 4.13), with a normal interval from the
        delta method over (zeta_u, sigma, xi), Var(zeta_u) = zeta_u (1 - zeta_u) / n (Coles §4.3.3)."""
        check_probability("exceedance", exceedance)
        check_probability("level", level)
        if exceedance >= self.rate:
            raise ParameterError("exceedance", f"a probability below the threshold's exceedance rate {self.rate:.4g}",
                                 exceedance, "choose a higher quantile or a lower threshold")
        zeta, sigma, xi = self.rate, self.sigma, self.xi
        log_ratio = math.log(zeta / exceedance)  # ln(m zeta_u)
        if abs(xi) < _SMALL_XI:
            value = self.threshold + sigma * log_ratio
            gradient = np.array([sigma / zeta, log_ratio, sigma * log_ratio ** 2 / 2])
        else:
            power = math.exp(xi * log_ratio)  # (m zeta_u)^xi
            value = self.threshold + sigma / xi * (power - 1)
            gradient = np.array([sigma * power / zeta, (power - 1) / xi,
                                 -sigma / xi ** 2 * (power - 1) + sigma / xi * power * log_ratio])
        cov = np.zeros((3, 3))
        cov[0, 0] = zeta * (1 - zeta) / self.n
        cov[1:, 1:] = self.cov
        se = float(math.sqrt(max(0.0, gradient @ cov @ gradient)))
        z = stats.norm.ppf(0.5 + level / 2)
        return Quantile(exceedance, float(value), se, float(value - z * se), float(value + z * se), level)

    def return_level(self, m: float, level: float = 0.95) -> Quantile:
        """The level exceeded on average once every ``m`` observations (exceedance 1/m)."""
        if not m > 1:
            raise ParameterError("m", "a number of observations > 1", m)
        return self.quantile(1.0 / m, level)


def excesses(samples: Samples, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Distinct excesses y = x - u over the observations x > u, with their counts."""
    start = int(np.searchsorted(samples.values, threshold, side="right"))
    return samples.values[start:] - threshold, samples.counts[start:]


def _profile(theta: np.ndarray, y: np.ndarray, c: np.ndarray, n: int, mean: float) -> tuple[np.ndarray, np.ndarray]:
    """Grimshaw's profile: xi(theta) and the log-likelihood at (sigma(theta), xi(theta))."""
    theta = np.atleast_1d(theta)
    xi = (np.log1p(np.outer(theta, y)) @ c) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.where(np.abs(theta) * mean < 1e-12, mean, xi / theta)
        loglik = np.where(xi >= -1, -n * np.log(sigma) - n * (1 + xi), -np.inf)
    return xi, np.where(np.isfinite(loglik), loglik, -np.inf)


def _loglik(sigma: float, xi: float, y: np.ndarray, c: np.ndarray) -> float:
    n = c.sum()
    if abs(xi) < _SMALL_XI:
        return float(-n * math.log(sigma) - np.dot(c, y) / sigma)
    z = 1 + xi * y / sigma
    if np.any(z <= 0):
        return -math.inf
    return float(-n * math.log(sigma) - (1 + 1 / xi) * np.dot(c, np.log(z)))


def observed_information(sigma: float, xi: float, y: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Minus the Hessian of the GPD log-likelihood in (sigma, xi), analytic; at |xi| < 1e-6 its
    xi -> 0 limit (the 1/xi^k terms cancel: d2l/dxi2 -> sum c (t^2 - 2 t^3 / 3), t = y / sigma)."""
    n = c.sum()
    t = y / sigma
    w = t / (1 + xi * t)  # y / (sigma z)
    sw, sw2 = np.dot(c, w), np.dot(c, w * w)
    l_ss = n / sigma ** 2 - 2 * (1 + xi) / sigma ** 2 * sw + xi * (1 + xi) / sigma ** 2 * sw2
    l_sx = (sw - (1 + xi) * sw2) / sigma
    if abs(xi) < _SMALL_XI:
        l_xx = float(np.dot(c, t * t - 2 * t ** 3 / 3))
    else:
        l_xx = -2 / xi ** 3 * np.dot(c, np.log1p(xi * t)) + 2 / xi ** 2 * sw + (1 + 1 / xi) * sw2
    return -np.array([[l_ss, l_sx], [l_sx, l_xx]])


def fit_gpd(samples: Samples, threshold: float, *, min_exceed: int = 10) -> GPDFit:
    """Maximum-likelihood GPD of the excesses over ``threshold`` (see the module note)."""
    y, c = excesses(samples, threshold)
    n_exceed = int(c.sum()) if c.size else 0
    if n_exceed < min_exceed or y.size < 2:
        raise InsufficientData(f"gpd: {n_exceed} observation(s) above the threshold {threshold:g} "
                               f"({y.size} distinct); at least {min_exceed} and 2 distinct are needed")
    c = c.astype(float)
    mean, largest = float(np.dot(c, y) / n_exceed), float(y[-1])
    # theta ranges over (-1/y_max, inf); scan t = theta * mean log-spaced on both sides of 0.
    lowest = -1.0 / largest
    positive = np.logspace(-6, 4, 60) / mean
    negative = lowest * (1 - np.logspace(-8, 0, 40)[::-1][:-1])
    grid = np.concatenate([negative[::-1], [0.0], positive])
    grid = np.sort(grid[grid > lowest])
    _, profile = _profile(grid, y, c, n_exceed, mean)
    best = int(np.argmax(profile))
    bracket = (grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)])
    if bracket[1] > bracket[0]:
        result = optimize.minimize_scalar(lambda th: -_profile(np.array([th]), y, c, n_exceed, mean)[1][0],
                                          bounds=bracket, method="bounded", options={"xatol": 1e-12 / mean})
        theta = float(result.x) if -result.fun >= profile[best] else float(grid[best])
    else:
        theta = float(grid[best])
    xi_arr, _ = _profile(np.array([theta]), y, c, n_exceed, mean)
    xi = float(xi_arr[0])
    sigma = mean if abs(theta) * mean < 1e-12 else xi / theta
    if abs(xi) < _SMALL_XI:
        xi = 0.0
    info = observed_information(sigma, xi, y, c)
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        cov = np.full((2, 2), np.nan)
    return GPDFit(float(threshold), float(sigma), xi, n_exceed, samples.n, _loglik(sigma, xi, y, c), cov)


def gpd_qq_points(fit: GPDFit, samples: Samples, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(model, empirical) quantiles of the excesses: Y_(i) <-> G^-1((i - 0.5)/n_u) (Coles §4.3.5)."""
    y, c = excesses(samples, fit.threshold)
    excess = Samples(y, c, samples.unit) if y[0] > 0 else Samples.from_counts(y, c, samples.unit)
    n = excess.n
    ranks = np.arange(1, n + 1) if n <= max_points else np.unique(
        np.concatenate([np.linspace(1, n, max_points - 100).round(), np.arange(n - 99, n + 1)]))
    ranks = ranks.astype(np.int64)
    return fit.excess_distribution.ppf((ranks - 0.5) / n), excess.order_statistics(ranks - 1)


# --- threshold choice ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThresholdStability:
    """GPD fits over a ladder of thresholds (Coles §4.3.4): above a threshold where the GPD holds,
    xi is constant and so is the modified scale sigma* = sigma - xi u."""
    threshold: np.ndarray
    xi: np.ndarray
    xi_se: np.ndarray
    modified_scale: np.ndarray
    modified_scale_se: np.ndarray
    n_exceed: np.ndarray
    chosen: float  # the lowest threshold whose xi lies inside every higher threshold's interval
    level: float


def threshold_stability(samples: Samples, thresholds: np.ndarray | None = None, *, points: int = 20,
                        min_exceed: int = 50, highest_fraction: float = 0.2, level: float = 0.95) -> ThresholdStability:
    """Fit the GPD at each threshold (default: ``points`` empirical quantiles whose exceedance
    probabilities are log-spaced from ``highest_fraction`` down to ``min_exceed`` / n) and choose
    a threshold: the lowest one whose xi estimate agrees with the estimate at every higher
    threshold, |xi_j - xi_i| <= z sqrt(se_j^2 - se_i^2) with z Bonferroni-adjusted to ``level``
    over the comparisons. This formalises reading the stability plot; it is a screening rule,
    so look at the plot (:func:`archlab.latency.plots.plot_threshold_stability`)."""
    check_positive_int("points", points, 2)
    check_positive_int("min_exceed", min_exceed, 10)
    check_probability("highest_fraction", highest_fraction)
    n = samples.n
    if thresholds is None:
        if n * highest_fraction <= min_exceed:
            raise InsufficientData(f"threshold stability: n={n} leaves fewer than min_exceed={min_exceed} "
                                   f"observations above the {1 - highest_fraction:.0%} quantile")
        fractions = np.logspace(math.log10(highest_fraction), math.log10(min_exceed / n), points)
        ranks = np.clip(np.floor((1 - fractions) * n).astype(np.int64) - 1, 0, n - 1)
        thresholds = np.unique(samples.order_statistics(ranks))
    rows = []
    for u in np.asarray(thresholds, dtype=float):
        try:
            fit = fit_gpd(samples, float(u), min_exceed=min_exceed)
        except InsufficientData:
            continue
        gradient = np.array([1.0, -u])  # sigma* = sigma - xi u
        rows.append((u, fit.xi, fit.xi_se, fit.sigma - fit.xi * u,
                     math.sqrt(max(0.0, gradient @ fit.cov @ gradient)), fit.n_exceed))
    if len(rows) < 2:
        raise InsufficientData(f"threshold stability: fewer than two thresholds leave {min_exceed} exceedances")
    u, xi, xi_se, scale, scale_se, exceed = (np.array(column) for column in zip(*rows))
    chosen = float(u[-1])
    for i in range(u.size - 1):
        # Exceedances above u_j are a subset of those above u_i, so under a GPD above u_i the
        # difference of the estimates has variance ~ se_j^2 - se_i^2; the level is Bonferroni-
        # adjusted over the m comparisons, or noise alone would reject a true threshold.
        m = u.size - 1 - i
        z_m = stats.norm.ppf(1 - (1 - level) / (2 * m))
        spread = np.sqrt(np.maximum(np.nan_to_num(xi_se[i + 1:], nan=np.inf) ** 2 - xi_se[i] ** 2, 1e-300))
        if np.all(np.abs(xi[i + 1:] - xi[i]) <= z_m * spread):
            chosen = float(u[i])
            break
    return ThresholdStability(u, xi, xi_se, scale, scale_se, exceed.astype(np.int64), chosen, level)
