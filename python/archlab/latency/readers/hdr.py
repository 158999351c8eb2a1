"""HdrHistogram data: interval logs (``.hlog``, as written by HdrHistogram's log writers, jHiccup,
wrk2 and archlab's load generator) and single encoded histograms, decoded with the
``hdrhistogram`` package and turned into exact-count :class:`Samples`.

An HdrHistogram keeps counts per bucket of equivalent values (relative width <= 10^-d for d
significant digits), so each bucket becomes one distinct value: ``bucket_value="median"`` (the
default; what HdrHistogram itself uses for the mean) or "highest" (what its percentiles report,
so nearest-rank percentiles of the result equal HdrHistogram's) or "lowest". Warm-up and cool-down
are trimmed by whole intervals, using the intervals' start timestamps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
from hdrh.histogram import HdrHistogram

from archlab.latency.errors import LatencyError, check_choice, check_nonnegative
from archlab.latency.samples import Samples

BUCKET_VALUES = ("median", "highest", "lowest")


def histogram_to_samples(histogram: HdrHistogram, unit: str, bucket_value: str = "median") -> Samples:
    check_choice("bucket_value", bucket_value, BUCKET_VALUES)
    values, counts = [], []
    for item in histogram.get_recorded_iterator():
        value = item.value_iterated_to
        lowest = histogram.get_lowest_equivalent_value(value)
        highest = histogram.get_highest_equivalent_value(value)
        # Java's medianEquivalentValue: lowest + (size of the equivalent range >> 1).
        chosen = {"lowest": lowest, "highest": highest, "median": lowest + ((highest - lowest + 1) >> 1)}
        values.append(chosen[bucket_value])
        counts.append(item.count_at_value_iterated_to)
    if not counts:
        raise LatencyError("HdrHistogram: no value recorded")
    return Samples.from_counts(np.array(values, dtype=float), np.array(counts, dtype=np.int64), unit)


def decode_histogram(encoded: str) -> HdrHistogram:
    try:
        return HdrHistogram.decode(encoded)
    except Exception as error:  # the package raises assorted low-level errors on bad input
        raise LatencyError(f"not an encoded HdrHistogram ({encoded[:16]}...): {error}") from error


@dataclass(frozen=True)
class _Interval:
    tag: str | None
    start_s: float
    length_s: float
    payload: str


#: The longest line an interval log may have: an interval's compressed histogram takes
#: kilobytes; a file whose "line" goes on (``/dev/zero``, a binary file) is refused at this length
#: rather than read into memory whole.
MAX_LINE_CHARS = 16 * 2**20


def _lines(path: Path, handle: TextIO) -> Iterator[tuple[int, str]]:
    """The numbered lines of an open log, each at most :data:`MAX_LINE_CHARS` long."""
    for number in itertools.count(1):
        line = handle.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        if len(line) > MAX_LINE_CHARS:
            raise LatencyError(f"{path}:{number}: expected a line of an HdrHistogram interval log (at most "
                               f"{MAX_LINE_CHARS // 2**20} Mi characters), got a longer one")
        yield number, line


def _intervals(path: Path) -> list[_Interval]:
    try:
        with open(path, encoding="utf-8") as handle:
            intervals = [i for number, line in _lines(path, handle) if (i := _interval(path, number, line.strip()))]
    except UnicodeDecodeError as error:
        raise LatencyError(f"{path}: expected an HdrHistogram interval log (UTF-8 text), got the byte "
                           f"{error.object[error.start]:#04x}") from None
    if not intervals:
        raise LatencyError(f"{path}: no interval histogram in the log")
    return intervals


def _interval(path: Path, number: int, line: str) -> _Interval | None:
    """One line of the log: an interval, or None for a comment, the legend or a blank line."""
    if not line or line.startswith("#") or line.startswith('"StartTimestamp"'):
        return None
    tag = None
    if line.startswith("Tag="):
        if "," not in line:
            raise LatencyError(f"{path}:{number}: expected 'Tag=NAME,start,interval,max,histogram', got {line[:60]!r}")
        tag, line = line[4:].split(",", 1)
    fields = line.split(",")
    if len(fields) != 4:
        raise LatencyError(f"{path}:{number}: expected 'start,interval,max,histogram', got {line[:60]!r}")
    try:
        start_s, length_s = float(fields[0]), float(fields[1])
    except ValueError:
        start_s = length_s = math.nan
    if not (math.isfinite(start_s) and math.isfinite(length_s) and length_s >= 0):
        raise LatencyError(f"{path}:{number}: expected a start time and an interval length in seconds, got "
                           f"{fields[0][:30]!r}, {fields[1][:30]!r}")
    return _Interval(tag, start_s, length_s, fields[3])


def read_hdr_log(path: str | Path, *, unit: str = "ns", tag: str | None = None, warmup_s: float = 0.0,
                 cooldown_s: float = 0.0, bucket_value: str = "median") -> Samples:
    """Sum of the log's interval histograms (those with ``tag``; untagged when ``tag`` is None),
    dropping intervals that start within ``warmup_s`` of the first interval's start or end within
    ``cooldown_s`` of the last interval's end. ``unit`` is the unit the values were recorded in
    (archlab and jHiccup record nanoseconds, wrk2 microseconds)."""
    check_nonnegative("warmup_s", warmup_s)
    check_nonnegative("cooldown_s", cooldown_s)
    path = Path(path)
    if not path.exists():
        raise LatencyError(f"path: no such file: {path}")
    intervals = [i for i in _intervals(path) if i.tag == tag]
    if not intervals:
        raise LatencyError(f"{path}: no interval with tag {tag!r}")
    first = min(i.start_s for i in intervals)
    last = max(i.start_s + i.length_s for i in intervals)
    kept = [i for i in intervals if i.start_s >= first + warmup_s and i.start_s + i.length_s <= last - cooldown_s]
    if not kept:
        raise LatencyError(f"{path}: trimming {warmup_s} s + {cooldown_s} s leaves no interval")
    decoded = [decode_histogram(interval.payload) for interval in kept]
    # Each interval is encoded with its own trackable range; the sum needs the widest of them
    # (adding a histogram whose values exceed the receiver's range fails), at the same precision.
    total = HdrHistogram(min(h.lowest_trackable_value for h in decoded),
                         max(h.highest_trackable_value for h in decoded), decoded[0].significant_figures)
    for histogram in decoded:
        total.add(histogram)
    return histogram_to_samples(total, unit, bucket_value)
