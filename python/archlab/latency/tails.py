"""Tail-index estimation for long-tailed latencies (seed 000 §4.7.5): the LLCD slope over the top
fraction, the Pareto tail MLE above a threshold, the Hill estimator with its Hill plot and an
automatic choice of k, and the Clauset-Shalizi-Newman (2009) choice of the tail start by KS
minimisation.

Convention: ``alpha`` is the *tail index* of the survival function, P(X > x) ~ x^-alpha (the
thesis' "a"); Clauset et al.'s density exponent is alpha + 1. All estimators work on descending
order statistics computed from the counts: with prefix sums of c*ln(v) and c*ln(v)^2 over the
distinct values, the Hill moments at any k cost O(log U), so a Hill plot over all k and the double
bootstrap never expand the data. Ties (integer milliseconds) are treated as the continuous
estimators treat them: order statistics that happen to be equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from archlab.latency.discrete import round_to
from archlab.latency.errors import InsufficientData, ParameterError, check_choice, check_positive_int, check_probability
from archlab.latency.samples import Samples


@dataclass(frozen=True)
class TailIndex:
    alpha: float
    se: float  # asymptotic standard error alpha / sqrt(n_tail) (Hill 1975; Clauset et al. 2009 eq. 3.2)
    xmin: float
    n_tail: int
    method: str


# --- LLCD -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LLCD:
    """Least-squares line through the log10-log10 empirical survival P(X >= x) of the top fraction.

    A visual aid: the slope of a least-squares fit to a log-log CCDF is biased and has no valid
    error bar (Clauset et al. 2009, §3.1 and appendix A); prefer the MLE or Hill estimates."""

    alpha: float  # -slope
    slope: float
    intercept: float
    r_squared: float
    top_fraction: float
    threshold: float
    log_x: np.ndarray
    log_survival: np.ndarray


def llcd(samples: Samples, top_fraction: float = 0.01) -> LLCD:
    check_probability("top_fraction", top_fraction)
    samples.require_positive("llcd")
    n = samples.n
    first_rank = min(n - 1, max(0, math.ceil((1.0 - top_fraction) * n) - 1))
    threshold = float(samples.order_statistics(np.array([first_rank]))[0])
    tail_start = int(np.searchsorted(samples.values, threshold))
    survival_ge = (n - samples.cumulative + samples.counts) / n
    log_x = np.log10(samples.values[tail_start:])
    log_survival = np.log10(survival_ge[tail_start:])
    if log_x.size < 2:
        raise InsufficientData(
            f"llcd: the top {top_fraction:.3%} of {n} observations holds {log_x.size} distinct value(s); "
            "at least 2 are needed (raise top_fraction)")
    slope, intercept = np.polyfit(log_x, log_survival, 1)
    residual = log_survival - (slope * log_x + intercept)
    total = np.sum((log_survival - log_survival.mean()) ** 2)
    r_squared = 1.0 - float(np.sum(residual ** 2) / total) if total > 0 else 1.0
    return LLCD(float(-slope), float(slope), float(intercept), r_squared, top_fraction, threshold, log_x, log_survival)


# --- mean excess ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanExcess:
    threshold: np.ndarray  # u: the distinct values with at least ``min_exceed`` observations above
    mean_excess: np.ndarray  # e(u) = E[X - u | X > u]
    exceedances: np.ndarray  # number of observations > u


def mean_excess(samples: Samples, *, min_exceed: int = 10) -> MeanExcess:
    """The empirical mean-excess function e(u) = mean of (X - u) over the X > u, at each distinct
    value u leaving at least ``min_exceed`` observations above it, exact from the counts in O(U).
    A Pareto(alpha) tail has e(u) = u / (alpha - 1) (rising linearly), an exponential a constant
    e(u) = its mean, a lighter tail a falling e(u) (Embrechts, Klueppelberg & Mikosch 1997, §6.2.2)."""
    check_positive_int("min_exceed", min_exceed, 1)
    counts, values = samples.counts, samples.values
    above = samples.n - samples.cumulative  # observations strictly above values[j]
    mass_above = np.concatenate([np.cumsum((counts * values)[::-1])[::-1][1:], [0.0]])
    keep = above >= min_exceed
    if not np.any(keep):
        raise InsufficientData(f"mean_excess: no value leaves {min_exceed} observations above it (n={samples.n})")
    u = values[keep]
    return MeanExcess(u, mass_above[keep] / above[keep] - u, above[keep])


# --- Pareto MLE above a threshold --------------------------------------------------------------------
def pareto_tail(samples: Samples, xmin: float) -> TailIndex:
    """MLE alpha = n_t / sum ln(x / xmin) over the n_t observations >= xmin (thesis eq. 4.18;
    Clauset et al. 2009 eq. 3.1 minus one)."""
    if not xmin > 0:
        raise ParameterError("xmin", "a positive threshold", xmin)
    tail = samples.at_least(xmin)
    total = float(np.dot(tail.counts, np.log(tail.values / xmin)))
    if total <= 0:
        raise InsufficientData(f"pareto_tail: every observation >= {xmin!r} equals it; no tail to fit")
    alpha = tail.n / total
    return TailIndex(alpha, alpha / math.sqrt(tail.n), float(xmin), tail.n, "pareto-mle")


# --- Hill ---------------------------------------------------------------------------------------------
class _DescendingLogs:
    """Sums over the k largest observations of ln x and ln^2 x, for any k, from the counts."""

    def __init__(self, samples: Samples):
        samples.require_positive("hill")
        self.n = samples.n
        self.logs = np.log(samples.values[::-1])
        self.counts = samples.counts[::-1].astype(float)
        self.cumulative = np.cumsum(samples.counts[::-1])
        self.sum1 = np.cumsum(self.counts * self.logs)
        self.sum2 = np.cumsum(self.counts * self.logs ** 2)

    def log_order_statistic(self, position: np.ndarray) -> np.ndarray:
        """ln X_(i) for 1-based descending positions i."""
        return self.logs[np.searchsorted(self.cumulative, position, side="left")]

    def moments(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hill's M1(k) = mean of ln(X_(i)/X_(k+1)) over i <= k, and M2(k), the mean of its square."""
        k = np.asarray(k, dtype=np.int64)
        group = np.searchsorted(self.cumulative, k, side="left")
        inside = k - (self.cumulative[group] - self.counts[group])  # members of the last group used
        s1 = self.sum1[group] - (self.counts[group] - inside) * self.logs[group]
        s2 = self.sum2[group] - (self.counts[group] - inside) * self.logs[group] ** 2
        threshold = self.log_order_statistic(k + 1)
        m1 = s1 / k - threshold
        m2 = s2 / k - 2 * threshold * s1 / k + threshold ** 2
        return m1, m2


