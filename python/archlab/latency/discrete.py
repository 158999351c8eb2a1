"""Discrete (rounded, heavily tied) latencies: detect the recording resolution, and undo the ties
where continuous methods need distinct values.

JMeter records integer milliseconds and HdrHistogram keeps one value per bucket, so real latency
data are a continuous quantity *rounded* to a grid. Continuous tail methods break on such ties:
the Hill moments vanish where the top k+1 values tie, so the double bootstrap's AMSE proxy is 0
there and it picks a tiny k (k=8 on a JMeter file; k=1 on an archlab HDR log); the KS distance of
CSN sees steps of the size of a whole tie; and a parametric bootstrap that draws *continuous*
synthetic samples compares them with tied data, so the observed KS/chi-squared statistic is
inflated and the p-value falsely small. Two remedies, both here:

* **jitter** (for estimators): replace each observation by a uniform draw within its rounding cell
  (``value ± width/2``), seeded (default seed 0, so results are reproducible). If the underlying
  latency has a smooth density, the jittered sample is, up to the within-cell shape, a sample of the
  unrounded latency; for the Pareto tails of interest the within-cell shape is flat to
  O(width/value). The jittered sample is built from the counts (O(n) memory), and at most
  ``max_values`` observations are jittered (a seeded subsample beyond that).
* **rounding** (for bootstrap tests): synthetic samples are rounded to the same grid as the data
  (:func:`round_to`), so the bootstrap null distribution of the statistic includes the ties.

The rounding cell ("resolution") is either a constant grid step, detected as the largest q such
that every distinct value is an integer multiple of q (:func:`grid_step`; 1 for integer ms), or
HdrHistogram's bucket width at each value (:func:`hdr_bucket_widths`; relative width about
2^-10 for 3 significant digits), for data read from HDR logs.
"""

from __future__ import annotations

import math

import numpy as np

from archlab.latency.errors import ParameterError, check_positive_int
from archlab.latency.samples import Samples

RESOLUTIONS = ("auto", "hdr", "none")


def grid_step(samples: Samples) -> float | None:
    """The constant grid step of the values (the gcd of integer values, e.g. 1 for integer ms),
    or None when the values are not integers (no grid detected)."""
    values = samples.values
    if not np.all(values == np.round(values)) or np.max(np.abs(values)) >= 2 ** 53:
        return None
    integers = np.abs(values.astype(np.int64))
    step = int(np.gcd.reduce(integers[integers > 0])) if np.any(integers > 0) else 0
    return float(step) if step > 0 else None


def hdr_bucket_widths(values: np.ndarray, significant_figures: int = 3) -> np.ndarray:
    """Width of the HdrHistogram bucket holding each value (lowest trackable unit 1), as in
    HdrHistogram: sub-buckets of 2^ceil(log2(2*10^d)) per power of two, so values below half of
    that are exact (width 1) and above it the width doubles with each power of two."""
    check_positive_int("significant_figures", significant_figures, 1)
    sub_bucket_count = 2 ** math.ceil(math.log2(2 * 10 ** significant_figures))
    values = np.maximum(np.asarray(values, dtype=float), 1.0)
    exponent = np.floor(np.log2(values)) - math.log2(sub_bucket_count) + 1
    return np.exp2(np.maximum(exponent, 0.0))


def is_tied(samples: Samples) -> bool:
    """Some value was observed more than once."""
    return samples.n > samples.distinct


def cell_widths(samples: Samples, resolution: str | float | None = "auto") -> np.ndarray | None:
    """Rounding-cell width at each distinct value: ``"auto"`` a detected constant grid,
    ``"hdr"`` HdrHistogram buckets (3 significant digits, values in recorded integer units),
    a number a given constant step, ``None``/``"none"`` no rounding (returns None)."""
    if resolution is None or resolution == "none":
        return None
    if resolution == "auto":
        step = grid_step(samples)
        return None if step is None else np.full(samples.distinct, step)
    if resolution == "hdr":
        return hdr_bucket_widths(samples.values)
    if isinstance(resolution, (int, float)) and resolution > 0:
        return np.full(samples.distinct, float(resolution))
    raise ParameterError("resolution", f"one of {RESOLUTIONS} or a positive step", resolution)


def jitter(samples: Samples, resolution: str | float | None = "auto", *, seed: int = 0,
           max_values: int = 2_000_000) -> Samples:
    """A tie-free version of ``samples``: every observation moved uniformly within its rounding
    cell (value ± width/2), seeded. Values whose cell would reach below 0 are only moved within
    (0, value + width/2). Returns ``samples`` unchanged when no resolution applies. Beyond
    ``max_values`` observations a seeded multinomial subsample of that size is jittered."""
    if resolution == "auto":
        resolution = grid_step(samples)  # of the full data: a subsample may miss values
    widths = cell_widths(samples, resolution)
    if widths is None:
        return samples
    check_positive_int("max_values", max_values, 1)
    rng = np.random.default_rng(seed)
    source = samples if samples.n <= max_values else samples.resample(rng, max_values)
    widths = cell_widths(source, resolution)
    assert widths is not None  # the resolution is settled above, so every subsample has cells
    values = np.repeat(source.values, source.counts)
    half = np.repeat(widths, source.counts) / 2
    low = np.where(values - half > 0, values - half, np.where(values > 0, 0.0, values - half))
    moved = low + rng.random(values.size) * (values + half - low)
    return Samples.from_values(moved, samples.unit)


def round_to(values: np.ndarray, samples: Samples, resolution: str | float | None = "auto") -> np.ndarray:
    """Round synthetic ``values`` to the rounding grid of ``samples`` (the nearest multiple of a
    constant step, or the median value of their HdrHistogram bucket). Unchanged without one."""
    if resolution is None or resolution == "none":
        return values
    if resolution == "hdr":
        widths = hdr_bucket_widths(values)
        lowest = np.floor(np.maximum(values, 0.0) / widths) * widths
        return lowest + np.where(widths > 1, np.floor(widths / 2), 0.0)
    step = grid_step(samples) if resolution == "auto" else float(resolution)
    if step is None:
        return values
    return np.round(values / step) * step
