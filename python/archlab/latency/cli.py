"""The ``archlab analyze`` verb: read latency files, run :func:`~archlab.latency.analysis.analyze`,
print a table or JSON, optionally write the HTML report. Glue only; the work is in the library.
The lead wires it as ``add_arguments(subparser)`` and ``run(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import sys

from archlab.latency.analysis import analyze
from archlab.latency.quantiles import QuantileMethod
from archlab.latency.readers import FORMATS, read
from archlab.latency.summary import CI_METHODS, DEFAULT_PERCENTILES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="latency files; several are merged exactly")
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
    parser.add_argument("--tail-fraction", type=float, default=0.01, help="LLCD top fraction (default 0.01)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--report", metavar="HTML", help="also write a self-contained HTML report with plots")


def run(args: argparse.Namespace) -> int:
    samples = None
    for path in args.files:
        part = read(path, args.format, column=args.column, unit=args.unit, measure=args.measure,
                    warmup_s=args.warmup, cooldown_s=args.cooldown)
        samples = part if samples is None else samples.merge(part)
    result = analyze(samples, percentiles=args.percentiles, quantile_method=args.quantile_method, ci=args.ci,
                     n_boot=args.boot, gof_boot=args.gof_boot, tail_gof_boot=args.tail_gof_boot,
                     tail_fraction=args.tail_fraction, seed=args.seed)
    print(result.to_json() if args.json else result.to_table(), file=sys.stdout)
    if args.report:
        result.to_html(args.report)
    return 0
