"""The results table printed in the terminal after a run and by ``archlab report``.

One line per cell, grouped by workload and load level (concurrency, or the open models'
planned rate) and sorted by mean throughput within each group, so the architectures that faced
the same load sit next to each other and the best is on top, marked; below the table, the order
each group establishes and where two architectures tie (:mod:`archlab.report.glance`). Plain
text with aligned columns and no dependency; ANSI colour only when the output is a terminal, so
piping the table into a file or a bug report stays clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from archlab.report.aggregate import METRICS, Cell, LoadGroup, Win, aggregate, group_by_load
from archlab.report.formatting import (
    foreign_text,
    format_failed,
    format_interval,
    format_mean,
    littles_law_text,
    utilisation_text,
)
from archlab.report.glance import glance_lines
from archlab.separation import FAMILY_ALPHA
from archlab.store.rows import ResultRow

__all__ = ["terminal_table"]

_MARKS = {Win.CLEAR: "*", Win.TIED: "(*)"}
_LEGEND = (
    "throughput: mean ± half-width of the 95% Student-t interval over repetitions; "
    "latencies: means; per-request columns: totals over the repetitions' requests.\n"
    "U: the server's CPU time over its CPUs' time in the windows (1 = saturated); ! = throughput x CPU per request "
    "exceeds its CPUs (the utilisation law broken: listed below). bottleneck: what saturated (server CPU: U >= 90%; "
    "generator: its own verdict); none saturated: throughput was set outside the measured processes (waits, the "
    "scheduler's share, the machine's other work), and the row says nothing about the architecture's capacity.\n"
    "* best mean throughput for its workload and load level, the interval of its ratio to the "
    "runner-up's clear of 1; (*) best mean, lead not established (that interval contains 1, or a "
    "single repetition).\n"
    "gen-bound: repetitions whose load generator was saturated; their throughput is the "
    "generator's limit, a lower bound of the server's.\n"
    "foreign: the most of the server's CPUs any repetition saw go to other work (processes not the lab's, and "
    "steal); ! = a repetition over the run's threshold (listed below: the orders it touches are not established on a "
    "quiet machine).\n"
    "X(R+Z)/N: Little's law for the closed model's N users (Little 1961; the interactive response "
    "time law, Lazowska et al. 1984 ch. 3), mean over repetitions; 1 when the latency accounts "
    "for the users' whole time. ! = a repetition off by more than its sampling error explains, or "
    "whose window is too short to tell (listed below); "
    "n/a = not defined (open models: their population is not measured; simulations)."
)
_ERROR_PREVIEW_CHARS = 120
_PLUS_MINUS = " ± "

_BOLD, _GREEN, _RED, _RESET = "\x1b[1m", "\x1b[32m", "\x1b[31m", "\x1b[0m"


@dataclass(frozen=True)
class _Column:
    header: str
    right_aligned: bool
    text: Callable[[Cell], str]


def _mean_of(key: str) -> Callable[[Cell], str]:
    return lambda cell: format_mean(cell.metric(key), METRICS[key])


_COLUMNS = (
    _Column("architecture", False, lambda c: c.label),
    _Column("workload", False, lambda c: c.workload),
    _Column("conc", True, lambda c: c.level.text),
    _Column(
        "throughput req/s",
        True,
        lambda c: format_interval(c.throughput, METRICS["throughput_rps"]),
    ),
    _Column("p50", True, _mean_of("p50_us")),
    _Column("p99", True, _mean_of("p99_us")),
    _Column("p99.9", True, _mean_of("p999_us")),
    _Column("svc p99", True, _mean_of("service_p99_us")),
    _Column("CPU µs/req", True, _mean_of("cpu_us_per_request")),
    _Column("ctx-sw/req", True, _mean_of("cs_per_request")),
    _Column("syscalls/req", True, _mean_of("syscalls_per_request")),
    _Column("hand-offs/req", True, _mean_of("handoffs_per_request")),
    _Column("errors", True, lambda c: str(c.errors)),
    _Column("gen-bound", True, lambda c: format_failed(c.generator_bound_repetitions, c.ok_repetitions)),
    _Column("foreign", True, lambda c: foreign_text(c, flag=" !")),
    _Column("U", True, lambda c: utilisation_text(c, flag=" !")),
    _Column("bottleneck", False, lambda c: c.bottleneck),
    _Column("X(R+Z)/N", True, lambda c: littles_law_text(c, flag=" !")),
    _Column("failed", True, lambda c: format_failed(len(c.failures), c.repetitions)),
)
# Shown only when a cell was driven by an open model: what the generator offered, and the
# service time beside the response time (the open models' p-columns start at the planned send).
_OPEN_ONLY = ("svc p99",)
_OFFERED = _Column("offered/s", True, _mean_of("offered_rps"))
_OPEN_LEGEND = (
    "\nopen models: p50/p99/p99.9 are response times from the planned send time (coordinated "
    "omission corrected); svc p99: service time from the actual send; offered/s: arrivals "
    "(sessions for partly-open) planned per second."
)


def _columns(cells: Sequence[Cell]) -> tuple[_Column, ...]:
    """The columns for these cells: the level column named after its kind, and the open-model
    columns only when some cell is open."""
    kinds = {c.level.kind for c in cells}
    is_open = bool(kinds - {"concurrency"})
    columns = []
    for column in _COLUMNS:
        if column.header in _OPEN_ONLY and not is_open:
            continue
        if column.header == "conc":
            heading = next(iter(kinds)) if len(kinds) == 1 else "level"
            column = _Column(
                {"concurrency": "conc", "rate": "rate", "session_rate": "sessions", "level": "level"}[heading],
                True,
                column.text if len(kinds) == 1 else (lambda c: c.level.short),
            )
            columns.append(column)
            if is_open:
                columns.append(_OFFERED)
            continue
        columns.append(column)
    return tuple(columns)


def _mark(group: LoadGroup, cell: Cell) -> str:
    winner = group.winner
    return _MARKS[winner.win] if winner and winner.cell is cell else ""


def _align_on_plus_minus(texts: list[str]) -> list[str]:
    """Pad ``mean ± half`` texts so the ± signs of a column line up; other texts stay as are."""
    split = [t.partition(_PLUS_MINUS) for t in texts]
    if not any(sep for _, sep, _ in split):
        return texts
    mean_width = max(len(mean) for mean, _, _ in split)
    half_width = max(len(half) for _, _, half in split)
    return [
        f"{mean.rjust(mean_width)}{sep or ' ' * len(_PLUS_MINUS)}{half.rjust(half_width)}"
        for mean, sep, half in split
    ]


def _pad(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)


def _paint(text: str, colour: str | None) -> str:
    return f"{colour}{text}{_RESET}" if colour else text


def _row_colour(cell: Cell, mark: str, color: bool) -> str | None:
    if not color:
        return None
    if cell.throughput is None:
        return _RED
    return _GREEN if mark == _MARKS[Win.CLEAR] else None


def _failure_lines(cells: Sequence[Cell]) -> list[str]:
    lines = []
    for cell in cells:
        for failure in cell.failures:
            first_line = (failure.error.strip().splitlines() or [""])[0]
            if len(first_line) > _ERROR_PREVIEW_CHARS:
                first_line = first_line[: _ERROR_PREVIEW_CHARS - 1] + "…"
            lines.append(
                f"  {cell.label} {cell.workload} {cell.level.short.replace('c=', 'conc=')} "
                f"rep {failure.repetition}: {first_line}"
            )
    return ["failed repetitions:", *lines] if lines else []


def _utilisation_lines(cells: Sequence[Cell]) -> list[str]:
    lines = [
        f"  {cell.label} {cell.workload} {cell.level.short.replace('c=', 'conc=')}: {law.cpus_in_use:.2f} CPUs in use "
        f"(throughput x CPU per request) on {law.cpus}"
        for cell in cells
        if (law := cell.utilisation_law) is not None and not law.ok
    ]
    return ["utilisation law broken (the numbers cannot all be right):", *lines] if lines else []


def _disturbed_lines(cells: Sequence[Cell]) -> list[str]:
    def line(cell: Cell, row: ResultRow, what: str) -> str:
        c = row.conditions
        assert c is not None
        return (f"  {cell.label} {cell.workload} {cell.level.short.replace('c=', 'conc=')} rep {row.repetition}: "
                f"{c.foreign_share:.0%} foreign, {c.steal_share:.0%} steal, load average {c.load_avg_start:.2f} -> "
                f"{c.load_avg_end:.2f}; {what}")

    lines = [line(cell, row, "in the statistics") for cell in cells for row in cell.disturbed]
    lines += [line(cell, row, "repeated, left out of the statistics") for cell in cells for row in cell.set_aside]
    if not lines:
        return []
    limit = cells[0].max_foreign
    return [f"disturbed repetitions (more than {limit:.0%} of the measured CPUs went to other work):", *lines]


def _littles_law_lines(cells: Sequence[Cell]) -> list[str]:
    lines = [
        f"  {cell.label} {cell.workload} {cell.level.short.replace('c=', 'conc=')} rep {repetition}: "
        f"X(R+Z)/N = {law.ratio:.3f}, tolerance ± {law.tolerance:.3f}; {law.explanation()}"
        for cell in cells
        for repetition, law in cell.littles_law_violations
    ]
    return ["Little's law not confirmed (off beyond sampling error, or a window too short to tell):", *lines] if lines else []


@dataclass
class _Line:
    """One cell's line before padding; ``None`` in a list of lines stands for a blank line."""

    mark: str
    texts: list[str]
    colour: str | None


