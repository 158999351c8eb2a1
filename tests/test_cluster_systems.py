"""Cells of `[[systems]]` entries on a real Dask `LocalCluster` of this machine (two worker
processes over TCP on loopback, no mocks). Their load goes through the same shard executor as a
server cell's: a system started from a plain command (`archlab-engine serve`) and a remote
target (a server this test started) are each loaded by two shards on the two workers, and the
merged row counts exactly the sum of the shards' requests, its histogram their sum; the started
system is still measured from `/proc` over the shards' window. A system placed on a named worker
(`worker = "NAME"`) is started, made ready, measured from that worker's `/proc` and stopped
there; an unknown worker name, or a worker without a cluster, is refused before any run exists;
its worker lost mid-cell leaves the repetition to `--resume`, which completes it; no process
outlives a client killed outright (the worker's lease) or interrupted (the CLI's Ctrl-C). A
topology with one front (an HTTP proxy, a memcached middleware) is loaded by the shards too.
A topology's own servers, its proxy, middleware or preset front, and the lab's PostgreSQL
(`[db] worker`) placed on a named worker are that worker process's children, measured there
(each `probe.json` row names the worker), and stopped there: by the client's `finally` on
Ctrl-C, by the lease when the client is SIGKILLed; an unknown worker name is refused before
anything starts; a placed front's worker lost mid-cell leaves the repetition to `--resume`.
Each window is 0.5 s (5 s for a lost worker, 30 s for the interrupted ones, cut short)."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    alive,
    cli_env,
    interrupt_when_running,
    kill_client_after_its_pid,
    missing_dependency,
    processes_with_token,
    run_cli,
    spec_text,
    start_cli,
    wait_no_process,
    wait_until_gone,
)

from archlab.cluster import ClusterError, ClusterFault, ShardedLoad, open_cluster
from archlab.errors import SpecError
from archlab.lab.load_merge import read_interval_log
from archlab.lab.session import resume_run, run_spec
from archlab.store import Store

WINDOW = 'name = "systems"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"'
LOAD = 'model = "closed"\nthink_time = "exp:2ms"\ntimeout = "2s"'


@pytest.fixture(scope="module")
def cluster():
    with open_cluster("local:2") as c:
        c.client.wait_for_workers(2, timeout=60)
        yield c


@pytest.fixture(scope="module")
def target_server(engine_path):
    """An archlab server this test starts itself: a remote target the lab only loads."""
    proc = subprocess.Popen([str(engine_path), "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # its readiness line, or EOF if it died
        assert line.startswith("listening "), line
        yield line.split(" ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(10)


def counts(path: Path) -> Counter:
    total: Counter = Counter()
    for _, _, h in read_interval_log(path.read_text()).intervals:
        total.update({i.value_iterated_to: i.count_at_value_iterated_to for i in h.get_recorded_iterator()})
    return total


def test_system_cells_load_through_the_shards_and_merge_exactly(engine_path, cluster, target_server, tmp_path):
    serve = [str(engine_path), "serve", "--arch", "single-thread", "--host", "{host}", "--port", "{port}"]
    systems = (f'\n[[systems]]\nname = "eng"\ncommand = {json.dumps(serve)}\nstop_grace = "1s"\n'
               f'\n[[systems]]\nname = "far"\ntarget = "http://{target_server}"\n')
    factors = 'architecture = ["system:eng", "system:far"]\nworkload = ["/echo?size=32"]\nconcurrency = [4]'
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors=factors) + systems)
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, load_executor=ShardedLoad(cluster, 2))
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete" and len(view.rows) == 2
    for row in view.rows:
        assert row.status == "ok", row.error
        rep = row.summary_path.parent
        shards = json.loads((rep / "shards.json").read_text())
        assert [s["users"] for s in shards["shard"]] == [2, 2] and len({s["worker"] for s in shards["shard"]}) == 2
        docs = [json.loads((rep / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
        assert all(d["requests"] > 0 for d in docs)
        # The merged row is the sum of its shards, and its histogram their histograms' sum, exactly.
        assert row.measurement.requests == sum(d["requests"] for d in docs) == sum(s["requests"] for s in shards["shard"])
        merged = counts(rep / "hdr.log")
        assert merged == counts(rep / "shards" / "shard-0" / "hdr.log") + counts(rep / "shards" / "shard-1" / "hdr.log")
    eng = next(r for r in view.rows if r.cell_id.startswith("system-eng"))
    far = next(r for r in view.rows if r.cell_id.startswith("system-far"))
    # The started system is measured from /proc over the shards' window; the remote target has no cost.
    probe = json.loads((eng.summary_path.parent / "probe.json").read_text())
    # (Memory and threads, not CPU time, which /proc counts in 10 ms ticks: a short window may show none.)
    assert probe["start"]["source"] == "before load start" and eng.cost is not None
    assert eng.cost.peak_rss_kib is not None and eng.cost.peak_rss_kib > 0 and eng.cost.server_threads >= 1
    assert far.cost is None



LB2 = """
[[systems]]
name = "lb-2"
backends = { architecture = "netty", copies = 2, options = { loops = 1 } }
front = { proxy = "round-robin" }
"""
MC = """
[[systems]]
name = "mc-2"
backends = { preset = "memcached", copies = 2 }
front = { middleware = "seed", workers = 2 }
preload = 10
load = { protocol = "memcached", ratio = "0:1" }
"""


@pytest.mark.parametrize("systems, factors", [
    (LB2, 'architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [4]'),
    (MC, 'architecture = ["system:mc-2"]\nworkload = ["/memcached?ratio=0:1"]\nconcurrency = [4]'),
], ids=["http-proxy", "memcached-middleware"])  # fmt: skip
def test_a_topologys_front_is_loaded_by_the_shards(engine_path, cluster, tmp_path, systems, factors):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors=factors) + systems)
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, load_executor=ShardedLoad(cluster, 2))
    (row,) = store.load_run(handle.run_id).rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    shards = json.loads((rep / "shards.json").read_text())
    docs = [json.loads((rep / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    assert [s["users"] for s in shards["shard"]] == [2, 2] and all(d["requests"] > 0 for d in docs)
    assert row.measurement.requests == sum(d["requests"] for d in docs)
    assert counts(rep / "hdr.log") == counts(rep / "shards" / "shard-0" / "hdr.log") + counts(rep / "shards" / "shard-1" / "hdr.log")
    # Every process of the topology was probed over the shards' window.
    probe = json.loads((rep / "probe.json").read_text())
    assert probe["window_sources"] == ["before load start", "after load exit"] and "load" not in probe
    assert row.cost is not None and row.cost.peak_rss_kib is not None and row.cost.peak_rss_kib > 0

# --- [[systems]] entries placed on a named worker (`worker = "NAME"`) -------------------------


def _placed_spec(tmp_path: Path, engine_path: Path, worker: str, duration: str = "500ms", cluster: str = "") -> Path:
    serve = [str(engine_path), "serve", "--arch", "single-thread", "--host", "{host}", "--port", "{port}"]
    systems = f'\n[[systems]]\nname = "eng"\ncommand = {json.dumps(serve)}\nworker = "{worker}"\nstop_grace = "1s"\n'
    factors = 'architecture = ["system:eng"]\nworkload = ["/echo?size=32"]\nconcurrency = [2]'
    experiment = f'name = "placed"\nrepetitions = 1\nwarmup = "200ms"\nduration = "{duration}"'
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=experiment, load=LOAD, factors=factors, **({"cluster": cluster} if cluster else {})) + systems)
    return spec


def test_a_system_placed_on_a_worker_runs_and_is_measured_there(engine_path, cluster, tmp_path):
    names = sorted(w.name for w in cluster.workers())
    load_host, system_host = names
    worker = next(w for w in cluster.workers() if w.name == system_host)
    (worker_pid,) = cluster.client.run(os.getpid, workers=[worker.address]).values()
    store = Store(tmp_path / "runs")
    with ShardedLoad(cluster, 1, load_hosts=(load_host,)) as executor:
        handle = run_spec(_placed_spec(tmp_path, engine_path, system_host), store, load_executor=executor)
    view = store.load_run(handle.run_id)
    (row,) = view.rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    probe = json.loads((rep / "probe.json").read_text())
    # Its process tree was read on the worker: the system is that worker process's child, not this one's.
    (member,) = probe["start"]["members"]
    assert member["ppid"] == worker_pid != os.getpid()
    assert probe["worker"]["name"] == system_host and row.cost is not None and row.cost.peak_rss_kib is not None and row.cost.peak_rss_kib > 0
    assert view.manifest.document["system_workers"][0]["eng"]["name"] == system_host
    # Stopped there, with its output and how it stopped copied into the repetition.
    stop = json.loads((rep / "system.stop.json").read_text())
    assert stop["exit"] in ("exit code 0", "killed by signal 15 (SIGTERM)") and stop["problem"] is None
    assert (rep / "system.log").exists()
    assert not alive(member["pid"])


def test_an_unknown_worker_is_refused_before_any_run(engine_path, cluster, tmp_path):
    store = Store(tmp_path / "runs")
    with pytest.raises(ClusterError) as caught:
        with ShardedLoad(cluster, 1) as executor:
            run_spec(_placed_spec(tmp_path, engine_path, "sut-9"), store, load_executor=executor)
    message = str(caught.value)
    known = sorted(w.name for w in cluster.workers())
    assert message == (f"systems[0].worker: no worker named 'sut-9' in the cluster local:2 (its workers: {known}; "
                       "name them with `dask worker --name NAME`)"), message
    assert not list((tmp_path / "runs").glob("*/manifest.json"))
    with pytest.raises(SpecError, match=r"^systems\[0\]\.worker: expected a worker name only in a run on a cluster .*, got 'sut-9'$"):
        run_spec(_placed_spec(tmp_path, engine_path, "sut-9"), store)
    assert not list((tmp_path / "runs").glob("*/manifest.json"))


def _kill_the_worker_of_the_system(token: str, killed: list, stop: threading.Event, target: str = r"archlab-engine\S* serve") -> None:
    """Once a shard's `archlab-engine load` of this test runs, SIGKILL the worker process that
    runs the system's process (``target``, by default `archlab-engine serve`: its parent)."""
    while not stop.is_set():
        procs = processes_with_token(token)
        if any(re.search(r"archlab-engine\S* load", cmd) for _, cmd in procs):
            for pid, cmd in procs:
                if re.search(target, cmd):
                    try:
                        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                        os.kill(parent, signal.SIGKILL)
                    except (OSError, ValueError):
                        continue
                    killed.append(parent)
                    return
        stop.wait(0.01)


