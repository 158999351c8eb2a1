"""The report's figures, drawn with matplotlib and returned as inline SVG text.

Each figure answers one question of the lab across every workload of a run: how throughput
scales with concurrency, what the latency quantiles do, what a request costs in CPU time and in
context switches, and whether throughput was steady during a repetition. One colour and marker
per series in every figure, error bars are the Student-t intervals over repetitions from
:mod:`archlab.report.aggregate`. Figures are built on :class:`matplotlib.figure.Figure`
directly, never through pyplot, so no interactive backend is selected and no figure registry
fills up; style settings are scoped with ``rc_context`` (process-wide while it lasts, so render
one report at a time per process).

The timeline figure reads the per-second throughput of one representative repetition per cell
(the one whose throughput is closest to the cell's median) from the ``timeline`` of its load
summary (schema ``archlab/load-summary`` version 1, written by ``archlab-engine load``): one
entry per second of the measurement window with ``second`` (0-based), ``length_s`` (shorter for
a last partial second) and ``throughput_rps``. Cells without a readable summary are left out;
without any, so is the figure.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib
from matplotlib.colors import ListedColormap, to_hex
from matplotlib.lines import Line2D
from matplotlib.axes import Axes
from matplotlib.figure import Figure as _MplFigure
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogFormatter,
    MaxNLocator,
    NullLocator,
    ScalarFormatter,
)

from archlab.report.aggregate import Cell, LoadLevel
from archlab.report.formatting import latency_unit
from archlab.stats import Interval, median
from archlab.plotstyle import style
from archlab.store.rows import ResultRow
from archlab.store.summary import SummaryError, read_summary

__all__ = ["Figure", "render_figures"]

# Every multi-panel figure is drawn at the page's text width and shown at its natural size, so
# the lettering is the same size in every figure; a lone panel gets half of it.
_FIGURE_WIDTH_IN = 10.5
_PANEL_HEIGHT_IN = 2.8
_LEGEND_HEIGHT_IN = 0.4
_MAX_COLUMNS = 3
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# Series at the same concurrency are shifted apart by this factor on the log axis, so their
# error bars stay visible instead of being drawn on top of each other.
_DODGE = 1.05

_STYLE = style(
    {
        "font.size": 10,
        "axes.titlesize": 10,
        "axes.titleweight": "bold",
        "axes.labelsize": 10,
        "lines.linewidth": 1.6,
        "lines.markersize": 5,
        "errorbar.capsize": 2.5,
    }
)


@dataclass(frozen=True)
class Figure:
    """A rendered figure: ``svg`` is an ``<svg>`` element ready to inline in HTML."""

    key: str
    title: str
    caption: str
    svg: str


@dataclass(frozen=True)
class _Series:
    label: str
    x: list[float]
    intervals: list[Interval]


@dataclass(frozen=True)
class _Look:
    color: str
    marker: str


# -- data selection ------------------------------------------------------------------------


def _workloads(cells: Iterable[Cell]) -> list[str]:
    return sorted({c.workload for c in cells})


def _series(cells: Iterable[Cell], workload: str, metric: str) -> list[_Series]:
    by_label: dict[str, list[tuple[float, Interval]]] = {}
    for cell in cells:
        interval = cell.metric(metric)
        if cell.workload == workload and interval is not None:
            by_label.setdefault(cell.label, []).append((cell.level.value, interval))
    series = []
    for label, points in sorted(by_label.items()):
        points.sort(key=lambda point: point[0])
        series.append(_Series(label, [float(c) for c, _ in points], [i for _, i in points]))
    return series


def _looks(cells: Iterable[Cell]) -> dict[str, _Look]:
    colors = cast(Sequence[Any], cast(ListedColormap, matplotlib.colormaps["tab10"]).colors)
    labels = sorted({c.label for c in cells})
    return {
        label: _Look(to_hex(colors[i % len(colors)]), _MARKERS[i % len(_MARKERS)])
        for i, label in enumerate(labels)
    }


# -- drawing helpers -----------------------------------------------------------------------


def _new_figure(rows: int, cols: int) -> tuple[_MplFigure, list[list[Axes]]]:
    width = _FIGURE_WIDTH_IN if cols > 1 else _FIGURE_WIDTH_IN / 2
    height = _PANEL_HEIGHT_IN * rows + _LEGEND_HEIGHT_IN
    fig = _MplFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, [list(row) for row in axes]


def _panel_grid(count: int) -> tuple[int, int]:
    cols = min(count, _MAX_COLUMNS)
    return -(-count // cols), cols


def _hide_unused(axes: list[list[Axes]], used: int) -> None:
    for ax in [a for row in axes for a in row][used:]:
        ax.set_visible(False)


def _level_axis_label(cells: Sequence[Cell]) -> str:
    """The x label of the figures: what the load levels of these cells are."""
    kinds = {c.level.kind for c in cells}
    return cells[0].level.axis if len(kinds) == 1 and cells else "load level"


def _concurrency_axis(ax: Axes, levels: Sequence[float], label: str = "concurrency (connections)") -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(levels))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    if levels:
        ax.set_xlim(min(levels) / 1.5, max(levels) * 1.5)
    ax.set_xlabel(label)


def _log_y_limits(series: Sequence[_Series]) -> tuple[float, float] | None:
    """Bottom at half the smallest mean, top a little above the highest bound: explicit, since a
    log axis autoscaled on a narrow band of values leaves the top points on the frame."""
    means = [i.mean for s in series for i in s.intervals if i.mean > 0]
    if not means:
        return None
    highs = [max(i.high, i.mean) for s in series for i in s.intervals]
    return min(means) / 2, max(highs) * 1.3


# Linear axes read 25,000 rather than 25000 (the same grouping as the tables).
_GROUPED = FuncFormatter(lambda value, _position: f"{value:,g}")


def _draw_series(
    ax: Axes, series: Sequence[_Series], looks: Mapping[str, _Look], gid: str, log_y: bool
) -> None:
    """Means joined by lines, with interval error bars; the data line of series i gets the SVG
    id ``{gid}-{i}`` so tests (and readers of the SVG) can find the plotted data."""
    limits = _log_y_limits(series) if log_y else None
    floor = limits[0] if limits else None
    for index, s in enumerate(series):
        shift = _DODGE ** (index - (len(series) - 1) / 2)
        x = [v * shift for v in s.x]
        means = [i.mean for i in s.intervals]
        # On a log axis a non-positive lower bound cannot be drawn; sending it far below the
        # visible floor makes the bar run off the panel, which reads as "unbounded below".
        lows = [max(i.low, floor / 100) if floor else i.low for i in s.intervals]
        yerr = [[m - lo for m, lo in zip(means, lows)], [i.high - i.mean for i in s.intervals]]
        look = looks[s.label]
        container = ax.errorbar(
            x, means, yerr=yerr, color=look.color, marker=look.marker, label=s.label
        )
        container.lines[0].set_gid(f"{gid}-{index}")
    if log_y:
        ax.set_yscale("log")
        if limits:
            ax.set_ylim(*limits)
    else:
        ax.set_ylim(0, _linear_top(series))
        ax.yaxis.set_major_formatter(_GROUPED)


def _linear_top(series: Sequence[_Series]) -> float | None:
    """Top of a linear axis: above the highest interval bound, but at most twice the highest
    mean. With two or three repetitions a t interval can be many times wider than the means
    are apart, and scaling to it would flatten every line; such a bar runs off the top, which
    reads as "wider than shown", and the tables give its value."""
    means = [i.mean for s in series for i in s.intervals]
    if not means or max(means) <= 0:
        return None
    highs = [max(i.high, i.mean) for s in series for i in s.intervals]
    return 1.1 * min(max(highs), 2 * max(means))


def _shared_legend(fig: _MplFigure, looks: Mapping[str, _Look]) -> None:
    handles = [
        Line2D([], [], color=look.color, marker=look.marker, label=label)
        for label, look in looks.items()
    ]
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4))


def _wants_log(series: Sequence[_Series]) -> bool:
    """Log scale when values are all positive and span more than a factor of 30, where a linear
    axis would flatten the smaller series onto zero."""
    means = [i.mean for s in series for i in s.intervals]
    return bool(means) and min(means) > 0 and max(means) / min(means) > 30


def _to_svg(fig: _MplFigure, salt: str) -> str:
    buffer = io.StringIO()
    # A per-figure salt keeps the ids matplotlib generates distinct between figures inlined in
    # one page, and fixed, so the same run always gives the same report.
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    # Keep only the <svg> element: the XML prolog and DOCTYPE are invalid inside HTML, and the
    # RDF metadata block is noise (it names external vocabularies by URL).
    text = text[text.index("<svg") :]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)


# -- the figures ---------------------------------------------------------------------------


def _per_workload_figure(
    cells: Sequence[Cell],
    key: str,
    metric: str,
    ylabel: str,
    log_y: Callable[[Sequence[_Series]], bool],
) -> _MplFigure:
    workloads = _workloads(cells)
    looks = _looks(cells)
    fig, axes = _new_figure(*_panel_grid(len(workloads)))
    flat = [a for row in axes for a in row]
    for index, (workload, ax) in enumerate(zip(workloads, flat)):
        series = _series(cells, workload, metric)
        _draw_series(ax, series, looks, f"data-{key}-{index}", log_y(series))
        _concurrency_axis(ax, [x for s in series for x in s.x], _level_axis_label(cells))
        ax.set_title(workload)
        ax.set_ylabel(ylabel)
    _hide_unused(axes, len(workloads))
    _shared_legend(fig, looks)
    return fig


_QUANTILES = (("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9"))


def _latency_figure(cells: Sequence[Cell]) -> _MplFigure:
    workloads = _workloads(cells)
    looks = _looks(cells)
    fig, axes = _new_figure(len(workloads), len(_QUANTILES))
    for row, workload in enumerate(workloads):
        for col, (metric, name) in enumerate(_QUANTILES):
            ax = axes[row][col]
            series = _series(cells, workload, metric)
            _draw_series(ax, series, looks, f"data-latency-{row}-{col}", log_y=True)
            _concurrency_axis(ax, [x for s in series for x in s.x], _level_axis_label(cells))
            ax.set_title(f"{workload} · {name}")
            ax.set_ylabel(f"{name} latency")
            ax.yaxis.set_major_formatter(_LatencyTicks(labelOnlyBase=False))
            ax.yaxis.set_minor_formatter(_LatencyTicks(labelOnlyBase=False))
        # Same scale across the quantiles of a workload, so p50 and p99.9 compare by eye.
        _share_y(axes[row])
    _shared_legend(fig, looks)
    return fig


class _LatencyTicks(LogFormatter):
    """Labels the ticks matplotlib's log formatter would label (decades, plus some minor ticks
    when a panel spans less than a decade), written as "1 ms" or "40 ms" rather than 10^3 µs."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):
            return ""
        divisor, unit = latency_unit(x)
        return f"{x / divisor:g} {unit}"


