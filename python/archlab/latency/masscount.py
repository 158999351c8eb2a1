"""Mass-count disparity (Feitelson 2015, *Workload Modeling*, ch. 5; seed 000 §4.7.5), exact from
counts: the count CDF F_c(x) = P(X <= x), the mass CDF F_m(x) = E[X 1{X <= x}] / E[X], the Lorenz
curve (F_c, F_m), the Gini coefficient, the joint ratio, N1/2 and W1/2.

For an empirical distribution the Lorenz curve is exactly the polygon through the points
(F_c, F_m) at the distinct values (items of equal size add mass linearly), so every quantity below
is read off that polygon without approximation:

* Gini = 1 - 2 * integral of L (trapezoid rule, exact on the polygon). This is the *population*
  form sum |x_i - x_j| / (2 n^2 mean); ``unbiased=True`` multiplies by n / (n - 1).
* joint ratio: the point where F_c + F_m = 1; ``joint_ratio`` is the percentage of items, the
  largest, that hold the complementary percentage (100 - joint_ratio) of the mass ("X/Y rule").
* N1/2: percentage of items, the largest, that hold half the mass.
* W1/2: percentage of the mass held by the smaller half of the items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archlab.latency.errors import InsufficientData
from archlab.latency.samples import Samples


@dataclass(frozen=True)
class MassCount:
    x: np.ndarray  # the distinct values
    count_cdf: np.ndarray  # F_c at x
    mass_cdf: np.ndarray  # F_m at x
    gini: float
    joint_ratio: float  # percent of items (the largest) holding 100 - joint_ratio percent of the mass
    n_half: float  # percent
    w_half: float  # percent
    unbiased_gini: bool

    @property
    def lorenz(self) -> tuple[np.ndarray, np.ndarray]:
        """The Lorenz polygon, starting at (0, 0)."""
        return np.concatenate([[0.0], self.count_cdf]), np.concatenate([[0.0], self.mass_cdf])


def mass_count(samples: Samples, *, unbiased: bool = False) -> MassCount:
    if samples.min < 0:
        raise InsufficientData(f"mass_count: needs non-negative values, got min {samples.min!r}")
    mass = samples.counts * samples.values
    total = float(mass.sum())
    if total <= 0:
        raise InsufficientData("mass_count: total mass is zero")
    count_cdf = samples.cumulative / samples.n
    mass_cdf = np.cumsum(mass) / total
    p, lorenz = np.concatenate([[0.0], count_cdf]), np.concatenate([[0.0], mass_cdf])
    gini = 1.0 - float(np.sum(np.diff(p) * (lorenz[1:] + lorenz[:-1])))
    if unbiased:
        if samples.n < 2:
            raise InsufficientData("mass_count(unbiased=True): needs n >= 2")
        gini *= samples.n / (samples.n - 1)
    # L is increasing and p + L(p) strictly increasing, so these inverse readings are unique.
    joint_p = float(np.interp(1.0, p + lorenz, p))
    n_half_p = float(np.interp(0.5, lorenz, p)) if np.all(np.diff(lorenz) > 0) else _first_crossing(p, lorenz, 0.5)
    return MassCount(x=samples.values, count_cdf=count_cdf, mass_cdf=mass_cdf, gini=gini,
                     joint_ratio=100.0 * (1.0 - joint_p), n_half=100.0 * (1.0 - n_half_p),
                     w_half=100.0 * float(np.interp(0.5, p, lorenz)), unbiased_gini=unbiased)


def _first_crossing(p: np.ndarray, lorenz: np.ndarray, level: float) -> float:
    """Smallest p with L(p) = level on a polygon that may be flat (zero-sized items)."""
    j = int(np.searchsorted(lorenz, level, side="left"))
    if j == 0:
        return 0.0
    span = lorenz[j] - lorenz[j - 1]
    return float(p[j - 1] + (p[j] - p[j - 1]) * (level - lorenz[j - 1]) / span)
