"""The lab's pure and near-pure parts, without the engine: /proc probes and the per-request
arithmetic, the load-summary reader, the engine's command lines, locating the engine, progress
lines."""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import spec_text

from archlab.errors import EngineNotFound
from archlab.lab import engine as engine_module
from archlab.lab.engine import Engine, find_engine, load_params, serve_options
from archlab.lab.probes import ProcSample, Rusage, context_switch_source, cost_between, read_proc, syscall_source
from archlab.lab.progress import Progress
from archlab.spec import parse_spec
from archlab.store.records import CellRecord, Measurement
from archlab.store.summary import SummaryError, parse_summary

# --- probes --------------------------------------------------------------------------------


def test_read_proc_of_a_live_process():
    child = subprocess.Popen(["sleep", "30"])
    try:
        s = read_proc(child.pid)
        assert s.utime_s >= 0 and s.stime_s >= 0 and s.num_threads == 1
        assert s.vm_hwm_kib and s.vm_hwm_kib > 0
        assert s.syscr is not None and s.syscw is not None  # our own child: /proc/<pid>/io is readable
        assert s.task_voluntary_cs >= 0 and s.rusage is None
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ProcessLookupError):
        read_proc(child.pid)


def test_rusage_line():
    r = Rusage.parse_line(
        'rusage {"user_cpu_s":1.25,"system_cpu_s":0.5,"voluntary_context_switches":10,"involuntary_context_switches":3,"max_rss_kib":2048}'
    )
    assert r == Rusage(1.25, 0.5, 10, 3, 2048)


def test_rusage_line_keeps_what_else_the_server_reports():
    # The counts at the limits and HybridNetty's routing ride on the same line; probe.json
    # must carry them as printed.
    hybrid = {"routes": {"profiled": 1, "netty": 2, "inline": 3, "corrected": 1}, "writes": {"netty_calls": 9}}
    line = (
        'rusage {"user_cpu_s":1,"system_cpu_s":0,"voluntary_context_switches":1,'
        '"involuntary_context_switches":0,"max_rss_kib":1,"write_syscalls":7,"accept_capped":4,'
        f'"hybrid":{json.dumps(hybrid)}}}'
    )
    r = Rusage.parse_line(line)
    assert r.write_syscalls == 7
    assert r.extra == {"accept_capped": 4, "hybrid": hybrid}
    assert json.loads(json.dumps(asdict(r)))["extra"]["hybrid"] == hybrid


