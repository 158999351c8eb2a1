"""Run directories and their catalog rows. Layout under the store root (default ``./runs``)::

    archlab.duckdb                      the catalog (see archlab.store.catalog)
    <run-id>/manifest.json              what ran, where, with which code (archlab.store.manifest)
    <run-id>/spec.toml                  the spec exactly as given
    <run-id>/cells/<cell_id>/rep-<r>/   summary.json, hdr.log, server.stderr, load.stderr, probe.json

Every kind of run is written through the same API: :meth:`Store.begin_run` with a
:class:`RunPlan` gives a :class:`RunWriter` (``archlab.sim.record`` writes simulations so;
:meth:`Store.create_run` makes the plan of an experiment and gives a :class:`RunHandle`, the
writer that also knows the experiment's pending pairs), then :meth:`RunWriter.record` once per
(cell, repetition) and :meth:`RunWriter.set_status`. Readers get a :class:`RunView` from
:meth:`Store.load_run`: the typed :class:`~archlab.store.manifest.Manifest` and
:class:`~archlab.store.rows.ResultRow` s.

A (cell, repetition) is done when, and only when, its catalog row exists; its directory is
written first. Resuming therefore clears the directory of every pair without a row and runs it
again, whatever state an interruption left it in. A run being executed holds an advisory lock on
``<run-id>/.lock`` (released by the kernel however the process ends), so a second orchestrator
cannot resume a run that is still going."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

from archlab.errors import StoreError
from archlab.spec.model import Cell, Experiment
from archlab.store.catalog import Catalog
from archlab.store.manifest import MANIFEST_SCHEMA, MANIFEST_VERSION, EngineFacts, Manifest, RunKind, experiment_facts, machine_facts
from archlab.store.records import CellKey, CellRecord, Source
from archlab.store.rows import ResultRow
from archlab.store.summary import SummaryError, read_summary

CATALOG_FILE = "archlab.duckdb"


def utc_now() -> datetime:
    """Naive UTC, as the catalog's TIMESTAMP columns store it."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_run_id(experiment_name: str, now: datetime | None = None) -> str:
    """``20261122-013000-quickstart-3fa2c1``: sortable local start time, name, random suffix."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{experiment_name}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    experiment: str
    spec_hash: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    cells_planned: int
    cells_ok: int
    cells_failed: int


@dataclass(frozen=True)
class RunPlan:
    """A run about to be written, whatever produces it. ``facts`` are what its kind adds to the
    manifest (the spec, placement, engine...); the store adds the run id, the start time, the
    cells, the load model and the machine and code facts."""

    name: str
    kind: RunKind
    spec_hash: str
    spec_text: str
    cells: tuple[str, ...]
    repetitions: int
    load_model: str | None
    source: Source = "measured"
    facts: Mapping[str, object] = field(default_factory=dict)

    @property
    def cells_planned(self) -> int:
        return len(self.cells) * self.repetitions

    @classmethod
    def of_experiment(cls, experiment: Experiment, spec_text: str, engine: EngineFacts | None = None) -> "RunPlan":
        return cls(
            name=experiment.name,
            kind="experiment",
            spec_hash=experiment.spec_hash(),
            spec_text=spec_text,
            cells=tuple(c.cell_id for c in experiment.cells()),
            repetitions=experiment.repetitions,
            load_model=experiment.load.model,
            facts=experiment_facts(experiment, engine),
        )


@dataclass(frozen=True)
class RunView:
    """A stored run as its readers see it: the manifest and the rows in the experiment's cell
    order (then repetition), file paths absolute."""

    manifest: Manifest
    rows: list[ResultRow]

    @property
    def cells(self) -> list[str]:
        """Cell ids: the planned ones in order, then any others the rows name."""
        return list(dict.fromkeys([*self.manifest.cells, *(r.cell_id for r in self.rows)]))

    @property
    def ok_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if r.ok]

    @property
    def failed_rows(self) -> list[ResultRow]:
        return [r for r in self.rows if not r.ok]


class Store:
    def __init__(self, root: str | Path, catalog_path: str | Path | None = None):
        self.root = Path(root)
        self.catalog = Catalog(Path(catalog_path) if catalog_path else self.root / CATALOG_FILE)

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    # --- writing -------------------------------------------------------------------------

    def create_run(self, experiment: Experiment, spec_text: str, engine: EngineFacts | None = None) -> "RunHandle":
        """A new run of ``experiment`` (see :meth:`begin_run`)."""
        writer = self.begin_run(RunPlan.of_experiment(experiment, spec_text, engine))
        return RunHandle(self, writer.run_id, experiment, writer.detach_lock())

    def begin_run(self, plan: RunPlan) -> "RunWriter":
        """A new run: its directory, ``spec.toml``, ``manifest.json`` and catalog row, locked
        for this process until the writer is closed."""
        started = utc_now()
        run_id = new_run_id(plan.name)
        directory = self.run_dir(run_id)
        directory.mkdir(parents=True, exist_ok=False)
        lock = _lock_run(directory, run_id)
        (directory / "spec.toml").write_text(plan.spec_text, encoding="utf-8")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "schema_version": MANIFEST_VERSION,
            "kind": plan.kind,
            "run_id": run_id,
            "experiment": plan.name,
            "started_at": started.isoformat() + "Z",
            **machine_facts(),
            "load_model": plan.load_model,
            **plan.facts,
            "spec_hash": plan.spec_hash,
            "spec_text": plan.spec_text,
            "cells": list(plan.cells),
            "repetitions": plan.repetitions,
        }
        _write_json(directory / "manifest.json", manifest)
        self.catalog.add_run(run_id, plan.name, plan.spec_hash, started, plan.cells_planned)
        return RunWriter(self, run_id, lock, plan.source, plan.load_model)

    def open_run(self, run_id: str, experiment: Experiment) -> "RunHandle":
        """Reopen a stored run to resume it; ``experiment`` must be its spec, validated again."""
        document = self._manifest_document(run_id)
        if experiment.spec_hash() != document["spec_hash"]:
            raise StoreError(
                f"run {run_id}: its spec validates differently now (hash {experiment.spec_hash()[:12]} instead of "
                f"{str(document['spec_hash'])[:12]}), e.g. because the CPUs or the registry changed; start a new run instead"
            )
        lock = _lock_run(self.run_dir(run_id), run_id)
        document.setdefault("resumed_at", []).append(utc_now().isoformat() + "Z")
        _write_json(self.run_dir(run_id) / "manifest.json", document)
        self.catalog.set_status(run_id, "running", None)
        return RunHandle(self, run_id, experiment, lock)

    def append_manifest_fact(self, run_id: str, key: str, fact: Mapping[str, object]) -> None:
        """Append ``fact`` to the list ``key`` of the run's manifest (one entry per start or
        resume, e.g. where a cluster ran its parts)."""
        document = self._manifest_document(run_id)
        found = document.get(key)
        entries: list = found if isinstance(found, list) else []
        document[key] = [*entries, {**fact, "recorded_at": utc_now().isoformat() + "Z"}]
        _write_json(self.run_dir(run_id) / "manifest.json", document)

    def set_status(self, run_id: str, status: str) -> None:
        finished = None if status == "running" else utc_now()
        self.catalog.set_status(run_id, status, finished)

    # --- reading -------------------------------------------------------------------------

    def read_manifest(self, run_id: str) -> Manifest:
        """The run's manifest, with the catalog's status and finish time."""
        document = self._manifest_document(run_id)
        run = self.catalog.run(run_id) or {}
        finished = run["finished_at"].isoformat() + "Z" if run.get("finished_at") else None
        return Manifest.from_document(document, status=run.get("status"), finished_at=finished)

    def _manifest_document(self, run_id: str) -> dict:
        path = self.run_dir(run_id) / "manifest.json"
        if self.catalog.run(run_id) is None:
            raise StoreError(f"no run {run_id!r} in {self.catalog.path} (`archlab runs` lists the runs)")
        try:
            document = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"run {run_id}: cannot read {path}: {e}") from None
        if not isinstance(document, dict):
            raise StoreError(f"run {run_id}: {path} holds {type(document).__name__}, expected a JSON object")
        return document

    def load_run(self, run_id: str) -> RunView:
        """The manifest and the rows in the experiment's cell order, file paths made absolute:
        everything a report needs. A measured closed-model row of a run recorded before rows
        carried Little's law gets the check computed from its stored summary (nothing is
        written back)."""
        manifest = self.read_manifest(run_id)
        order = {cell_id: i for i, cell_id in enumerate(manifest.cells)}
        rows = [_with_littles_law(ResultRow.from_columns(c, self.root)) for c in self.catalog.results(run_id)]
        rows.sort(key=lambda r: (order.get(r.cell_id, len(order)), r.cell_id, r.repetition))
        return RunView(manifest, rows)

    def runs(self) -> list[RunInfo]:
        return [RunInfo(**row) for row in self.catalog.runs()]


class RunWriter:
    """One run being written, whatever produces it: where its cells go and how each is
    recorded. Holds the run's lock until closed."""

    def __init__(self, store: Store, run_id: str, lock: int | None = None, source: Source = "measured",
                 load_model: str | None = None):
        self.store = store
        self.run_id = run_id
        self.directory = store.run_dir(run_id)
        self.source = source
        self.load_model = load_model
        self._lock = lock

    def close(self) -> None:
        """Release the run's lock (the end of the process releases it too)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def detach_lock(self) -> int | None:
        """Hand the run's lock over (to the handle that goes on writing the run)."""
        lock, self._lock = self._lock, None
        return lock

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rep_dir(self, cell: Cell | CellKey | str, repetition: int) -> Path:
        cell_id = cell if isinstance(cell, str) else cell.cell_id
        return self.directory / "cells" / cell_id / f"rep-{repetition}"

    def prepare_rep_dir(self, cell: Cell | CellKey | str, repetition: int) -> Path:
        """An empty directory for the pair: leftovers of an interrupted attempt are removed."""
        d = self.rep_dir(cell, repetition)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def remove_unrecorded_rep_dirs(self) -> list[Path]:
        """Remove the repetition directories no catalog row describes, and return them: the
        leftovers of an attempt interrupted in an earlier session of the run and not made again
        (a repetition the adaptive rule added, then no longer wanted). Every attempt that ended
        has a row, failed ones included, so nothing a row points to is touched."""
        recorded = {(row.cell_id, row.repetition) for row in self.store.load_run(self.run_id).rows}
        removed = []
        for d in sorted((self.directory / "cells").glob("*/rep-*")):
            rep = d.name.removeprefix("rep-")
            if d.is_dir() and rep.isdigit() and (d.parent.name, int(rep)) not in recorded:
                shutil.rmtree(d)
                removed.append(d)
        return removed

    def record(self, cell: Cell | CellKey, repetition: int, record: CellRecord) -> ResultRow:
        """Insert the catalog row of one cell and repetition (its files must be complete);
        returns the row as written."""
        key = cell if isinstance(cell, CellKey) else CellKey.of(cell)
        row = ResultRow.of(self.run_id, key, repetition, record, source=self.source, load_model=self.load_model,
                           recorded_at=utc_now())
        self.store.catalog.insert_result(row.to_columns(self.store.root), _class_columns(row))
        return row

    def set_status(self, status: str) -> None:
        self.store.set_status(self.run_id, status)


