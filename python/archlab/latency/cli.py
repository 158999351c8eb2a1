"""The ``archlab analyze`` verb: read latency files, run :func:`~archlab.latency.analysis.analyze`,
print a table or JSON, optionally write the HTML report. Glue only; the work is in the library.
A FILE may also be an archlab load summary (``archlab-engine load --json``), a run directory or
a run id in ``--store``: then each cell (or those of ``--cell``) is analysed with its repetitions
merged exactly, with progress on stderr, and ``--report`` gathers every cell in one page
(:mod:`archlab.latency.report`).
The lead wires it as ``add_arguments(subparser)`` and ``run(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from archlab.latency.analysis import analyze
from archlab.latency.quantiles import QuantileMethod
from archlab.latency.errors import LatencyError
from archlab.latency.readers import FORMATS, detect_format, read, read_run_cell, run_cells
from archlab.latency.report import write_report
from archlab.latency.summary import CI_METHODS, DEFAULT_PERCENTILES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="latency files, merged exactly; or one archlab run directory or run id")
    parser.add_argument("--store", metavar="DIR", default="runs", help="result store for a run id (default: ./runs)")
    parser.add_argument("--cell", action="append", metavar="CELL_ID", help="cell of a run to analyse (repeatable; default: every cell)")
    parser.add_argument("--repetitions", type=lambda text: [int(r) for r in text.split(",")], metavar="R1,R2",
                        help="repetitions of a run to merge (default: every successful one)")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detect)")
    parser.add_argument("--column", help="value column of a plain CSV/Parquet file")
    parser.add_argument("--unit", choices=("ns", "us", "ms", "s"),
                        help="unit of --column values, or of an HDR log's values (default ns)")
    parser.add_argument("--measure", choices=("elapsed", "Latency", "Connect"), default="elapsed",
                        help="JMeter column to analyse (default elapsed: the full response time)")
    parser.add_argument("--warmup", type=float, default=0.0, metavar="SECONDS", help="drop the first SECONDS of each file")
    parser.add_argument("--cooldown", type=float, default=0.0, metavar="SECONDS", help="drop the last SECONDS of each file")
    parser.add_argument("--percentiles", type=lambda text: [float(p) for p in text.split(",")],
                        default=list(DEFAULT_PERCENTILES), help="comma-separated, in percent (default 50,90,95,99,99.9)")
    parser.add_argument("--quantile-method", choices=[m.value for m in QuantileMethod] + ["nearest_rank"],
                        default="linear", help="percentile definition (default linear = NumPy/H&F 7)")
    parser.add_argument("--ci", choices=CI_METHODS, default="bootstrap", help="percentile interval")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap replicates for percentile intervals")
    parser.add_argument("--gof-boot", type=int, default=0, help="parametric-bootstrap replicates for KS/chi2 (0: skip)")
    parser.add_argument("--tail-gof-boot", type=int, default=0, help="replicates for CSN's power-law p-value (0: skip)")
    parser.add_argument("--tail-boot", type=int, default=0,
                        help="bootstrap replicates for intervals of the Hill/CSN tail index and Gini (0: skip)")
    parser.add_argument("--tail-fraction", type=float, default=0.01, help="LLCD top fraction (default 0.01)")
    parser.add_argument("--resolution", default=None, metavar="auto|hdr|none|STEP",
                        help="rounding of tied data, for the tail estimators and GOF bootstrap (default: hdr for "
                             "HDR logs and archlab runs, else auto = detected integer grid)")
    parser.add_argument("--power-law", choices=("auto", "discrete", "continuous"), default="auto",
                        help="CSN power-law model: discrete (zeta) for integer-grid data such as integer ms, "
                             "continuous (Pareto) otherwise; auto picks discrete for integer data (not HDR buckets)")
    parser.add_argument("--pot-threshold", default="auto", metavar="auto|none|VALUE",
                        help="peaks-over-threshold GPD threshold, in the data's unit (default auto: parameter "
                             "stability; none: skip)")
    parser.add_argument("--no-stable", action="store_true", help="skip McCulloch's alpha-stable fit")
    parser.add_argument("--jitter-max", type=int, default=100_000, metavar="N",
                        help="observations the tail estimators jitter on rounded, tied data (a seeded subsample "
                             "beyond; lower is faster, default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--report", metavar="HTML",
                        help="also write a self-contained HTML report with plots (a run: every chosen cell, "
                             "with a summary table and one collapsible section per cell)")


def _is_run(path: str, store: str) -> bool:
    given = Path(path)
    if given.is_dir():
        return (given / "manifest.json").exists()
    return not given.exists() and (Path(store) / path / "manifest.json").exists()


def _resolution(text: str | None, default: str):
    if text is None:
        return default
    if text in ("auto", "hdr", "none"):
        return text
    try:
        return float(text)
    except ValueError:
        raise LatencyError(f"--resolution: expected auto, hdr, none or a step, got {text!r}") from None


def _pot_threshold(text: str):
    if text in ("auto", "none"):
        return None if text == "none" else "auto"
    try:
        return float(text)
    except ValueError:
        raise LatencyError(f"--pot-threshold: expected auto, none or a number, got {text!r}") from None


def _analyze(samples, args, resolution_default: str = "auto"):
    return analyze(samples, percentiles=args.percentiles, quantile_method=args.quantile_method, ci=args.ci,
                   n_boot=args.boot, gof_boot=args.gof_boot, tail_gof_boot=args.tail_gof_boot,
                   tail_fraction=args.tail_fraction, tail_boot=args.tail_boot,
                   resolution=_resolution(args.resolution, resolution_default), power_law=args.power_law,
                   pot_threshold=_pot_threshold(args.pot_threshold), stable=not args.no_stable,
                   jitter_max=args.jitter_max, seed=args.seed)


def _run_of_store(args: argparse.Namespace) -> int:
    if len(args.files) != 1:
        raise LatencyError("analyze: a run directory or run id must be the only FILE")
    source = args.files[0]
    run_id, cells, _ = run_cells(source, store=args.store)
    chosen = args.cell or cells
    results = {}
    for i, cell in enumerate(chosen, 1):
        started = time.perf_counter()
        part = read_run_cell(source, cell, store=args.store, repetitions=args.repetitions,
                             warmup_s=args.warmup, cooldown_s=args.cooldown)
        results[cell] = (part, _analyze(part.samples, args, "hdr"))
        print(f"analyze: cell {i}/{len(chosen)} {cell}: n={part.samples.n:,} "
              f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    if args.json:
        print(json.dumps({"run_id": run_id, "cells": {
            cell: {"repetitions": list(part.repetitions), **result.to_dict()} for cell, (part, result) in results.items()}},
            indent=2))
    else:
        print("\n\n".join(f"run {run_id} cell {cell} (repetitions {', '.join(map(str, part.repetitions))})\n"
                           + result.to_table() for cell, (part, result) in results.items()))
    if args.report:
        write_report(args.report, {f"{cell} (repetitions {', '.join(map(str, part.repetitions))})": result
                                   for cell, (part, result) in results.items()}, title=f"latency analysis of run {run_id}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Library errors (:class:`LatencyError`, an ArchlabError) propagate to archlab's main."""
    if any(_is_run(path, args.store) for path in args.files):
        return _run_of_store(args)
    if args.cell or args.repetitions:
        raise LatencyError("--cell/--repetitions: only for a run directory or run id")
    return _run_of_files(args)


def _run_of_files(args: argparse.Namespace) -> int:
    samples, hdr = None, True
    for path in args.files:
        hdr = hdr and (args.format if args.format != "auto" else detect_format(path)) in ("hdr-log", "load-summary")
        part = read(path, args.format, column=args.column, unit=args.unit, measure=args.measure,
                    warmup_s=args.warmup, cooldown_s=args.cooldown)
        samples = part if samples is None else samples.merge(part)
    result = _analyze(samples, args, "hdr" if hdr else "auto")
    print(result.to_json() if args.json else result.to_table(), file=sys.stdout)
    if args.report:
        result.to_html(args.report)
    return 0
