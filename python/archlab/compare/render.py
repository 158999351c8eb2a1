"""A :class:`~archlab.compare.diff.Comparison` for people: a terminal table (one line per cell
and metric: A's mean, B's mean, the change with its interval, the resolution, the verdict) and
a self-contained HTML page with the same content, no script and no external reference."""

from __future__ import annotations

from html import escape

from archlab.compare.diff import CellComparison, Comparison, MetricChange
from archlab.report.formatting import latency_unit

_HEADER = ("cell", "metric", "run A", "run B", "change", "interval", "resolution", "verdict")


def _value(change: MetricChange, v: float) -> str:
    if change.metric.better == "higher":
        return f"{v:,.0f} req/s"
    divisor, unit = latency_unit(v)
    return f"{v / divisor:.3g} {unit}"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _cells(cell: CellComparison) -> list[tuple[str, ...]]:
    lines: list[tuple[str, ...]] = []
    for i, c in enumerate(cell.changes):
        iv = c.interval
        interval = f"[{_pct(iv.low - 1)}, {_pct(iv.high - 1)}]" if iv.has_interval else "n<2"
        resolution = f"±{iv.resolution * 100:.1f}%" if iv.resolution is not None else "n/a"
        lines.append((cell.cell_id if i == 0 else "", c.metric.label, _value(c, c.mean_a), _value(c, c.mean_b), _pct(iv.change), interval, resolution, c.verdict))
    if not cell.changes:
        lines.append((cell.cell_id, "", "", "", "", "", "", "no verdict (no successful repetition on a side)"))
    return lines


def _notes(comparison: Comparison) -> list[str]:
    notes = [
        f"verdict per cell at {comparison.level:.0%} confidence (each metric's interval at {comparison.metric_level:.2%}, Bonferroni); "
        "change = mean(B)/mean(A) - 1, Welch interval on the ratio over repetitions; resolution = smallest change the runs could detect"
    ]
    for cell in comparison.cells:
        if cell.failed_a or cell.failed_b:
            notes.append(f"{cell.cell_id}: failed repetitions left out (A: {cell.failed_a}, B: {cell.failed_b})")
    if comparison.only_in_a:
        notes.append(f"cells only in run A (not compared): {', '.join(comparison.only_in_a)}")
    if comparison.only_in_b:
        notes.append(f"cells only in run B (not compared): {', '.join(comparison.only_in_b)}")
    return notes


def terminal_table(comparison: Comparison) -> str:
    rows = [_HEADER] + [line for cell in comparison.cells for line in _cells(cell)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    text = [f"A = {comparison.run_a}", f"B = {comparison.run_b}", ""]
    for r in rows:
        text.append("  ".join(v.ljust(w) if i in (0, 1, 7) else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    verdicts = [f"{c.cell_id}: {c.verdict}" for c in comparison.cells]
    return "\n".join(text + [""] + verdicts + [""] + _notes(comparison)) + "\n"


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; } th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child, td.metric, td.verdict { text-align: left; }
tr.slower td.verdict { color: #b00; font-weight: 600; } tr.faster td.verdict { color: #070; font-weight: 600; }
.notes { color: #555; }
"""


def html_page(comparison: Comparison) -> str:
    e = escape
    body = []
    for cell in comparison.cells:
        changes: list[MetricChange | None] = [*cell.changes] or [None]
        for line, change in zip(_cells(cell), changes):
            kind = change.verdict.replace(" ", "-") if change is not None else "none"
            tds = "".join(
                f'<td class="{"metric" if i == 1 else "verdict" if i == 7 else ""}">{e(v)}</td>' for i, v in enumerate(line)
            )
            body.append(f'<tr class="{kind}">{tds}</tr>')
    head = "".join(f"<th>{e(h)}</th>" for h in _HEADER)
    verdicts = "".join(f"<li><b>{e(c.cell_id)}</b>: {e(c.verdict)}</li>" for c in comparison.cells)
    notes = "".join(f"<li>{e(n)}</li>" for n in _notes(comparison))
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>archlab compare {e(comparison.run_a)} vs {e(comparison.run_b)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Run B against run A</h1><p>A = <code>{e(comparison.run_a)}</code><br>B = <code>{e(comparison.run_b)}</code></p>"
        f"<h2>Verdicts</h2><ul>{verdicts}</ul>"
        f"<h2>Cells</h2><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<ul class=\"notes\">{notes}</ul></body></html>\n"
    )
