"""The discrete power law (zeta distribution) above xmin, for integer data such as JMeter's
integer milliseconds: maximum likelihood, xmin by KS minimisation, standard error and the
semi-parametric bootstrap p-value of Clauset, Shalizi & Newman (2009, SIAM Review 51(4), 661-703;
"CSN" below), all on exact counts.

Model (CSN eq. 2.4, §3.1 and appendix B): P(X = x) = x^-a / zeta(a, xmin) for integers x >= xmin,
with the Hurwitz zeta function zeta(a, q) = sum_{k>=0} (k + q)^-a (``scipy.special.zeta``). ``a``
is CSN's exponent of the probability mass; the library's tail index (survival P(X >= x) ~ x^-alpha,
as in :mod:`archlab.latency.tails`) is alpha = a - 1.

Why here: on integer data the continuous Pareto likelihood is wrong near xmin (CSN §3.1 and
table 3.1: the continuous MLE on discrete data is biased, badly so for xmin below about 6), and the
continuous KS scan sees whole ties as steps. The discrete likelihood needs no jitter.

Cost. The log-likelihood of the tail is -n_t ln zeta(a, xmin) - a sum c ln x, convex in a (ln zeta
is a log-sum-exp of functions linear in a), so one vectorised golden-section search fits every
candidate xmin at once. The discrete CDF at the observed values, needed by the KS distance, is a
cumulative sum of k^-a over the integers from xmin (dense, 6 ns per integer) up to
``DENSE_INTEGERS`` past xmin, and Hurwitz zeta values beyond (165 ns each, only at observed values).
Bootstrap samples are drawn as counts (a multinomial over the dense integers, exact inverse-CDF
draws for the rare values beyond), so neither fitting nor testing expands the data.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import zeta as hurwitz_zeta

from archlab.latency.errors import InsufficientData, ParameterError, check_positive_int
from archlab.latency.samples import Samples

DENSE_INTEGERS = 1 << 18  # integers past xmin handled by cumulative sums rather than zeta calls
_EXPONENT_RANGE = (1.0 + 1e-6, 50.0)  # search interval of the mass exponent a (a > 1 for a proper law)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def integer_values(samples: Samples) -> np.ndarray:
    """The distinct values as int64, or a ParameterError naming what is not a positive integer."""
    values = samples.values
    if samples.min < 1 or not np.all(values == np.round(values)) or samples.max >= 2 ** 53:
        bad = values[(values < 1) | (values != np.round(values))][:5].tolist()
        raise ParameterError("samples", "positive integer values for the discrete power law "
                             "(use the continuous PowerLawTail, or divide by the grid step)", bad or samples.max)
    return values.astype(np.int64)


# Below this, zeta(a, q) is computed from its expansion in log space (log_zeta).
_TINY = 1e-280


def log_zeta(a, q):
    """ln zeta(a, q), also where zeta(a, q) itself underflows: integer data near 10^7 ms make
    q^(1 - a) / (a - 1) smaller than the smallest double for a > 45, and ln 0 ended the fit with a
    math domain error. There the Euler-Maclaurin expansion is used, ln zeta(a, q) = -a ln q +
    ln(q / (a - 1) + 1/2 + a / (12 q) - a (a + 1) (a + 2) / (720 q^3)) (DLMF 25.11.43 with
    B2 = 1/6, B4 = -1/30): zeta < 1e-280 needs (a - 1) ln q > 644 with a <= 50, so q > 5 x 10^5,
    where the first omitted term is below 1e-25 of the bracket."""
    a_arr, q_arr = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(q, dtype=float))
    z = np.asarray(hurwitz_zeta(a_arr, q_arr), dtype=float)
    small = ~(z > _TINY)
    out = np.atleast_1d(np.log(np.where(small, 1.0, z))).reshape(z.shape).copy()
    if np.any(small):
        s, x = a_arr[small], q_arr[small]
        out[small] = -s * np.log(x) + np.log(x / (s - 1) + 0.5 + s / (12 * x) - s * (s + 1) * (s + 2) / (720 * x**3))
    return out if out.ndim else float(out[()])


def _neg_loglik(a: np.ndarray, xmin: np.ndarray, n_tail: np.ndarray, sum_log: np.ndarray) -> np.ndarray:
    """Negative log-likelihood of the tails, per candidate (CSN eq. B.4)."""
    return n_tail * log_zeta(a, xmin) + a * sum_log


def fit_exponent(xmin: np.ndarray, n_tail: np.ndarray, sum_log: np.ndarray, iterations: int = 80) -> np.ndarray:
    """MLE of the mass exponent a for each (xmin, n_tail, sum of c ln x) by a vectorised
    golden-section search over ``_EXPONENT_RANGE`` (the objective is convex in a)."""
    xmin, n_tail, sum_log = (np.asarray(v, dtype=float) for v in (xmin, n_tail, sum_log))
    low = np.full(xmin.shape, _EXPONENT_RANGE[0])
    high = np.full(xmin.shape, _EXPONENT_RANGE[1])
    left, right = high - _GOLDEN * (high - low), low + _GOLDEN * (high - low)
    f_left = _neg_loglik(left, xmin, n_tail, sum_log)
    f_right = _neg_loglik(right, xmin, n_tail, sum_log)
    for _ in range(iterations):  # 0.618^80 * 50 < 1e-15: converged to double precision
        go_left = f_left < f_right  # the minimum is in [low, right]
        high, low = np.where(go_left, right, high), np.where(go_left, low, left)
        new_left = np.where(go_left, high - _GOLDEN * (high - low), right)
        new_right = np.where(go_left, left, low + _GOLDEN * (high - low))
        f_new = _neg_loglik(np.where(go_left, new_left, new_right), xmin, n_tail, sum_log)
        f_left, f_right = np.where(go_left, f_new, f_right), np.where(go_left, f_left, f_new)
        left, right = new_left, new_right
    return (low + high) / 2


def survival_at(values: np.ndarray, xmin: int, a: float) -> np.ndarray:
    """P(X >= v) = zeta(a, v) / zeta(a, xmin) at integers v >= xmin: a cumulative sum of k^-a over
    the first ``DENSE_INTEGERS`` integers, Hurwitz zeta calls beyond."""
    values = np.asarray(values, dtype=np.int64)
    log_total = log_zeta(a, xmin)
    # Terms and total scaled by xmin^a, which keeps them finite however large xmin is.
    total = math.exp(log_total + a * math.log(xmin))
    last_dense = min(int(values.max()), xmin + DENSE_INTEGERS)
    below = np.concatenate([[0.0], np.cumsum((np.arange(xmin, last_dense + 1, dtype=float) / xmin) ** -a)])
    dense = values <= last_dense + 1
    out = np.empty(values.size)
    out[dense] = (total - below[values[dense] - xmin]) / total
    out[~dense] = np.exp(log_zeta(a, values[~dense].astype(float)) - log_total)
    return np.clip(out, 0.0, 1.0)


def discrete_ks(values: np.ndarray, counts: np.ndarray, xmin: int, a: float) -> float:
    """sup over integers x >= xmin of |empirical CDF - model CDF| of the tail (CSN eq. 3.9 on the
    discrete CDF). Between two observed values the empirical CDF is flat and the model's rises,
    so the supremum is reached at an observed value or just before the next one."""
    cumulative = np.cumsum(counts) / counts.sum()
    points = np.concatenate([values, values + 1])  # P(X <= v) = 1 - P(X >= v + 1)
    survival = survival_at(points, xmin, a)
    model_at = 1.0 - survival[values.size:]  # F(v_j)
    before_next = 1.0 - survival[:values.size]  # F(v_j - 1): the model just before each value
    empirical_before = np.concatenate([[0.0], cumulative[:-1]])
    return float(max(np.max(np.abs(cumulative - model_at)), np.max(np.abs(empirical_before - before_next))))


def exponent_se(a: float, xmin: int, n_tail: int) -> float:
    """Asymptotic standard error of a: 1 / sqrt(n_t d^2 ln zeta(a, xmin) / da^2) (CSN eq. 3.6,
    whose bracket is the second derivative of ln zeta), by a central difference."""
    h = 1e-4 * max(1.0, a)
    second = (log_zeta(a + h, xmin) - 2 * log_zeta(a, xmin) + log_zeta(a - h, xmin)) / (h * h)
    return 1.0 / math.sqrt(n_tail * second) if second > 0 else math.inf


class DiscretePowerLaw:
    """Discrete power law above xmin, xmin chosen by KS minimisation (CSN §3.3 on the discrete CDF).

    Candidates are the distinct values leaving at least ``min_tail`` observations at or above them,
    except the largest, thinned to ``max_candidates`` evenly spaced in rank; a fixed ``xmin`` skips
    the scan. Learned: ``exponent_`` (CSN's a), ``exponent_se_``, ``alpha_`` (= a - 1, the tail
    index of the survival function) and ``alpha_se_``, ``xmin_``, ``n_tail_``, ``ks_`` and the scan
    ``scan_xmin_``, ``scan_exponent_``, ``scan_ks_``. :meth:`gof` gives CSN's bootstrap p-value.
    Data must be positive integer multiples of ``step`` (:func:`integer_values` of values / step;
    step 1 for integer milliseconds); ``xmin`` and ``xmin_`` are in the data's unit.
    """

    def __init__(self, xmin: float | str = "auto", *, step: float = 1.0, min_tail: int = 50, max_candidates: int = 1000):
        if not (isinstance(step, (int, float, np.floating)) and step > 0):
            raise ParameterError("step", "a positive grid step", step)
        if xmin != "auto" and not (isinstance(xmin, (int, np.integer, float)) and xmin / step >= 1
                                   and xmin / step == round(xmin / step)):
            raise ParameterError("xmin", f"'auto' or a positive multiple of the step {step:g}", xmin)
        self.xmin, self.step = xmin, float(step)
        self.min_tail = check_positive_int("min_tail", min_tail, 2)
        self.max_candidates = check_positive_int("max_candidates", max_candidates, 1)

    def _grid(self, samples: Samples) -> Samples:
        return samples if self.step == 1 else Samples(samples.values / self.step, samples.counts, samples.unit)

    def fit(self, samples: Samples) -> DiscretePowerLaw:
        samples = self._grid(samples)
        values = integer_values(samples)
        counts = samples.counts
        count_suffix = np.cumsum(counts[::-1])[::-1]  # observations >= values[j]
        log_suffix = np.cumsum((counts * np.log(values))[::-1])[::-1]
        if self.xmin == "auto":
            eligible = np.flatnonzero((count_suffix >= self.min_tail) & (np.arange(values.size) < values.size - 1))
            if eligible.size == 0:
                raise InsufficientData(f"discrete power law: fewer than min_tail={self.min_tail} observations "
                                       "at or above any candidate xmin")
            if eligible.size > self.max_candidates:
                eligible = eligible[np.unique(np.linspace(0, eligible.size - 1, self.max_candidates).round().astype(int))]
            xmins = values[eligible]
        else:
            assert not isinstance(self.xmin, str)  # "auto" took the branch above
            start = int(np.searchsorted(values, round(self.xmin / self.step)))
            if start >= values.size:
                raise InsufficientData(f"xmin={self.xmin!r} is above every observation (max {samples.max:g})")
            eligible, xmins = np.array([start]), np.array([int(round(self.xmin / self.step))])
        exponents = fit_exponent(xmins, count_suffix[eligible], log_suffix[eligible])
        distances = np.array([discrete_ks(values[j:], counts[j:], int(x), float(a))
                              for j, x, a in zip(eligible, xmins, exponents)])
        best = int(np.argmin(distances))
        self.scan_xmin_, self.scan_exponent_, self.scan_ks_ = xmins * self.step, exponents, distances
        self._xmin_grid = int(xmins[best])
        self.xmin_ = self._xmin_grid * self.step
        self.exponent_ = float(exponents[best])
        self.n_tail_ = int(count_suffix[eligible[best]])
        self.ks_ = float(distances[best])
        self.exponent_se_ = exponent_se(self.exponent_, self._xmin_grid, self.n_tail_)
        self.alpha_, self.alpha_se_ = self.exponent_ - 1.0, self.exponent_se_
        return self

    # --- sampling -------------------------------------------------------------------------------
    def sample_counts(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        """``size`` draws from the fitted tail as (distinct values, counts) in the data's unit: a
        multinomial over the integers xmin .. xmin + DENSE_INTEGERS, exact inverse-CDF draws beyond."""
        values, counts = draw_zeta_counts(rng, size, self._xmin_grid, self.exponent_)
        return values * self.step, counts

    def survival(self, x: np.ndarray) -> np.ndarray:
        """The fitted P(X >= x | X >= xmin) at grid points x >= xmin (data unit)."""
        return survival_at(np.round(np.asarray(x) / self.step).astype(np.int64), self._xmin_grid, self.exponent_)

    def gof(self, samples: Samples, *, n_boot: int = 100, seed: int = 0, max_candidates: int = 200) -> float:
        """CSN's semi-parametric bootstrap p-value (§4.1): each synthetic sample takes a
        Binomial(n, n_tail/n) number of draws from the fitted discrete power law above xmin and the
        rest from the empirical values below xmin, is refitted including the xmin scan (at most
        ``max_candidates`` candidates, to bound the cost), and counts when its KS distance is at
        least the observed one. p >= 0.1: the power law is plausible (CSN §4.1)."""
        check_positive_int("n_boot", n_boot, 1)
        rng = np.random.default_rng(seed)
        n = samples.n
        below = samples.values < self.xmin_
        body = Samples(samples.values[below], samples.counts[below], samples.unit) if np.any(below) else None
        exceed = 0
        for _ in range(n_boot):
            from_tail = int(rng.binomial(n, self.n_tail_ / n)) if body is not None else n
            tail_values, tail_counts = self.sample_counts(rng, from_tail)
            values, counts = [tail_values], [tail_counts]
            if body is not None and from_tail < n:
                body_counts = rng.multinomial(n - from_tail, body.counts / body.n)
                values.append(body.values)
                counts.append(body_counts)
            synthetic = Samples.from_counts(np.concatenate(values), np.concatenate(counts), samples.unit)
            refit = DiscretePowerLaw(self.xmin, step=self.step, min_tail=self.min_tail, max_candidates=max_candidates)
            try:
                exceed += refit.fit(synthetic).ks_ >= self.ks_
            except InsufficientData:
                continue
        return exceed / n_boot


def draw_zeta_counts(rng: np.random.Generator, size: int, xmin: int, a: float) -> tuple[np.ndarray, np.ndarray]:
    """``size`` independent draws of P(X = x) = x^-a / zeta(a, xmin), x >= xmin, as counts."""
    if size == 0:
        return np.array([], dtype=float), np.array([], dtype=np.int64)
    log_total = log_zeta(a, xmin)
    dense = np.arange(xmin, xmin + DENSE_INTEGERS, dtype=float)
    pmf = np.exp(-a * np.log(dense) - log_total)
    beyond = max(0.0, 1.0 - pmf.sum())  # P(X >= xmin + DENSE_INTEGERS)
    counts = rng.multinomial(size, np.append(pmf, beyond))
    far = int(counts[-1])
    values, counts = dense, counts[:-1]
    if far:
        extra = _inverse_survival(rng.random(far) * beyond, xmin, a, log_total, xmin + DENSE_INTEGERS)
        distinct, extra_counts = np.unique(extra, return_counts=True)
        values = np.concatenate([values, distinct.astype(float)])
        counts = np.concatenate([counts, extra_counts])
    keep = counts > 0
    return values[keep], counts[keep]


def _inverse_survival(u: np.ndarray, xmin: int, a: float, log_total: float, start: int) -> np.ndarray:
    """Smallest integer x >= start with P(X > x) <= u < P(X >= x): integer bisection on the Hurwitz
    zeta survival, vectorised (CSN appendix D's exact discrete generator)."""
    low = np.full(u.size, start, dtype=np.int64)  # P(X >= low) >= u holds
    high = np.full(u.size, start, dtype=np.int64)
    while True:  # bracket: double until P(X >= high + 1) <= u; draws are capped at 2^52 (exact floats)
        short = (np.exp(log_zeta(a, (high + 1).astype(float)) - log_total) > u) & (high < 2 ** 52)
        if not np.any(short):
            break
        high = np.where(short, np.minimum(high * 2, 2 ** 52), high)
    while np.any(high > low):
        middle = (low + high) // 2
        enough = np.exp(log_zeta(a, (middle + 1).astype(float)) - log_total) <= u
        high = np.where(enough, middle, high)
        low = np.where(enough, low, middle + 1)
    return low
