"""The heavy-tail checks of seed 000 §4.7.5: is the tail index in (0, 2), and is it stable under
aggregation X^(m) (sums of m consecutive observations, thesis eq. 4.16)?

For a heavy tail with alpha < 2 the sum of m observations keeps the same tail index (it is in the
domain of attraction of an alpha-stable law), while with finite variance the sums drift towards
the normal and the estimated tail index grows with m (Crovella & Taqqu 1999 build their ``aest``
estimator on the same scaling). Here each level m is summarised by its Hill estimate at the same
tail fraction (``tail_fraction``, the top 2% by default: the sums' bodies are not power laws,
so a data-driven k of the original data does not carry over), and the verdict compares them with
a stated tolerance: level m agrees with level 1 when |alpha_m - alpha_1| <= max(tolerance *
alpha_1, 3 alpha_m / sqrt(k_m)), the second term being three asymptotic Hill standard errors, and
levels with fewer than ``min_k`` tail points are not used. The verdict is a screening aid;
the numbers are returned for judgment.

Order: X^(m) needs the observations in time order. :func:`aggregate` takes a time-ordered array;
:func:`heavy_tail_check` on :class:`Samples` (which keep no order) uses seeded i.i.d. draws from
the empirical distribution, which is the same thing under the i.i.d. assumption of the tail-index
estimators, and says so in its result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archlab.latency.errors import InsufficientData, ParameterError, check_positive_int, check_probability
from archlab.latency.samples import Samples
from archlab.latency.tails import HillEstimator, PowerLawTail, hill, llcd


def aggregate(series: np.ndarray, m: int) -> np.ndarray:
    """X^(m)_i = sum of observations (i-1)m+1 .. im of a time-ordered series (incomplete block dropped)."""
    check_positive_int("m", m)
    series = np.asarray(series, dtype=float)
    blocks = series.size // m
    if blocks < 1:
        raise ParameterError("m", f"at most the series length {series.size}", m)
    return series[: blocks * m].reshape(blocks, m).sum(axis=1)


@dataclass(frozen=True)
class AggregationLevel:
    m: int
    n: int  # number of aggregated observations
    k: int  # tail points used by the Hill estimate
    alpha: float


@dataclass(frozen=True)
class HeavyTailCheck:
    alpha_hill: float
    alpha_mle: float  # CSN power-law tail
    alpha_llcd: float
    index_in_0_2: bool  # the Hill estimate
    aggregation: tuple[AggregationLevel, ...]
    aggregation_stable: bool
    tolerance: float
    order: str  # "time order" or "i.i.d. draws from the empirical distribution"

    @property
    def heavy_tailed(self) -> bool:
        return self.index_in_0_2 and self.aggregation_stable


def heavy_tail_check(samples: Samples, *, levels: Sequence[int] = (1, 2, 4, 8, 16, 32), tolerance: float = 0.25,
                     tail_fraction: float = 0.02, min_k: int = 50,
                     max_draws: int = 1_000_000, seed: int = 0, series: np.ndarray | None = None,
                     hill_estimator: HillEstimator | None = None) -> HeavyTailCheck:
    """Run the §4.7.5 checks. ``series`` (time-ordered raw values) is used for X^(m) when given;
    otherwise min(n, ``max_draws``) i.i.d. draws. Aggregation counts as stable when every level's
    Hill estimate agrees with level 1's (see the module note)."""
    if not 0 < tolerance < 1:
        raise ParameterError("tolerance", "a relative tolerance strictly between 0 and 1", tolerance)
    check_probability("tail_fraction", tail_fraction)
    check_positive_int("min_k", min_k, 2)
    fitted = hill_estimator if hill_estimator is not None else HillEstimator(seed=seed).fit(samples)
    if series is None:
        base = samples.draw(np.random.default_rng(seed), min(samples.n, max_draws))
        order = "i.i.d. draws from the empirical distribution"
    else:
        base = np.asarray(series, dtype=float)
        order = "time order"
    levels_out = []
    for m in levels:
        aggregated = aggregate(base, m)
        k = int(round(tail_fraction * aggregated.size))
        if k < min_k or k >= aggregated.size:
            break  # too few blocks left for a tail estimate at this level
        levels_out.append(AggregationLevel(m, aggregated.size, k, float(hill(Samples.from_values(aggregated), k)[0])))
    if len(levels_out) < 2:
        raise InsufficientData(f"heavy_tail_check: too few observations ({samples.n}) for two aggregation levels")
    reference = levels_out[0].alpha
    stable = all(abs(level.alpha - reference) <= max(tolerance * reference, 3 * level.alpha / math.sqrt(level.k))
                 for level in levels_out)
    return HeavyTailCheck(alpha_hill=fitted.alpha_, alpha_mle=PowerLawTail().fit(samples).alpha_,
                          alpha_llcd=llcd(samples).alpha, index_in_0_2=0 < fitted.alpha_ < 2,
                          aggregation=tuple(levels_out), aggregation_stable=stable, tolerance=tolerance, order=order)
