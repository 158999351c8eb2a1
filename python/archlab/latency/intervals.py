"""Confidence intervals for statistics of :class:`Samples`: bootstrap and order-statistic (binomial).

The bootstrap here resamples the *count vector* (a multinomial draw of n over the U distinct
values), which is exactly the nonparametric bootstrap of the raw sample at O(U) per replicate, and
reports the percentile interval. For quantiles the distribution-free interval from the binomial
distribution of ranks (the ``l``-th and ``u``-th order statistics with P(l <= rank < u) >= level,
e.g. Hahn & Meeker 1991, §5.2) is also offered: it needs no resampling and keeps its coverage in the
far tail, where the bootstrap of a quantile is known to be poor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from archlab.latency.errors import check_positive_int, check_probability
from archlab.latency.quantiles import QuantileMethod, quantile
from archlab.latency.samples import Samples


@dataclass(frozen=True)
class Bounds:
    low: np.ndarray
    high: np.ndarray


def bootstrap(statistic: Callable[[Samples], np.ndarray], samples: Samples, *, level: float = 0.95,
              n_boot: int = 1000, seed: int | np.random.Generator = 0) -> Bounds:
    """Percentile-bootstrap interval of a (vector) statistic, resampling the counts ``n_boot`` times."""
    check_probability("level", level)
    check_positive_int("n_boot", n_boot, 2)
    rng = np.random.default_rng(seed)
    replicates = np.array([statistic(samples.resample(rng)) for _ in range(n_boot)])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [tail, 1.0 - tail], axis=0)
    return Bounds(np.asarray(low), np.asarray(high))


def bootstrap_quantile(samples: Samples, q: np.ndarray, method: QuantileMethod | str = "linear", *,
                       level: float = 0.95, n_boot: int = 1000, seed: int | np.random.Generator = 0) -> Bounds:
    return bootstrap(lambda s: quantile(s, q, method), samples, level=level, n_boot=n_boot, seed=seed)


def binomial_quantile(samples: Samples, q: np.ndarray, *, level: float = 0.95) -> Bounds:
    """Distribution-free interval [X_(l), X_(u)] for the q-quantile (1-based ranks, clipped to 1..n).

    With B ~ Binomial(n, q), P(X_(l) <= x_q < X_(u)) = P(l <= B < u) >= level for
    l = F_B^{-1}((1-level)/2) and u = F_B^{-1}((1+level)/2) + 1 (equal tails; conservative because B
    is discrete). Where l or u fall outside 1..n the interval is open on that side and is clipped to
    the sample minimum or maximum, which then understates the uncertainty.
    """
    check_probability("level", level)
    q = np.asarray(q, dtype=float)
    n = samples.n
    tail = (1.0 - level) / 2.0
    lower_rank = sps.binom.ppf(tail, n, q)
    upper_rank = sps.binom.ppf(1.0 - tail, n, q) + 1
    # 1-based ranks -> 0-based, clipped into the sample.
    lower = np.clip(lower_rank - 1, 0, n - 1).astype(np.int64)
    upper = np.clip(upper_rank - 1, 0, n - 1).astype(np.int64)
    return Bounds(samples.order_statistics(lower), samples.order_statistics(upper))