def _sample(t, cpu, vcs, syscr, rusage=None):
    return ProcSample(t, cpu, cpu / 2, 4, syscr, syscr // 2, 5000, vcs, 1, rusage)


def test_cost_prefers_rusage_and_divides_by_requests():
    start = _sample(0, 1.0, 100, 1000, Rusage(1.0, 0.5, 100, 10, 4000))
    end = _sample(1, 2.0, 150, 3000, Rusage(1.6, 0.9, 2100, 30, 4500))
    c = cost_between(start, end, requests=1000)
    assert c.cpu_user_s == pytest.approx(0.6) and c.cpu_sys_s == pytest.approx(0.4)
    assert c.cpu_us_per_request == pytest.approx(1000.0)
    assert c.voluntary_cs_per_request == pytest.approx(2.0) and c.involuntary_cs_per_request == pytest.approx(0.02)
    assert c.read_syscalls_per_request == pytest.approx(2.0) and c.write_syscalls_per_request == pytest.approx(1.0)
    assert c.peak_rss_kib == 5000 and c.server_threads == 4
    assert context_switch_source(start, end) == "rusage"


def test_cost_falls_back_to_proc():
    start, end = _sample(0, 1.0, 100, 1000), _sample(1, 2.0, 300, 1000)
    c = cost_between(start, end, requests=100)
    assert c.cpu_user_s == pytest.approx(1.0) and c.cpu_us_per_request == pytest.approx(15000.0)
    assert c.voluntary_cs_per_request == pytest.approx(2.0)
    assert context_switch_source(start, end).startswith("proc-tasks")


def test_server_counted_syscalls_win_over_proc_io():
    start = _sample(0, 1.0, 100, 1000, Rusage(1.0, 0.5, 100, 10, 4000, read_syscalls=10, write_syscalls=20))
    end = _sample(1, 2.0, 150, 9000, Rusage(1.6, 0.9, 2100, 30, 4500, read_syscalls=110, write_syscalls=220))
    c = cost_between(start, end, requests=100)
    assert c.read_syscalls_per_request == pytest.approx(1.0) and c.write_syscalls_per_request == pytest.approx(2.0)
    assert syscall_source(start, end) == "server counters"
    assert syscall_source(_sample(0, 1, 1, 1), _sample(1, 1, 1, 1)).startswith("proc io")


# --- summary -------------------------------------------------------------------------------

SUMMARY = {
    "schema": "archlab/load-summary",
    "schema_version": 1,
    "model": "closed",
    "coordinated_omission_corrected": False,
    "duration_s": 3.0,
    "requests": 30000,
    "throughput_rps": 10000.0,
    "latency_us": {"min": 50, "mean": 98.5, "stdev": 10, "p50": 95, "p90": 120, "p99": 200, "p99.9": 400, "max": 1500},
    "errors": {"total": 3, "by_class": {"connect": 1, "timeout": 2}},
}


def test_parse_summary():
    summary = parse_summary(SUMMARY)
    m = summary.measurement
    assert m == Measurement(3.0, 30000, 10000.0, 95, 120, 200, 400, 1500, 98.5, 3, {"connect": 1, "timeout": 2})
    assert summary.model == "closed"
    assert m.generator_bound is None  # version 1 has no verdict
    assert m.offered_rps is None and m.service_p99_us is None  # nor the open models' fields


def test_parse_open_summary_reports_response_time_and_keeps_service_time():
    """An open-model summary: the latency columns are the response time (from the planned send),
    the service time and the schedule's figures are kept beside them."""
    response = {"min": 60, "mean": 150, "stdev": 20, "p50": 140, "p90": 190, "p99": 400, "p99.9": 900, "max": 1200}
    service = {"min": 40, "mean": 90, "stdev": 10, "p50": 85, "p90": 110, "p99": 210, "p99.9": 450, "max": 700}
    doc = {
        **SUMMARY, "schema_version": 2, "model": "open", "latency_basis": "planned", "offered_rps": 1000.5,
        "latency_us": response, "response_time_us": response, "service_time_us": service,
        "schedule_lag_us": {**service, "p99": 33}, "flow": {"sent_late": 4, "never_started": 1},
        "generator": {"bound": False},
    }  # fmt: skip
    summary = parse_summary(doc)
    m = summary.measurement
    assert summary.littles_law is None  # not defined for the open model
    assert (summary.model, m.offered_rps, m.generator_bound) == ("open", 1000.5, False)
    assert (m.p50_us, m.p99_us, m.p999_us, m.max_us) == (140, 400, 900, 1200)
    assert (m.service_p50_us, m.service_p99_us, m.service_p999_us) == (85, 210, 450)
    assert (m.schedule_lag_p99_us, m.sent_late, m.never_started) == (33, 4, 1)


def test_a_summary_of_an_empty_window_says_so():
    # Valid per the schema (its latency statistics are null without a sample), but nothing to
    # measure: the reader says what happened instead of "garbled".
    empty = {**SUMMARY, "requests": 0, "latency_us": dict.fromkeys(SUMMARY["latency_us"]),
             "errors": {"total": 2, "by_class": {"connect": 0, "timeout": 2}}}
    with pytest.raises(SummaryError, match=r"^s.json: no request completed in the measurement window \(errors: \{'timeout': 2\}\)$"):
        parse_summary(empty, where="s.json")


def test_parse_summary_reads_the_generator_verdict():
    v2 = {**SUMMARY, "schema_version": 2, "generator": {"bound": True, "bound_reasons": ["load thread 0 was busy 98%"]}}
    assert parse_summary(v2).measurement.generator_bound is True
    assert parse_summary({**v2, "generator": {"bound": False}}).measurement.generator_bound is False


@pytest.mark.parametrize(
    ("change", "message"),
    [({"schema_version": 3}, "schema_version 3; expected 'archlab/load-summary' schema_version 1 or 2"), ({"latency_us": {"p50": 1}}, "lacks or garbles field")],
)
def test_bad_summaries(change, message):
    with pytest.raises(SummaryError, match=message):
        parse_summary({**SUMMARY, **change})


# --- engine command lines and location -----------------------------------------------------


def test_command_lines(env, tmp_path):
    exp = parse_spec(spec_text(server="loops = 2", factors='architecture = ["netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [8]'), "t", env)
    cell = exp.cells()[0]
    e = Engine(Path("archlab-engine"))
    assert e.serve_argv("netty", tmp_path / "o.json") == [
        "archlab-engine", "serve", "--arch", "netty", "--host", "127.0.0.1", "--port", "0", "--options", str(tmp_path / "o.json"),
    ]  # fmt: skip
    # The options, normalised by the data plane: the spec's and the placement's, then the
    # server's defaults.
    assert serve_options(cell, exp.placement) == {
        "loops": 2, "cpus": "1", "db_pool": 10, "db_wait_ms": 1000, "max_body_bytes": 1024 * 1024, "nodelay": True,
        "request_timeout_ms": 60_000, "idle_timeout_ms": 75_000, "max_connections": 0, "max_output_bytes": 1024 * 1024,
    }  # fmt: skip
    assert e.load_argv(tmp_path / "p.json", tmp_path / "s.json", tmp_path / "h.log") == [
        "archlab-engine", "load", "--params", str(tmp_path / "p.json"), "--json", str(tmp_path / "s.json"),
        "--hdr-log", str(tmp_path / "h.log"),
    ]  # fmt: skip
    # The parameters, normalised by the data plane: the spec's, the target and the client CPUs,
    # and every default of the load generator made explicit (one thread per client CPU).
    assert load_params(cell, exp, "127.0.0.1:5000") == {
        "target": "127.0.0.1:5000", "path": "/echo?size=64", "model": "closed", "connections": 8, "duration": "500ms",
        "warmup": "200ms", "think_time": "0s", "timeout": "2s", "cpus": "0", "threads": 1, "late_after": "1ms",
        "busy_poll": False, "backend": "auto", "connect_timeout": "2s", "protocol": "http", "verify": False, "keep_alive": True,
        "pipeline": 1,
    }  # fmt: skip


def test_engine_env_var_must_point_at_an_executable(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHLAB_ENGINE", str(tmp_path / "missing"))
    with pytest.raises(EngineNotFound, match=r"ARCHLAB_ENGINE=.*missing is not an executable file; unset it or run `make build`"):
        find_engine()


def test_engine_not_built(monkeypatch, tmp_path):
    monkeypatch.delenv("ARCHLAB_ENGINE", raising=False)
    monkeypatch.setattr(engine_module, "repo_root", lambda: tmp_path)  # a checkout with nothing built
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineNotFound, match=r"archlab-engine is not built: run `make build`"):
        find_engine()


def test_engine_found_through_env(tmp_path, monkeypatch):
    fake = tmp_path / "archlab-engine"
    fake.write_text("#!/bin/sh\necho 'archlab-engine 9.8.7'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ARCHLAB_ENGINE", str(fake))
    e = Engine.locate()
    assert e.path == fake and e.version == "9.8.7" and e.build_profile == "installed"


# --- progress ------------------------------------------------------------------------------


def test_progress_lines_without_a_terminal(env):
    exp = parse_spec(spec_text(), "t", env)
    cells = exp.cells()
    out = io.StringIO()
    p = Progress(total=4, done=1, stream=out)
    m = Measurement(0.5, 1000, 45200.0, 100, 200, 1230, 2000, 3000, 150, 0, {})
    p.cell_started(cells[0], 1)
    p.cell_finished(cells[0], 1, CellRecord("ok", measurement=m))
    p.cell_started(cells[1], 1)
    p.cell_finished(cells[1], 1, CellRecord.failed("server: killed by signal 9 (SIGKILL) during the load run\n--- stderr ---"))
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"[2/4] {cells[0].cell_id} rep 1: 45.2 krps, p99 1.23 ms | ETA 0:")
    assert lines[1].startswith(f"[3/4] {cells[1].cell_id} rep 1: FAILED: server: killed by signal 9 (SIGKILL) during the load run | ETA")


def test_module_files_start_with_a_paragraph():
    root = Path(engine_module.__file__).resolve().parents[1]
    for sub in ("spec", "lab", "store", "cli"):
        for path in (root / sub).glob("*.py"):
            text = path.read_text()
            assert text.startswith('"""'), f"{path.name} lacks its opening paragraph"