def hill(samples: Samples, k: np.ndarray | int) -> np.ndarray:
    """Hill tail-index estimates 1 / M1(k) at the given k (1 <= k < n); inf where the top k+1 tie."""
    k = np.atleast_1d(np.asarray(k))
    if np.any(k < 1) or np.any(k >= samples.n):
        raise ParameterError("k", f"integers in [1, {samples.n - 1}] (n - 1)", k[(k < 1) | (k >= samples.n)][:5].tolist())
    gamma, _ = _DescendingLogs(samples).moments(k)
    with np.errstate(divide="ignore"):
        return 1.0 / gamma


def _k_grid(largest: int, points: int) -> np.ndarray:
    """About ``points`` log-spaced integers in [1, largest] (every integer when there are few)."""
    if largest < 1:
        return np.array([], dtype=np.int64)
    return np.unique(np.round(np.logspace(0, math.log10(largest), points)).astype(np.int64))


K_METHODS = ("double_bootstrap", "ks")


class HillEstimator:
    """Hill (1975) estimator with a Hill plot and k chosen by hand or automatically.

    ``k="auto"`` with ``k_method="double_bootstrap"`` minimises the bootstrap estimate of the
    asymptotic mean squared error (Danielsson, de Haan, Peng & de Vries 2001): resamples of size
    n1 = n sqrt(t) and n2 = n t (``t_bootstrap``), each reduced to the k minimising the mean of
    (M2 - 2 M1^2)^2 over a log-spaced k grid, combined by their eq. for k*. With ``k_method="ks"``
    k is the tail size of the Clauset-Shalizi-Newman fit (:class:`PowerLawTail`). Seeded, so
    reproducible. Learned: ``k_``, ``alpha_``, ``gamma_`` (= 1/alpha), ``alpha_se_``,
    ``threshold_`` (X_(k+1)), ``curve_k_`` and ``curve_alpha_`` (the Hill plot).
    """

    def __init__(self, k: int | str = "auto", *, k_method: str = "double_bootstrap", n_boot: int = 200,
                 t_bootstrap: float = 0.5, grid_points: int = 200, seed: int = 0):
        if k != "auto":
            check_positive_int("k", k)
        check_choice("k_method", k_method, K_METHODS)
        check_positive_int("n_boot", n_boot, 2)
        check_probability("t_bootstrap", t_bootstrap)
        check_positive_int("grid_points", grid_points, 2)
        self.k, self.k_method, self.n_boot = k, k_method, n_boot
        self.t_bootstrap, self.grid_points, self.seed = t_bootstrap, grid_points, seed

    def fit(self, samples: Samples) -> HillEstimator:
        if samples.n < 3 or samples.distinct < 2:
            raise InsufficientData(f"hill: needs at least 3 observations and 2 distinct values, got {samples!r}")
        logs = _DescendingLogs(samples)
        self.curve_k_ = _k_grid(samples.n - 1, self.grid_points)
        self.curve_alpha_ = _inverse(logs.moments(self.curve_k_)[0])
        if self.k == "auto":
            if self.k_method == "ks":
                self.k_ = max(1, PowerLawTail().fit(samples).n_tail_ - 1)
            else:
                self.k_ = self._double_bootstrap(samples)
        else:
            assert not isinstance(self.k, str)  # "auto" took the branch above
            if self.k >= samples.n:
                raise ParameterError("k", f"an integer in [1, {samples.n - 1}] (n - 1)", self.k)
            self.k_ = int(self.k)
        gamma = float(logs.moments(np.array([self.k_]))[0][0])
        self.gamma_ = gamma
        self.alpha_ = float(_inverse(np.array([gamma]))[0])
        self.alpha_se_ = self.alpha_ / math.sqrt(self.k_)
        self.threshold_ = float(np.exp(logs.log_order_statistic(np.array([self.k_ + 1]))[0]))
        return self

    def _double_bootstrap(self, samples: Samples) -> int:
        rng = np.random.default_rng(self.seed)
        n = samples.n
        n1 = int(n * math.sqrt(self.t_bootstrap))
        n2 = int(n1 * n1 / n)
        if n2 < 10:
            raise InsufficientData(f"hill double bootstrap: n={n} is too small (second resample size {n2} < 10)")
        k1 = self._amse_minimiser(samples, n1, rng)
        k2 = self._amse_minimiser(samples, n2, rng)
        log_k1, log_n1 = math.log(k1), math.log(n1)
        if k1 < 2 or 2 * log_n1 - log_k1 <= 0:
            return int(min(n - 1, max(1, k1, int(samples.counts[-1]))))
        # Danielsson et al. (2001), the estimator of the AMSE-optimal k from k1*, k2* (Hill case).
        k_star = (k1 * k1 / k2) * ((log_k1 ** 2) / (2 * log_n1 - log_k1) ** 2) ** ((log_n1 - log_k1) / log_n1)
        # The Hill estimate is informative only when X_(k+1) < X_(1), i.e. k >= the number of
        # observations tied at the maximum (rounded data: a timeout, the top HDR bucket).
        return int(min(n - 1, max(1, round(k_star), int(samples.counts[-1]))))

    def _amse_minimiser(self, samples: Samples, size: int, rng: np.random.Generator) -> int:
        grid = _k_grid(size - 1, self.grid_points)
        total = np.zeros(grid.size)
        tied = np.zeros(grid.size, dtype=bool)
        for _ in range(self.n_boot):
            resample = samples.resample(rng, size)
            m1, m2 = _DescendingLogs(resample).moments(grid)
            total += (m2 - 2 * m1 * m1) ** 2
            tied |= grid < resample.counts[-1]  # the top k+1 all equal the maximum
        # Where the top k+1 of a resample tie, M1 = M2 = 0 and the AMSE proxy is 0 for lack of
        # information, not for a small error: such k (frequent on rounded data) are not candidates.
        if np.all(tied):
            raise InsufficientData("hill double bootstrap: the top order statistics tie at every k of the grid "
                                   "(rounded data: jitter them, see archlab.latency.discrete)")
        total[tied] = np.inf
        return int(grid[int(np.argmin(total))])


