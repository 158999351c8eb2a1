"""Topologies of several processes on real processes, loopback only: archlab backends behind
archlab's round-robin proxy, real memcached servers behind archlab's middleware (keys preloaded,
the load generator's gets all hits), a Ctrl-C in the middle of a cell, and bad topology input
refused before anything starts. Windows are short (warm-up 0.2 s, measurement 0.5 s); no timing
is asserted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from conftest import REPO, missing_dependency, processes_with_token, spec_text, start_cli

from archlab.errors import SpecError
from archlab.lab.session import run_spec
from archlab.lab.engine import DataPlaneRegistry
from archlab.spec import SpecEnvironment, load_spec
from archlab.store import Store

SHORT = 'name = "topo"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"'
LB2 = """
[[systems]]
name = "lb-2"
backends = { architecture = "netty", copies = 2, options = { loops = 1 } }
front = { proxy = "round-robin" }
"""
MC = """
[[systems]]
name = "lb-2"
backends = { preset = "memcached", copies = 2 }
front = { middleware = "seed", workers = 4 }
preload = 10
load = { protocol = "memcached", ratio = "0:1" }
"""
LB2_FACTORS = 'architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'


def write_spec(tmp_path: Path, systems: str, factors: str, experiment: str = SHORT, load: str | None = None) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "spec.toml"
    sections = {"experiment": experiment, "factors": factors}
    if load is not None:
        sections["load"] = load
    path.write_text(spec_text(**sections) + systems)
    return path


def run(tmp_path: Path, systems: str, factors: str, load: str | None = None):
    path = write_spec(tmp_path, systems, factors, load=load)
    store = Store(tmp_path / "runs")
    handle = run_spec(path, store)
    view = store.load_run(handle.run_id)
    return store, view


def rep_dir(store, view, row) -> Path:
    return store.run_dir(view.manifest.run_id) / "cells" / row.cell_id / "rep-1"


def pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_two_backends_behind_the_proxy_share_the_requests_round_robin(engine_path, tmp_path, token):
    store, view = run(tmp_path, LB2, LB2_FACTORS)
    (row,) = view.rows
    assert row.status == "ok", row.error
    probe = json.loads((rep_dir(store, view, row) / "probe.json").read_text())
    rows = {p["process"]: p for p in probe["processes"]}
    # A row for every process, in start order, each with its own accounting.
    assert [p["process"] for p in probe["processes"]] == ["backend-0", "backend-1", "front"]
    for name, p in rows.items():
        assert p["cost"]["cpu_us_per_request"] > 0, name
        assert p["measured"].startswith("by itself"), name  # archlab's own: rusage, socket calls, hand-offs
        # Every response goes out in at least one socket write of the backend and of the front.
        assert p["cost"]["write_syscalls_per_request"] > 0, name
    # Round-robin: the proxy's per-backend counters over the whole run differ by at most one
    # (the requests of a run are sent in turn while both backends are healthy).
    backends = rows["front"]["final_counters"]["proxy"]["backends"]
    counts = [b["requests"] for b in backends]
    assert len(counts) == 2 and min(counts) > 0 and max(counts) - min(counts) <= 1, counts
    assert {b["addr"] for b in backends} == {rows["backend-0"]["address"], rows["backend-1"]["address"]}
    # The row's cost is the sum over the processes (CPU time adds up exactly).
    total = sum(p["cost"]["cpu_user_s"] + p["cost"]["cpu_sys_s"] for p in rows.values())
    assert row.cost.cpu_user_s + row.cost.cpu_sys_s == pytest.approx(total, rel=1e-9)
    # The report's "where the CPU went": one line per process, shares of the cell's CPU adding to 1.
    from archlab.report.processes import process_costs, process_lines

    costs = process_costs(view.rows)
    assert [c.process for c in costs] == ["backend-0", "backend-1", "front"]
    assert sum(c.cpu_share for c in costs) == pytest.approx(1.0)
    assert len(process_lines(view.rows)) == 4
    # Every process was stopped by its stop signal, and none is left.
    stops = json.loads((rep_dir(store, view, row) / "topology.stop.json").read_text())
    assert [s["process"] for s in stops] == ["front", "backend-1", "backend-0"]
    assert not any(pid_alive(p["pid"]) for p in rows.values())
    assert processes_with_token(token) == []


def test_a_topology_is_a_level_beside_a_plain_architecture(engine_path, tmp_path, token):
    factors = 'architecture = ["netty", "system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'
    store, view = run(tmp_path, LB2, factors)
    assert [r.status for r in view.rows] == ["ok", "ok"], [r.error for r in view.rows]
    plain, balanced = view.rows
    assert plain.cell_id.startswith("netty") and balanced.cell_id.startswith("system-lb-2")
    assert "processes" not in json.loads((rep_dir(store, view, plain) / "probe.json").read_text())
    assert processes_with_token(token) == []


def test_memcached_servers_behind_the_middleware_serve_preloaded_gets(engine_path, tmp_path, token):
    if shutil.which("memcached") is None:
        missing_dependency("memcached", "it is not installed", "the Debian package `memcached`")
    systems = """
