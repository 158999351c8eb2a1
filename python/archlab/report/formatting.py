"""Number formatting shared by the terminal table and the HTML report.

Numbers are printed to three significant digits, the half-width of an interval with the same
decimals as its mean (so ``12,346 ± 235`` and ``1.23 ± 0.06 ms`` line up by eye), and latencies,
stored in microseconds, in whichever of µs, ms or s keeps the mantissa between 1 and 1000.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from archlab.report.aggregate import METRICS, Cell, Metric
from archlab.stats import Interval

__all__ = [
    "MISSING",
    "IntervalText",
    "format_failed",
    "format_interval",
    "format_mean",
    "interval_text",
    "latency_unit",
    "littles_law_text",
]

#: Shown where a cell has no successful repetition to summarise.
MISSING = "—"

_LATENCY_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"))


def latency_unit(us: float) -> tuple[float, str]:
    """The divisor and unit name that print ``us`` microseconds with a mantissa below 1000."""
    for divisor, unit in _LATENCY_UNITS:
        if abs(us) >= divisor:
            return divisor, unit
    return 1.0, "µs"


def _decimals(value: float, significant: int = 3) -> int:
    if value == 0 or not math.isfinite(value):
        return 0
    return max(0, significant - 1 - math.floor(math.log10(abs(value))))


def _scaled(metric: Metric, mean: float) -> tuple[float, str]:
    if metric.is_latency:
        return latency_unit(mean)
    return 1.0, ""


def _join(number: str, unit: str) -> str:
    return f"{number} {unit}" if unit else number


@dataclass(frozen=True)
class IntervalText:
    """An interval's printed parts: ``mean`` and ``half`` (None when n=1) share ``unit``."""

    mean: str
    half: str | None
    unit: str


def interval_text(interval: Interval, metric: Metric) -> IntervalText:
    divisor, unit = _scaled(metric, interval.mean)
    mean = interval.mean / divisor
    places = _decimals(mean)
    half = f"{interval.half_width / divisor:,.{places}f}" if interval.has_interval else None
    return IntervalText(f"{mean:,.{places}f}", half, unit)


def format_mean(interval: Interval | None, metric: Metric) -> str:
    """The mean alone, e.g. ``1.23 ms`` (latency units are appended, others are in the header)."""
    if interval is None:
        return MISSING
    text = interval_text(interval, metric)
    return _join(text.mean, text.unit)


def format_interval(interval: Interval | None, metric: Metric) -> str:
    """``mean ± half-width`` at the mean's precision; just the mean when n=1."""
    if interval is None:
        return MISSING
    text = interval_text(interval, metric)
    if text.half is None:
        return _join(text.mean, text.unit)
    return _join(f"{text.mean} ± {text.half}", text.unit)


def format_failed(failed: int, repetitions: int) -> str:
    """Failed repetitions as ``1/2``; a plain ``0`` when none failed, so failures stand out."""
    return f"{failed}/{repetitions}" if failed else "0"


def littles_law_text(cell: Cell, flag: str) -> str:
    """A cell's Little's law: the mean X(R+Z)/N over its repetitions, ``flag`` appended when a
    repetition breaks the law beyond its sampling tolerance; ``n/a`` where the law is not
    checked (open models, simulations), the missing mark when nothing succeeded."""
    if not cell.ok_rows:
        return MISSING
    if not cell.littles_law_checked:
        return "n/a"
    text = format_mean(cell.metric("littles_law_ratio"), METRICS["littles_law_ratio"])
    return text + flag if cell.littles_law_violations else text


def foreign_text(cell: Cell, flag: str) -> str:
    """The most of a cell's measured CPUs any repetition saw go to other work, as a percentage,
    ``flag`` appended when a repetition was over the run's threshold (in the statistics or set
    aside); ``n/a`` where it was not measured (simulations, older runs)."""
    share = cell.foreign_share
    if share is None:
        return "n/a"
    text = f"{share:.0%}" if share >= 0.01 else f"{share:.1%}"
    return text + flag if cell.disturbed or cell.set_aside else text


def utilisation_text(cell: Cell, flag: str) -> str:
    """The measured CPUs' utilisation as a percentage, ``flag`` appended when the row's printed
    throughput and CPU per request break the utilisation law; ``n/a`` where not measured."""
    u = cell.utilisation
    if u is None:
        return "n/a"
    law = cell.utilisation_law
    return f"{u:.0%}" + (flag if law is not None and not law.ok else "")
