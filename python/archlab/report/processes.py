"""Where the CPU went when a cell runs several processes (a topology: backends behind a balancer
or a middleware, :mod:`archlab.lab.topology`; or a server and the lab database it queries,
:mod:`archlab.lab.services.database_cost`): per cell and process, the mean over the cell's
successful repetitions of CPU time, context switches, socket calls and hand-offs per request,
and each process's share of the cell's CPU time, read from the ``processes`` rows of each
repetition's ``probe.json``. Printed under the terminal table and as a section of the HTML
report; runs whose cells are single processes print nothing. A mean is taken only over the repetitions that
have the number (a peer's socket calls are unavailable, shown as "-", never as 0)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from statistics import fmean
from typing import Iterable

from archlab.store.rows import ResultRow

_PER_REQUEST = (
    ("cpu_us_per_request", "CPU µs/req"),
    ("context_switches", "cs/req"),
    ("syscalls", "socket calls/req"),
    ("handoffs_per_request", "hand-offs/req"),
)


@dataclass(frozen=True)
class ProcessCost:
    cell_id: str
    process: str
    what: str
    measured: str
    per_request: dict[str, float | None]  # keyed as _PER_REQUEST
    cpu_share: float  # of the cell's CPU time, 0..1


def _value(cost: dict, key: str) -> float | None:
    if key == "context_switches":
        a, b = cost.get("voluntary_cs_per_request"), cost.get("involuntary_cs_per_request")
        return None if a is None or b is None else a + b
    if key == "syscalls":
        a, b = cost.get("read_syscalls_per_request"), cost.get("write_syscalls_per_request")
        return None if a is None or b is None else a + b
    v = cost.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def process_costs(rows: Iterable[ResultRow]) -> list[ProcessCost]:
    """One entry per (cell, process) of the topology cells among ``rows``, in cell order."""
    by_cell: dict[str, list[list[dict]]] = {}
    for row in rows:
        if not row.ok or row.summary_path is None:
            continue
        try:
            probe = json.loads((row.summary_path.parent / "probe.json").read_text())
        except (OSError, ValueError):
            continue
        processes = probe.get("processes")
        if isinstance(processes, list) and processes:
            by_cell.setdefault(row.cell_id, []).append(processes)
    out = []
    for cell_id, reps in by_cell.items():
        names = [p["process"] for p in reps[0]]
        cpu_of = {name: fmean([_cpu_s(p) for rep in reps for p in rep if p["process"] == name]) for name in names}
        total = sum(cpu_of.values())
        for first in reps[0]:
            name = first["process"]
            costs = [p["cost"] for rep in reps for p in rep if p["process"] == name]
            per_request = {}
            for key, _ in _PER_REQUEST:
                values = [v for v in (_value(c, key) for c in costs) if v is not None]
                per_request[key] = fmean(values) if values else None
            share = cpu_of[name] / total if total > 0 else 0.0
            out.append(ProcessCost(cell_id, name, str(first.get("what", "")), str(first.get("measured", "")), per_request, share))
    return out


def _cpu_s(p: dict) -> float:
    return float(p["cost"]["cpu_user_s"]) + float(p["cost"]["cpu_sys_s"])


def _fmt(v: float | None) -> str:
    return "-" if v is None else (f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}")


def process_lines(rows: Iterable[ResultRow]) -> list[str]:
    """The terminal's section: a header and one line per process."""
    costs = process_costs(rows)
    if not costs:
        return []
    lines = ["where the CPU went (cells of several processes; '-' = unavailable for that process):"]
    for c in costs:
        nums = "  ".join(f"{label} {_fmt(c.per_request[key])}" for key, label in _PER_REQUEST)
        lines.append(f"  {c.cell_id}  {c.process:<10} {c.cpu_share:>4.0%} of CPU  {nums}  ({c.what})")
    return lines


def processes_html(rows: Iterable[ResultRow]) -> str:
    costs = process_costs(rows)
    if not costs:
        return ""
    head = "".join(f"<th>{escape(label)}</th>" for _, label in _PER_REQUEST)
    body = "".join(
        f"<tr><td>{escape(c.cell_id)}</td><td>{escape(c.process)}</td><td>{escape(c.what)}</td><td>{c.cpu_share:.0%}</td>"
        + "".join(f"<td>{_fmt(c.per_request[key])}</td>" for key, _ in _PER_REQUEST)
        + f"<td>{escape(c.measured)}</td></tr>"
        for c in costs
    )
    return (
        '<section id="processes"><h2>Where the CPU went</h2>'
        "<p>Each process of a topology, mean over the cell's repetitions; '-' is a number that process does not report.</p>"
        f"<table><thead><tr><th>cell</th><th>process</th><th>what</th><th>share of CPU</th>{head}<th>measured</th></tr></thead>"
        f"<tbody>{body}</tbody></table></section>"
    )
