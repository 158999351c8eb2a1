"""The ``archlab analyze`` verb: read latency files, run :func:`~archlab.latency.analysis.analyze`,
print a table or JSON, optionally write the HTML report. Glue only; the work is in the library.
A FILE may also be an archlab load summary (``archlab-engine load --json``), a run directory or
a run id in ``--store``: then each cell (or those of ``--cell``) is analysed with its repetitions
merged exactly, with progress on stderr, and ``--report`` gathers every cell in one page
(:mod:`archlab.latency.report`). With ``--cluster`` the per-file reads, or the per-cell reads
and analyses, run as tasks on a Dask cluster (:mod:`archlab.cluster.fanout`) and come back in
order, so the output is the local run's; the files must be readable at the same paths on the
workers (one host, or a shared file system).
The lead wires it as ``add_arguments(subparser)`` and ``run(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from archlab.errors import SpecError
from archlab.latency.analysis import analyze, format_duration
from archlab.latency.errors import LatencyError, ParameterError
from archlab.latency.quantiles import QuantileMethod
from archlab.latency.readers import FAILED, FORMATS, PercentileReport, Reading, read_cell_rows, read_file, run_cells
from archlab.latency.report import write_report
from archlab.latency.summary import CI_METHODS, DEFAULT_PERCENTILES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="latency files, merged exactly; or one archlab run directory or run id")
    parser.add_argument("--store", metavar="DIR", default="runs", help="result store for a run id (default: ./runs)")
    parser.add_argument("--cell", action="append", metavar="CELL_ID", help="cell of a run to analyse (repeatable; default: every cell)")
    parser.add_argument("--repetitions", type=_comma_list(int, "integers"), metavar="R1,R2",
                        help="repetitions of a run to merge (default: every successful one)")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detect)")
    parser.add_argument("--column", help="value column of a plain CSV/Parquet file")
    parser.add_argument("--unit", choices=("ns", "us", "ms", "s"),
                        help="unit of the values in the file: of --column, of an HDR log (default ns), of a .hgrm "
                             "percentile distribution (HdrHistogram prints values divided by its "
                             "outputValueUnitScalingRatio; wrk2's are ms), or the unit to print wrk's percentiles in")
    parser.add_argument("--measure", choices=("elapsed", "Latency", "Connect"), default="elapsed",
                        help="JMeter column to analyse (default elapsed: the full response time)")
    parser.add_argument("--failed", choices=FAILED, default="exclude",
                        help="JMeter samples with success=false: left out (default; the output says how many), "
                             "included, or the only ones analysed")
    parser.add_argument("--label", action="append", metavar="LABEL",
                        help="JMeter sampler label to analyse (repeatable; default: every label)")
    parser.add_argument("--jtl-columns", type=_comma_list(str.strip, "column names"), metavar="NAME,NAME",
                        help="columns of a JMeter CSV without a header line, when not one of JMeter's default layouts")
    parser.add_argument("--warmup", type=float, default=0.0, metavar="SECONDS", help="drop the first SECONDS of each file")
    parser.add_argument("--cooldown", type=float, default=0.0, metavar="SECONDS", help="drop the last SECONDS of each file")
    parser.add_argument("--percentiles", type=_comma_list(float, "numbers"),
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
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="read the files (or analyse the run's cells) on a Dask cluster: tcp://HOST:PORT of a "
                             "scheduler, or local:N (N local workers); output identical to a local run")


def _comma_list(convert, what: str):
    """An argparse type: comma-separated values, each converted (a bad one is named)."""
    def parse(text: str) -> list:
        try:
            values = [convert(part) for part in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}") from None
        if any(v == "" for v in values):
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}")
        return values
    return parse


def _is_run(path: str, store: str) -> bool:
    """A run directory, or a run id of ``--store`` (checked only for a FILE that does not exist)."""
    given = Path(path)
    if given.is_dir():
        return (given / "manifest.json").exists()
    if given.exists():
        return False
    from archlab.cli.stores import open_store
    from archlab.store import CATALOG_FILE

    if Path(store).exists():  # (a missing store is not made for a lookup)
        opened = open_store(store)
        if (Path(store) / CATALOG_FILE).exists() and opened.catalog.run(path) is not None:
            return True
    raise SpecError("FILE", f"a latency file, a run directory or a run id of the store {store}", path)


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


@dataclass(frozen=True)
class _CellTask:
    """One cell of a run to read and analyse: the catalog's rows travel with it, so the task
    (here, or on a cluster's worker) opens only the cell's HDR logs."""

    run_id: str
    cell: str
    cells: list[str]
    rows: list
    args: argparse.Namespace


@dataclass(frozen=True)
class _CellDone:
    repetitions: tuple[int, ...]
    n: int
    seconds: float
    result: Any


def _analyze_cell(task: _CellTask) -> _CellDone:
    started = time.perf_counter()
    args = task.args
    part = read_cell_rows(task.run_id, task.cell, task.cells, task.rows, repetitions=args.repetitions,
                          warmup_s=args.warmup, cooldown_s=args.cooldown)
    result = _analyze(part.samples, args, "hdr")
    return _CellDone(part.repetitions, part.samples.n, time.perf_counter() - started, result)


@contextlib.contextmanager
def _mapper(args: argparse.Namespace) -> Iterator[Callable]:
    """``map(function, items, name)`` in order: a local loop, or the tasks spread over the
    ``--cluster`` (opened here, closed when the caller is done)."""
    if args.cluster is None:
        yield lambda function, items, name: map(function, items)
        return
    from archlab.cluster import ClusterAddress, open_cluster  # lazy: Dask only when asked for
    from archlab.cluster.fanout import map_in_order

    with open_cluster(ClusterAddress.parse(args.cluster)) as cluster:
        yield lambda function, items, name: map_in_order(cluster, function, items, name)


def _run_of_store(args: argparse.Namespace) -> int:
    if len(args.files) != 1:
        raise LatencyError("analyze: a run directory or run id must be the only FILE")
    source = args.files[0]
    run_id, cells, rows = run_cells(source, store=args.store)
    chosen = args.cell or cells
    tasks = [_CellTask(run_id, cell, cells, [r for r in rows if r.cell_id == cell], args) for cell in chosen]
    results = {}
    with _mapper(args) as mapped:
        for i, (task, done) in enumerate(zip(tasks, mapped(_analyze_cell, tasks, lambda t: f"cell {t.cell} of run {run_id}")), 1):
            results[task.cell] = (done, done.result)
            print(f"analyze: cell {i}/{len(chosen)} {task.cell}: n={done.n:,} ({done.seconds:.1f} s)", file=sys.stderr)
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


# Library parameters -> the flags that set them, so that a refusal names the flag.
_FLAGS = {"warmup_s": "--warmup", "cooldown_s": "--cooldown", "percentiles": "--percentiles", "n_boot": "--boot",
          "gof_boot": "--gof-boot", "tail_gof_boot": "--tail-gof-boot", "tail_boot": "--tail-boot",
          "tail_fraction": "--tail-fraction", "jitter_max": "--jitter-max", "seed": "--seed", "unit": "--unit",
          "column/unit": "--column/--unit", "failed/labels/jtl_columns": "--failed/--label/--jtl-columns",
          "measure": "--measure", "format": "--format", "resolution": "--resolution", "pot_threshold": "--pot-threshold"}


def run(args: argparse.Namespace) -> int:
    """Library errors (:class:`LatencyError`, exit status 2) propagate to archlab's main, a
    refused parameter renamed to its flag."""
    try:
        if args.report:
            _check_output(args.report, "--report")
        if any(_is_run(path, args.store) for path in args.files):
            return _run_of_store(args)
        if args.cell or args.repetitions:
            raise LatencyError("--cell/--repetitions: expected a run directory or run id as FILE, got files")
        return _run_of_files(args)
    except ParameterError as e:
        if e.parameter in _FLAGS:
            raise e.named(_FLAGS[e.parameter]) from None
        raise


def _check_output(path: str, flag: str) -> None:
    target = Path(path)
    if target.is_dir() or not target.parent.is_dir():
        raise SpecError(flag, "a file path in an existing directory", path)


def _run_of_files(args: argparse.Namespace) -> int:
    with _mapper(args) as mapped:
        readings: list[Reading] = list(mapped(functools.partial(_read, args), args.files, lambda path: f"file {path}"))
    printed_only = [(path, r.report) for path, r in zip(args.files, readings) if r.samples is None]
    if printed_only:
        if len(args.files) > 1:
            raise LatencyError(f"{printed_only[0][0]}: holds only printed percentiles, which cannot be merged with "
                               "other files: analyse it alone")
        report = printed_only[0][1]
        assert report is not None  # a reading holds samples or printed percentiles
        return _print_percentiles(args.files[0], report, args)
    samples = readings[0].samples
    for reading in readings[1:]:
        assert samples is not None and reading.samples is not None  # no printed-only reading here
        samples = samples.merge(reading.samples)
    hdr = all(r.format in ("hdr-log", "load-summary") for r in readings)
    result = _analyze(samples, args, "hdr" if hdr else "auto")
    inputs = [f"input {path}: {note}" for path, r in zip(args.files, readings) for note in r.notes]
    result.notes[:0] = inputs
    print(result.to_json() if args.json else result.to_table(), file=sys.stdout)
    if args.report:
        result.to_html(args.report)
    return 0


def _read(args: argparse.Namespace, path: str) -> Reading:
    return read_file(path, args.format, column=args.column, unit=args.unit, measure=args.measure, warmup_s=args.warmup,
                     cooldown_s=args.cooldown, failed=args.failed, labels=args.label, jtl_columns=args.jtl_columns)


def _print_percentiles(path: str, report: PercentileReport, args: argparse.Namespace) -> int:
    """A file of a few printed percentiles (wrk --latency, memtier without its histogram): shown
    as printed; no distribution can be rebuilt from them, so nothing else is computed."""
    if args.report:
        raise LatencyError(f"{path}: --report needs a distribution, and the file holds only printed percentiles")
    if args.json:
        print(json.dumps({"file": path, "unit": report.unit, "count": report.count, "mean": report.mean,
                          "stdev": report.stdev, "max": report.max,
                          "percentiles": [{"p": p, "value": v} for p, v in report.percentiles.items()],
                          "notes": ["printed percentiles only: no distribution to analyse"]}, indent=2))
        return 0
    u = report.unit
    lines = [f"{path}: percentiles as the tool printed them (no distribution: nothing else can be computed)"]
    if report.count is not None:
        lines.append(f"  requests  {report.count:,}")
    for name, value in (("mean", report.mean), ("stdev", report.stdev), ("max", report.max)):
        if value is not None:
            lines.append(f"  {name:<8}  {format_duration(value, u)}")
    lines.extend(f"  p{p:<7g}  {format_duration(v, u)}" for p, v in report.percentiles.items())
    print("\n".join(lines))
    return 0
