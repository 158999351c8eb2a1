"""Percentile reports printed by load generators: ``wrk --latency`` output, wrk2's HdrHistogram
"Detailed Percentile spectrum", and HdrHistogram ``.hgrm`` percentile-distribution files.

wrk prints only a few percentiles (50/75/90/99) and the mean, stdev and max, so the result is a
:class:`PercentileReport`, not samples. A percentile spectrum (``Value Percentile TotalCount
1/(1-Percentile)`` rows) also carries cumulative counts, from which a coarse histogram is rebuilt:
the observations added between two rows are placed at the later row's value (an upper bound, within
the spectrum's resolution). Values with a unit suffix (``us``, ``ms``, ``s``, ``m``) are converted to
``unit``; bare spectrum values are taken to be in ``spectrum_unit`` (wrk2 prints milliseconds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archlab import documents
from archlab.latency.errors import LatencyError, check_choice
from archlab.latency.samples import UNIT_SECONDS, Samples

_SUFFIX_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)$")
_PERCENTILE_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+(\S+)\s*$")
_SPECTRUM_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s+(\d(?:\.\d+)?)\s+(\d+)(?:\s+\S+)?\s*$")
# wrk's "Thread Stats" row (not wrk2's "Latency Distribution (HdrHistogram - ...)" heading).
_THREAD_LATENCY = re.compile(r"^\s*Latency\s+(\d\S*)\s+(\d\S*)\s+(\d\S*)")
_REQUESTS = re.compile(r"^\s*(\d+) requests in ")


@dataclass(frozen=True)
class PercentileReport:
    """Percentiles as a tool printed them (percent -> value in ``unit``), with what else it printed."""

    unit: str
    percentiles: dict[float, float]
    mean: float | None = None
    stdev: float | None = None
    max: float | None = None
    count: int | None = None
    samples: Samples | None = field(default=None, repr=False)  # rebuilt from a spectrum, when present


def _duration(text: str, unit: str) -> float:
    match = _DURATION.match(text)
    if not match:
        raise LatencyError(f"not a duration with a unit (e.g. 1.20ms): {text!r}")
    return float(match.group(1)) * _SUFFIX_SECONDS[match.group(2)] / UNIT_SECONDS[unit]


def parse_percentile_text(text: str, *, unit: str = "ms", spectrum_unit: str = "ms") -> PercentileReport:
    check_choice("unit", unit, UNIT_SECONDS)
    check_choice("spectrum_unit", spectrum_unit, UNIT_SECONDS)
    percentiles: dict[float, float] = {}
    mean = stdev = maximum = None
    count = None
    spectrum: list[tuple[float, float, int]] = []
    for line in text.splitlines():
        if match := _PERCENTILE_LINE.match(line):
            percentiles[float(match.group(1))] = _duration(match.group(2), unit)
        elif match := _SPECTRUM_LINE.match(line):
            scale = UNIT_SECONDS[spectrum_unit] / UNIT_SECONDS[unit]
            spectrum.append((float(match.group(1)) * scale, float(match.group(2)), int(match.group(3))))
        elif (match := _THREAD_LATENCY.match(line)) and mean is None:
            mean, stdev, maximum = (_duration(match.group(i), unit) for i in (1, 2, 3))
        elif match := _REQUESTS.match(line):
            count = int(match.group(1))
    samples = None
    if spectrum:
        values = np.array([row[0] for row in spectrum])
        totals = np.array([row[2] for row in spectrum])
        added = np.diff(totals, prepend=0)
        if np.any(added < 0):
            raise LatencyError("percentile spectrum: TotalCount decreases; not a cumulative spectrum")
        samples = Samples.from_counts(values, added, unit)
        for value, fraction, _ in spectrum:
            percentiles.setdefault(round(fraction * 100, 10), value)
        count = count if count is not None else int(totals[-1])
    if not percentiles:
        raise LatencyError("expected percentile lines (e.g. '  99%  1.20ms') or a percentile spectrum, got none")
    return PercentileReport(unit, dict(sorted(percentiles.items())), mean, stdev, maximum, count, samples)


def report_text(path: Path) -> str:
    """The text of a percentile report file (undecodable bytes replaced), read up to the lab's
    bound on documents."""
    if not path.exists():
        raise LatencyError(f"{path}: expected a percentile report, got no such file")
    try:
        return documents.read_text(path, errors="replace")
    except OSError as error:
        raise LatencyError(f"{path}: expected a readable percentile report, got {error.strerror or error}") from None


def read_percentile_text(path: str | Path, *, unit: str = "ms", spectrum_unit: str = "ms") -> PercentileReport:
    path = Path(path)
    text = report_text(path)
    try:
        return parse_percentile_text(text, unit=unit, spectrum_unit=spectrum_unit)
    except LatencyError as error:
        raise LatencyError(f"{path}: {error}") from None
