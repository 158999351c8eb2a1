"""The report's per-class panel for runs with a request mix: for each cell, one line per class of
its mix (path, weight share, the share of requests actually sent, throughput and latency of the
class's 2xx responses), each a mean over the cell's successful repetitions with its 95 %
Student-t interval (:func:`archlab.stats.mean_confidence_interval`, as every other column).

The classes are read from each repetition's stored load summary (its ``mix`` entries, parsed by
:mod:`archlab.store.summary`), like the timeline figure: a pure function of the stored run.
Cells without a mix contribute nothing, and a run with none gets no panel at all."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from archlab.report.aggregate import METRICS, Cell
from archlab.report.formatting import MISSING, format_interval
from archlab.stats import Interval, mean_confidence_interval
from archlab.store.summary import ClassResult, SummaryError, read_summary

__all__ = ["ClassLine", "class_lines", "classes_section"]


class ClassLine:
    """One class of one cell over its successful repetitions."""

    def __init__(self, cell: Cell, path: str, share: float, reps: Sequence[tuple[ClassResult, int]]):
        self.cell = cell
        self.path = path
        #: Expected share of the requests (weight over the total weight).
        self.share = share
        values = {
            # The share of the repetition's requests sent that were of this class.
            "sent_share": [c.sent / total for c, total in reps if total > 0],
            "throughput_rps": [c.throughput_rps for c, _ in reps],
            "p50_us": [c.p50_us for c, _ in reps if c.p50_us is not None],
            "p99_us": [c.p99_us for c, _ in reps if c.p99_us is not None],
        }
        self.stats: dict[str, Interval] = {k: mean_confidence_interval(v) for k, v in values.items() if v}
        self.errors = sum(c.errors for c, _ in reps)


def class_lines(cells: Sequence[Cell]) -> list[ClassLine]:
    """Every class of every cell with a mix, cells in their order, classes in the mix's."""
    lines = []
    for cell in cells:
        per_rep: list[tuple[ClassResult, ...]] = []
        for row in cell.ok_rows:
            if row.summary_path is None:
                continue
            try:
                classes = read_summary(row.summary_path).classes
            except SummaryError:
                continue
            if classes:
                per_rep.append(classes)
        if not per_rep:
            continue
        first = per_rep[0]
        for i, c in enumerate(first):
            reps = [(rep[i], sum(k.sent for k in rep)) for rep in per_rep if i < len(rep) and rep[i].path == c.path]
            lines.append(ClassLine(cell, c.path, c.share, reps))
    return lines


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _share(interval: Interval | None) -> str:
    if interval is None:
        return MISSING
    text = f"{100 * interval.mean:.2f} %"
    return text + (f" ± {100 * interval.half_width:.2f}" if interval.has_interval else "")


def classes_section(cells: Sequence[Cell]) -> str:
    """The ``Request classes`` section of the HTML report; empty when no cell has a mix."""
    lines = class_lines(cells)
    if not lines:
        return ""
    body = []
    for line in lines:
        s = line.stats
        body.append(
            f"<tr><td>{_e(line.cell.label)}</td><td>{_e(line.cell.level.short)}</td><td><code>{_e(line.path)}</code></td>"
            f'<td class="num">{100 * line.share:.2f} %</td><td class="num">{_share(s.get("sent_share"))}</td>'
            f'<td class="num">{_e(format_interval(s.get("throughput_rps"), METRICS["throughput_rps"]))}</td>'
            f'<td class="num">{_e(format_interval(s.get("p50_us"), METRICS["p50_us"]))}</td>'
            f'<td class="num">{_e(format_interval(s.get("p99_us"), METRICS["p99_us"]))}</td>'
            f'<td class="num">{line.errors}</td></tr>'
        )
    return (
        '<section id="classes"><h2>Request classes</h2>'
        "<p>Cells whose load is a request mix: each request's class was drawn from the weights with "
        "the repetition's seed. <em>Weight</em> is the share the mix asks for, <em>sent</em> the share "
        "of the requests sent that were of the class (it differs from the weight by the draw's "
        "binomial error only); throughput and latency are those of the class's 2xx responses, on "
        "the same basis as the results above (service time for the closed model, response time "
        "from the planned send for the open ones), mean over successful repetitions ± half-width "
        "of the 95% Student-t interval.</p>"
        "<table><thead><tr><th>cell</th><th>load</th><th>class</th><th>weight</th><th>sent</th>"
        "<th>throughput</th><th>p50</th><th>p99</th><th>errors</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )
