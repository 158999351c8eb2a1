"""Run directories and their catalog rows. Layout under the store root (default ``./runs``)::

    archlab.duckdb                      the catalog (see archlab.store.catalog)
    <run-id>/manifest.json              what ran, where, with which code (archlab.store.manifest)
    <run-id>/spec.toml                  the spec exactly as given
    <run-id>/cells/<cell_id>/rep-<r>/   summary.json, hdr.log, server.stderr, load.stderr, probe.json

A (cell, repetition) is done when, and only when, its catalog row exists; its directory is
written first. Resuming therefore clears the directory of every pair without a row and runs it
again, whatever state an interruption left it in. A run being executed holds an advisory lock on
``<run-id>/.lock`` (released by the kernel however the process ends), so a second orchestrator
cannot resume a run that is still going."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from archlab.errors import StoreError
from archlab.spec.model import Cell, Experiment
from archlab.store.catalog import Catalog
from archlab.store.manifest import EngineFacts, build_manifest
from archlab.store.records import CellRecord

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


class Store:
    def __init__(self, root: str | Path, catalog_path: str | Path | None = None):
        self.root = Path(root)
        self.catalog = Catalog(Path(catalog_path) if catalog_path else self.root / CATALOG_FILE)

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    # --- writing -------------------------------------------------------------------------

    def create_run(self, experiment: Experiment, spec_text: str, engine: EngineFacts | None = None) -> "RunHandle":
        started = utc_now()
        run_id = new_run_id(experiment.name)
        directory = self.run_dir(run_id)
        directory.mkdir(parents=True, exist_ok=False)
        lock = _lock_run(directory, run_id)
        (directory / "spec.toml").write_text(spec_text, encoding="utf-8")
        _write_json(directory / "manifest.json", build_manifest(run_id, experiment, spec_text, started, engine))
        self.catalog.add_run(run_id, experiment.name, experiment.spec_hash(), started, experiment.cells_planned)
        return RunHandle(self, run_id, experiment, lock)

    def create_run_directory(self, name: str, spec_hash: str, spec_text: str, manifest: dict, cells_planned: int) -> str:
        """A run that is not an experiment of real processes (e.g. a simulation): its directory,
        spec and ``manifest`` (run_id and started_at are filled in here) and its catalog row.
        The caller records its rows with :meth:`Catalog.insert_result` and sets the status."""
        started = utc_now()
        run_id = new_run_id(name)
        directory = self.run_dir(run_id)
        directory.mkdir(parents=True, exist_ok=False)
        (directory / "spec.toml").write_text(spec_text, encoding="utf-8")
        _write_json(directory / "manifest.json", {**manifest, "run_id": run_id, "started_at": started.isoformat() + "Z"})
        self.catalog.add_run(run_id, name, spec_hash, started, cells_planned)
        return run_id

    def open_run(self, run_id: str, experiment: Experiment) -> "RunHandle":
        """Reopen a stored run to resume it; ``experiment`` must be its spec, validated again."""
        manifest = self.read_manifest(run_id)
        if experiment.spec_hash() != manifest["spec_hash"]:
            raise StoreError(
                f"run {run_id}: its spec validates differently now (hash {experiment.spec_hash()[:12]} instead of "
                f"{manifest['spec_hash'][:12]}), e.g. because the CPUs or the registry changed; start a new run instead"
            )
        lock = _lock_run(self.run_dir(run_id), run_id)
        manifest.setdefault("resumed_at", []).append(utc_now().isoformat() + "Z")
        _write_json(self.run_dir(run_id) / "manifest.json", manifest)
        self.catalog.set_status(run_id, "running", None)
        return RunHandle(self, run_id, experiment, lock)

    def record(self, run_id: str, cell: Cell, repetition: int, record: CellRecord, load_model: str | None = None) -> None:
        """Insert the catalog row of one cell and repetition (its files must be complete)."""
        self.catalog.insert_result(_result_row(run_id, cell, repetition, record, load_model))

    def set_status(self, run_id: str, status: str) -> None:
        finished = None if status == "running" else utc_now()
        self.catalog.set_status(run_id, status, finished)

    # --- reading -------------------------------------------------------------------------

    def read_manifest(self, run_id: str) -> dict:
        path = self.run_dir(run_id) / "manifest.json"
        if self.catalog.run(run_id) is None:
            raise StoreError(f"no run {run_id!r} in {self.catalog.path} (`archlab runs` lists the runs)")
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise StoreError(f"run {run_id}: cannot read {path}: {e}") from None

    def load_run(self, run_id: str) -> tuple[dict, list[dict]]:
        """The manifest (with the catalog's status and finish time added) and the rows in the
        experiment's cell order, file paths made absolute: everything a report needs."""
        manifest = self.read_manifest(run_id)
        run = self.catalog.run(run_id) or {}
        manifest["status"] = run.get("status")
        manifest["finished_at"] = run["finished_at"].isoformat() + "Z" if run.get("finished_at") else None
        order = {cell_id: i for i, cell_id in enumerate(manifest.get("cells", []))}
        rows = self.catalog.results(run_id)
        rows.sort(key=lambda r: (order.get(r["cell_id"], len(order)), r["cell_id"], r["repetition"]))
        for row in rows:
            for key in ("summary_path", "hdr_log_path"):
                if row.get(key):
                    row[key] = str((self.root / row[key]).resolve())
            if row.get("recorded_at") is not None:
                row["recorded_at"] = row["recorded_at"].isoformat() + "Z"
        return manifest, rows

    def runs(self) -> list[RunInfo]:
        return [RunInfo(**row) for row in self.catalog.runs()]


class RunHandle:
    """One run being written: where its cells go, which are done, how each is recorded."""

    def __init__(self, store: Store, run_id: str, experiment: Experiment, lock: int | None = None):
        self.store = store
        self.run_id = run_id
        self.experiment = experiment
        self.directory = store.run_dir(run_id)
        self._lock = lock

    def close(self) -> None:
        """Release the run's lock (the end of the process releases it too)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> "RunHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rep_dir(self, cell: Cell, repetition: int) -> Path:
        return self.directory / "cells" / cell.cell_id / f"rep-{repetition}"

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

    def prepare_rep_dir(self, cell: Cell, repetition: int) -> Path:
        """An empty directory for the pair: leftovers of an interrupted attempt are removed."""
        d = self.rep_dir(cell, repetition)
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def relative(self, path: Path) -> str:
        """A path as the catalog stores it: relative to the store root, so the store can move."""
        return os.path.relpath(path, self.store.root)

    def record(self, cell: Cell, repetition: int, record: CellRecord) -> None:
        self.store.record(self.run_id, cell, repetition, record, self.experiment.load.model)

    def set_status(self, status: str) -> None:
        self.store.set_status(self.run_id, status)


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


def _result_row(run_id: str, cell: Cell, repetition: int, record: CellRecord, load_model: str | None = None) -> dict:
    m, c = record.measurement, record.cost
    row = {
        "run_id": run_id,
        "cell_id": cell.cell_id,
        "repetition": repetition,
        "architecture": cell.architecture,
        "workload": cell.workload,
        "concurrency": cell.concurrency,
        "threads": cell.threads,
        "loops": cell.loops,
        "think_time_s": cell.think_time_s,
        "think_time": cell.think_time.stored,
        "rate_rps": cell.rate_rps,
        "session_rate": cell.session_rate,
        "factors": cell.factor_levels(),
        "status": record.status,
        "error": record.error,
        "source": "measured",
        "summary_path": record.summary_path,
        "hdr_log_path": record.hdr_log_path,
        "recorded_at": utc_now(),
    }
    if m is not None:
        row.update(vars(m))
    if c is not None:
        row.update(vars(c))
    # The spec's model names a failed row's load too (a summary of version 1 names none).
    row["load_model"] = row.get("load_model") or load_model
    return row


def _write_json(path: Path, doc: dict) -> None:
    """Write-then-rename, so a reader never sees half a manifest."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