def _lose_a_worker_mid_cell_then_resume(tmp_path: Path, token: str, make_spec, target: str, what: str, after_loss=None) -> int:
    """Run the spec ``make_spec(worker)`` places on one worker of a `local:2` cluster, its load
    on the other, and SIGKILL the worker that runs ``target`` (a regex of its command) once the
    load runs: the repetition fails naming the worker, nothing is half-written in the catalog,
    ``after_loss()`` checks what it must, and once the nanny brings the worker back under its
    name, `--resume` completes the repetition there. Returns the killed worker's pid."""
    store = Store(tmp_path / "runs")
    created: list = []
    with open_cluster("local:2") as local:
        local.client.wait_for_workers(2, timeout=60)
        load_host, placed = sorted(w.name for w in local.workers())
        spec = make_spec(placed)
        killed: list[int] = []
        stop = threading.Event()
        killer = threading.Thread(target=_kill_the_worker_of_the_system, args=(token, killed, stop, target), daemon=True)
        killer.start()
        try:
            with pytest.raises(ClusterFault, match=rf"system host '{placed}' lost mid-cell"):
                with ShardedLoad(local, 1, load_hosts=(load_host,)) as executor:
                    run_spec(spec, store, on_created=created.append, load_executor=executor)
        finally:
            stop.set()
            killer.join(5)
        assert killed, f"no placed {what} was seen under load"
        run_id = created[0].run_id
        view = store.load_run(run_id)
        assert view.manifest.status == "failed" and view.rows == []  # nothing half-written in the catalog
        if after_loss is not None:
            after_loss()
        deadline = time.monotonic() + 60
        while placed not in {w.name for w in local.workers()} and time.monotonic() < deadline:
            local.client.wait_for_workers(2, timeout=10)
        with ShardedLoad(local, 1, load_hosts=(load_host,)) as executor:
            resumed = resume_run(run_id, store, load_executor=executor)
        (row,) = store.load_run(resumed.run_id).rows
        assert row.status == "ok", row.error
    assert [p for p, cmd in processes_with_token(token) if "archlab-engine" in cmd] == []
    return killed[0]