def _cell_lines(groups: Sequence[LoadGroup], columns: Sequence[_Column], color: bool) -> list[_Line | None]:
    lines: list[_Line | None] = []
    for index, group in enumerate(groups):
        if index and group.workload != groups[index - 1].workload:
            lines.append(None)  # a blank line between workloads
        for cell in group.cells:
            mark = _mark(group, cell)
            texts = [column.text(cell) for column in columns]
            lines.append(_Line(mark, texts, _row_colour(cell, mark, color)))
    return lines


def _column_widths(lines: Sequence[_Line], columns: Sequence[_Column]) -> list[int]:
    """Align the ± of every column in place, then measure each column."""
    for i in range(len(columns)):
        for line, text in zip(lines, _align_on_plus_minus([line.texts[i] for line in lines])):
            line.texts[i] = text
    return [
        max(len(column.header), *(len(line.texts[i]) for line in lines))
        for i, column in enumerate(columns)
    ]


def terminal_table(rows: Iterable[ResultRow], color: bool | None = None, confidence: float = 1.0 - FAMILY_ALPHA,
                   max_foreign: float | None = None) -> str:
    """The results table of ``rows`` (store rows, one per cell and repetition) as text, then
    the order each load group establishes (:mod:`archlab.report.glance`), neighbours compared
    at ``confidence`` (a run's is :func:`archlab.report.glance.comparison_confidence`).
    ``max_foreign``: the run's, whose disturbed repetitions were repeated and are set aside
    (:func:`archlab.report.glance.disturbance_limit`).

    ``color`` defaults to whether standard output is a terminal.
    """
    if color is None:
        color = sys.stdout.isatty()
    groups = group_by_load(aggregate(rows, max_foreign), confidence)
    if not groups:
        return "no results"
    columns = _columns([cell for group in groups for cell in group.cells])
    lines = _cell_lines(groups, columns, color)
    widths = _column_widths([line for line in lines if line is not None], columns)
    mark_width = max(len(m) for m in _MARKS.values())

    def render(mark: str, texts: list[str]) -> str:
        padded = [_pad(t, w, c.right_aligned) for t, w, c in zip(texts, widths, columns)]
        return (mark.ljust(mark_width) + " " + "  ".join(padded)).rstrip()

    out = [_paint(render("", [column.header for column in columns]), _BOLD if color else None)]
    out += [_paint(render(line.mark, line.texts), line.colour) if line else "" for line in lines]
    out += ["", *glance_lines(groups)]
    out += ["", _LEGEND + (_OPEN_LEGEND if _OFFERED in columns else "")]
    cells = [cell for group in groups for cell in group.cells]
    for notes in (_disturbed_lines(cells), _utilisation_lines(cells), _littles_law_lines(cells), _failure_lines(cells)):
        if notes:
            out += ["", *notes]
    return "\n".join(out)
