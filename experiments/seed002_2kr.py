"""Seed 002 §6 from a stored run of `seed002-2kr.toml`: per workload, the 2^3 3 design of the
clients' throughput and mean response time over servers (A), middlewares (B) and workers per
middleware (C), read from the run's own spec, fitted by archlab.models.FactorialDesign; prints
the effects (with their 90 % intervals) and the allocation of variation as Markdown tables, the
shape of seed 002 Tables 7-20.

usage: .venv/bin/python experiments/seed002_2kr.py RUN_ID [--store runs] [--confidence 0.90]"""

from __future__ import annotations

import argparse
import sys

from archlab.cli.stores import known_run, open_store
from archlab.errors import ArchlabError
from archlab.models.middleware_run import factorial_from_points, fmt, points_from_run

LETTERS = {"servers": "A", "middlewares": "B", "workers": "C"}
RESPONSES = (("throughput_rps", "throughput (requests/s, clients)", 0), ("client_response_ms", "mean response time (ms, clients)", 3))
WORKLOAD_NAMES = {"/memcached?ratio=1:0": "write-only", "/memcached?ratio=0:1": "read-only", "/memcached?ratio=1:1": "50-50"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--store", default="runs")
    parser.add_argument("--confidence", type=float, default=0.90)
    args = parser.parse_args(argv)
    try:
        store = open_store(args.store)
        view = store.load_run(known_run(store, args.run_id))
        points = points_from_run(view.manifest.spec, view.rows, store.run_dir(args.run_id))
        for workload in dict.fromkeys(p.workload for p in points):
            for response, label, digits in RESPONSES:
                design, factors = factorial_from_points(points, response, workload, args.confidence)
                print(f"\n#### {WORKLOAD_NAMES.get(workload, workload)}: {label}\n")
                print("factors: " + ", ".join(f"{LETTERS[f]} = {f} {lo} / {hi}" for f, (lo, hi) in factors.items()))
                print("\n| effect | q | 90 % interval | variation explained |\n|---|---|---|---|")
                print(f"| I (mean) | {fmt(design.mean_, digits)} | | |")
                for name, e in design.effects_.items():
                    letters = "".join(LETTERS[f] for f in name.split(":"))
                    print(f"| {letters} | {fmt(e.estimate, digits)} | [{fmt(e.lower, digits)}, {fmt(e.upper, digits)}]"
                          f"{'' if e.significant else ' (includes 0)'} | {100 * e.fraction_of_variation:.1f} % |")
                print(f"| errors | | | {100 * design.error_fraction_:.1f} % |")
    except ArchlabError as e:
        print(f"seed002_2kr: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
