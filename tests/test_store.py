"""The store without processes: run creation (directory, manifest, catalog row), recording
typed rows, the round trip through ``load_run``, the catalog schema, what resuming sees (pending
pairs, cleared partial directories, a spec that changed), that the DuckDB file is not kept open
(checked from a second process), and that a run stored by the code before typed rows still
loads, gets its Little's-law check from its stored summary and reports."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import spec_text

from archlab.errors import StoreError
from archlab.spec import parse_spec
from archlab.store import RESULT_COLUMNS, CellKey, CellRecord, LittlesLaw, Measurement, ResultRow, ServerCost, Store

BRIEF_COLUMNS = (
    "run_id cell_id repetition architecture workload concurrency threads loops think_time_s factors status error "
    "duration_s requests throughput_rps p50_us p90_us p99_us p999_us max_us mean_us errors errors_by_class cpu_user_s "
    "cpu_sys_s cpu_us_per_request voluntary_cs_per_request involuntary_cs_per_request read_syscalls_per_request "
    "write_syscalls_per_request peak_rss_kib server_threads summary_path hdr_log_path recorded_at "
    "handoffs_per_request generator_bound "
    # The open and partly-open models.
    "load_model rate_rps session_rate offered_rps service_p50_us service_p99_us service_p999_us schedule_lag_p99_us "
    "sent_late never_started source "
    # The distribution of a random think time (NULL: constant).
    "think_time "
    # Little's law on the window (archlab.littles_law).
    "littles_law_ratio littles_law_planned_ratio littles_law_tolerance littles_law_ok littles_law_boundary_share "
    # What else ran on the machine during the window (archlab.lab.interference).
    "foreign_share steal_share load_avg_start load_avg_end measured_cpus"
).split()


@pytest.fixture
def experiment(env):
    return parse_spec(spec_text(experiment='name = "t"\nrepetitions = 2\nwarmup = "200ms"\nduration = "500ms"'), "t", env)


def ok_record(handle, cell, rep, rps=1000.0) -> CellRecord:
    d = handle.prepare_rep_dir(cell, rep)
    (d / "summary.json").write_text("{}")
    (d / "hdr.log").write_text("")
    m = Measurement(0.5, 500, rps, 100, 150, 300, 400, 900, 120.5, 2, {"timeout": 2})
    c = ServerCost(0.2, 0.1, 600.0, 1.5, 0.1, 2.0, 1.0, 4096, 5)
    return CellRecord("ok", None, m, c, d / "summary.json", d / "hdr.log", LittlesLaw(0.98, 0.05, 1.001))


def test_create_run_writes_directory_manifest_and_row(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "# the text\n", None)
    assert handle.run_id.split("-")[2] == "t" and len(handle.run_id.split("-")[-1]) == 6
    assert (handle.directory / "spec.toml").read_text() == "# the text\n"
    manifest = json.loads((handle.directory / "manifest.json").read_text())
    assert manifest["spec_hash"] == experiment.spec_hash()
    assert manifest["spec"] == experiment.to_dict()
    assert manifest["spec_text"] == "# the text\n"
    assert manifest["cells"] == [c.cell_id for c in experiment.cells()]
    for key in ("git", "kernel", "cpu_model", "cpu_count", "placement", "tools", "hostname", "started_at", "build_profile", "engine_version"):
        assert key in manifest
    assert set(manifest["tools"]) >= {"python", "archlab", "duckdb", "numpy"}
    (info,) = store.runs()
    assert (info.run_id, info.status, info.cells_planned, info.cells_ok) == (handle.run_id, "running", 8, 0)


def test_round_trip_in_cell_order(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    cells = experiment.cells()
    # Record out of order; load_run gives the experiment's order back.
    handle.record(cells[2], 1, ok_record(handle, cells[2], 1))
    handle.record(cells[0], 2, ok_record(handle, cells[0], 2))
    handle.record(cells[0], 1, CellRecord.failed("server: exit code 2 before printing 'listening'\n--- stderr (tail) ---\nbad"))
    handle.set_status("complete")
    view = store.load_run(handle.run_id)
    manifest, rows = view.manifest, view.rows
    assert manifest.status == "complete" and manifest.finished_at.endswith("Z") and manifest.kind == "experiment"
    assert manifest.cells == tuple(c.cell_id for c in cells) and manifest.name == "t" and manifest.repetitions == 2
    assert [(r.cell_id, r.repetition) for r in rows] == [(cells[0].cell_id, 1), (cells[0].cell_id, 2), (cells[2].cell_id, 1)]
    failed, ok = rows[0], rows[1]
    assert isinstance(ok, ResultRow) and ok.cell == CellKey.of(cells[0])
    assert failed.status == "failed" and "stderr (tail)" in failed.error and failed.measurement is None and failed.cost is None
    assert ok.status == "ok" and ok.measurement.throughput_rps == 1000.0 and ok.measurement.p999_us == 400
    assert ok.measurement.errors_by_class == {"timeout": 2} and ok.source == "measured"
    assert ok.cell.factors == {"architecture": cells[0].architecture, "workload": cells[0].workload, "concurrency": cells[0].concurrency}
    assert ok.cost == ServerCost(0.2, 0.1, 600.0, 1.5, 0.1, 2.0, 1.0, 4096, 5)
    assert ok.littles_law == LittlesLaw(0.98, 0.05, 1.001) and ok.littles_law.ok
    assert failed.littles_law is None
    # Paths come back absolute; the catalog keeps them relative to the store's root.
    assert ok.summary_path == (handle.directory / "cells" / cells[0].cell_id / "rep-2" / "summary.json").resolve()
    con = duckdb.connect(str(store.catalog.path), read_only=True)
    try:
        stored = con.execute("SELECT summary_path, littles_law_ok FROM results WHERE status = 'ok' ORDER BY cell_id").fetchall()
    finally:
        con.close()
    assert stored[0] == (f"{handle.run_id}/cells/{cells[0].cell_id}/rep-2/summary.json", True)
    assert json.dumps([r.to_json() for r in rows])  # export-ready: plain JSON values only
    assert ResultRow.from_columns(ok.to_columns(store.root), store.root) == ok  # one translation, both ways
    # The boundary share the load generator's report gave survives the catalog: a window whose
    # edges hold half the users' time reads back as too short to tell, though its ratio is 1.
    cut_off = dataclasses.replace(ok, littles_law=LittlesLaw(1.0, 0.001, 1.0, 0.5))
    back = ResultRow.from_columns(cut_off.to_columns(store.root), store.root).littles_law
    assert back == LittlesLaw(1.0, 0.001, 1.0, 0.5) and back.holds and not back.ok
    (info,) = store.runs()
    assert (info.cells_ok, info.cells_failed) == (2, 1)


def test_catalog_schema_is_the_documented_one(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    store.create_run(experiment, "x", None)
    assert [name for name, _ in RESULT_COLUMNS] == BRIEF_COLUMNS
    con = duckdb.connect(str(store.catalog.path), read_only=True)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE results").fetchall()]
        run_cols = [r[0] for r in con.execute("DESCRIBE runs").fetchall()]
    finally:
        con.close()
    assert cols == BRIEF_COLUMNS
    assert run_cols == ["run_id", "experiment", "spec_hash", "started_at", "finished_at", "status", "cells_planned"]


def test_a_pair_is_recorded_once(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    cell = experiment.cells()[0]
    handle.record(cell, 1, CellRecord.failed("x"))
    with pytest.raises(duckdb.ConstraintException):
        handle.record(cell, 1, CellRecord.failed("again"))
    assert len(store.load_run(handle.run_id).rows) == 1


def test_pending_and_partial_directories(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    cells = experiment.cells()
    assert len(handle.pending()) == experiment.cells_planned
    # Repetition-major: every cell once before any twice.
    assert [rep for _, rep in handle.pending()] == [1] * len(cells) + [2] * len(cells)
    handle.record(cells[0], 1, ok_record(handle, cells[0], 1))
    # An interrupted attempt leaves files but no row.
    partial = handle.prepare_rep_dir(cells[1], 1)
    (partial / "summary.json").write_text("{half")
    pending = handle.pending()
    assert (cells[0], 1) not in pending and (cells[1], 1) in pending and len(pending) == experiment.cells_planned - 1
    again = handle.prepare_rep_dir(cells[1], 1)
    assert again == partial and list(again.iterdir()) == []


def test_reopen_for_resume(tmp_path, experiment, env):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    store.set_status(handle.run_id, "interrupted")
    handle.close()  # as the interrupted orchestrator did by ending
    reopened = store.open_run(handle.run_id, experiment)
    assert reopened.run_id == handle.run_id and reopened.directory == handle.directory
    assert store.catalog.run(handle.run_id)["status"] == "running"
    assert len(store.read_manifest(handle.run_id).document["resumed_at"]) == 1
    other = parse_spec(spec_text(factors='architecture = ["netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [1]'), "t", env)
    with pytest.raises(StoreError, match="validates differently now"):
        store.open_run(handle.run_id, other)


def test_only_repetition_directories_without_a_row_are_removed(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    with store.create_run(experiment, "x") as handle:
        first, second = experiment.cells()[:2]
        handle.record(first, 1, ok_record(handle, first, 1))  # recorded: kept
        leftover = handle.prepare_rep_dir(second, 3)  # an attempt that never got its row
        (leftover / "load.stderr").write_text("interrupted")
        other = handle.directory / "cells" / first.cell_id / "notes"  # not a repetition: kept
        other.mkdir()
        assert handle.remove_unrecorded_rep_dirs() == [leftover]
        assert not leftover.exists() and other.is_dir() and handle.rep_dir(first, 1).is_dir()
        assert handle.remove_unrecorded_rep_dirs() == []


def test_a_run_in_progress_cannot_be_resumed_twice(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    with pytest.raises(StoreError, match=rf"run {handle.run_id} is being executed by another archlab process \(pid {os.getpid()}\)"):
        store.open_run(handle.run_id, experiment)
    handle.close()
    with store.open_run(handle.run_id, experiment) as again:  # free once the first one let go
        assert again.run_id == handle.run_id


def test_unknown_run(tmp_path):
    with pytest.raises(StoreError, match=r"no run 'nope' in .*archlab runs"):
        Store(tmp_path / "runs").load_run("nope")


def _open_catalog_in_another_process(path) -> subprocess.CompletedProcess:
    """Open the catalog for writing from a second process, once, without waiting: DuckDB lets
    one process at a time hold a database file, so this fails while another process has it open."""
    code = f"import duckdb; c = duckdb.connect({str(path)!r}); print(c.execute('SELECT count(*) FROM results').fetchone()[0])"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_catalog_file_is_not_held_open(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    with store.create_run(experiment, "x", None) as handle:
        handle.record(experiment.cells()[0], 1, CellRecord.failed("x"))
        # The oracle can fail: while this process holds the file, the other is refused.
        held = duckdb.connect(str(store.catalog.path))
        try:
            refused = _open_catalog_in_another_process(store.catalog.path)
        finally:
            held.close()
        assert refused.returncode != 0 and "lock" in refused.stderr.lower(), refused
        # A run in progress (its handle open, a row recorded) leaves the catalog to others: a
        # report or `archlab runs` in another terminal opens it at once.
        other = _open_catalog_in_another_process(store.catalog.path)
        assert (other.returncode, other.stdout.strip()) == (0, "1"), other.stderr
        handle.record(experiment.cells()[1], 1, CellRecord.failed("y"))  # and the run goes on
    assert len(store.load_run(handle.run_id).rows) == 2


def test_catalog_path_is_configurable(tmp_path, experiment):
    store = Store(tmp_path / "runs", catalog_path=tmp_path / "elsewhere.duckdb")
    store.create_run(experiment, "x", None)
    assert (tmp_path / "elsewhere.duckdb").exists() and not (tmp_path / "runs" / "archlab.duckdb").exists()


def test_waits_for_another_process_holding_the_catalog(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    store.create_run(experiment, "x", None)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(store.catalog.path)!r}); print('held', flush=True); time.sleep(0.5)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert len(store.runs()) == 1  # retried until the other process let go
    finally:
        holder.wait(timeout=10)


def test_a_catalog_from_before_a_column_was_added_is_migrated(tmp_path, experiment):
    # A catalog written before handoffs_per_request existed: the store adds the column on open.
    path = tmp_path / "runs" / "archlab.duckdb"
    path.parent.mkdir()
    old_columns = [(n, t) for n, t in RESULT_COLUMNS if n not in ("handoffs_per_request", "generator_bound", "source", "think_time")]
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE results (" + ", ".join(f"{n} {t}" for n, t in old_columns) + ")")
    con.close()
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    cell = experiment.cells()[0]
    handle.record(cell, 1, ok_record(handle, cell, 1))
    (row,) = store.load_run(handle.run_id).rows
    assert row.cost.handoffs_per_request is None and row.measurement.throughput_rps == 1000.0
    assert row.measurement.generator_bound is None
    assert row.source == "measured"  # simulated runs say "simulated" (archlab.sim.record)
    assert row.cell.think_time is None  # the cell's think time is constant


# A run stored by the code before rows were typed and carried Little's law (main at 8b3735d): a
# real two-cell run of single-thread (concurrency 1 and 4, 1 s windows), its run directory as
# written (manifest.json with the machine's name, kernel and CPU replaced) and its catalog,
# exported by DuckDB as CSV with the schema of that time (`EXPORT DATABASE ... (FORMAT CSV)`).
LEGACY = Path(__file__).parent / "data" / "store-legacy"
LEGACY_RUN = "20261125-151650-legacy-1c5d6e"


def legacy_store(tmp_path) -> Store:
    root = tmp_path / "runs"
    shutil.copytree(LEGACY / "runs", root)
    con = duckdb.connect(str(root / "archlab.duckdb"))
    try:
        con.execute((LEGACY / "schema.sql").read_text())
        for table in ("runs", "results"):
            con.execute(f"COPY {table} FROM '{LEGACY / (table + '.csv')}' (FORMAT csv, HEADER true)")
    finally:
        con.close()
    return Store(root)


def test_a_catalog_written_before_typed_rows_still_loads(tmp_path, experiment):
    store = legacy_store(tmp_path)
    view = store.load_run(LEGACY_RUN)
    m = view.manifest
    assert (m.run_id, m.name, m.kind, m.status, m.load_model) == (LEGACY_RUN, "legacy", "experiment", "complete", "closed")
    assert m.cells == ("single-thread__echo-size-64__c1", "single-thread__echo-size-64__c4") and m.server_cpus == "1"
    assert [(r.cell.concurrency, r.status, r.source) for r in view.rows] == [(1, "ok", "measured"), (4, "ok", "measured")]
    for row in view.rows:
        summary = json.loads(row.summary_path.read_text())
        assert row.measurement.requests == summary["requests"] and row.measurement.mean_us == summary["latency_us"]["mean"]
        assert row.hdr_log_path.is_file() and row.cost.cpu_us_per_request > 0
        # Little's law, computed on reading from the stored summary (these rows predate it):
        # the row's own X (R + Z) / N, and it holds on this keep-alive run without think time.
        law = row.littles_law
        m_ = row.measurement
        assert law is not None and law.ratio == pytest.approx(m_.throughput_rps * m_.mean_us * 1e-6 / row.cell.concurrency)
        assert law.holds
    # Reading migrated the catalog (new columns, NULL in old rows) and wrote nothing back.
    con = duckdb.connect(str(store.catalog.path), read_only=True)
    try:
        stored = con.execute("SELECT littles_law_ratio, littles_law_ok FROM results").fetchall()
    finally:
        con.close()
    assert stored == [(None, None), (None, None)]
    # The old run reports and analyses as a new one would; a new run joins the old catalog.
    from archlab.latency.readers.archlab import read_run_cell
    from archlab.report import terminal_table

    assert read_run_cell(store.run_dir(LEGACY_RUN), "single-thread__echo-size-64__c4").samples.n == view.rows[1].measurement.requests
    table = terminal_table(view.rows, color=False).split("\nat a glance")[0]  # the rows, not the orders below them
    lines = [ln for ln in table.splitlines() if "/echo?size=64" in ln]
    # The columns end "... X(R+Z)/N  failed": the ratio is shown, near 1, never n/a.
    assert len(lines) == 2 and all(abs(float(ln.split()[-2]) - 1.0) < 0.01 for ln in lines), lines
    with store.create_run(experiment, "x") as handle:
        handle.record(experiment.cells()[0], 1, ok_record(handle, experiment.cells()[0], 1))
    assert {info.run_id for info in store.runs()} == {LEGACY_RUN, handle.run_id}
    assert len(store.load_run(handle.run_id).rows) == 1 and len(store.load_run(LEGACY_RUN).rows) == 2


def test_a_store_opened_by_a_relative_path_reads_its_files_back(tmp_path, experiment, monkeypatch):
    """`archlab run --store runs` from a working directory: the catalog must keep each file's
    path relative to the store's root, not to the working directory, or it reads runs/runs/..."""
    monkeypatch.chdir(tmp_path)
    store = Store(Path("runs"))
    handle = store.create_run(experiment, "x", None)
    cell = experiment.cells()[0]
    record = ok_record(handle, cell, 1)
    assert not Path(record.summary_path).is_absolute()  # the runner's paths under a relative root
    handle.record(cell, 1, record)
    (row,) = store.load_run(handle.run_id).rows
    assert row.summary_path == (tmp_path / "runs" / handle.run_id / "cells" / cell.cell_id / "rep-1" / "summary.json")
    assert row.summary_path.exists()