def _share_y(row: Sequence[Axes]) -> None:
    lows, highs = zip(*(ax.get_ylim() for ax in row))
    for ax in row:
        ax.set_ylim(min(lows), max(highs))


# -- timeline ------------------------------------------------------------------------------


def _representative(cell: Cell) -> ResultRow | None:
    """The repetition closest to the cell's median throughput."""
    rows = [r for r in cell.ok_rows if r.measurement is not None]
    if not rows:
        return None
    middle = median(r.measurement.throughput_rps for r in rows if r.measurement is not None)
    return min(rows, key=lambda r: abs(r.measurement.throughput_rps - middle) if r.measurement else 0.0)


def _read_timeline(run_dir: Path, row: ResultRow) -> list[tuple[float, float]] | None:
    """(middle of the interval in seconds since the window opened, req/s) of each interval of
    the row's load summary."""
    if row.summary_path is None:
        return None
    try:
        summary = read_summary(run_dir / row.summary_path)
    except SummaryError:
        return None  # a missing or unreadable summary only costs this cell its timeline
    points = [(p.second + p.length_s / 2, p.throughput_rps) for p in summary.timeline]
    return points or None


def _timelines(cells: Sequence[Cell], run_dir: Path) -> dict[tuple[str, LoadLevel, str], list]:
    found = {}
    for cell in cells:
        row = _representative(cell)
        points = _read_timeline(run_dir, row) if row else None
        if points:
            found[(cell.workload, cell.level, cell.label)] = points
    return found