[[systems]]
name = "mw"
backends = { preset = "memcached", copies = 2 }
front = { middleware = "seed", workers = 4 }
preload = 200
load = { protocol = "memcached", key_pattern = "R:R", key_min = 0, key_max = 199 }
"""
    # The workload level says what the load does: only gets (memtier's --ratio 0:1).
    factors = 'architecture = ["system:mw"]\nworkload = ["/memcached?ratio=0:1"]\nconcurrency = [2]'
    store, view = run(tmp_path, systems, factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    directory = rep_dir(store, view, row)
    summary = json.loads((directory / "summary.json").read_text())
    mc = summary["memcached"]
    # Every key drawn lies in 0..=199, all preloaded on both servers: every get is a hit (without
    # the preload every one would miss).
    assert mc["gets"] > 0 and mc["hits"] == mc["gets"] and mc["misses"] == 0, mc
    probe = json.loads((directory / "probe.json").read_text())
    assert [p["process"] for p in probe["processes"]] == ["backend-0", "backend-1", "front"]
    assert probe["processes"][0]["what"] == "preset memcached"
    # The middleware's own statistics, flushed on its SIGTERM, count the gets it relayed.
    assert probe["processes"][2]["final_counters"]["totals"], probe["processes"][2]["final_counters"]
    assert not any(pid_alive(p["pid"]) for p in probe["processes"])
    assert processes_with_token(token) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_no_process_of_the_topology(engine_path, tmp_path, token, sig):
    experiment = SHORT.replace('duration = "500ms"', 'duration = "30s"')
    path = write_spec(tmp_path, LB2, LB2_FACTORS, experiment=experiment)
    cli = start_cli("run", str(path), "--store", str(tmp_path / "runs"), "--no-report")
    try:
        # Mid-cell: the CLI, two backends, the front and the load generator all carry the token.
        # One reading decides: a short-lived helper that carries the token too can be counted
        # by one reading and gone by the next.
        deadline = time.monotonic() + 30
        seen: list[int] = []
        while len(seen) < 4 and time.monotonic() < deadline:
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.05)  # no event tells the test that another process has started
            seen = [pid for pid, _ in processes_with_token(token) if pid != cli.pid]
        assert len(seen) >= 4, seen
        cli.send_signal(sig)
        _, stderr = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == (130 if sig == signal.SIGINT else 143), stderr
    assert [pid for pid in seen if pid_alive(pid)] == []
    assert processes_with_token(token) == []


def validate_file(path: Path):
    experiment, _ = load_spec(path, SpecEnvironment.local(DataPlaneRegistry()))
    return experiment


@pytest.mark.parametrize(
    ("workload", "words"),
    [("/get", "/memcached[?PARAM=VALUE"), ("/memcached?ratio=0:0", "0:0"), ("/memcached?connections=3", "not set by the workload"), ("/memcached?ratio", "ratio")],
)
def test_a_bad_memcached_workload_is_refused(tmp_path, token, workload, words):
    factors = f'architecture = ["system:lb-2"]\nworkload = ["{workload}"]\nconcurrency = [2]'
    error = _refusal(tmp_path, MC, factors)
    assert error.field == "factors.workload[0]", str(error)
    assert words in str(error)


def test_http_and_memcached_levels_in_one_spec_are_refused(tmp_path, token):
    factors = 'architecture = ["netty", "system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'
    error = _refusal(tmp_path, MC, factors)
    assert error.field == "factors.workload[0]" and "both http and memcached" in str(error)


def test_a_workload_archlab_backends_do_not_serve_is_refused(tmp_path, token):
    factors = LB2_FACTORS.replace("/echo?size=64", "/eco?size=64")
    error = _refusal(tmp_path, LB2, factors)
    assert error.field.startswith("factors.workload"), str(error)
    assert "/eco" in str(error)


def test_copies_of_a_command_system_behind_the_proxy(engine_path, tmp_path, token):
    """``backends.system``: each copy of a [[systems]] command on its own port, measured from outside."""
    import sys

    server = Path(__file__).parent / "data" / "byo" / "http_server.py"
    systems = f"""
