"""Small-sample statistics shared by the whole package.

An experiment repeats each cell a handful of times (two to ten repetitions), so every summary of
repetitions the lab prints is a mean with a Student-t confidence interval, never a bare mean and
never a normal-approximation interval, which is far too narrow at such n. This module is the one
place those formulas live; the report, the analysis and the models import them from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "HDR_RESOLUTION", "Interval", "RatioInterval", "mean_confidence_interval", "median", "ratio_of_means_interval",
    "widen_to_quantum",
]

#: Relative error of a value read from an HDR histogram of 3 significant digits (a quantile, a
#: mean): its sub-buckets are 2^-10 of their power of two wide.
HDR_RESOLUTION = 2.0**-10


@dataclass(frozen=True)
class Interval:
    """A sample mean with its two-sided confidence interval ``[low, high]`` at ``level``.

    With a single observation there is no estimate of spread: ``low == high == mean`` and
    :attr:`has_interval` is false, so callers print "n=1" instead of a zero-width interval.
    """

    mean: float
    low: float
    high: float
    n: int
    level: float

    @property
    def has_interval(self) -> bool:
        return self.n >= 2

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def overlaps(self, other: Interval) -> bool:
        """Whether the two intervals share a point (a conservative "not distinguishable")."""
        return self.low <= other.high and other.low <= self.high


def _finite_array(values: Iterable[float], what: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        raise ValueError(f"{what}: expected at least one value, got none")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: expected finite values, got {array.tolist()!r}")
    return array


def mean_confidence_interval(values: Iterable[float], level: float = 0.95,
                             counts: Iterable[int] | None = None) -> Interval:
    """Mean of ``values`` with the Student-t confidence interval at ``level``.

    ``mean ± t_{(1+level)/2, n-1} · s / sqrt(n)`` with ``s`` the sample standard deviation
    (ddof=1). It assumes independent observations of roughly normal spread (or n large enough
    for the central limit theorem); for n=1 the interval is degenerate (see :class:`Interval`).
    ``counts``, when given, says how many times each value was observed (exact counts of
    distinct values, as the latency library keeps them): the result equals that of the
    expanded sample without expanding it.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: expected a probability strictly between 0 and 1, got {level!r}")
    array = _finite_array(values, "mean_confidence_interval")
    if counts is None:
        weights = np.ones(array.size)
    else:
        weights = np.asarray(list(counts), dtype=float)
        if weights.shape != array.shape or np.any(weights < 0) or not np.all(np.isfinite(weights)):
            raise ValueError(f"counts: expected one count >= 0 per value ({array.size}), got {weights.tolist()!r}")
    n = int(round(weights.sum()))
    if n == 0:
        raise ValueError("mean_confidence_interval: expected at least one observation, got counts summing to 0")
    mean = float(np.dot(weights, array) / n)
    if n == 1:
        return Interval(mean=mean, low=mean, high=mean, n=1, level=level)
    # scipy.special holds the same Student-t quantile as scipy.stats.t.ppf (stdtrit is what that
    # calls) at half the import cost; imported here so `import archlab.stats` stays cheap.
    from scipy.special import stdtrit

    t = float(stdtrit(n - 1, (1.0 + level) / 2.0))
    std = math.sqrt(float(np.dot(weights, (array - mean) ** 2)) / (n - 1))
    half_width = t * std / math.sqrt(n)
    return Interval(mean=mean, low=mean - half_width, high=mean + half_width, n=n, level=level)


def median(values: Iterable[float]) -> float:
    """The sample median (mean of the two middle values when n is even)."""
    return float(np.median(_finite_array(values, "median")))


@dataclass(frozen=True)
class RatioInterval:
    """``mean(b) / mean(a)`` with its two-sided confidence interval ``[low, high]`` at ``level``.

    ``resolution`` is the smallest relative change the two samples could have told apart from
    none at this level: the interval's half-width on the log scale, as a fraction
    (``exp(t·se) - 1``). With fewer than two observations on a side there is no interval.
    """

    ratio: float
    low: float
    high: float
    n_a: int
    n_b: int
    level: float
    resolution: float | None

    @property
    def has_interval(self) -> bool:
        return self.n_a >= 2 and self.n_b >= 2

    @property
    def change(self) -> float:
        """The relative change from a to b (``ratio - 1``)."""
        return self.ratio - 1.0


def ratio_of_means_interval(a: Iterable[float], b: Iterable[float], level: float = 0.95) -> RatioInterval:
    """Welch interval of the ratio of two means, computed on the log scale.

    Each value is one repetition's result (a throughput, a quantile), so the repetitions are the
    independent observations and their spread, not the spread of requests inside a repetition,
    is what the interval accounts for. ``log(mean(b)/mean(a))`` has, by the delta method, the
    variance ``s_a²/(n_a·m_a²) + s_b²/(n_b·m_b²)``; Welch–Satterthwaite gives its degrees of
    freedom, and the Student-t quantile the interval, which is then exponentiated. The log scale
    keeps the interval of a ratio positive and makes a slowdown and the matching speed-up
    symmetric. Values must be positive.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: expected a probability strictly between 0 and 1, got {level!r}")
    xa = _finite_array(a, "ratio_of_means_interval a")
    xb = _finite_array(b, "ratio_of_means_interval b")
    if np.any(xa <= 0) or np.any(xb <= 0):
        raise ValueError(f"ratio_of_means_interval: expected positive values, got {xa.tolist()!r} and {xb.tolist()!r}")
    ma, mb = float(xa.mean()), float(xb.mean())
    ratio = mb / ma
    if xa.size < 2 or xb.size < 2:
        return RatioInterval(ratio, ratio, ratio, int(xa.size), int(xb.size), level, None)
    from scipy.special import stdtrit

    va = float(xa.var(ddof=1)) / (xa.size * ma * ma)
    vb = float(xb.var(ddof=1)) / (xb.size * mb * mb)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return RatioInterval(ratio, ratio, ratio, int(xa.size), int(xb.size), level, 0.0)
    df = (va + vb) ** 2 / (va * va / (xa.size - 1) + vb * vb / (xb.size - 1))
    t = float(stdtrit(df, (1.0 + level) / 2.0))
    log_ratio = math.log(ratio)
    return RatioInterval(
        ratio=ratio,
        low=math.exp(log_ratio - t * se),
        high=math.exp(log_ratio + t * se),
        n_a=int(xa.size),
        n_b=int(xb.size),
        level=level,
        resolution=math.expm1(t * se),
    )


def widen_to_quantum(interval: RatioInterval, quantum: float) -> RatioInterval:
    """``interval`` no narrower than the rounding of the values it was computed from.

    Each value is known only to within a relative ``quantum`` (HDR quantiles: 2^-10), so their
    ratio is known to within about ``2·quantum`` however consistent the repetitions are. Without
    this floor, repetitions that all read the same HDR bucket give a zero-width interval and a
    resolution of 0, a claim to detect any change that the measurement cannot back.
    """
    if quantum <= 0.0 or not interval.has_interval:
        return interval
    floor = 2.0 * quantum
    return replace(
        interval,
        low=min(interval.low, interval.ratio / (1.0 + floor)),
        high=max(interval.high, interval.ratio * (1.0 + floor)),
        resolution=max(interval.resolution or 0.0, floor),
    )
