"""Empirical distribution curves of :class:`Samples`: ECDF and CCDF (with DKW bands), histograms
with linear or logarithmic bins, and a Gaussian kernel density estimate.

All are exact step or bin functions of the counts (the thesis script integrated a near-degenerate
KDE to get a "CDF", which is both biased and O(n * range)). Conventions: ``cdf = P(X <= x)``,
``ccdf = P(X > x)`` and ``survival_ge = P(X >= x)`` at each distinct value; the last is what a
log-log CCDF plot draws, because it never reaches zero at the largest observation. Histogram
densities are count / (n * bin width), so linear and log bins integrate to one alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as spfft

from archlab.latency.errors import InsufficientData, ParameterError, check_choice, check_positive_int, check_probability
from archlab.latency.quantiles import quantile
from archlab.latency.samples import Samples


@dataclass(frozen=True)
class ECDF:
    x: np.ndarray
    cdf: np.ndarray  # P(X <= x)
    ccdf: np.ndarray  # P(X > x)
    survival_ge: np.ndarray  # P(X >= x)
    dkw_epsilon: float  # half-width of the simultaneous DKW band at ``level``
    level: float


def ecdf(samples: Samples, level: float = 0.95) -> ECDF:
    """Exact ECDF at the distinct values, with the Dvoretzky-Kiefer-Wolfowitz-Massart band
    half-width sqrt(ln(2/(1-level)) / (2n)) (Massart 1990)."""
    check_probability("level", level)
    n = samples.n
    cumulative = samples.cumulative
    cdf = cumulative / n
    epsilon = math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * n))
    return ECDF(x=samples.values, cdf=cdf, ccdf=(n - cumulative) / n,
                survival_ge=(n - cumulative + samples.counts) / n, dkw_epsilon=epsilon, level=level)


@dataclass(frozen=True)
class Histogram:
    edges: np.ndarray
    counts: np.ndarray
    density: np.ndarray  # counts / (n_in_range * width)
    scale: str
    excluded: int  # observations outside the binned range (zero or negative values on a log scale)


HISTOGRAM_SCALES = ("linear", "log")


def histogram(samples: Samples, bins: int | str = "fd", scale: str = "linear", *,
              bins_per_decade: int = 10, max_bins: int = 10_000) -> Histogram:
    """Histogram with linear bins (``bins`` an int, or "fd" for Freedman-Diaconis) or logarithmic
    bins (``bins_per_decade`` geometric bins per factor of 10, over the positive values)."""
    check_choice("scale", scale, HISTOGRAM_SCALES)
    values, counts = samples.values, samples.counts
    if scale == "log":
        check_positive_int("bins_per_decade", bins_per_decade)
        positive = values > 0
        if not np.any(positive):
            raise InsufficientData("histogram(scale='log'): no positive value to bin")
        low, high = math.log10(values[positive][0]), math.log10(values[-1])
        count = max(1, math.ceil((high - low) * bins_per_decade))
        edges = np.logspace(low, low + count / bins_per_decade, count + 1)
        edges[-1] = max(edges[-1], values[-1])  # keep the maximum inside despite rounding
    else:
        count = _linear_bin_count(samples, bins, max_bins)
        edges = np.linspace(values[0], values[-1] if values[-1] > values[0] else values[0] + 1, count + 1)
    binned, _ = np.histogram(values, bins=edges, weights=counts)
    binned = np.rint(binned).astype(np.int64)
    inside = int(binned.sum())
    density = binned / (inside * np.diff(edges)) if inside else np.zeros_like(binned, dtype=float)
    return Histogram(edges=edges, counts=binned, density=density, scale=scale, excluded=samples.n - inside)


def _linear_bin_count(samples: Samples, bins: int | str, max_bins: int) -> int:
    if isinstance(bins, int) and not isinstance(bins, bool):
        return check_positive_int("bins", bins)
    if bins != "fd":
        raise ParameterError("bins", "a positive integer or 'fd'", bins)
    q25, q75 = quantile(samples, np.array([0.25, 0.75]))
    width = 2.0 * (q75 - q25) / samples.n ** (1.0 / 3.0)  # Freedman & Diaconis (1981)
    span = samples.max - samples.min
    if width <= 0 or span <= 0:
        return 1
    return int(min(max_bins, max(1, math.ceil(span / width))))


@dataclass(frozen=True)
class KernelDensity:
    x: np.ndarray
    density: np.ndarray
    bandwidth: float  # in the unit of the data, or of ln(data) when log_scale
    log_scale: bool


def kde(samples: Samples, *, points: int = 512, bandwidth: float | str = "silverman",
        log_scale: bool = False, grid_size: int = 4096) -> KernelDensity:
    """Gaussian KDE evaluated on ``points`` equally spaced points.

    The counts are binned linearly onto a grid of ``grid_size`` points and convolved with the
    kernel by FFT (Silverman 1982; Wand 1994), so the cost is O(U + G log G) however large n is.
    ``bandwidth`` is a number or "silverman" (0.9 min(sd, IQR/1.34) n^-1/5) or "scott"
    (1.06 sd n^-1/5), computed with n the number of observations, not of distinct values.
    With ``log_scale`` the estimate is made on ln(x) and transformed back (density / x), which
    suits right-skewed latencies and never puts mass below zero.
    """
    check_positive_int("points", points, 2)
    check_positive_int("grid_size", grid_size, 16)
    if log_scale:
        samples.require_positive("kde(log_scale=True)")
        work = Samples(np.log(samples.values), samples.counts, samples.unit)
    else:
        work = samples
    h = _bandwidth(work, bandwidth)
    low, high = work.min - 4 * h, work.max + 4 * h
    grid = np.linspace(low, high, grid_size)
    step = grid[1] - grid[0]
    # Linear binning: each value's weight is split between its two neighbouring grid points.
    position = (work.values - low) / step
    left = np.clip(np.floor(position).astype(np.int64), 0, grid_size - 2)
    right_share = position - left
    weights = np.bincount(left, work.counts * (1 - right_share), grid_size)
    weights += np.bincount(left + 1, work.counts * right_share, grid_size)
    offsets = np.arange(-grid_size + 1, grid_size) * step
    kernel = np.exp(-0.5 * (offsets / h) ** 2) / (h * math.sqrt(2 * math.pi))
    smoothed = spfft.irfft(spfft.rfft(weights, 3 * grid_size) * spfft.rfft(kernel, 3 * grid_size), 3 * grid_size)
    density_on_grid = smoothed[grid_size - 1:2 * grid_size - 1] / work.n
    x = np.linspace(low, high, points)
    density = np.interp(x, grid, np.maximum(density_on_grid, 0.0))
    if log_scale:
        x = np.exp(x)
        density = density / x
    return KernelDensity(x=x, density=density, bandwidth=h, log_scale=log_scale)


def _bandwidth(samples: Samples, bandwidth: float | str) -> float:
    if isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool):
        if not bandwidth > 0:
            raise ParameterError("bandwidth", "a positive number, 'silverman' or 'scott'", bandwidth)
        return float(bandwidth)
    check_choice("bandwidth", bandwidth, ("silverman", "scott"))
    sd = samples.std
    if bandwidth == "scott":
        h = 1.06 * sd * samples.n ** -0.2
    else:
        q25, q75 = quantile(samples, np.array([0.25, 0.75]))
        spread = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
        h = 0.9 * spread * samples.n ** -0.2
    if not h > 0:
        raise InsufficientData("kde: the data have no spread (all values equal); give bandwidth explicitly")
    return float(h)