def test_a_system_worker_lost_mid_cell_fails_the_repetition_and_resume_completes_it(engine_path, tmp_path, token):
    killed = _lose_a_worker_mid_cell_then_resume(
        tmp_path, token, lambda placed: _placed_spec(tmp_path, engine_path, placed, duration="5s"),
        r"archlab-engine\S* serve", "system")
    # The killed worker never closed its private directory; the next actor removed it.
    assert glob.glob(os.path.join(tempfile.gettempdir(), f"archlab-remote-{killed}-*")) == []


def test_a_placed_fronts_worker_lost_mid_cell_fails_the_repetition_and_resume_completes_it(engine_path, tmp_path, token):
    def make_spec(placed: str) -> Path:
        systems = LB2.replace('front = { proxy = "round-robin" }', f'front = {{ proxy = "round-robin", worker = "{placed}" }}')
        spec = tmp_path / "spec.toml"
        spec.write_text(spec_text(experiment=WINDOW.replace('"500ms"', '"5s"'), load=LOAD,
                                  factors='architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]') + systems)
        return spec

    def backends_stopped() -> None:
        # The backends here were stopped although the front's worker was gone.
        assert [p for p, cmd in processes_with_token(token) if re.search(r"archlab-engine\S* serve", cmd)] == []

    _lose_a_worker_mid_cell_then_resume(tmp_path, token, make_spec, r"archlab-engine\S* proxy", "front", backends_stopped)


