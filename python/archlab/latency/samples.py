"""The one data type every statistic in archlab.latency runs on: samples with exact counts.

A :class:`Samples` holds the *distinct* observed values in increasing order and, for each, how many
times it was observed, plus the unit. Raw samples (``from_values``) and pre-aggregated counts
(``from_counts``, e.g. ``SELECT elapsed, count(*) ... GROUP BY 1`` over a JTL file, or the buckets
of an HdrHistogram) end up in the same canonical form, so every statistic gives the same answer on
both, and its cost depends on the number U of distinct values, not on the number n of samples.
Integer-millisecond JMeter data has U of 10^3..10^5 however large n is. Bootstrap resamples are
multinomial draws of the count vector (O(U) each), never expansions of the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from archlab.latency.errors import InsufficientData, ParameterError, check_choice

# Seconds per unit; the names are the ones latency tools print.
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True, eq=False)
class Samples:
    """Distinct values (sorted, finite) with positive integer counts, in ``unit``.

    Build it with :meth:`from_values` or :meth:`from_counts`; the constructor only checks.
    """

    values: np.ndarray
    counts: np.ndarray
    unit: str = "ms"

    def __post_init__(self) -> None:
        check_choice("unit", self.unit, UNIT_SECONDS)
        v, c = self.values, self.counts
        if v.ndim != 1 or c.shape != v.shape:
            raise ParameterError("counts", f"a 1-d array of the length of values ({v.shape})", c.shape)
        if v.size == 0:
            raise InsufficientData("samples: expected at least one observation, got none")
        if v.size > 1 and not np.all(np.diff(v) > 0):
            raise ParameterError("values", "strictly increasing distinct values", "unsorted values",
                                 "use Samples.from_counts to aggregate")
        if not np.all(c > 0):
            raise ParameterError("counts", "positive integers", c[c <= 0][:5].tolist())
        # Read-only views: the arrays are shared by every statistic, and the caller's own arrays
        # must stay writable.
        for name, array in (("values", v), ("counts", c)):
            view = array.view()
            view.setflags(write=False)
            object.__setattr__(self, name, view)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_values(cls, values: Sequence[float] | np.ndarray, unit: str = "ms") -> Samples:
        """Raw observations, in any order, with repeats."""
        array = _finite_1d(values, "values")
        distinct, counts = np.unique(array, return_counts=True)
        return cls(distinct, counts.astype(np.int64), unit)

    @classmethod
    def from_counts(cls, values: Sequence[float] | np.ndarray, counts: Sequence[int] | np.ndarray,
                    unit: str = "ms") -> Samples:
        """``counts[i]`` observations of ``values[i]``; repeated values are summed, zero counts dropped."""
        v = _finite_1d(values, "values")
        c = np.asarray(counts)
        if c.shape != v.shape:
            raise ParameterError("counts", f"an array of the length of values ({v.size})", c.shape)
        if c.size and (not np.all(c >= 0) or not np.all(np.asarray(c) == np.floor(c))):
            raise ParameterError("counts", "non-negative integers", c[(c < 0) | (c != np.floor(c))][:5].tolist())
        c = c.astype(np.int64)
        keep = c > 0
        distinct, inverse = np.unique(v[keep], return_inverse=True)
        summed = np.bincount(inverse, weights=c[keep], minlength=distinct.size)
        return cls(distinct, np.rint(summed).astype(np.int64), unit)

    # --- basic quantities ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of observations (sum of counts)."""
        return int(self.cumulative[-1])

    @property
    def distinct(self) -> int:
        return int(self.values.size)

    @cached_property
    def cumulative(self) -> np.ndarray:
        """``cumulative[j]`` = number of observations <= ``values[j]``."""
        return np.cumsum(self.counts)

    @cached_property
    def mean(self) -> float:
        return float(np.dot(self.counts, self.values) / self.n)

    @cached_property
    def variance(self) -> float:
        """Sample variance (ddof=1); 0 for a single observation."""
        if self.n < 2:
            return 0.0
        deviations = self.values - self.mean
        return float(np.dot(self.counts, deviations * deviations) / (self.n - 1))

    @property
    def std(self) -> float:
        return float(np.sqrt(self.variance))

    @property
    def min(self) -> float:
        return float(self.values[0])

    @property
    def max(self) -> float:
        return float(self.values[-1])

    def order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """Values at 0-based ascending ranks (``ranks`` in [0, n-1]) without expanding the data."""
        ranks = np.asarray(ranks)
        return self.values[np.searchsorted(self.cumulative, ranks, side="right")]

    # --- derived samples ----------------------------------------------------------------------
    def expand(self) -> np.ndarray:
        """All n observations, sorted. O(n) memory: for small data and cross-checks only."""
        return np.repeat(self.values, self.counts)

    def at_least(self, threshold: float) -> Samples:
        """The observations >= ``threshold`` (the tail above an xmin)."""
        start = int(np.searchsorted(self.values, threshold, side="left"))
        if start >= self.values.size:
            raise InsufficientData(f"threshold: no observation >= {threshold!r} (max {self.max!r})")
        return Samples(self.values[start:], self.counts[start:], self.unit)

    def resample(self, rng: np.random.Generator, size: int | None = None) -> Samples:
        """A bootstrap resample: ``size`` (default n) draws with replacement, as a multinomial of counts."""
        size = self.n if size is None else size
        counts = rng.multinomial(size, self.counts / self.n)
        keep = counts > 0
        return Samples(self.values[keep], counts[keep], self.unit)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws from the empirical distribution, as raw values in random order."""
        return self.values[np.searchsorted(self.cumulative, rng.integers(0, self.n, size), side="right")]

    def to_unit(self, unit: str) -> Samples:
        check_choice("unit", unit, UNIT_SECONDS)
        factor = UNIT_SECONDS[self.unit] / UNIT_SECONDS[unit]
        return Samples(self.values * factor, self.counts, unit)

    def merge(self, other: Samples) -> Samples:
        """Exact union of two count vectors (lossless, associative); ``other`` is converted to this unit."""
        other = other.to_unit(self.unit)
        return Samples.from_counts(np.concatenate([self.values, other.values]),
                                   np.concatenate([self.counts, other.counts]), self.unit)

    def require_positive(self, what: str) -> None:
        if self.min <= 0:
            raise InsufficientData(
                f"{what}: needs strictly positive values, got min {self.min!r} {self.unit} "
                "(use a shifted family, or drop zero latencies)")

    def __repr__(self) -> str:
        return f"Samples(n={self.n}, distinct={self.distinct}, min={self.min:g}, max={self.max:g}, unit={self.unit!r})"


def _finite_1d(values: object, parameter: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(array)):
        raise ParameterError(parameter, "finite numbers", array[~np.isfinite(array)][:5].tolist())
    return array


def as_samples(data: Samples | Sequence[float] | np.ndarray, unit: str = "ms") -> Samples:
    """Accept either a :class:`Samples` or raw values (taken to be in ``unit``)."""
    return data if isinstance(data, Samples) else Samples.from_values(data, unit)
