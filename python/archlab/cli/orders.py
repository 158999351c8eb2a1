"""``archlab orders``: check published orders (a claims TOML) against a stored run or a results
table as archlab prints it, one line per claim; the counting is :mod:`archlab.report.orders`."""

from __future__ import annotations

import argparse
from pathlib import Path

from archlab import documents
from archlab.errors import SpecError
from archlab.report.orders import Cells, load_claims, report, table_section


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", nargs="?", help="a stored run id (or use --table)")
    p.add_argument("--claims", metavar="FILE", required=True, help="TOML with [[claims]]: best/worst = ARCH, of = [ARCH, ...], optional workload/concurrency lists")
    p.add_argument("--table", metavar="FILE", help="read the cells from a results table as archlab prints it (e.g. experiments/README.md) instead of a run")
    p.add_argument("--section", metavar="TEXT", help="with --table: the first fenced block after the heading containing TEXT")
    p.add_argument("--store", metavar="DIR", default="runs", help="result store (default: ./runs)")


def run(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.table is None):
        raise SpecError("RUN", "a run id or --table FILE (one of the two)", args.run or args.table)
    if args.section is not None and args.table is None:
        raise SpecError("--section", "to be given with --table", args.section)
    claims = load_claims(Path(args.claims))
    if args.table is not None:
        path = Path(args.table)
        try:
            text = documents.read_text(path)
        except OSError as e:
            raise SpecError("--table", "a readable UTF-8 text file", args.table, hint=e.strerror or str(e)) from None
        except UnicodeDecodeError as e:
            raise SpecError("--table", "a readable UTF-8 text file", args.table, hint=type(e).__name__) from None
        cells = Cells.from_table(table_section(text, args.section, args.table), args.table)
    else:
        from archlab.cli.stores import known_run, open_store

        store = open_store(args.store)
        cells = Cells.from_run(store.load_run(known_run(store, args.run, "RUN")))
    for line in report(claims, cells):
        print(f"- {line}")
    return 0
