"""Services the lab starts beside the measured server: the downstream of ``/call?ms=M`` is
started only for cells whose workload needs it, its address reaches the server as
``--downstream``, the cell's requests really wait for it, and it is always stopped (after a
normal cell and after a failing one)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from conftest import spec_text
from test_lab_runner import wait_no_engine

from archlab.lab.engine import Engine, serve_options
from archlab.lab.runner import execute
from archlab.lab.services import needs_downstream
from archlab.lab.services.downstream import DOWNSTREAM_ARCHITECTURE, downstream_argv
from archlab.lab.session import run_spec
from archlab.spec import load_spec
from archlab.store import Store


def test_only_call_needs_the_downstream():
    assert needs_downstream("/call?ms=5") and needs_downstream("/call")
    for w in ("/echo?size=64", "/callx?ms=1", "/response?size=102400", "/file?size=10", "/delay?ms=1"):
        assert not needs_downstream(w), w


def test_downstream_command_line(tmp_path):
    exp, _ = load_spec(_write(tmp_path, "/call?ms=1"))
    argv = downstream_argv(Path("/bin/engine"), exp.placement)
    assert argv[:4] == ["/bin/engine", "serve", "--arch", DOWNSTREAM_ARCHITECTURE]
    assert argv[-2:] == ["--cpus", exp.placement.client_cpu_list]
    cell = exp.cells()[0]
    assert serve_options(cell, exp.placement, downstream="127.0.0.1:9")["downstream"] == "127.0.0.1:9"
    assert "downstream" not in serve_options(cell, exp.placement)


def _write(tmp_path: Path, workload: str, arch: str = '["single-thread"]') -> Path:
    path = tmp_path / "spec.toml"
    factors = f'architecture = {arch}\nworkload = ["{workload}"]\nconcurrency = [2]'
    path.write_text(spec_text(experiment='name = "svc"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"', factors=factors))
    return path


def test_call_cell_runs_against_a_started_downstream(engine_path, tmp_path, token):
    store = Store(tmp_path / "runs")
    handle = run_spec(_write(tmp_path, "/call?ms=20", '["single-thread", "blocking"]'), store)
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete"
    for r in (row.to_json() for row in view.rows):
        assert r["status"] == "ok", r["error"]
        # Every request waits 20 ms downstream: the latency says the call really happened.
        assert r["requests"] > 0 and r["p50_us"] >= 20_000
        assert (Path(r["summary_path"]).parent / "downstream.stderr").is_file()
    assert wait_no_engine(token) == []


@dataclass(frozen=True)
class BadOptionEngine(Engine):
    def serve_argv(self, architecture, options_path, host="127.0.0.1"):
        return [*super().serve_argv(architecture, options_path, host), "--bogus"]


def test_downstream_is_stopped_when_the_server_fails(engine_path, tmp_path, token):
    store = Store(tmp_path / "runs")
    experiment, text = load_spec(_write(tmp_path, "/call?ms=1"))
    handle = store.create_run(experiment, text)
    execute(handle, BadOptionEngine(engine_path), stream=io.StringIO())
    rows = store.load_run(handle.run_id).rows
    assert [r.status for r in rows] == ["failed"]
    assert wait_no_engine(token) == []
