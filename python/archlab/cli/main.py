"""The ``archlab`` command line: the argument parser, and the one mapping from errors to exit
codes (input the user can fix -- a spec, an option, a file given to a verb -- 2; any other lab
error: 1; Ctrl-C: 130, SIGTERM: 143; each error class carries its status). Every message goes to
stderr as one line ``archlab: error: ...``; tracebacks are kept for real bugs."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn, Sequence

from archlab import __version__
from archlab.cli import commands
from archlab.errors import ArchlabError, Interrupted

# The export formats of `archlab records export` (archlab.lab.rawrecords.FORMATS; spelled here
# so the parser does not import NumPy).
FORMATS = ("parquet", "jtl")

_DESCRIPTION = """\
archlab: a performance lab for server architectures. It starts real servers and a real load
generator on loopback, pinned to CPUs, measures throughput, latency quantiles and what each
request costs the server (CPU time, context switches, system calls), and stores every result in a
run directory and a DuckDB catalog."""

_RUN_EPILOG = """\
examples:
  archlab run                               the quick start (experiments/quickstart.toml)
  archlab run experiments/my-study.toml --store /data/runs
  archlab run --resume 20261122-013000-quickstart-3fa2c1

Ctrl-C stops every process, keeps the cell runs recorded so far and prints the resume command.
Exit codes: 0 done, 1 lab error or every cell failed, 2 invalid spec, 130 interrupted."""


# Verbs of the analysis libraries. Their modules import SciPy and matplotlib (about a second),
# so they are imported only when their verb is used; otherwise a placeholder parser carries the
# one-line help for `archlab --help`. verb -> (module, registration style, help).
_LAZY_VERBS = {
    "analyze": ("archlab.latency.cli", "parser", "analyse latency files (JMeter JTL, HDR interval logs such as archlab's, wrk, memtier, CSV/Parquet)"),
    "fit-usl": ("archlab.models.cli", "subparsers", "fit the Universal Scalability Law (or Amdahl) to a CSV of N,X"),
    "model": ("archlab.models.cli", "subparsers", "evaluate a queueing model, or fit the USL to a stored run (--run)"),
    "simulate": ("archlab.sim.cli", "subparsers", "run a discrete-event simulation model (TOML)"),
    "compare": ("archlab.compare.cli", "parser", "compare two runs cell by cell: throughput and latency changes with intervals and a verdict"),
    "orders": ("archlab.cli.orders", "parser", "check published orders (a claims file) against a run or a results table: holds in k of n cells"),
}


def _add_lazy_verbs(sub: argparse._SubParsersAction, argv: Sequence[str]) -> None:
    verb = next((a for a in argv if not a.startswith("-")), None)
    loaded: set[str] = set()
    if verb in _LAZY_VERBS:
        module_name, style, help_text = _LAZY_VERBS[verb]
        module = importlib.import_module(module_name)
        if style == "parser":
            p = sub.add_parser(verb, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
            module.add_arguments(p)
            p.set_defaults(func=module.run)
            loaded.add(verb)
        else:
            before = set(sub.choices)
            module.add_arguments(sub)
            for name in set(sub.choices) - before:
                sub.choices[name].set_defaults(func=module.run)
                loaded.add(name)
    for name, (_, _, help_text) in _LAZY_VERBS.items():
        if name not in loaded:
            sub.add_parser(name, help=help_text, add_help=False)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line answer to a bad command line, like every other refusal (argparse
    prints the whole usage first, which buries the reason); ``--help`` still shows the usage.
    Subparsers are made of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` shows the usage)\n")


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = _Parser(prog="archlab", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"archlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def store_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--store", metavar="DIR", default="runs", help="result store: run directories and archlab.duckdb (default: ./runs)")

    p = sub.add_parser(
        "run",
        help="run an experiment spec (default: the quick start)",
        description="Validate an experiment spec, run every cell and repetition on real processes, store the\n"
        "results, print a table and write report.html in the run directory.",
        epilog=_RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", nargs="?", metavar="SPEC", help="experiment spec (TOML); default: experiments/quickstart.toml")
    store_option(p)
    p.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run: run only the cells it has not recorded")
    p.add_argument("--no-report", action="store_true", help="skip the report: no table, no report.html (`archlab report` makes them later)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run each cell's load as shards on a Dask cluster: tcp://HOST:PORT of a scheduler, or local:N (N local workers)")
    p.add_argument("--shards", metavar="S", type=int,
                   help="load shards per cell with --cluster (default: one per load worker, i.e. per worker started with --resources load=1)")
    p.set_defaults(func=commands.run)

    p = sub.add_parser(
        "tune",
        help="sweep a pool size over service programs, pick the best per program, score three tuners",
        description="Run a spec with a [tune] section (a sweep of a pool size over the service programs of a\n"
        "program file) like `archlab run`, then print per program the best level with its interval and\n"
        "ties, and the regret of the learned, model-based and controller tuners vs the measured best\n"
        "and vs the default level; report.html in the run directory gets the same with a figure.",
        epilog="examples:\n"
        "  archlab tune experiments/seed003-pool-sweep.toml\n"
        "  archlab tune --resume 20261125-220000-seed003-pool-sweep-3fa2c1\n"
        "  archlab tune --analyse 20261125-220000-seed003-pool-sweep-3fa2c1   (no process started)\n"
        "  archlab tune experiments/seed003-pool-sweep.toml --cluster tcp://10.0.0.1:8786\n\n"
        "Exit codes: 0 done, 1 lab error or every cell failed, 2 invalid spec, 130 interrupted.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", nargs="?", metavar="SPEC", help="a spec with a [tune] section (TOML)")
    store_option(p)
    p.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted sweep, then analyse it")
    p.add_argument("--analyse", metavar="RUN_ID", help="analyse a stored sweep again (no process is started)")
    p.add_argument("--no-report", action="store_true", help="skip the table and report.html")
    p.add_argument("--all-models", action="store_true",
                   help="also score the seed's four models as regression and classification (slower: 8 nested cross-validations)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the sweep's load as shards on a Dask cluster (as `archlab run --cluster`) and the tuners' "
                   "cross-validation folds on its workers, output identical to a local run: tcp://HOST:PORT, or local:N; "
                   "with --analyse, only the tuners' work")
    p.add_argument("--shards", metavar="S", type=int, help="load shards per cell with --cluster (as `archlab run --shards`)")
    p.set_defaults(func=commands.tune)

    p = sub.add_parser(
        "report",
        help="print the table and regenerate report.html of a stored run",
        description="Regenerate a run's terminal table and report.html from the store alone (no process is started).",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, as `archlab runs` lists them")
    store_option(p)
    p.set_defaults(func=commands.report)

    p = sub.add_parser("runs", help="list the runs in the store", description="List the runs in the store, newest first.")
    store_option(p)
    p.set_defaults(func=commands.runs)

    p = sub.add_parser(
        "records",
        help="export raw per-request records (a run's, or one file) to Parquet or JMeter's JTL CSV",
        description="Work with the raw per-request records the load generator keeps when a spec sets\n"
        "`records = true` in [load] (or `archlab-engine load --records FILE` wrote them).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    records_sub = p.add_subparsers(dest="records_command", metavar="COMMAND", required=True)
    p = records_sub.add_parser(
        "export",
        help="convert records to Parquet or JTL CSV",
        description="Convert records to Parquet (columns planned_ns, sent_ns, first_byte_ns, done_ns: ns since the\n"
        "run's start; status, bytes_received, bytes_sent, connection, error_class, mix_class) or to JMeter's JTL CSV.\n"
        "Given a run id, every repetition's records.bin gets a records.parquet (or records.jtl.csv)\n"
        "beside it; given a file, the output goes to --output (default: the file's name with the\n"
        "format's suffix). The file is read in chunks, so memory stays flat however large it is.",
        epilog="examples:\n"
        "  archlab records export 20261122-013000-open-tail-latency-3fa2c1\n"
        "  archlab records export records.bin --format jtl --output run.jtl.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", metavar="RUN_OR_FILE", help="a run id (as `archlab runs` lists them) or a records file")
    p.add_argument("--format", choices=FORMATS, default="parquet", help="output format (default: parquet)")
    p.add_argument("--output", metavar="PATH", help="output file, for a records file only")
    store_option(p)
    p.set_defaults(func=commands.records_export)

    p = sub.add_parser(
        "architectures",
        help="list the server architectures the engine offers",
        description="List the registered server architectures with the options each accepts.",
    )
    p.set_defaults(func=commands.architectures)
    _add_lazy_verbs(sub, argv)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    try:
        return args.func(args)
    except ArchlabError as e:  # 2: input the user can fix (InvalidValue and its kind); 1: the lab failed
        print(f"archlab: error: {e}", file=sys.stderr)
        return e.exit_status
    except Interrupted as e:
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `archlab runs | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
