"""The store without processes: run creation (directory, manifest, catalog row), recording
rows, the round trip through ``load_run``, the catalog schema, what resuming sees (pending pairs,
cleared partial directories, a spec that changed), and that the DuckDB file is not kept open."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest
from conftest import spec_text

from archlab.errors import StoreError
from archlab.spec import parse_spec
from archlab.store import RESULT_COLUMNS, CellRecord, Measurement, ServerCost, Store

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
    "think_time"
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
    return CellRecord("ok", None, m, c, handle.relative(d / "summary.json"), handle.relative(d / "hdr.log"))


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
    manifest, rows = store.load_run(handle.run_id)
    assert manifest["status"] == "complete" and manifest["finished_at"].endswith("Z")
    assert [(r["cell_id"], r["repetition"]) for r in rows] == [(cells[0].cell_id, 1), (cells[0].cell_id, 2), (cells[2].cell_id, 1)]
    failed, ok = rows[0], rows[1]
    assert failed["status"] == "failed" and "stderr (tail)" in failed["error"] and failed["throughput_rps"] is None
    assert ok["status"] == "ok" and ok["throughput_rps"] == 1000.0 and ok["p999_us"] == 400
    assert ok["errors_by_class"] == {"timeout": 2}
    assert ok["factors"] == {"architecture": cells[0].architecture, "workload": cells[0].workload, "concurrency": cells[0].concurrency}
    assert ok["cpu_us_per_request"] == 600.0 and ok["peak_rss_kib"] == 4096 and ok["server_threads"] == 5
    assert ok["summary_path"].endswith("summary.json") and (tmp_path / "runs").resolve().as_posix() in ok["summary_path"]
    assert json.dumps(rows)  # report-ready: plain JSON values only
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
    assert len(store.load_run(handle.run_id)[1]) == 1


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
    assert len(store.read_manifest(handle.run_id)["resumed_at"]) == 1
    other = parse_spec(spec_text(factors='architecture = ["netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [1]'), "t", env)
    with pytest.raises(StoreError, match="validates differently now"):
        store.open_run(handle.run_id, other)


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


def test_catalog_file_is_not_held_open(tmp_path, experiment):
    store = Store(tmp_path / "runs")
    handle = store.create_run(experiment, "x", None)
    handle.record(experiment.cells()[0], 1, CellRecord.failed("x"))
    # A writer in another connection (as another process would be) can open it right away.
    con = duckdb.connect(str(store.catalog.path))
    con.execute("SELECT count(*) FROM results").fetchall()
    con.close()


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
    _, rows = store.load_run(handle.run_id)
    assert rows[0]["handoffs_per_request"] is None and rows[0]["throughput_rps"] == 1000.0
    assert "generator_bound" in rows[0]
    assert rows[0]["source"] == "measured"  # simulated runs say "simulated" (archlab.sim.record)
    assert rows[0]["think_time"] is None  # the cell's think time is constant
