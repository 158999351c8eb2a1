"""What each ``archlab`` verb does, as thin calls into the library: parse nothing, decide
nothing the library could decide, print results on stdout and progress/diagnostics on stderr.
Each function takes the parsed arguments and returns the process exit code."""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from archlab import documents
from archlab.errors import Interrupted, ResumableFault, SpecError, StoreError
from archlab.lab.adaptive import most_added
from archlab.lab.engine import DataPlaneRegistry, repo_root
from archlab.spec import SpecEnvironment
from archlab.lab.session import resume_run, run_spec
from archlab.cli.stores import known_run, open_store
from archlab.store import RunHandle, RunView, Store

if TYPE_CHECKING:
    from archlab.tuning.fanout import Mapper

DEFAULT_SPEC = Path("experiments") / "quickstart.toml"


def default_spec() -> Path:
    """``experiments/quickstart.toml`` in the current directory, else in this checkout."""
    if DEFAULT_SPEC.is_file():
        return DEFAULT_SPEC
    root = repo_root()
    if root is not None and (root / DEFAULT_SPEC).is_file():
        return root / DEFAULT_SPEC
    raise SpecError("SPEC", f"a spec file (none given, and no {DEFAULT_SPEC} here)", str(DEFAULT_SPEC))


def _say(text: str) -> None:
    print(f"archlab: {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    return _with_load_executor(args, store, lambda executor: _run(args, store, executor))


def _spec_cluster(args: argparse.Namespace, store: Store):
    """The ``[cluster]`` section of the spec this command runs (the stored one with --resume);
    None without one, or when the spec cannot be read (running it then says why)."""
    from archlab.spec.cluster import settings_in

    if args.resume:
        if args.spec is not None:
            return None  # refused by the run itself, with the reason
        text, source = store.read_manifest(known_run(store, args.resume, "--resume")).spec_text or "", f"{args.resume}/spec.toml"
    else:
        path = Path(args.spec) if args.spec is not None else default_spec()
        try:
            text, source = documents.read_text(path), path.name
        except (OSError, UnicodeDecodeError):
            return None
    return settings_in(text, source)


def _with_load_executor(args: argparse.Namespace, store: Store, body) -> int:
    """``body(executor)`` with the load executor the flags and the spec's ``[cluster]`` ask
    for (the flags win): None for a local run, else shards on an open cluster, closed after."""
    from archlab.spec.cluster import choose

    choice = choose(getattr(args, "cluster", None), getattr(args, "shards", None), _spec_cluster(args, store))
    if choice is None:
        return body(None)
    from archlab.cluster import ShardedLoad, open_cluster  # lazy: Dask only when asked for

    with open_cluster(choice.address) as cluster:
        shards = choice.shards if choice.shards is not None else len(cluster.load_workers(choice.load_hosts))
        if shards < 1:
            raise SpecError(choice.address_from, "a cluster with at least one load worker (a worker started with --resources load=1)",
                            str(choice.address))
        # Closing it stops what runs on the workers of [[systems]] entries, always.
        with ShardedLoad(cluster, shards, load_hosts=choice.load_hosts, chosen=choice.to_dict()) as executor:
            if choice.server_host is None:
                return body(executor)
            from archlab.cluster.remote import RemoteHost

            with RemoteHost(cluster, choice.server_host) as executor.server_host:  # stops the servers there, always
                return body(executor)


def tune(args: argparse.Namespace) -> int:
    """``archlab tune``: the sweep runs as ``archlab run`` runs a spec (progress, resume, its
    load on the ``--cluster`` or the spec's ``[cluster]``), then the tuning library reads it
    back from the store, its tuners' folds on the same cluster if there is one."""
    store = open_store(args.store)
    if args.analyse:
        if args.spec is not None or args.resume:
            raise SpecError("--analyse", "no SPEC and no --resume with --analyse", args.analyse)
        if args.shards is not None:
            raise SpecError("--shards", "no --shards with --analyse (nothing is measured; --cluster alone spreads the tuners' work)",
                            args.shards)
        view = store.load_run(known_run(store, args.analyse, "--analyse"))
        with _computing_on(args.cluster) as mapper:
            return _tune_summary(view, store.run_dir(args.analyse), args.all_models, _SweepAnalysis(mapper))
    if args.spec is None and not args.resume:
        raise SpecError("SPEC", "a spec with a [tune] section (or --resume RUN_ID)", "nothing")
    if args.spec is not None:
        from archlab.spec import load_spec

        experiment, _ = load_spec(args.spec, SpecEnvironment.local(DataPlaneRegistry()))
        if experiment.tune is None:
            raise SpecError("tune", f"a [tune] section in {args.spec} (`archlab run` runs specs without one)", "nothing")
    made: list[RunHandle] = []

    def created(handle: RunHandle) -> None:
        made.append(handle)
        _keep_programs(handle)

    def sweep_then_analyse(executor) -> int:
        analysis = _SweepAnalysis(_mapper_of(executor))
        code = _run(args, store, executor, on_created=created, tuning=analysis)
        if code == 130 or not made:
            return code
        status = _tune_summary(store.load_run(made[0].run_id), made[0].directory, args.all_models, analysis)
        return code or status

    return _with_load_executor(args, store, sweep_then_analyse)


@contextlib.contextmanager
def _computing_on(address: str | None) -> Iterator[Mapper]:
    """Where the tuners' independent computations run: here without ``--cluster``, else as
    tasks on the cluster's workers (opened here, closed when the caller is done)."""
    if address is None:
        from archlab.tuning.fanout import here

        yield here
        return
    from archlab.cluster import ClusterAddress, open_cluster  # lazy: Dask only when asked for

    with open_cluster(ClusterAddress.parse(address)) as cluster:
        yield _mapper_of_cluster(cluster)


def _mapper_of(executor) -> Mapper:
    """The tuners' computations on the cluster the sweep's load ran on (if any), else here."""
    if executor is None:
        from archlab.tuning.fanout import here

        return here
    return _mapper_of_cluster(executor.cluster)


def _mapper_of_cluster(cluster) -> Mapper:
    from archlab.cluster.fanout import map_in_order

    return functools.partial(map_in_order, cluster)


class _SweepAnalysis:
    """A stored sweep analysed once, for the run's report and for the terminal, its tuners'
    computations run by ``mapper``: ``analysis(view, run_dir)`` -> (evaluations, datasets)."""

    def __init__(self, mapper: Mapper):
        self.mapper = mapper
        self._done: tuple[str, tuple] | None = None

    def __call__(self, view: RunView, run_dir: Path) -> tuple:
        from archlab.tuning.tune_report import analyse_with_data  # lazy: scikit-learn

        if self._done is None or self._done[0] != view.manifest.run_id:
            self._done = (view.manifest.run_id, analyse_with_data(view.manifest, view.rows, run_dir, self.mapper))
        return self._done[1]


def _keep_programs(handle: RunHandle) -> None:
    """A copy of the program file in the run directory, so the analysis reads what ran."""
    tune = handle.experiment.tune
    kept = handle.directory / "programs.toml"
    if tune is not None and not kept.exists():
        kept.write_bytes(Path(tune.programs_file).read_bytes())


def _tune_summary(view: RunView, run_dir: Path, all_models: bool, analysis: _SweepAnalysis) -> int:
    from archlab.tuning.tune_report import live_summary_text, models_text, summary_text, tune_settings  # lazy: scikit-learn

    tune = tune_settings(view.manifest)
    if tune is None:
        raise SpecError("RUN_ID", "a run of a spec with a [tune] section", view.manifest.run_id)
    if tune.controller is not None:
        print(live_summary_text(view.manifest, view.rows, run_dir))
        return 0
    evals, data = analysis(view, run_dir)
    if not evals:
        _say(f"run {view.manifest.run_id}: no successful repetition at concurrency {tune.concurrency} to analyse")
        return 1
    print(summary_text(evals, tune.parameter))
    if all_models:
        print(models_text(evals, data, tune.default, analysis.mapper))
    return 0


def _run(args: argparse.Namespace, store: Store, executor, on_created=None, tuning: _SweepAnalysis | None = None) -> int:
    created: list[RunHandle] = []

    def announce(handle: RunHandle) -> None:
        if on_created is not None:
            on_created(handle)
        created.append(handle)
        planned, left = handle.experiment.cells_planned, len(handle.pending())
        todo = f"{left} of {planned} cell runs left" if left < planned else f"{planned} cell runs"
        if added := most_added(handle.experiment):
            todo += f", then up to {added} more where a comparison is still open"
        _say(f"run {handle.run_id}: {todo} -> {handle.directory}")

    try:
        if args.resume:
            if args.spec is not None:
                raise SpecError("SPEC", "no spec with --resume (the run's stored spec is used)", str(args.spec))
            handle = resume_run(known_run(store, args.resume, "--resume"), store, stream=sys.stderr, on_created=announce,
                                load_executor=executor)
        else:
            handle = run_spec(args.spec or default_spec(), store, stream=sys.stderr, on_created=announce, load_executor=executor)
    except Interrupted as e:
        if created:
            _say(
                f"interrupted; run {created[0].run_id} keeps the cells recorded so far. Resume it with:\n"
                f"  archlab run --resume {created[0].run_id} --store {args.store}"
            )
        return e.exit_code
    except ResumableFault as e:
        if not created:
            raise
        cluster = f" --cluster {args.cluster}" if getattr(args, "cluster", None) else ""
        _say(f"error: {e}; run {created[0].run_id} stopped before recording that cell. Resume it with:\n"
             f"  archlab run --resume {created[0].run_id} --store {args.store}{cluster}")
        return e.exit_status
    return _finish(store, handle, write_report=not args.no_report, tuning=tuning)


def _finish(store: Store, handle: RunHandle, write_report: bool, tuning: _SweepAnalysis | None = None) -> int:
    view = store.load_run(handle.run_id)
    if write_report:
        _print_table(view)
        _write_report(view, handle.directory / "report.html", tuning)
    else:
        _say(f"run {handle.run_id} {view.manifest.status}; `archlab report {handle.run_id} --store {store.root}` shows it")
    failed, rows = view.failed_rows, view.rows
    if failed:
        first = (failed[0].error or "failed").splitlines()[0]
        _say(f"{len(failed)} of {len(rows)} cell runs failed (first: {failed[0].cell_id}: {first})")
    return 1 if rows and len(failed) == len(rows) else 0


def _print_table(view: RunView) -> None:
    from archlab.report import terminal_table  # lazy: the report stack (matplotlib) is heavy
    from archlab.report.glance import comparison_confidence, disturbance_limit
    from archlab.report.processes import process_lines
    from archlab.report.sources import column_source_lines

    print(terminal_table(view.rows, confidence=comparison_confidence(view.manifest), max_foreign=disturbance_limit(view.manifest)))
    for line in [*column_source_lines(view.manifest), *process_lines(view.rows)]:
        print(line)


def _write_report(view: RunView, path: Path, tuning: _SweepAnalysis | None = None) -> None:
    from archlab.report import write_html

    analysed = (lambda: tuning(view, path.parent)[0]) if tuning is not None else None
    written = write_html(view.manifest, view.rows, path, tuning=analysed)
    print(f"report: {written}")


def report(args: argparse.Namespace) -> int:
    store = open_store(args.store)
    view = store.load_run(known_run(store, args.run_id))
    _print_table(view)
    _write_report(view, store.run_dir(args.run_id) / "report.html")
    return 0


def runs(args: argparse.Namespace) -> int:
    infos = open_store(args.store).runs()
    if not infos:
        _say(f"no runs in {args.store} yet (`archlab run` makes one)")
        return 0
    header = ("RUN ID", "EXPERIMENT", "STATUS", "STARTED (UTC)", "OK", "FAILED", "PLANNED")
    table = [
        (i.run_id, i.experiment, i.status, i.started_at.strftime("%Y-%m-%d %H:%M:%S"), str(i.cells_ok), str(i.cells_failed), str(i.cells_planned))
        for i in infos
    ]
    _print_columns(header, table)
    return 0


def records_export(args: argparse.Namespace) -> int:
    from archlab.lab import rawrecords  # lazy: NumPy and DuckDB are needed by this verb only
    from archlab.lab.engine import Engine

    source = Path(args.source)
    if source.is_file():
        out = Path(args.output) if args.output else _with_suffix(source, rawrecords.SUFFIXES[args.format])
        if not out.parent.is_dir() or out.is_dir():
            raise SpecError("--output", "a file path in an existing directory", str(out))
        jobs = [(source, out)]
    else:
        if args.output:
            raise SpecError("--output", "no --output with a run id (each repetition's export goes beside its records)", args.output)
        store = open_store(args.store)
        if source.is_dir() or store.catalog.run(args.source) is None:
            raise SpecError("RUN_OR_FILE", f"a records file, or a run id of the store {store.root}", args.source)
        found = sorted(store.run_dir(args.source).glob("cells/*/rep-*/records.bin"))
        if not found:
            raise StoreError(f"run {args.source} kept no raw records (set `records = true` in the spec's [load] section)")
        jobs = [(f, f.with_name("records" + rawrecords.SUFFIXES[args.format])) for f in found]
    engine = Engine.locate().path if args.format == "jtl" else None
    for path, out in jobs:
        records = rawrecords.RecordsFile.open(path)
        if engine is None:
            rows = rawrecords.export_parquet(records, out)
        else:
            rows = rawrecords.export_jtl(engine, records, out)
        print(f"{out}\t{rows} rows")
    return 0


def _with_suffix(path: Path, suffix: str) -> Path:
    """``records.bin`` -> ``records.parquet``: the file's stem with the format's suffix."""
    return path.with_name(path.name.removesuffix(path.suffix) + suffix)


def architectures(_args: argparse.Namespace) -> int:
    registry = DataPlaneRegistry()
    table = [(a.name, ",".join(sorted(a.options)) or "-", a.description) for a in registry.architectures()]
    _print_columns(("NAME", "OPTIONS", "DESCRIPTION"), table)
    return 0


def _print_columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