def _inverse(gamma: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(gamma > 0, 1.0 / np.where(gamma > 0, gamma, 1.0), np.inf)


# --- Clauset-Shalizi-Newman ------------------------------------------------------------------------
def _tail_ks(values: np.ndarray, counts: np.ndarray, xmin: float, alpha: float) -> float:
    """KS distance between the tail's empirical CDF and the Pareto(xmin, alpha) CDF."""
    cumulative = np.cumsum(counts)
    n_tail = cumulative[-1]
    model = 1.0 - (xmin / values) ** alpha
    return float(max(np.max(np.abs(cumulative / n_tail - model)),
                     np.max(np.abs(model - (cumulative - counts) / n_tail))))


class PowerLawTail:
    """Power-law tail above xmin with xmin chosen by KS minimisation (Clauset, Shalizi & Newman 2009).

    Candidates are the distinct values leaving at least ``min_tail`` observations above them
    (thinned to ``max_candidates`` evenly spaced in rank when there are more; a fixed ``xmin`` skips
    the scan). For each, alpha is the Pareto MLE and D the KS distance of the tail; the chosen xmin
    minimises D. Learned: ``xmin_``, ``alpha_``, ``alpha_se_``, ``n_tail_``, ``ks_``, and the scan
    ``scan_xmin_``, ``scan_alpha_``, ``scan_ks_``. :meth:`gof` gives CSN's semi-parametric bootstrap
    p-value (p >= 0.1: a power law is plausible).
    """

    def __init__(self, xmin: float | str = "auto", *, min_tail: int = 50, max_candidates: int = 1000):
        if xmin != "auto" and not (isinstance(xmin, (int, float)) and xmin > 0):
            raise ParameterError("xmin", "'auto' or a positive number", xmin)
        self.xmin = xmin
        self.min_tail = check_positive_int("min_tail", min_tail, 2)
        self.max_candidates = check_positive_int("max_candidates", max_candidates, 1)

    def fit(self, samples: Samples) -> PowerLawTail:
        samples.require_positive("power-law tail")
        values, counts = samples.values, samples.counts
        if self.xmin == "auto":
            above = samples.n - samples.cumulative + counts  # observations >= values[j]
            eligible = np.flatnonzero((above >= self.min_tail) & (np.arange(values.size) < values.size - 1))
            if eligible.size == 0:
                raise InsufficientData(f"power-law tail: fewer than min_tail={self.min_tail} observations "
                                       "above any candidate xmin")
            if eligible.size > self.max_candidates:
                eligible = eligible[np.unique(np.linspace(0, eligible.size - 1, self.max_candidates).round().astype(int))]
        else:
            eligible = np.array([int(np.searchsorted(values, self.xmin))])
            if eligible[0] >= values.size:
                raise InsufficientData(f"xmin={self.xmin!r} is above every observation")
        logs = np.log(values)
        weighted_log_suffix = np.cumsum((counts * logs)[::-1])[::-1]
        count_suffix = np.cumsum(counts[::-1])[::-1]
        xmins, alphas, distances = [], [], []
        for j in eligible:
            xmin = float(self.xmin) if self.xmin != "auto" else float(values[j])
            log_total = weighted_log_suffix[j] - count_suffix[j] * math.log(xmin)
            if log_total <= 0:
                continue
            alpha = count_suffix[j] / log_total
            xmins.append(xmin)
            alphas.append(alpha)
            distances.append(_tail_ks(values[j:], counts[j:], xmin, alpha))
        if not distances:
            raise InsufficientData("power-law tail: every candidate tail is a single repeated value")
        best = int(np.argmin(distances))
        self.scan_xmin_, self.scan_alpha_, self.scan_ks_ = map(np.asarray, (xmins, alphas, distances))
        self.xmin_, self.alpha_, self.ks_ = xmins[best], float(alphas[best]), float(distances[best])
        self.n_tail_ = int(count_suffix[int(np.searchsorted(values, self.xmin_))])
        self.alpha_se_ = self.alpha_ / math.sqrt(self.n_tail_)
        return self

    def index(self) -> TailIndex:
        return TailIndex(self.alpha_, self.alpha_se_, self.xmin_, self.n_tail_, "csn")

    def gof(self, samples: Samples, *, n_boot: int = 100, seed: int = 0, max_candidates: int = 200,
            resolution: str | float | None = None) -> float:
        """CSN's p-value: the fraction of semi-parametric bootstrap samples (Pareto above xmin with
        probability n_tail/n, the empirical body below it otherwise), each refitted including the
        xmin scan, whose KS distance is at least the observed one (Clauset et al. 2009, §4.1).
        The refits scan at most ``max_candidates`` xmins to bound the cost. With ``resolution``
        (see :mod:`archlab.latency.discrete`) the synthetic Pareto tail is rounded to the data's
        grid, for a fit made on rounded data."""
        check_positive_int("n_boot", n_boot, 1)
        rng = np.random.default_rng(seed)
        n = samples.n
        body = samples.values[samples.values < self.xmin_]
        body_samples = Samples.from_counts(body, samples.counts[:body.size], samples.unit) if body.size else None
        exceed = 0
        for _ in range(n_boot):
            from_tail = rng.binomial(n, self.n_tail_ / n) if body_samples is not None else n
            tail = self.xmin_ * (1.0 - rng.random(from_tail)) ** (-1.0 / self.alpha_)
            if resolution is not None:
                tail = round_to(tail, samples, resolution)
            parts = [tail] if body_samples is None else [tail, body_samples.draw(rng, n - from_tail)]
            synthetic = Samples.from_values(np.concatenate(parts), samples.unit)
            refit = PowerLawTail(self.xmin if self.xmin != "auto" else "auto",
                                 min_tail=self.min_tail, max_candidates=max_candidates)
            try:
                exceed += refit.fit(synthetic).ks_ >= self.ks_
            except InsufficientData:
                continue
        return exceed / n_boot
