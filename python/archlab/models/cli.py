"""The `archlab fit-usl` and `archlab model` verbs: argument parsing and printing only; the
work is done by the library functions. The lead wires them into the main parser by calling
:func:`add_arguments` with its subparsers and dispatching to :func:`run`."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

from archlab import documents
from archlab.models.errors import ModelError
from archlab.models.fromrun import check_run_laws, fit_run, fit_text, law_summary, ok_rows
from archlab.models.queueing import machine_repairman, mminf, mmm, mmmb
from archlab.models.station import metrics_table
from archlab.models.usl import USL, Amdahl, ScalabilityComparison


def add_arguments(subparsers: argparse._SubParsersAction) -> None:
    fit = subparsers.add_parser("fit-usl", help="fit the Universal Scalability Law (or Amdahl) to a CSV of N,X")
    fit.add_argument("csv", type=Path, help="CSV file with a header; columns named by --n-column and --x-column")
    fit.add_argument("--n-column", default="N", help="concurrency column (default: N)")
    fit.add_argument("--x-column", default="X", help="throughput column (default: X)")
    fit.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    fit.add_argument("--amdahl", action="store_true", help="fit Amdahl's law (kappa = 0) instead")
    fit.add_argument("--weighting", choices=["none", "relative"], default="none",
                     help="least squares on absolute errors (default, as R usl) or on relative errors")
    fit.add_argument("--predict", type=float, nargs="*", default=[], help="concurrency levels to predict, with bands")
    fit.set_defaults(models_verb="fit-usl")

    model = subparsers.add_parser(
        "model", help="evaluate a single-station queueing model, or fit the USL to a stored run",
        description="`archlab model KIND --service-rate ...` evaluates a queueing formula; "
        "`archlab model --run RUN_ID [--store DIR]` fits the USL per architecture and workload of a "
        "stored run and prints its predictions beside the measured throughput and mean latency.",
    )
    model.add_argument("kind", nargs="?", choices=["mm1", "mmm", "mmmb", "mminf", "repairman"])
    model.add_argument("--run", metavar="RUN_ID", help="a stored run to model (closed load model)")
    model.add_argument("--store", metavar="DIR", default="runs", help="result store of --run (default: ./runs)")
    model.add_argument("--confidence", type=float, default=0.95, help="confidence level with --run (default 0.95)")
    model.add_argument("--weighting", choices=["none", "relative"], default="relative",
                       help="USL least squares with --run on relative (default) or absolute errors")
    model.add_argument("--arrival-rate", type=float, help="jobs per second (open models)")
    model.add_argument("--service-rate", type=float, help="jobs per second of one server")
    model.add_argument("--servers", type=int, default=1)
    model.add_argument("--capacity", type=int, help="jobs the station holds at most (mmmb)")
    model.add_argument("--population", type=int, help="clients (repairman)")
    model.add_argument("--think-time", type=float, default=0.0, help="seconds (repairman)")
    model.add_argument("--time-scale", type=float, default=1e3, help="multiply times by this (default 1000: ms)")
    model.set_defaults(models_verb="model")


# The library's parameter names -> the flags a user wrote, so that a refusal names the flag.
_MODEL_FLAGS = {"arrival_rate": "--arrival-rate", "service_rate": "--service-rate", "servers": "--servers",
                "capacity": "--capacity", "population": "--population", "think_time": "--think-time",
                "confidence": "--confidence", "time_scale": "--time-scale"}


def run(args: argparse.Namespace) -> int:
    """Execute the verb; a ModelError propagates to the CLI's single error mapping, renamed to
    the flag or the CSV column the user wrote."""
    flags = dict(_MODEL_FLAGS)
    if args.models_verb == "fit-usl":
        flags.update({"n": f"{args.csv}: column {args.n_column}", "x": f"{args.csv}: column {args.x_column}"})
    try:
        if args.models_verb == "fit-usl":
            return _fit_usl(args)
        return _model(args)
    except ModelError as e:
        if e.parameter in flags:
            raise e.named(flags[e.parameter]) from None
        raise


def _fit_usl(args: argparse.Namespace) -> int:
    n, x = _read_columns(args.csv, args.n_column, args.x_column)
    estimator = (Amdahl if args.amdahl else USL)(confidence=args.confidence, weighting=args.weighting).fit(n, x)
    print(estimator.summary())
    if not args.amdahl:
        try:
            amdahl = Amdahl(confidence=args.confidence, weighting=args.weighting).fit(n, x)
        except ModelError as exc:
            print(f"Amdahl vs USL: not tested ({exc})")
        else:
            print(ScalabilityComparison.from_fits(estimator, amdahl).summary())
    if args.predict:
        for level in args.predict:
            if not (math.isfinite(level) and level >= 1):
                raise ModelError("--predict", "concurrency levels >= 1", level)
        band = estimator.predict(args.predict, "prediction")
        print(f"\n{'N':>10}{'X(N)':>14}{'prediction band':>34}")
        for level, mean, lo, hi in zip(band.n, band.throughput, band.lower, band.upper):
            print(f"{level:>10g}{mean:>14.6g}{f'[{lo:.6g}, {hi:.6g}]':>34}")
    return 0


def _model(args: argparse.Namespace) -> int:
    if args.run is not None:
        return _model_run(args)
    kind = args.kind
    if not (math.isfinite(args.time_scale) and args.time_scale > 0):
        raise ModelError("--time-scale", "a finite number > 0", args.time_scale)
    if kind is None:
        raise ModelError("kind", "mm1, mmm, mmmb, mminf or repairman (or --run RUN_ID for a stored run)", None)
    _required(args.service_rate, "--service-rate")
    if kind == "repairman":
        station = machine_repairman(_required(args.population, "--population"), args.think_time, args.service_rate, args.servers)
    elif kind == "mminf":
        station = mminf(_required(args.arrival_rate, "--arrival-rate"), args.service_rate)
    elif kind == "mmmb":
        station = mmmb(_required(args.arrival_rate, "--arrival-rate"), args.service_rate, args.servers,
                       _required(args.capacity, "--capacity"))
    else:
        servers = 1 if kind == "mm1" else args.servers
        station = mmm(_required(args.arrival_rate, "--arrival-rate"), args.service_rate, servers)
    print(metrics_table({station.model: station}, time_scale=args.time_scale).to_text())
    return 0


def _model_run(args: argparse.Namespace) -> int:
    from archlab.cli.stores import known_run, open_store

    store = open_store(args.store)
    view = store.load_run(known_run(store, args.run, "--run"))
    manifest, rows = view.manifest, view.rows
    fits = fit_run(manifest, rows, confidence=args.confidence, weighting=args.weighting)
    print(f"run {args.run}: {len(ok_rows(rows))} successful repetitions of {len(rows)}; "
          "X in req/s, R = mean latency (model: N/X - Z), errors (model - measured)/measured")
    for fit in fits:
        print()
        print(fit_text(fit))
    checks = check_run_laws(manifest, rows)
    if checks:
        print()
        print("operational laws (Little's law within each row's sampling tolerance, the others within 5%):")
        for line in law_summary(checks):
            print("  " + line)
    return 0


def _required(value, flag: str):
    if value is None:
        raise ModelError(flag, "a value for this model", None)
    return value


def _read_columns(path: Path, n_column: str, x_column: str) -> tuple[list[float], list[float]]:
    """The two columns of a CSV file with a header line, as finite numbers; a row that is not
    one is refused naming the file, the line and the column."""
    line = 0
    try:
        with io.StringIO(documents.read_text(path), newline="") as fh:
            reader = csv.reader(fh)
            line = 1
            header = next(reader, None)
            if header is None or n_column not in header or x_column not in header:
                raise ModelError(str(path), f"a header line naming the columns {n_column!r} and {x_column!r}", header or [])
            at = (header.index(n_column), header.index(x_column))
            n: list[float] = []
            x: list[float] = []
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise ModelError(f"{path}:{reader.line_num}", f"a row of {len(header)} fields (as the header line)",
                                     len(row))
                for values, column, i in ((n, n_column, at[0]), (x, x_column, at[1])):
                    values.append(_number(row[i], f"{path}:{reader.line_num}", column))
            return n, x
    except UnicodeDecodeError as exc:
        raise ModelError(str(path), "a UTF-8 text CSV file", f"byte {exc.object[exc.start]:#04x} at offset {exc.start}") from None
    except csv.Error as exc:  # e.g. a field over the csv module's 128 KiB limit
        raise ModelError(f"{path}:{line + 1}", "a CSV row", _short(str(exc))) from None
    except OSError as exc:
        raise ModelError(str(path), "a readable CSV file", str(path), exc.strerror or str(exc)) from None


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ModelError(where, f"a finite number in column {column!r}", _short(text))
    return value


def _short(text: str, limit: int = 60) -> str:
    """The beginning of a long value: an error line quotes what it received, not 200 kB of it."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - convenience entry point
    parser = argparse.ArgumentParser(prog="archlab-models")
    add_arguments(parser.add_subparsers(required=True))
    try:
        return run(parser.parse_args(argv))
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
