"""One self-contained HTML page for many analyses: a whole archlab run (every cell) or any set of
named samples. A summary table with one row per analysis (count, mean, percentiles, tail indices,
GPD shape, Gini) comes first; below it each analysis has a collapsible section with its text table
and its figures as embedded PNGs. It reuses :meth:`LatencyAnalysis.to_table` and
:meth:`LatencyAnalysis.figures`, so the page says exactly what ``archlab analyze`` prints.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from archlab.latency.analysis import LatencyAnalysis, figure_html, format_duration

_STYLE = """<style>
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1400px}
table{border-collapse:collapse;font-size:0.9em}th,td{padding:0.25em 0.6em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}details{margin:0.8em 0}summary{cursor:pointer;font-weight:600}
figure{display:inline-block;margin:0.3em}pre{font-size:0.85em;background:#f7f7f7;padding:0.6em;overflow-x:auto}
</style>"""


def summary_row(result: LatencyAnalysis) -> dict[str, str]:
    """The key statistics of one analysis, formatted for people (durations in readable units)."""
    d, unit = result.to_dict(), result.summary.unit
    percentiles = {e["p"]: e["value"] for e in d["percentiles"]["values"]}
    tail = d["tail"]

    def index(name: str, key: str = "alpha") -> str:
        value = tail.get(name, {}).get(key)
        return "n/a" if value is None else f"{value:.3g}"

    row = {"n": f"{d['count']:,}", "mean": format_duration(d["mean"]["value"], unit)}
    for p in (50, 99, 99.9):
        row[f"p{p:g}"] = format_duration(percentiles[p], unit) if p in percentiles else "n/a"
    row["max"] = format_duration(d["max"], unit)
    row["Hill alpha"] = index("hill")
    row["CSN alpha"] = index("power_law_csn")
    row["GPD xi"] = index("gpd_pot", "xi")
    row["Gini"] = f"{d['mass_count']['gini']:.3f}" if "mass_count" in d else "n/a"
    return row


def write_report(path: str | Path, analyses: Mapping[str, LatencyAnalysis], *, title: str = "latency analysis",
                 progress: TextIO | bool = True) -> Path:
    """Write the page: the summary table, then one collapsible section per analysis (figures are
    drawn here, the costly part, with progress on stderr, or on the stream ``progress``; False
    for silence)."""
    stream = sys.stderr if progress is True else (progress or None)
    names = list(analyses)
    rows = {name: summary_row(analyses[name]) for name in names}
    columns = list(next(iter(rows.values()))) if rows else []
    parts = ["<!doctype html><meta charset='utf-8'>", f"<title>{html.escape(title)}</title>", _STYLE,
             f"<h1>{html.escape(title)}</h1>", "<table><tr><th>analysis</th>"
             + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>"]
    for name in names:
        parts.append(f"<tr><td><a href='#{_anchor(name)}'>{html.escape(name)}</a></td>"
                     + "".join(f"<td>{html.escape(rows[name][c])}</td>" for c in columns) + "</tr>")
    parts.append("</table>")
    for i, name in enumerate(names, 1):
        started = time.perf_counter()
        result = analyses[name]
        figures = "".join(figure_html(figure_name, figure) for figure_name, figure in result.figures().items())
        parts.append(f"<details id='{_anchor(name)}'{' open' if len(names) == 1 else ''}><summary>{html.escape(name)}"
                     f"</summary><pre>{html.escape(result.to_table())}</pre>{figures}</details>")
        if stream is not None:
            print(f"report: figures {i}/{len(names)} {name} ({time.perf_counter() - started:.1f} s)", file=stream)
    path = Path(path)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _anchor(name: str) -> str:
    return "a-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)