def test_a_topologys_memcached_backends_run_on_a_named_worker(engine_path, cluster, tmp_path):
    load_host, backend_host = sorted(w.name for w in cluster.workers())
    worker = next(w for w in cluster.workers() if w.name == backend_host)
    placed = MC.replace("copies = 2 }", f'copies = 2, worker = "{backend_host}" }}')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:mc-2"]\nworkload = ["/memcached?ratio=0:1"]\n'
                              'concurrency = [2]') + placed)
    store = Store(tmp_path / "runs")
    with ShardedLoad(cluster, 1, load_hosts=(load_host,)) as executor:
        handle = run_spec(spec, store, load_executor=executor)
    view = store.load_run(handle.run_id)
    (row,) = view.rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    processes = {p["process"]: p for p in json.loads((rep / "probe.json").read_text())["processes"]}
    # Both memcached copies ran on the worker (the preloaded keys were read back through the
    # middleware here), each measured from that host's /proc; the middleware ran here.
    # (Its memory and threads, not its CPU time: two users' gets over 0.5 s may take less than
    # the 10 ms tick /proc counts CPU time in.)
    for name in ("backend-0", "backend-1"):
        cost = processes[name]["cost"]
        assert processes[name]["worker"]["address"] == worker.address and cost["peak_rss_kib"] > 0 and cost["server_threads"] >= 1
        assert (rep / "topology" / name / "system.log").exists()  # its output, copied back
    assert "worker" not in processes["front"]
    assert view.manifest.document["system_workers"][0]["mc-2.backends"]["name"] == backend_host
    stops = json.loads((rep / "topology.stop.json").read_text())
    assert [s["process"] for s in stops] == ["front", "backend-1", "backend-0"] and not any(s.get("problem") for s in stops)


def test_the_cli_refuses_an_unknown_worker_in_one_line_before_any_run(engine_path, tmp_path):
    spec = _placed_spec(tmp_path, engine_path, "sut-9", cluster='address = "local:2"\nshards = 1')
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"archlab: error: systems\[0\]\.worker: no worker named 'sut-9' in the cluster local:2 "
                                            r"\(its workers: \['0', '1'\]; name them with `dask worker --name NAME`\)", lines[0]), done.stderr
    assert not list((tmp_path / "runs").glob("*/manifest.json"))


# --- a topology's own servers and its front on a named worker ----------------------------------


def _children_of(parent: int, seen: dict[int, str], stop: threading.Event) -> None:
    """Record (pid -> command line) every child of ``parent`` (a worker process) while the cell
    runs: what that worker started is its child, what this process started is not. (The
    command line is read again on every pass: a child seen between fork and exec still shows
    its parent's.)"""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                        cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        if cmdline or int(entry.name) not in seen:  # a zombie's is empty
                            seen[int(entry.name)] = cmdline
                except (OSError, ValueError, IndexError):
                    continue
        stop.wait(0.02)


def _run_watching(cluster, worker_name: str, spec: Path, store: Store, shards: int = 2) -> tuple[object, dict[int, str]]:
    """Run ``spec`` with ``shards`` shards, recording the children of worker ``worker_name``."""
    worker = next(w for w in cluster.workers() if w.name == worker_name)
    (worker_pid,) = cluster.client.run(os.getpid, workers=[worker.address]).values()
    seen: dict[int, str] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_children_of, args=(worker_pid, seen, stop), daemon=True)
    watcher.start()
    try:
        with ShardedLoad(cluster, shards) as executor:
            handle = run_spec(spec, store, load_executor=executor)
    finally:
        stop.set()
        watcher.join(5)
    return handle, seen


