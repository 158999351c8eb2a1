"""``archlab compare RUN_A RUN_B``: argument parsing and printing; the comparison itself is
:func:`archlab.compare.compare_runs`. Exit status 0, or 3 when ``--fail-if-slower PCT`` finds a
cell detectably slower by PCT percent or more, or whose cells do not match (a CI pipeline must
not pass on a cell it did not compare); 2 for bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archlab.compare.diff import DEFAULT_METRICS, METRICS, compare_runs
from archlab.compare.render import html_page, terminal_table
from archlab.errors import InvalidValue, SpecError

SLOWER_EXIT = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run id")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared with it")
    p.add_argument("--cells", metavar="ID[,ID...]", help="compare only these cell ids (default: every cell both runs have)")
    p.add_argument("--metrics", metavar="M[,M...]", default=",".join(DEFAULT_METRICS), help=f"metrics among {', '.join(METRICS)} (default: {','.join(DEFAULT_METRICS)})")
    p.add_argument("--level", metavar="P", type=float, default=0.95, help="confidence of each cell's verdict (default: 0.95)")
    p.add_argument("--fail-if-slower", metavar="PCT", type=float, help=f"exit {SLOWER_EXIT} if a cell is detectably slower by PCT %% or more, or cells do not match")
    p.add_argument("--html", metavar="FILE", help="also write the comparison as a self-contained HTML page")
    p.add_argument("--store", metavar="DIR", default="runs", help="result store: run directories and archlab.duckdb (default: ./runs)")


def run(args: argparse.Namespace) -> int:
    from archlab.cli.stores import known_run, open_store

    if args.fail_if_slower is not None and not 0 <= args.fail_if_slower < 100:
        raise SpecError("--fail-if-slower", "a percentage in [0, 100)", args.fail_if_slower)
    if not 0.5 <= args.level < 1:
        raise SpecError("--level", "a confidence level in [0.5, 1), e.g. 0.95", args.level)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics:
        raise SpecError("--metrics", "a comma-separated list of " + ", ".join(METRICS), args.metrics)
    if args.html and not Path(args.html).resolve().parent.is_dir():
        raise SpecError("--html", "a file path in an existing directory", args.html)
    store = open_store(args.store)
    view_a = store.load_run(known_run(store, args.run_a, "RUN_A"))
    view_b = store.load_run(known_run(store, args.run_b, "RUN_B"))
    cells = [c.strip() for c in args.cells.split(",") if c.strip()] if args.cells else None
    try:
        comparison = compare_runs(view_a, view_b, cells=cells, level=args.level, metrics=metrics)
    except InvalidValue as e:  # named after the option the user wrote
        raise e.named("--" + e.parameter) from None
    if not comparison.cells:
        raise SpecError("RUN_B", f"a run with cells in common with {args.run_a} ({', '.join(view_a.cells)})", args.run_b, hint=f"its cells: {', '.join(view_b.cells)}")
    sys.stdout.write(terminal_table(comparison))
    if args.html:
        Path(args.html).write_text(html_page(comparison))
        print(f"wrote {args.html}")
    if args.fail_if_slower is not None:
        limit = args.fail_if_slower / 100
        slower = [(c.cell_id, m) for c in comparison.cells for m in c.slower_by_at_least(limit)]
        for cell_id, m in slower:
            print(f"archlab compare: {cell_id}: {m.metric.label} slower by {m.slowdown:.1%} (>= {args.fail_if_slower:g}%)", file=sys.stderr)
        if not comparison.matched:
            print("archlab compare: the runs' cells do not match (see the notes above)", file=sys.stderr)
        if slower or not comparison.matched:
            return SLOWER_EXIT
    return 0
