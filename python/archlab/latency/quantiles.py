"""Quantiles (percentiles) of :class:`Samples` under a stated definition, exact from counts.

Tools disagree on "the 99th percentile" of a sample: NumPy's default interpolates between order
statistics (Hyndman & Fan 1996 type 7), HdrHistogram (Java, Rust) and most load generators take the
nearest rank ``ceil(p*n)`` (H&F type 1, NumPy ``inverted_cdf``), and the HdrHistogram Python port
rounds the rank half up. Every result of this library says which definition it used. The continuous
definitions follow NumPy's parametrisation (virtual index ``n*q + alpha + q*(1-alpha-beta) - 1``),
so ``quantile(Samples.from_values(x), q, m)`` equals ``numpy.quantile(x, q, method=m)`` (to a
few ulps); order
statistics are located in the cumulative counts, so the cost is O(U log U) whatever n is.
"""

from __future__ import annotations

import enum

import numpy as np

from archlab.latency.errors import ParameterError, check_choice
from archlab.latency.samples import Samples


class QuantileMethod(str, enum.Enum):
    """The quantile definitions offered; the value is NumPy's name where NumPy has one."""

    LINEAR = "linear"  # H&F 7, NumPy default
    HAZEN = "hazen"  # H&F 5
    WEIBULL = "weibull"  # H&F 6
    MEDIAN_UNBIASED = "median_unbiased"  # H&F 8
    NORMAL_UNBIASED = "normal_unbiased"  # H&F 9
    NEAREST_RANK = "inverted_cdf"  # H&F 1: smallest x with F(x) >= q; HdrHistogram Java/Rust
    LOWER = "lower"
    HIGHER = "higher"


# (alpha, beta) of the continuous definitions, as in Hyndman & Fan (1996) and numpy.quantile.
_PLOTTING_POSITIONS = {
    QuantileMethod.LINEAR: (1.0, 1.0),
    QuantileMethod.HAZEN: (0.5, 0.5),
    QuantileMethod.WEIBULL: (0.0, 0.0),
    QuantileMethod.MEDIAN_UNBIASED: (1 / 3, 1 / 3),
    QuantileMethod.NORMAL_UNBIASED: (3 / 8, 3 / 8),
}

DEFINITIONS = {
    QuantileMethod.LINEAR: "Hyndman-Fan type 7: linear interpolation of order statistics at (n-1)q (NumPy default)",
    QuantileMethod.HAZEN: "Hyndman-Fan type 5: piecewise linear, plotting positions (k-0.5)/n",
    QuantileMethod.WEIBULL: "Hyndman-Fan type 6: piecewise linear, plotting positions k/(n+1)",
    QuantileMethod.MEDIAN_UNBIASED: "Hyndman-Fan type 8: approximately median-unbiased",
    QuantileMethod.NORMAL_UNBIASED: "Hyndman-Fan type 9: approximately unbiased for normal data",
    QuantileMethod.NEAREST_RANK: "nearest rank: the ceil(q*n)-th smallest value (Hyndman-Fan type 1; HdrHistogram)",
    QuantileMethod.LOWER: "the floor((n-1)q)-th order statistic (0-based)",
    QuantileMethod.HIGHER: "the ceil((n-1)q)-th order statistic (0-based)",
}


def parse_method(method: QuantileMethod | str) -> QuantileMethod:
    aliases = {"nearest_rank": QuantileMethod.NEAREST_RANK, "nearest-rank": QuantileMethod.NEAREST_RANK}
    if isinstance(method, str) and method in aliases:
        return aliases[method]
    try:
        return QuantileMethod(method)
    except ValueError:
        check_choice("method", method, [m.value for m in QuantileMethod] + list(aliases))
        raise


def _ceil_exact(x: np.ndarray) -> np.ndarray:
    """ceil() that does not jump to the next integer when n*q lands a rounding error above one
    (0.9 * 10 == 9.000000000000002); the same guard HdrHistogram applies by nudging p down."""
    return np.ceil(x - 1e-12 * np.maximum(np.abs(x), 1.0))


def quantile(samples: Samples, q: float | np.ndarray, method: QuantileMethod | str = "linear") -> np.ndarray:
    """Quantiles at probabilities ``q`` (in [0, 1]); returns an array shaped like ``q``."""
    method = parse_method(method)
    q = np.asarray(q, dtype=float)
    if not np.all((q >= 0) & (q <= 1)):
        raise ParameterError("q", "probabilities in [0, 1]", q[(q < 0) | (q > 1)].tolist())
    n = samples.n
    if method is QuantileMethod.NEAREST_RANK:
        ranks = np.clip(_ceil_exact(n * q) - 1, 0, n - 1)
        return samples.order_statistics(ranks.astype(np.int64))
    if method in (QuantileMethod.LOWER, QuantileMethod.HIGHER):
        position = (n - 1) * q
        rounded = np.floor(position) if method is QuantileMethod.LOWER else _ceil_exact(position)
        return samples.order_statistics(rounded.astype(np.int64))
    alpha, beta = _PLOTTING_POSITIONS[method]
    position = np.clip(n * q + alpha + q * (1 - alpha - beta) - 1, 0, n - 1)
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, n - 1)
    fraction = position - below
    low, high = samples.order_statistics(below), samples.order_statistics(above)
    # The lerp form NumPy uses (exact at both ends of the interval).
    return np.where(fraction >= 0.5, high - (high - low) * (1 - fraction), low + (high - low) * fraction)


def percentiles(samples: Samples, p: float | np.ndarray, method: QuantileMethod | str = "linear") -> np.ndarray:
    """Like :func:`quantile` with ``p`` in percent (99.9 means the 0.999 quantile)."""
    return quantile(samples, np.asarray(p, dtype=float) / 100.0, method)