def test_archlabs_own_backends_and_proxy_front_run_on_a_named_worker(engine_path, cluster, tmp_path):
    _, placed = sorted(w.name for w in cluster.workers())
    worker = next(w for w in cluster.workers() if w.name == placed)
    systems = LB2.replace("options = { loops = 1 } }", f'options = {{ loops = 1 }}, worker = "{placed}" }}') \
                 .replace('front = { proxy = "round-robin" }', f'front = {{ proxy = "round-robin", worker = "{placed}" }}')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\n'
                              'concurrency = [4]') + systems)
    store = Store(tmp_path / "runs")
    handle, children = _run_watching(cluster, placed, spec, store)
    view = store.load_run(handle.run_id)
    (row,) = view.rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    # Every process of the topology was that worker's child, none this process's.
    assert sum("archlab-engine serve" in c for c in children.values()) == 2, children
    assert sum("archlab-engine proxy" in c for c in children.values()) == 1, children
    processes = {p["process"]: p for p in json.loads((rep / "probe.json").read_text())["processes"]}
    assert set(processes) == {"backend-0", "backend-1", "front"}
    for p in processes.values():
        # Probed on the worker through its own rusage line: the worker's answer, with socket calls counted.
        assert p["worker"]["address"] == worker.address and p["pid"] in children and p["measured"] == "by itself (rusage line)"
        assert p["address"].rsplit(":", 1)[0] == worker.host and p["cost"]["read_syscalls_per_request"] is not None
    # The shards loaded the front where it listens; the proxy relayed (at least) every measured
    # request to the backends it was given, which listen on the worker's address.
    assert json.loads((rep / "load.params.json").read_text())["target"] == processes["front"]["address"]
    relayed = processes["front"]["final_counters"]
    docs = [json.loads((rep / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    assert row.measurement.requests == sum(d["requests"] for d in docs) > 0
    assert counts(rep / "hdr.log") == counts(rep / "shards" / "shard-0" / "hdr.log") + counts(rep / "shards" / "shard-1" / "hdr.log")
    assert relayed is not None and sum(b["requests"] for b in relayed["proxy"]["backends"]) >= row.measurement.requests, relayed
    assert {b["addr"] for b in relayed["proxy"]["backends"]} == {processes["backend-0"]["address"], processes["backend-1"]["address"]}
    assert (rep / "topology" / "front.stderr").exists() and (rep / "topology" / "backend-0.stderr").exists()  # copied back
    fact = view.manifest.document["system_workers"][0]
    assert fact["lb-2.backends"]["name"] == fact["lb-2.front"]["name"] == placed
    stops = json.loads((rep / "topology.stop.json").read_text())
    assert [s["process"] for s in stops] == ["front", "backend-1", "backend-0"]
    assert all(not alive(p["pid"]) for p in processes.values())


def test_a_middleware_front_on_a_worker_relays_to_backends_here(engine_path, cluster, tmp_path):
    _, placed = sorted(w.name for w in cluster.workers())
    worker = next(w for w in cluster.workers() if w.name == placed)
    systems = MC.replace("workers = 2 }", f'workers = 2, worker = "{placed}" }}')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:mc-2"]\nworkload = ["/memcached?ratio=0:1"]\n'
                              'concurrency = [2]') + systems)
    store = Store(tmp_path / "runs")
    handle, children = _run_watching(cluster, placed, spec, store)
    (row,) = store.load_run(handle.run_id).rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    processes = {p["process"]: p for p in json.loads((rep / "probe.json").read_text())["processes"]}
    front = processes["front"]
    # The middleware was the worker's child, its process tree read from that host's /proc; the
    # memcached copies ran here (no worker), and every get the shards sent came back through it.
    assert front["pid"] in children and "archlab-engine middleware" in children[front["pid"]]
    assert front["worker"]["address"] == worker.address and front["cost"]["peak_rss_kib"] > 0
    assert all("worker" not in processes[b] and processes[b]["pid"] not in children for b in ("backend-0", "backend-1"))
    docs = [json.loads((rep / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    assert row.measurement.requests == sum(d["requests"] for d in docs) > 0
    # Its stdout came back with its files: the `stats` line it printed when stopped.
    assert (rep / "topology" / "front" / "system.log").exists()
    stops = json.loads((rep / "topology.stop.json").read_text())
    assert not any(s.get("problem") for s in stops), stops


def test_a_preset_front_on_a_worker_balances_backends_there(engine_path, cluster, tmp_path):
    _, placed = sorted(w.name for w in cluster.workers())
    systems = MC.replace("copies = 2 }", f'copies = 2, worker = "{placed}" }}') \
                .replace('front = { middleware = "seed", workers = 2 }', f'front = {{ preset = "nutcracker", worker = "{placed}" }}')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:mc-2"]\nworkload = ["/memcached?ratio=0:1"]\n'
                              'concurrency = [2]') + systems)
    store = Store(tmp_path / "runs")
    handle, children = _run_watching(cluster, placed, spec, store)
    (row,) = store.load_run(handle.run_id).rows
    assert row.status == "ok", row.error
    rep = row.summary_path.parent
    processes = {p["process"]: p for p in json.loads((rep / "probe.json").read_text())["processes"]}
    assert {n: "nutcracker" in children.get(p["pid"], "") or "memcached" in children.get(p["pid"], "") for n, p in processes.items()} \
        == {"front": True, "backend-0": True, "backend-1": True}, (processes, children)
    assert all(p["worker"]["name"] == placed for p in processes.values())
    assert (rep / "topology" / "front" / "system.log").exists()


def test_an_unknown_front_worker_is_refused_before_any_run(engine_path, cluster, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\n'
                              'concurrency = [2]') + LB2.replace('front = { proxy = "round-robin" }', 'front = { proxy = "round-robin", worker = "nope" }'))
    store = Store(tmp_path / "runs")
    known = sorted(w.name for w in cluster.workers())
    with pytest.raises(ClusterError) as caught:
        with ShardedLoad(cluster, 1) as executor:
            run_spec(spec, store, load_executor=executor)
    assert str(caught.value) == (f"systems[0].front.worker: no worker named 'nope' in the cluster local:2 (its workers: {known}; "
                                 "name them with `dask worker --name NAME`)")
    assert not list((tmp_path / "runs").glob("*/manifest.json"))


# --- the lab's PostgreSQL on a named worker (`[db] worker = "NAME"`) ---------------------------


def _postgres_bindir() -> Path:
    from archlab.lab.services import postgres

    try:
        return postgres.find_bindir()
    except postgres.PostgresUnavailable as e:
        missing_dependency("PostgreSQL", str(e), "the Debian package `postgresql`")


def _pg_dirs() -> set[str]:
    return set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "archlab-pg-*")))