[[systems]]
name = "svc"
command = {json.dumps([sys.executable, str(server), "--port", "{port}", "--host", "{host}"])}
stop_grace = "1s"
setup = [["sh", "-c", "echo configured > {{dir}}/setup.txt"]]
teardown = [["sh", "-c", "echo stopped:$(cat {{dir}}/setup.txt) > {{dir}}/../teardown.txt"]]

[[systems]]
name = "lb"
backends = {{ system = "svc", copies = 2 }}
front = {{ proxy = "round-robin" }}
"""
    factors = 'architecture = ["system:lb"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'
    store, view = run(tmp_path, systems, factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    rows = {p["process"]: p for p in json.loads((rep_dir(store, view, row) / "probe.json").read_text())["processes"]}
    assert rows["backend-0"]["address"] != rows["backend-1"]["address"]
    for name in ("backend-0", "backend-1"):
        assert rows[name]["what"] == "system svc" and rows[name]["measured"].startswith("from outside")
        assert rows[name]["cost"]["cpu_us_per_request"] > 0, rows[name]
    counts = [b["requests"] for b in rows["front"]["final_counters"]["proxy"]["backends"]]
    assert min(counts) > 0 and max(counts) - min(counts) <= 1, counts
    # Each copy was set up and torn down around its own run, as a system cell is.
    for name in ("backend-0", "backend-1"):
        assert (rep_dir(store, view, row) / "topology" / name / "teardown.txt").read_text() == "stopped:configured\n"
    assert processes_with_token(token) == []


def _refusal(tmp_path: Path, systems: str, factors: str = LB2_FACTORS) -> SpecError:
    path = write_spec(tmp_path, systems, factors)
    with pytest.raises(SpecError) as e:
        validate_file(path)
    return e.value


@pytest.mark.parametrize(
    ("systems", "key", "words"),
    [
        (LB2.replace('proxy = "round-robin"', 'proxy = "fastest"'), "systems[0].front.proxy", "fastest"),
        (LB2.replace('proxy = "round-robin"', 'balancer = "x"'), "systems[0].front.balancer", "one of the keys"),
        (LB2.replace("copies = 2", "copies = 0"), "systems[0].backends.copies", "1..=64"),
        (LB2.replace('architecture = "netty", copies = 2, options = { loops = 1 }', 'system = "ghost", copies = 2'), "systems[0].backends.system", "ghost"),
        (LB2.replace('architecture = "netty"', 'architecture = "nety"'), "systems[0].backends.architecture", "nety"),
        (LB2.replace('front = { proxy = "round-robin" }', 'front = { preset = "nutcracker" }'), "systems[0].front.preset", "speaks http"),
        (LB2.replace('front = { proxy = "round-robin" }', "").replace("copies = 2", "copies = 17"), "systems[0].backends.copies", "no front"),
        (LB2 + "preload = 10\n", "systems[0].preload", "memcached"),
        (LB2 + 'load = { protocol = "memcached" }\n', "systems[0].load.protocol", "'http'"),
        (LB2.replace("options = { loops = 1 }", "options = { loops = 0 }"), "systems[0].backends.options.loops", "0"),
        (LB2.replace('front = { proxy = "round-robin" }', 'front = { proxy = "round-robin", cpus = "99" }'), "systems[0].front.cpus", "99"),
        (LB2.replace('proxy = "round-robin" }', 'proxy = "round-robin", options = { max_conns = 0 } }'), "systems[0].front.options.max_conns", "1..="),
        (LB2.replace('proxy = "round-robin" }', 'proxy = "round-robin", architecture = "tokio" }'), "systems[0].front.architecture", "can proxy"),
        (MC.replace('ratio = "0:1"', 'ratio = "0:0"'), "systems[0].load.ratio", "0:0"),
        (MC.replace("workers = 4", "workers = 0"), "systems[0].front.workers", "1..=1024"),
        (MC.replace("preload = 10", "preload = -1"), "systems[0].preload", ">= 0"),
    ],
)
def test_bad_topology_input_is_refused_naming_the_key(tmp_path, token, systems, key, words):
    error = _refusal(tmp_path, systems)
    assert error.field == key, str(error)
    assert words in str(error)
    assert processes_with_token(token) == []  # refused before anything started


def test_the_seed000_lb_experiment_validates(tmp_path):
    exp = validate_file(REPO / "experiments" / "seed000-lb.toml")
    names = {s.name: s for s in exp.systems}
    assert {"lb-2", "lb-3"} <= set(names)
    assert names["lb-3"].topology.backends.copies == 3
    levels = next(f.levels for f in exp.factors if f.name == "architecture")
    assert any(not str(a).startswith("system:") for a in levels)  # one backend alone, unbalanced


def test_cpu_quota_says_what_was_applied(engine_path, tmp_path, token):
    systems = LB2.replace('front = { proxy = "round-robin" }', 'front = { proxy = "round-robin", cpu_quota = 0.5 }')
    store, view = run(tmp_path, systems, LB2_FACTORS)
    (row,) = view.rows
    assert row.status == "ok", row.error
    front = json.loads((rep_dir(store, view, row) / "probe.json").read_text())["processes"][2]
    quota = front["cpu_quota"]
    assert quota["cpu_quota"] == 0.5
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").is_file()
    # Applied exactly when this machine has a writable cgroup v2; otherwise the reason is given.
    assert quota["applied"] in (True, False) and (quota["applied"] or quota["why"])
    if not v2:
        assert quota["applied"] is False and "cgroup v2 is not mounted" in quota["why"]
    else:
        assert quota["applied"] is False or quota["cpu_max"] == "50000 100000"
    # The manifest says what the spec asked for and whether this machine can apply it.
    (fact,) = view.manifest.document["cpu_quota"]  # one entry per start or resume
    assert fact["asked"] == [{"system": "lb-2", "process": "front", "cpu_quota": 0.5}]
    assert fact["applicable"] is (fact["why_not"] is None)
    if not v2:
        assert fact["applicable"] is False
    assert os.environ.get("ARCHLAB_TEST_TOKEN") == token and processes_with_token(token) == []


@pytest.mark.parametrize("peer", ["haproxy", "nginx"])
def test_a_peer_balancer_the_lab_configures_relays_to_both_backends(engine_path, tmp_path, token, peer):
    program = shutil.which(peer) or (f"/usr/sbin/{peer}" if Path(f"/usr/sbin/{peer}").exists() else None)
    if program is None:
        missing_dependency(peer, "it is not installed", f"the Debian package `{peer}`")
    systems = LB2.replace('front = { proxy = "round-robin" }', f'front = {{ preset = "{peer}" }}')
    store, view = run(tmp_path, systems, LB2_FACTORS)
    (row,) = view.rows
    assert row.status == "ok", row.error
    rows = {p["process"]: p for p in json.loads((rep_dir(store, view, row) / "probe.json").read_text())["processes"]}
    assert rows["front"]["measured"].startswith("from outside") and rows["front"]["cost"]["read_syscalls_per_request"] is None
    # Round-robin over keep-alive connections: every backend wrote responses in the window.
    for name in ("backend-0", "backend-1"):
        assert rows[name]["cost"]["write_syscalls_per_request"] > 0.1, rows[name]["cost"]
    stops = json.loads((rep_dir(store, view, row) / "topology.stop.json").read_text())
    assert not any(s.get("problem") for s in stops), stops
    assert processes_with_token(token) == []


def test_twemproxy_in_front_of_memcached_serves_preloaded_gets(engine_path, tmp_path, token):
    for program in ("memcached", "nutcracker"):
        if shutil.which(program) is None and not Path(f"/usr/sbin/{program}").exists():
            missing_dependency(program, "it is not installed", f"the Debian package `{program}`")
    systems = """
