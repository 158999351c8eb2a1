"""The comparison of two stored runs, cell by cell. A cell is matched by its id (the factor
levels), each metric's repetitions of run B are set against run A's with a Welch interval on the
ratio of means (:func:`archlab.stats.ratio_of_means_interval`), and a verdict is read off the
interval: faster or slower when it excludes 1, else no detectable change, with the smallest
change the run could have detected (the interval's half-width, never less than the HDR
rounding of a quantile). A cell is judged on several
metrics at once, so each metric's interval is taken at the Bonferroni level ``1 - (1 - level)/k``:
the chance that a cell that did not change is called changed stays below ``1 - level``. Only
repetitions that succeeded count; a cell with fewer than two on a side gets no verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from archlab.errors import InvalidValue
from archlab.stats import HDR_RESOLUTION, RatioInterval, ratio_of_means_interval, widen_to_quantum
from archlab.store import ResultRow, RunView

Direction = Literal["higher", "lower"]  # which way is better
Verdict = Literal["faster", "slower", "no detectable change", "no verdict"]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    better: Direction
    value: Callable[[ResultRow], float | None]
    quantum: float = 0.0  # relative rounding of one value (HDR quantiles), a floor on the interval


METRICS: dict[str, Metric] = {
    "throughput": Metric("throughput", "throughput", "higher", lambda r: r.measurement.throughput_rps if r.measurement else None),
    "p50": Metric("p50", "p50", "lower", lambda r: r.measurement.p50_us if r.measurement else None, HDR_RESOLUTION),
    "p90": Metric("p90", "p90", "lower", lambda r: r.measurement.p90_us if r.measurement else None, HDR_RESOLUTION),
    "p99": Metric("p99", "p99", "lower", lambda r: r.measurement.p99_us if r.measurement else None, HDR_RESOLUTION),
    "p999": Metric("p999", "p99.9", "lower", lambda r: r.measurement.p999_us if r.measurement else None, HDR_RESOLUTION),
}
DEFAULT_METRICS = ("throughput", "p50", "p99")


@dataclass(frozen=True)
class MetricChange:
    metric: Metric
    mean_a: float
    mean_b: float
    interval: RatioInterval

    @property
    def verdict(self) -> Verdict:
        i = self.interval
        if not i.has_interval:
            return "no verdict"
        if i.low > 1.0:
            return "faster" if self.metric.better == "higher" else "slower"
        if i.high < 1.0:
            return "slower" if self.metric.better == "higher" else "faster"
        return "no detectable change"

    @property
    def slowdown(self) -> float:
        """How much worse B is than A, as a fraction (negative: better)."""
        r = self.interval.ratio
        return 1.0 - r if self.metric.better == "higher" else r - 1.0


@dataclass(frozen=True)
class CellComparison:
    cell_id: str
    changes: tuple[MetricChange, ...]
    failed_a: int
    failed_b: int

    @property
    def verdict(self) -> Verdict:
        verdicts = [c.verdict for c in self.changes]
        if not verdicts:
            return "no verdict"
        if "slower" in verdicts:
            return "slower"
        if "faster" in verdicts:
            return "faster"
        if "no verdict" in verdicts:
            return "no verdict"
        return "no detectable change"

    def slower_by_at_least(self, fraction: float) -> list[MetricChange]:
        """The metrics that are detectably slower by ``fraction`` or more (point estimate)."""
        return [c for c in self.changes if c.verdict == "slower" and c.slowdown >= fraction]


@dataclass(frozen=True)
class Comparison:
    run_a: str
    run_b: str
    level: float  # per cell
    metric_level: float  # per metric (Bonferroni)
    cells: tuple[CellComparison, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    @property
    def matched(self) -> bool:
        return not self.only_in_a and not self.only_in_b


def _ok_rows(view: RunView) -> dict[str, list[ResultRow]]:
    out: dict[str, list[ResultRow]] = {}
    for cell_id in view.cells:
        out[cell_id] = [r for r in view.rows if r.cell_id == cell_id]
    return out


def compare_runs(
    a: RunView, b: RunView, cells: Sequence[str] | None = None, level: float = 0.95, metrics: Sequence[str] = DEFAULT_METRICS
) -> Comparison:
    if not 0.5 <= level < 1.0:
        raise InvalidValue("level", "a confidence level in [0.5, 1)", level)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise InvalidValue("metrics", "some of " + ", ".join(METRICS), ",".join(metrics))
    rows_a, rows_b = _ok_rows(a), _ok_rows(b)
    if cells:
        missing = [c for c in cells if c not in rows_a or c not in rows_b]
        if missing:
            where = "A" if missing[0] not in rows_a else "B"
            raise InvalidValue("cells", f"cell ids of both runs (common: {', '.join(c for c in rows_a if c in rows_b) or 'none'})", missing[0], hint=f"not in run {where}")
        wanted = list(cells)
    else:
        wanted = [c for c in rows_a if c in rows_b]
    only_a = tuple(c for c in rows_a if c not in rows_b) if not cells else ()
    only_b = tuple(c for c in rows_b if c not in rows_a) if not cells else ()
    metric_level = 1.0 - (1.0 - level) / len(metrics)
    out = []
    for cell_id in wanted:
        ra, rb = rows_a[cell_id], rows_b[cell_id]
        changes = []
        for key in metrics:
            metric = METRICS[key]
            va = [v for r in ra if r.ok and (v := metric.value(r)) is not None and v > 0]
            vb = [v for r in rb if r.ok and (v := metric.value(r)) is not None and v > 0]
            if not va or not vb:
                continue
            interval = widen_to_quantum(ratio_of_means_interval(va, vb, metric_level), metric.quantum)
            changes.append(MetricChange(metric, sum(va) / len(va), sum(vb) / len(vb), interval))
        out.append(CellComparison(cell_id, tuple(changes), sum(not r.ok for r in ra), sum(not r.ok for r in rb)))
    return Comparison(a.manifest.run_id, b.manifest.run_id, level, metric_level, tuple(out), only_a, only_b)