DB_FACTORS = 'architecture = ["single-thread"]\nworkload = ["/db?id=42"]\nconcurrency = [2]'


def test_the_lab_database_runs_on_a_named_worker(engine_path, cluster, tmp_path):
    _postgres_bindir()
    _, placed = sorted(w.name for w in cluster.workers())
    worker = next(w for w in cluster.workers() if w.name == placed)
    before = _pg_dirs()
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors=DB_FACTORS) + f'[db]\nrows = 100\nworker = "{placed}"\n')
    store = Store(tmp_path / "runs")
    handle, children = _run_watching(cluster, placed, spec, store)
    view = store.load_run(handle.run_id)
    (row,) = view.rows
    assert row.status == "ok", row.error
    # The postmaster was that worker's child; the server here queried it at the worker's
    # address (every /db?id=42 answered 200, or the row would count errors).
    assert any(re.search(r"/postgres -D \S*archlab-pg-", c) for c in children.values()), children
    assert row.measurement.requests > 0 and row.measurement.errors == 0
    processes = {p["process"]: p for p in json.loads((row.summary_path.parent / "probe.json").read_text())["processes"]}
    db = processes["postgres"]
    # Its cost was read from that worker's /proc: the backend serving the pool ran all window.
    assert db["worker"]["address"] == worker.address and db["cost"]["peak_rss_kib"] > 0 and db["cost"]["server_threads"] >= 1
    assert "worker" not in processes["server"]
    assert view.manifest.document["system_workers"][0]["db"]["name"] == placed
    assert "ready to accept connections" in (handle.directory / "postgres.stderr").read_text()  # its log, copied back
    assert _pg_dirs() <= before  # its data directory removed on the worker
    # Without a cluster the placement is refused before any run exists.
    with pytest.raises(SpecError, match=rf"^db\.worker: expected a worker name only in a run on a cluster .*, got '{placed}'$"):
        run_spec(spec, Store(tmp_path / "none"))
    assert not list((tmp_path / "none").glob("*/manifest.json"))


