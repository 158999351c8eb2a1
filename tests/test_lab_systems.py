"""Foreign systems under test on real processes, loopback only: a small Python HTTP server
(``tests/data/byo/http_server.py``) started from a ``[[systems]]`` command, pinned, measured from
``/proc`` and stopped with its whole process tree, including a grandchild that left the session
and ignores SIGTERM. Each fault (exits before ready, never ready, dies mid-cell, ignores its stop
signal, leaves a process behind) is a named failure of its cell with the last lines of the
system's output, and no process of the test survives. A remote target gets load only. Windows
are short (warm-up 0.2 s, measurement 0.5 s); no timing is asserted."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import processes_with_token, run_cli, spec_text, start_cli

from archlab.lab.session import run_spec
from archlab.spec.units import parse_cpu_list
from archlab.store import Store

SERVER = Path(__file__).parent / "data" / "byo" / "http_server.py"
SHORT = 'name = "byo"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"'
ONE_CELL = 'architecture = ["system:svc"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'


def system(*args: str, extra: str = "", name: str = "svc") -> str:
    argv = [sys.executable, str(SERVER), "--port", "{port}", "--host", "{host}", *args]
    return f'\n[[systems]]\nname = "{name}"\ncommand = {json.dumps(argv)}\nstop_grace = "1s"\n{extra}\n'


def run(tmp_path: Path, systems: str, experiment: str = SHORT, factors: str = ONE_CELL):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(experiment=experiment, factors=factors) + systems)
    store = Store(tmp_path / "runs")
    handle = run_spec(path, store)
    return store, store.load_run(handle.run_id)


def survivors(token: str, timeout_s: float = 5.0) -> list:
    """Processes of this test still alive; waits for the condition, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_with_token(token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_a_foreign_server_is_started_pinned_measured_and_stopped(engine_path, tmp_path, token):
    store, view = run(tmp_path, system())
    (row,) = view.rows
    assert row.status == "ok", row.error
    assert row.cell_id == "system-svc__delay-ms-1__c2"
    m, c = row.measurement, row.cost
    assert m.requests > 0 and m.p50_us >= 1000  # every request sleeps 1 ms in the system
    # Measured from outside: the Python server spends CPU on every request and sleeps in each
    # (a voluntary switch at least per request), while its socket calls are unavailable, not 0.
    assert c.cpu_user_s + c.cpu_sys_s > 0 and c.cpu_us_per_request > 0
    assert c.voluntary_cs_per_request >= 1
    assert c.read_syscalls_per_request is None and c.write_syscalls_per_request is None
    assert c.peak_rss_kib > 1024 and c.server_threads >= 2  # an interpreter, and a thread per connection
    rep_dir = store.run_dir(view.manifest.run_id) / "cells" / row.cell_id / "rep-1"
    probe = json.loads((rep_dir / "probe.json").read_text())
    assert probe["column_sources"]["syscalls"].startswith("unavailable")
    assert probe["rss_samples"] and all(kib > 0 for _, kib, _ in probe["rss_samples"])
    assert probe["stop"]["left_behind"] == [] and not probe["stop"]["ignored_stop_signal"]
    # Pinned to the server CPUs from its first instruction (it prints its own affinity).
    log = (rep_dir / "system.log").read_text()
    pinned = ",".join(map(str, parse_cpu_list(view.manifest.server_cpus, "server_cpus")))
    assert f"affinity {pinned}\n" in log
    sources = view.manifest.document["column_sources"]["system:svc"]
    assert sources["cpu"].endswith("(outside)") and sources["throughput_latency"] == "load generator"
    assert survivors(token) == []


def test_a_grandchild_that_escaped_and_ignores_sigterm_is_reaped(engine_path, tmp_path, token):
    _, view = run(tmp_path, system("--escaping-grandchild"))
    (row,) = view.rows
    assert row.status == "failed"
    assert "system svc: left 1 process(es) behind after its stop" in row.error and "(killed)" in row.error
    assert survivors(token) == []


def test_readiness_timeout_is_a_named_failure_with_the_output_tail(engine_path, tmp_path, token):
    _, view = run(tmp_path, system("--never-listen", extra='ready_timeout = "1s"'))
    (row,) = view.rows
    assert row.status == "failed"
    assert "not ready within 1 s (ready_timeout)" in row.error and "accepting connections" in row.error
    assert "test server starting" in row.error  # the last lines of its output
    assert survivors(token) == []


def test_exit_before_ready_is_a_named_failure(engine_path, tmp_path, token):
    _, view = run(tmp_path, system("--exit-at-start"))
    (row,) = view.rows
    assert row.status == "failed"
    assert "system svc: exit code 3 before it was ready" in row.error and "configuration error: refusing to start" in row.error
    assert survivors(token) == []


def test_death_mid_cell_is_a_named_failure_and_the_run_goes_on(engine_path, tmp_path, token):
    systems = system("--die-after-s", "0.4", name="dies") + system()
    factors = 'architecture = ["system:dies", "system:svc"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'
    _, view = run(tmp_path, systems, factors=factors)
    dies, svc = view.rows
    assert dies.status == "failed" and "system dies: exit code 7 during the load run" in dies.error
    assert svc.status == "ok", svc.error
    assert survivors(token) == []


def test_a_system_ignoring_its_stop_signal_is_killed_and_named(engine_path, tmp_path, token):
    _, view = run(tmp_path, system("--ignore-term", extra='stop_grace = "300ms"').replace('stop_grace = "1s"\n', ""))
    (row,) = view.rows
    assert row.status == "failed" and "ignored SIGTERM for 0.3 s (stop_grace); killed with SIGKILL" in row.error
    assert survivors(token) == []


def test_a_reusable_system_is_started_once_per_run(engine_path, tmp_path, token):
    experiment = SHORT.replace("repetitions = 1", "repetitions = 2")
    store, view = run(tmp_path, system(extra="reusable = true"), experiment=experiment)
    assert [r.status for r in view.rows] == ["ok", "ok"], [r.error for r in view.rows]
    log = (store.run_dir(view.manifest.run_id) / "systems" / "svc" / "system.log").read_text()
    assert log.count("test server starting") == 1
    assert survivors(token) == []


@pytest.fixture
def remote_server(token):
    """The test's own server on a free loopback port, as a system the lab cannot start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # readiness line, or EOF if it died
            if line.strip() == "ready":
                break
        assert proc.poll() is None, "the test's server did not start"
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_remote_target_gets_load_only_and_is_flagged(engine_path, tmp_path, remote_server):
    systems = f'\n[[systems]]\nname = "svc"\ntarget = "http://127.0.0.1:{remote_server}"\n'
    store, view = run(tmp_path, systems)
    (row,) = view.rows
    assert row.status == "ok", row.error
    assert row.measurement.requests > 0 and row.measurement.p50_us >= 1000
    assert row.cost is None  # the lab cannot see the remote system's processes
    assert view.manifest.document["remote_targets"] == {"system:svc": f"http://127.0.0.1:{remote_server}"}
    assert view.manifest.document["column_sources"]["system:svc"]["cpu"] == "unavailable (remote target)"
    done = run_cli("report", view.manifest.run_id, "--store", str(store.root))
    assert done.returncode == 0, done.stderr
    assert f"system:svc is a remote target (http://127.0.0.1:{remote_server}): load and latency only" in done.stdout


def test_the_cli_says_which_columns_come_from_outside(engine_path, tmp_path, token):
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(experiment=SHORT, factors=ONE_CELL) + system())
    done = run_cli("run", str(path), "--store", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "columns of system:svc: CPU: /proc/<pid>/stat of the process tree (outside)" in done.stdout
    assert "socket calls: unavailable (the system does not count its own socket calls)" in done.stdout
    (report,) = (tmp_path / "runs").glob("*/report.html")
    assert "Where the columns come from" in report.read_text()
    assert survivors(token) == []


def test_ctrl_c_mid_cell_stops_the_whole_tree(engine_path, tmp_path, token):
    experiment = SHORT.replace('duration = "500ms"', 'duration = "30s"')
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(experiment=experiment, factors=ONE_CELL) + system("--escaping-grandchild"))
    cli = start_cli("run", str(path), "--store", str(tmp_path / "runs"), "--no-report")
    try:
        # Mid-cell: the system answers and its grandchild exists (both carry the test's token).
        deadline = time.monotonic() + 30
        while len(processes_with_token(token)) < 5 and time.monotonic() < deadline:  # cli, system, child, grandchild, load
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.05)
        cli.send_signal(signal.SIGINT)
        _, stderr = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130, stderr
    assert survivors(token) == []


def test_nginx_preset_from_the_example_spec_is_measured_and_stopped(engine_path, tmp_path, token):
    """experiments/byo-nginx.toml's system (the nginx preset: generated configuration, SIGQUIT stop), shortened."""
    import shutil

    from conftest import REPO, missing_dependency

    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        missing_dependency("nginx", "it is not installed", "the Debian package `nginx-light`")
    spec = (REPO / "experiments" / "byo-nginx.toml").read_text()
    section = spec[spec.index("\n[[systems]]\n") :]
    assert 'preset = "nginx"' in section
    factors = 'architecture = ["system:nginx"]\nworkload = ["/echo?size=1024"]\nconcurrency = [4]'
    store, view = run(tmp_path, section, factors=factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    assert row.measurement.requests > 0 and row.cost.cpu_us_per_request > 0
    # A master and one worker, both found and counted; SIGQUIT stopped them without SIGKILL.
    rep_dir = store.run_dir(view.manifest.run_id) / "cells" / row.cell_id / "rep-1"
    probe = json.loads((rep_dir / "probe.json").read_text())
    assert len(probe["end"]["members"]) == 2 and probe["stop"]["exit"] == "exit code 0"
    assert not probe["stop"]["ignored_stop_signal"]
    summary = json.loads((rep_dir / "summary.json").read_text())
    assert summary["bytes_received"] > 1024 * summary["requests"]  # the 1 KiB answer, with headers
    assert survivors(token) == []


def test_setup_and_teardown_commands_run_around_the_system(engine_path, tmp_path, token):
    extra = (
        'setup = [["sh", "-c", "echo configured > {dir}/setup.txt"]]\n'
        'teardown = [["sh", "-c", "echo stopped:$(cat {dir}/setup.txt) > {dir}/../teardown.txt"]]'
    )
    store, view = run(tmp_path, system(extra=extra))
    (row,) = view.rows
    assert row.status == "ok", row.error
    rep_dir = store.run_dir(view.manifest.run_id) / "cells" / row.cell_id / "rep-1"
    assert (rep_dir / "teardown.txt").read_text() == "stopped:configured\n"

    _, view = run(tmp_path / "failing", system(extra='setup = [["sh", "-c", "echo no licence; exit 4"]]'))
    (row,) = view.rows
    assert row.status == "failed" and "system svc setup[0]: sh -c echo no licence; exit 4: exit code 4" in row.error
    assert "no licence" in row.error
    assert survivors(token) == []