[[systems]]
name = "tw"
backends = { preset = "memcached", copies = 2 }
front = { preset = "nutcracker" }
preload = 100
load = { protocol = "memcached", ratio = "0:1", key_min = 0, key_max = 99 }
"""
    factors = 'architecture = ["system:tw"]\nworkload = ["/memcached"]\nconcurrency = [2]'
    store, view = run(tmp_path, systems, factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    mc = json.loads((rep_dir(store, view, row) / "summary.json").read_text())["memcached"]
    assert mc["gets"] > 0 and mc["hits"] == mc["gets"], mc
    assert processes_with_token(token) == []


def test_a_failed_start_stops_what_was_started_and_names_the_process(engine_path, tmp_path, token):
    """Copy 1 of the backends exits before it is ready: copy 0, already running, is stopped,
    the front never starts, the cell fails naming the copy, and no process is left."""
    import sys

    server = Path(__file__).parent / "data" / "byo" / "http_server.py"
    script = f'if [ "{{cpus}}" = "1" ]; then echo "copy on cpu 1 refuses" >&2; exit 3; fi; exec {sys.executable} {server} --port {{port}} --host {{host}}'
    systems = f"""
[[systems]]
name = "svc"
command = {json.dumps(["sh", "-c", script])}
stop_grace = "1s"

