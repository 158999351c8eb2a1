"""The descriptive summary of a latency sample: count, mean with its confidence interval, standard
deviation, extremes, and percentiles of a stated definition with confidence intervals.

The mean's interval is Student t, from :func:`archlab.stats.mean_confidence_interval`, the one
place the package keeps that formula; it takes the exact counts directly, so 10^8 observations
are never expanded. Percentile intervals are bootstrap (multinomial on counts) or
distribution-free binomial, see :mod:`archlab.latency.intervals`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archlab.latency.errors import ParameterError, check_choice, check_probability
from archlab.latency.intervals import binomial_quantile, bootstrap_quantile
from archlab.latency.quantiles import DEFINITIONS, parse_method, quantile
from archlab.latency.samples import Samples
from archlab.stats import Interval, mean_confidence_interval

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
CI_METHODS = ("bootstrap", "binomial", "none")


@dataclass(frozen=True)
class PercentileEstimate:
    percentile: float
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Summary:
    count: int
    distinct: int
    unit: str
    mean: Interval
    std: float
    min: float
    max: float
    percentiles: tuple[PercentileEstimate, ...]
    quantile_method: str
    quantile_definition: str
    ci_method: str
    level: float

    def percentile(self, p: float) -> PercentileEstimate:
        for estimate in self.percentiles:
            if estimate.percentile == p:
                return estimate
        raise ParameterError("p", "one of the summarised percentiles " + repr([e.percentile for e in self.percentiles]), p)


def mean_interval(samples: Samples, level: float = 0.95) -> Interval:
    """Student-t interval of the mean, computed from the exact counts."""
    check_probability("level", level)
    return mean_confidence_interval(samples.values, level, counts=samples.counts)


def summarize(samples: Samples, percentiles: Sequence[float] = DEFAULT_PERCENTILES, *,
              method: str = "linear", level: float = 0.95, ci: str = "bootstrap",
              n_boot: int = 1000, seed: int = 0) -> Summary:
    """Summary statistics; ``ci`` chooses the percentile interval (bootstrap, binomial or none)."""
    quantile_method = parse_method(method)
    check_choice("ci", ci, CI_METHODS)
    check_probability("level", level)
    p = np.asarray(list(percentiles), dtype=float)
    if p.size == 0 or not np.all((p >= 0) & (p <= 100)):
        raise ParameterError("percentiles", "a non-empty list of numbers in [0, 100]", list(percentiles))
    q = p / 100.0
    values = quantile(samples, q, quantile_method)
    if ci == "bootstrap":
        bounds = bootstrap_quantile(samples, q, quantile_method, level=level, n_boot=n_boot, seed=seed)
        low, high = bounds.low, bounds.high
    elif ci == "binomial":
        bounds = binomial_quantile(samples, q, level=level)
        low, high = bounds.low, bounds.high
    else:
        low = high = np.full(p.size, np.nan)
    estimates = tuple(PercentileEstimate(float(pi), float(v), float(lo), float(hi))
                      for pi, v, lo, hi in zip(p, values, low, high))
    return Summary(count=samples.n, distinct=samples.distinct, unit=samples.unit,
                   mean=mean_interval(samples, level), std=samples.std, min=samples.min, max=samples.max,
                   percentiles=estimates, quantile_method=quantile_method.value,
                   quantile_definition=DEFINITIONS[quantile_method], ci_method=ci, level=level)