def _timeline_figure(cells: Sequence[Cell], run_dir: Path) -> _MplFigure | None:
    timelines = _timelines(cells, run_dir)
    if not timelines:
        return None
    workloads = sorted({w for w, _, _ in timelines})
    levels = sorted({c for _, c, _ in timelines})
    looks = _looks(cells)
    fig, axes = _new_figure(len(workloads), len(levels))
    for row, workload in enumerate(workloads):
        for col, level in enumerate(levels):
            ax = axes[row][col]
            for index, label in enumerate(looks):
                points = timelines.get((workload, level, label))
                if points:
                    xs, ys = zip(*points)
                    look = looks[label]
                    (line,) = ax.plot(xs, ys, color=look.color, marker=look.marker, markersize=3)
                    line.set_gid(f"data-timeline-{row}-{col}-{index}")
            ax.set_title(f"{workload} · {level.short}")
            ax.set_xlabel("time in the measurement window (s)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel("req/s")
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(_GROUPED)
    _shared_legend(fig, looks)
    return fig


# -- entry point ---------------------------------------------------------------------------

_INTERVAL_NOTE = "Error bars: 95% Student-t confidence interval of the mean over repetitions."


@dataclass(frozen=True)
class _MetricFigure:
    """A figure with one panel per workload plotting one metric against concurrency."""

    key: str
    title: str
    metric: str
    ylabel: str
    log_y: Callable[[Sequence[_Series]], bool]
    caption: str

    def draw(self, cells: Sequence[Cell]) -> _MplFigure:
        return _per_workload_figure(cells, self.key, self.metric, self.ylabel, self.log_y)


_THROUGHPUT = _MetricFigure(
    "throughput",
    "Throughput vs concurrency",
    "throughput_rps",
    "throughput (req/s)",
    lambda _series: False,  # linear from zero: ratios between architectures read true
    f"Requests per second completed under the load generator. {_INTERVAL_NOTE}",
)
_CPU = _MetricFigure(
    "cpu",
    "Server CPU time per request",
    "cpu_us_per_request",
    "CPU µs per request",
    _wants_log,
    "User plus system CPU time of the server process divided by the requests it served. "
    + _INTERVAL_NOTE,
)
_CONTEXT_SWITCHES = _MetricFigure(
    "context-switches",
    "Context switches per request",
    "cs_per_request",
    "context switches per request",
    _wants_log,
    "Voluntary plus involuntary context switches of the server process per request (log "
    f"scale when they span orders of magnitude). {_INTERVAL_NOTE}",
)
_LATENCY_TITLE = "Latency quantiles vs concurrency"
_LATENCY_CAPTION = (
    "Means over repetitions of each repetition's latency quantile (from its HDR histogram), "
    "log scale. Error bars: 95% Student-t interval; a bar that runs off the bottom of a panel "
    "has a lower bound at or below zero."
)
_OPEN_LATENCY_NOTE = (
    " Open models: response time from each request's planned send time (coordinated omission "
    "corrected)."
)
_TIMELINE_TITLE = "Throughput during one repetition"
_TIMELINE_CAPTION = (
    "Requests completed per second at each load level, in the repetition closest to each cell's "
    "median throughput; a steady line means the measurement window saw a steady state."
)


def render_figures(cells: Sequence[Cell], run_dir: Path | None = None) -> list[Figure]:
    """Every figure the data supports, in reading order.

    ``run_dir`` is where the rows' ``summary_path`` are relative to; without it, or without
    readable summaries, the timeline figure is omitted.
    """
    measured = [c for c in cells if c.stats]
    if not measured:
        return []
    figures = []
    with matplotlib.rc_context(cast(Any, _STYLE)):

        def add(key: str, title: str, caption: str, fig: _MplFigure | None) -> None:
            if fig is not None:
                figures.append(Figure(key, title, caption, _to_svg(fig, salt=key)))

        # "vs concurrency", or "vs offered rate" / "vs session rate" for the open models.
        versus = _level_axis_label(measured).split(" (")[0]
        latency_caption = _LATENCY_CAPTION if versus == "concurrency" else _LATENCY_CAPTION + _OPEN_LATENCY_NOTE
        add(_THROUGHPUT.key, _THROUGHPUT.title.replace("concurrency", versus), _THROUGHPUT.caption, _THROUGHPUT.draw(measured))
        add("latency", _LATENCY_TITLE.replace("concurrency", versus), latency_caption, _latency_figure(measured))
        for spec in (_CPU, _CONTEXT_SWITCHES):
            add(spec.key, spec.title, spec.caption, spec.draw(measured))
        if run_dir is not None:
            add("timeline", _TIMELINE_TITLE, _TIMELINE_CAPTION, _timeline_figure(measured, run_dir))
    return figures