[[systems]]
name = "lb"
backends = {{ system = "svc", copies = 2, cpus = ["0", "1"] }}
front = {{ proxy = "round-robin" }}
"""
    factors = 'architecture = ["system:lb"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'
    store, view = run(tmp_path, systems, factors)
    (row,) = view.rows
    assert row.status == "failed"
    assert "svc.1" in row.error and "exit code 3" in row.error and "refuses" in row.error, row.error
    topo = rep_dir(store, view, row) / "topology"
    assert (topo / "backend-0" / "system.log").exists() and not (topo / "front.stderr").exists()
    # Copy 0 was stopped by the topology itself, with its stop signal, at the failure.
    (stopped,) = json.loads((topo / "failed-start.stop.json").read_text())
    assert stopped["process"] == "backend-0" and not stopped["ignored_stop_signal"] and stopped["problem"] is None
    assert processes_with_token(token) == []


@pytest.mark.parametrize("name", ["seed002-baseline", "seed002-middleware"])
def test_the_seed002_experiments_validate(name):
    exp = validate_file(REPO / "experiments" / f"{name}.toml")
    for s in exp.systems:
        assert s.topology is not None and s.topology.protocol == "memcached", s.name
        assert s.topology.preload > 0, s.name  # every read finds its key
    workloads = next(f.levels for f in exp.factors if f.name == "workload")
    assert set(workloads) == {"/memcached?ratio=0:1", "/memcached?ratio=1:0"}  # read-only, write-only


@pytest.mark.parametrize("kind", ["archlab", "memcached"])
def test_a_killed_lab_leaves_no_process_of_the_topology(engine_path, tmp_path, token, kind):
    """SIGKILL of the lab itself (no cleanup can run): every process of the topology dies with it
    (the parent-death signal, kept even by a server that changes its user)."""
    experiment = SHORT.replace('duration = "500ms"', 'duration = "30s"')
    if kind == "archlab":
        path = write_spec(tmp_path, LB2, LB2_FACTORS, experiment=experiment)
    else:
        path = write_spec(tmp_path, MC.replace('name = "lb-2"', 'name = "mw"'), 'architecture = ["system:mw"]\nworkload = ["/memcached"]\nconcurrency = [2]', experiment=experiment)
    cli = start_cli("run", str(path), "--store", str(tmp_path / "runs"), "--no-report")
    try:
        deadline = time.monotonic() + 30
        while len(processes_with_token(token)) < 5 and time.monotonic() < deadline:
            assert cli.poll() is None, cli.communicate()
            time.sleep(0.05)  # no event tells the test that another process has started
        seen = [pid for pid, _ in processes_with_token(token) if pid != cli.pid]
        assert len(seen) >= 4
        cli.kill()
        cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    deadline = time.monotonic() + 10
    while (alive := [pid for pid in seen if pid_alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel delivers the parent-death signals asynchronously
    assert alive == []


def test_a_backend_dying_mid_cell_fails_the_cell_naming_it(engine_path, tmp_path, token):
    """Copy 1 exits 0.5 s after its start, in the middle of the window: the cell fails naming
    that copy, every other process of the topology is stopped, none is left."""
    import sys

    server = Path(__file__).parent / "data" / "byo" / "http_server.py"
    die = f'if [ "{{cpus}}" = "1" ]; then set -- --die-after-s 0.5; fi; exec {sys.executable} {server} --port {{port}} --host {{host}} "$@"'
    systems = f"""
[[systems]]
name = "svc"
command = {json.dumps(["sh", "-c", die])}
stop_grace = "1s"

[[systems]]
name = "lb"
backends = {{ system = "svc", copies = 2, cpus = ["0", "1"] }}
front = {{ proxy = "round-robin" }}
"""
    factors = 'architecture = ["system:lb"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'
    experiment = SHORT.replace('duration = "500ms"', 'duration = "2s"')
    path = write_spec(tmp_path, systems, factors, experiment=experiment)
    store = Store(tmp_path / "runs")
    view = store.load_run(run_spec(path, store).run_id)
    (row,) = view.rows
    assert row.status == "failed"
    assert "svc.1" in row.error and "during the load run" in row.error, row.error
    stops = json.loads((rep_dir(store, view, row) / "topology.stop.json").read_text())
    assert [s["process"] for s in stops] == ["front", "backend-1", "backend-0"]
    assert processes_with_token(token) == []