def test_a_placed_system_queries_the_database_placed_on_its_worker(engine_path, cluster, tmp_path):
    # `{db_url}` of a system on a worker names the placed database's address there.
    _postgres_bindir()
    _, placed = sorted(w.name for w in cluster.workers())
    serve = [str(engine_path), "serve", "--arch", "single-thread", "--host", "{host}", "--port", "{port}", "--db", "{db_url}"]
    systems = f'\n[[systems]]\nname = "eng"\ncommand = {json.dumps(serve)}\nworker = "{placed}"\nstop_grace = "1s"\n'
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors='architecture = ["system:eng"]\nworkload = ["/db?id=42"]\nconcurrency = [2]')
                    + systems + f'[db]\nrows = 100\nworker = "{placed}"\n')
    store = Store(tmp_path / "runs")
    handle, children = _run_watching(cluster, placed, spec, store)
    view = store.load_run(handle.run_id)
    (row,) = view.rows
    assert row.status == "ok", row.error
    assert row.measurement.requests > 0 and row.measurement.errors == 0  # every /db?id=42 answered from the table
    assert any("archlab-engine serve" in c and "--db postgresql://" in c for c in children.values()), children
    assert any(re.search(r"/postgres -D \S*archlab-pg-", c) for c in children.values()), children
    processes = {p["process"]: p for p in json.loads((row.summary_path.parent / "probe.json").read_text())["processes"]}
    assert processes["postgres"]["worker"]["name"] == placed
    fact = view.manifest.document["system_workers"][0]
    assert fact["eng"]["name"] == fact["db"]["name"] == placed


def test_the_cli_refuses_an_unknown_database_worker_in_one_line_before_anything_starts(engine_path, tmp_path):
    before = _pg_dirs()
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors=DB_FACTORS, cluster='address = "local:2"\nshards = 1')
                    + '[db]\nrows = 100\nworker = "db-9"\n')
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"archlab: error: db\.worker: no worker named 'db-9' in the cluster local:2 "
                                            r"\(its workers: \['0', '1'\]; name them with `dask worker --name NAME`\)", lines[0]), done.stderr
    assert not list((tmp_path / "runs").glob("*/manifest.json")) and _pg_dirs() <= before  # no run, no database made


def test_an_interrupted_cli_leaves_no_database_on_its_worker(engine_path, tmp_path, token):
    # `archlab run` with the lab's database on worker "1" and the load on "0": Ctrl-C while the
    # /db cell is under load stops PostgreSQL there and removes its data directory.
    _postgres_bindir()
    before = _pg_dirs()
    experiment = 'name = "db"\nrepetitions = 1\nwarmup = "200ms"\nduration = "30s"'
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=experiment, load=LOAD, factors=DB_FACTORS, cluster='address = "local:2"\nshards = 1\nload_hosts = ["0"]')
                    + '[db]\nrows = 100\nworker = "1"\n')
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    code, err = interrupt_when_running(cli, token, [r"archlab-engine\S* load", r"/postgres -D"], "the /db cell under load with its database")
    assert code == 130, err[-3000:]
    assert wait_no_process(token) == []
    assert _pg_dirs() <= before


CLIENT = """
import sys, time
from pathlib import Path
from archlab.cluster import open_cluster
from archlab.cluster.remote import RemoteHost
from archlab.spec.systems import SystemSpec
cluster = open_cluster(sys.argv[1])
host = RemoteHost(cluster, sys.argv[2], lease_s=2.0)
spec = SystemSpec(name="eng", command=({engine!r}, "serve", "--arch", "single-thread", "--host", "{{host}}", "--port", "{{port}}"))
system = host.start_system(spec, Path(sys.argv[3]), (0,))
print(system.pid, flush=True)
time.sleep(600)
"""