class RunHandle(RunWriter):
    """An experiment's run being written: also which (cell, repetition) pairs are pending."""

    def __init__(self, store: Store, run_id: str, experiment: Experiment, lock: int | None = None):
        super().__init__(store, run_id, lock, "measured", experiment.load.model)
        self.experiment = experiment

    def __enter__(self) -> "RunHandle":
        return self

    def pending(self) -> list[tuple[Cell, int]]:
        """(cell, repetition) pairs without a catalog row, repetition-major: every cell runs
        once before any runs twice, so slow drift of the machine spreads over all cells."""
        done = self.store.catalog.done_keys(self.run_id)
        return [
            (cell, rep)
            for rep in range(1, self.experiment.repetitions + 1)
            for cell in self.experiment.cells()
            if (cell.cell_id, rep) not in done
        ]


def _class_columns(row: ResultRow) -> list[dict[str, object]]:
    """The ``result_classes`` rows of a successful measured row whose summary has a request mix."""
    if not row.ok or row.summary_path is None or row.source != "measured":
        return []
    try:
        classes = read_summary(row.summary_path).classes
    except SummaryError:
        return []
    key = {"run_id": row.run_id, "cell_id": row.cell_id, "repetition": row.repetition}
    return [
        {**key, "class_index": c.index, **{f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name != "index"}}
        for c in classes
    ]


def _with_littles_law(row: ResultRow) -> ResultRow:
    """``row`` with the Little's-law check of its stored summary, when it lacks one and can have
    one (a measured repetition that succeeded; the summary decides whether its model has one)."""
    if row.littles_law is not None or not row.ok or row.source != "measured" or row.summary_path is None:
        return row
    if row.load_model not in (None, "closed"):  # the open models have no check to compute
        return row
    try:
        law = read_summary(row.summary_path).littles_law
    except SummaryError:
        return row
    return replace(row, littles_law=law) if law is not None else row


def _lock_run(directory: Path, run_id: str) -> int:
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise StoreError(f"run {run_id} is being executed by another archlab process (pid {holder})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _write_json(path: Path, doc: Mapping) -> None:
    """Write-then-rename, so a reader never sees half a manifest."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