CLIENT_OWN = """
import sys, time
from pathlib import Path
from archlab.cluster import open_cluster
from archlab.cluster.remote import RemoteHost
cluster = open_cluster(sys.argv[1])
host = RemoteHost(cluster, sys.argv[2], lease_s=2.0)
proc = host.start_server([{engine!r}, "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"],
                         Path(sys.argv[3]) / "backend-0.stderr", "backend-0")
proc.expect("listening ", 30)
print(proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("script", [CLIENT, CLIENT_OWN], ids=["system", "own-server"])
def test_no_system_outlives_a_client_killed_outright(engine_path, cluster, tmp_path, script):
    # A client killed with SIGKILL runs no finally block: the lease on the worker stops its
    # system, or archlab's own process (a topology's placed backend).
    address = cluster.client.scheduler.address
    name = sorted(w.name for w in cluster.workers())[0]
    client = subprocess.Popen([sys.executable, "-c", script.format(engine=str(engine_path)), address, name, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    pid = kill_client_after_its_pid(client)
    # Bounded wait on the condition: the lease (2 s) plus its watchdog's period and the stop's grace.
    wait_until_gone(lambda: not alive(pid))
    assert not alive(pid), f"system {pid} outlived its client on the worker"


CLIENT_DB = """
import sys, time
from pathlib import Path
from archlab.cluster import open_cluster
from archlab.cluster.remote import RemoteHost
cluster = open_cluster(sys.argv[1])
host = RemoteHost(cluster, sys.argv[2], lease_s=2.0)
db = host.start_database(Path(sys.argv[3]), rows=10, max_connections=20, cpus=None, settings=())
print(db.pid, flush=True)
time.sleep(600)
"""


def test_no_database_outlives_a_client_killed_outright(cluster, tmp_path):
    # As for a system: the lease ends, the worker stops PostgreSQL (pg_ctl) and removes its directory.
    _postgres_bindir()
    before = _pg_dirs()
    address = cluster.client.scheduler.address
    name = sorted(w.name for w in cluster.workers())[1]
    client = subprocess.Popen([sys.executable, "-c", CLIENT_DB, address, name, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    pid = kill_client_after_its_pid(client, lambda pid: len(_pg_dirs() - before) == 1)
    # Bounded wait on the condition: the lease (2 s), its watchdog's period, pg_ctl's fast stop.
    wait_until_gone(lambda: not (alive(pid) or _pg_dirs() - before))
    assert not alive(pid), f"postgres {pid} outlived its client on the worker"
    assert _pg_dirs() <= before


def test_an_interrupted_cli_leaves_no_placed_topology_process_on_any_worker(engine_path, tmp_path, token):
    # archlab's backends and proxy on worker "1", the load on "0": Ctrl-C under load leaves
    # nothing behind, on either worker or here.
    systems = LB2.replace("options = { loops = 1 } }", 'options = { loops = 1 }, worker = "1" }') \
                 .replace('front = { proxy = "round-robin" }', 'front = { proxy = "round-robin", worker = "1" }')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW.replace('"500ms"', '"30s"'), load=LOAD, cluster='address = "local:2"\nshards = 1\nload_hosts = ["0"]',
                              factors='architecture = ["system:lb-2"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]') + systems)
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    code, err = interrupt_when_running(cli, token, [r"archlab-engine\S* load", r"archlab-engine\S* proxy"], "the placed topology under load")
    assert code == 130, err[-3000:]
    assert wait_no_process(token) == []


def test_an_interrupted_cli_leaves_no_system_on_any_worker(engine_path, tmp_path, token):
    # `archlab run` with its system on one worker and its load on the other of a local cluster:
    # Ctrl-C while the system is under load leaves nothing behind, on either worker or here.
    spec = _placed_spec(tmp_path, engine_path, "1", duration="30s", cluster='address = "local:2"\nshards = 1\nload_hosts = ["0"]')
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    code, err = interrupt_when_running(cli, token, [r"archlab-engine\S* load", r"archlab-engine\S* serve"], "the cell under load")
    assert code == 130, err[-3000:]
    assert wait_no_process(token) == []


def test_only_the_directories_of_dead_workers_are_removed(tmp_path):
    from archlab.cluster.remote import remove_orphaned_dirs

    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, alive = tmp_path / f"archlab-remote-{gone.pid}-x1", tmp_path / f"archlab-remote-{os.getpid()}-x2"
    unrelated = [tmp_path / "archlab-remote-abc", tmp_path / "archlab-remote-noname", tmp_path / "other-1-2"]
    for d in (dead, alive, *unrelated):
        d.mkdir()
        (d / "file").write_text("x")
    assert remove_orphaned_dirs(tmp_path) == [dead]
    assert not dead.exists() and alive.is_dir() and all(d.is_dir() for d in unrelated)
