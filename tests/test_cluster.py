"""archlab on a real Dask cluster on this machine: a scheduler and two worker processes started
as `dask scheduler` / `dask worker --resources load=1` over TCP on loopback (no mocks). A sharded
closed-model cell completes as many requests as the unsharded one within the variance of the
counts; the merged histogram is the sum of the shards'; open-model shards together achieve the
offered rate; a simulated sweep is bit-identical locally and on the cluster; an unreachable
scheduler, more shards than load workers and clocks too far apart are refused with one line and
leave nothing half-written; a load worker killed mid-cell (a `LocalCluster`, whose nanny brings
it back) stops the run with that repetition unrecorded, and `--resume` completes it. Each load
run is a 1 s window."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import alive, cli_env, interrupt_when_running, kill_client_after_its_pid, processes_with_token, run_cli, spec_text, start_cli, wait_no_process, wait_until_gone

from archlab.cluster import ClusterFault, ShardedLoad, open_cluster
from archlab.lab.foreign import free_port
from archlab.lab.load_merge import read_interval_log
from archlab.errors import ArchlabError
from archlab.lab.session import resume_run, run_spec
from archlab.store import Store

REPO = Path(__file__).resolve().parents[1]
DASK = Path(sys.executable).with_name("dask")
WINDOW = 'name = "cluster"\nrepetitions = 1\nwarmup = "200ms"\nduration = "1s"'
# Relative distance allowed between offered and completed rates in a 1 s window (as in
# tests/test_lab_load_models.py: only the requests in flight at the window's edges move).
RATE_TOLERANCE = 0.10


def _started(proc: subprocess.Popen, pattern: str, timeout_s: float = 60.0) -> re.Match:
    """Read ``proc``'s stderr until a line matches ``pattern`` (the readiness line)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if m := re.search(pattern, line):
            return m
    raise AssertionError(f"no line matching {pattern!r}: {''.join(seen)[-2000:]}")


@pytest.fixture(scope="module")
def scheduler():
    """`dask scheduler` on a free loopback port and two load workers (one thread each)."""
    if not DASK.exists():
        pytest.fail(f"the `dask` command is required ({DASK} missing): run scripts/bootstrap test", pytrace=False)
    procs: list[subprocess.Popen] = []
    try:
        sched = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env())
        procs.append(sched)
        address = _started(sched, r"Scheduler at:\s+(tcp://127\.0\.0\.1:\d+)").group(1)
        for k in range(2):
            w = subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
                                  "--resources", "load=1", "--name", f"load-{k}", "--no-dashboard"],
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env())
            procs.append(w)
            _started(w, r"Registered to:")
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture(scope="module")
def cluster(scheduler):
    with open_cluster(scheduler) as c:
        c.client.wait_for_workers(2, timeout=30)
        yield c


def write_spec(tmp_path: Path, load: str, factors: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(spec_text(experiment=WINDOW, load=load, factors=factors))
    return path


def only_row(store: Store, run_id: str):
    view = store.load_run(run_id)
    assert view.manifest.status == "complete" and len(view.rows) == 1
    row = view.rows[0]
    assert row.status == "ok", row.error
    return row


def counts(path: Path) -> Counter:
    total = Counter()
    for _, _, h in read_interval_log(path.read_text()).intervals:
        total.update({i.value_iterated_to: i.count_at_value_iterated_to for i in h.get_recorded_iterator()})
    return total


CLOSED = ('model = "closed"\nthink_time = "exp:5ms"\ntimeout = "2s"', 'architecture = ["single-thread"]\nworkload = ["/echo?size=32"]\nconcurrency = [4]')


def test_a_sharded_closed_cell_matches_the_unsharded_one(engine_path, cluster, tmp_path):
    store = Store(tmp_path / "runs")
    spec = write_spec(tmp_path, *CLOSED)
    local = only_row(store, run_spec(spec, store).run_id)
    sharded_handle = run_spec(spec, store, load_executor=ShardedLoad(cluster, 2))
    sharded = only_row(store, sharded_handle.run_id)
    rep = sharded.summary_path.parent
    shards = json.loads((rep / "shards.json").read_text())
    assert [s["users"] for s in shards["shard"]] == [2, 2] and len({s["worker"] for s in shards["shard"]}) == 2
    assert len({s["seed"] for s in shards["shard"]}) == 2
    for s in shards["shard"]:
        assert isinstance(s["generator_bound"], bool) and abs(s["clock_offset_start"]["offset_s"]) < 1.0
        assert s["clock_offset_start"]["uncertainty_s"] >= 0 and s["clock_offset_end"]["measured_at_s"] > s["clock_offset_start"]["measured_at_s"]
    # Request counts: with exponential think times (mean 5 ms, far above the ~0.1 ms an echo
    # takes) each user completes a renewal process whose count over the window is close to
    # Poisson, variance = mean; a total over users has the variance of its own count, and the
    # difference of two independent totals the sum of both. 4 standard deviations.
    n_local, n_sharded = local.measurement.requests, sharded.measurement.requests
    bound = 4 * (n_local + n_sharded) ** 0.5
    assert abs(n_local - n_sharded) <= bound, (n_local, n_sharded, bound)
    # The merged row is the sum of its shards, and its histogram their histograms' sum, exactly.
    shard_docs = [json.loads((rep / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    assert n_sharded == sum(d["requests"] for d in shard_docs) == sum(s["requests"] for s in shards["shard"])
    merged = counts(rep / "hdr.log")
    assert merged == counts(rep / "shards" / "shard-0" / "hdr.log") + counts(rep / "shards" / "shard-1" / "hdr.log")
    assert sum(merged.values()) == n_sharded
    assert sharded.measurement.generator_bound == any(d["generator"]["bound"] for d in shard_docs)
    # Where each part ran is in the manifest.
    facts = store.read_manifest(sharded_handle.run_id).document["load_hosts"]
    assert facts[0]["shards"] == 2 and {w["name"] for w in facts[0]["workers"]} == {"load-0", "load-1"}
    assert len(facts[0]["clock_offsets"]) == 2


def test_open_model_shards_together_achieve_the_offered_rate(engine_path, cluster, tmp_path):
    store = Store(tmp_path / "runs")
    load = 'model = "open"\nschedule = "constant"\nconnections = 4\nmax_connections = 16'
    spec = write_spec(tmp_path, load, 'architecture = ["single-thread"]\nworkload = ["/echo?size=16"]\nrate = [400]')
    row = only_row(store, run_spec(spec, store, load_executor=ShardedLoad(cluster, 2)).run_id)
    shards = json.loads((row.summary_path.parent / "shards.json").read_text())
    assert [s["rate_per_s"] for s in shards["shard"]] == [200.0, 200.0]
    # Each constant schedule plans exactly rate x window arrivals, to one at each edge.
    assert row.measurement.offered_rps == pytest.approx(400, abs=4)
    assert row.measurement.throughput_rps == pytest.approx(row.measurement.offered_rps, rel=RATE_TOLERANCE)


def test_a_simulated_sweep_is_bit_identical_on_the_cluster(scheduler, tmp_path):
    model = REPO / "experiments" / "seed000-table8.1.toml"
    args = ["simulate", str(model), "--horizon", "20", "--replications", "3"]
    local = run_cli(*args, "--json", str(tmp_path / "local.jsonl"))
    remote = run_cli(*args, "--json", str(tmp_path / "cluster.jsonl"), "--cluster", scheduler)
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    lines = (tmp_path / "local.jsonl").read_text().splitlines()
    assert len(lines) == 9 and (tmp_path / "cluster.jsonl").read_text().splitlines() == lines
    assert local.stdout == remote.stdout


def test_the_cli_runs_a_spec_on_the_cluster(engine_path, scheduler, tmp_path):
    store = tmp_path / "runs"
    done = run_cli("run", str(write_spec(tmp_path, *CLOSED)), "--store", str(store), "--no-report", "--cluster", scheduler)
    assert done.returncode == 0, done.stderr
    (summary,) = store.glob("*/cells/*/rep-1/summary.json")
    shards = json.loads(summary.with_name("shards.json").read_text())
    assert shards["shards"] == 2 and json.loads(summary.read_text())["connections"] == 4  # --shards defaults to the load workers


def test_a_spec_cluster_section_runs_like_the_flags_and_the_flags_win(engine_path, scheduler, tmp_path):
    store = tmp_path / "runs"
    load, factors = CLOSED
    # The spec names one load host: its one shard runs there, and the manifest says the spec chose.
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=load, factors=factors,
                              cluster=f'address = "{scheduler}"\nshards = 1\nload_hosts = ["load-1"]'))
    done = run_cli("run", str(spec), "--store", str(store), "--no-report")
    assert done.returncode == 0, done.stderr
    (summary,) = store.glob("*/cells/*/rep-1/summary.json")
    shards = json.loads(summary.with_name("shards.json").read_text())
    assert shards["shards"] == 1 and shards["shard"][0]["users"] == 4
    names = {w["address"]: w["name"] for w in json.loads(next(store.glob("*/manifest.json")).read_text())["load_hosts"][0]["workers"]}
    assert names[shards["shard"][0]["worker"]] == "load-1"
    (facts,) = json.loads(next(store.glob("*/manifest.json")).read_text())["load_hosts"]
    assert facts["chosen"] == {"address": scheduler, "address_from": "[cluster] address", "shards": 1, "shards_from": "[cluster] shards",
                               "load_hosts": ["load-1"], "server_host": None}
    # A spec whose scheduler is unreachable runs on the one --cluster names, with --shards' count.
    other = tmp_path / "runs-flags"
    unreachable = free_port("127.0.0.1")
    spec.write_text(spec_text(experiment=WINDOW, load=load, factors=factors, cluster=f'address = "tcp://127.0.0.1:{unreachable}"\nshards = 1'))
    done = run_cli("run", str(spec), "--store", str(other), "--no-report", "--cluster", scheduler, "--shards", "2")
    assert done.returncode == 0, done.stderr
    (facts,) = json.loads(next(other.glob("*/manifest.json")).read_text())["load_hosts"]
    assert (facts["chosen"]["address_from"], facts["chosen"]["shards_from"], facts["shards"]) == ("--cluster", "--shards", 2)
    # A load host the cluster does not have is one line, before any run exists.
    bad = tmp_path / "runs-bad"
    spec.write_text(spec_text(experiment=WINDOW, load=load, factors=factors, cluster=f'address = "{scheduler}"\nload_hosts = ["load-9"]'))
    done = run_cli("run", str(spec), "--store", str(bad), "--no-report")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert re.search(r"cluster\.load_hosts: \['load-9'\] not among the load workers of tcp://.*\['load-0', 'load-1'\]", lines[0])
    assert not list(bad.glob("*/manifest.json"))


def test_bad_clusters_are_refused_in_one_line_before_any_run(scheduler, engine_path, tmp_path):
    spec = str(write_spec(tmp_path, *CLOSED))
    store = str(tmp_path / "runs")
    cases = [
        (["--cluster", f"tcp://127.0.0.1:{free_port('127.0.0.1')}"], 1, r"--cluster tcp://127\.0\.0\.1:\d+: no Dask scheduler answered within 5 s"),
        (["--cluster", "127.0.0.1:8786"], 2, r"--cluster: expected tcp://HOST:PORT .* or local:N .*, got '127\.0\.0\.1:8786'"),
        (["--cluster", "local:0"], 2, r"--cluster: expected .*, got 'local:0'"),
        (["--cluster", scheduler, "--shards", "3"], 1, r"--shards 3: the cluster tcp://.* has 2 load worker\(s\)"),
        (["--shards", "2"], 2, r"--shards: expected --shards only with --cluster or a spec with a \[cluster\] section, got 2"),
    ]
    for extra, status, message in cases:
        done = run_cli("run", spec, "--store", store, "--no-report", *extra)
        assert done.returncode == status, (extra, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("archlab: error: ") and re.search(message, lines[0]), (extra, done.stderr)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*/manifest.json"))


def test_clocks_too_far_apart_stop_the_run_resumably(engine_path, cluster, tmp_path):
    store = Store(tmp_path / "runs")
    created = []
    # No offset is within 0 s once its measuring round trip is counted: the refusal is certain.
    with pytest.raises(ClusterFault, match=r"worker tcp://.*: its clock is [-+][0-9.]+ ms \(± [0-9.]+ ms\) from this host's, beyond the 0 ms"):
        run_spec(write_spec(tmp_path, *CLOSED), store, on_created=created.append, load_executor=ShardedLoad(cluster, 2, max_offset_s=0.0))
    run_id = created[0].run_id
    view = store.load_run(run_id)
    assert view.manifest.status == "failed" and view.rows == []  # nothing half-written in the catalog
    resumed = resume_run(run_id, store, load_executor=ShardedLoad(cluster, 2))
    assert only_row(store, resumed.run_id).measurement.requests > 0


def _kill_parent(pid: int, killed: list) -> bool:
    """SIGKILL the parent of ``pid`` (the worker process that started it) and note it; False
    when either is gone already."""
    try:
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(parent, signal.SIGKILL)
    except (OSError, ValueError):
        return False
    killed.append(parent)
    return True


def _kill_a_load_worker_when_its_shard_runs(token: str, killed: list, stop: threading.Event) -> None:
    """Wait for an `archlab-engine load` process of this test, then SIGKILL its parent (the
    worker process that runs the shard)."""
    while not stop.is_set():
        for pid, cmd in processes_with_token(token):
            if ("archlab-engine load" in cmd or re.search(r"archlab-engine\S* load", cmd)) and _kill_parent(pid, killed):
                return
        stop.wait(0.01)


def test_a_worker_killed_mid_cell_fails_the_repetition_and_resume_completes_it(engine_path, tmp_path, token):
    store = Store(tmp_path / "runs")
    created: list = []
    with open_cluster("local:2") as local:
        local.client.wait_for_workers(2, timeout=60)
        killed: list[int] = []
        stop = threading.Event()
        killer = threading.Thread(target=_kill_a_load_worker_when_its_shard_runs, args=(token, killed, stop), daemon=True)
        killer.start()
        try:
            with pytest.raises(ClusterFault, match=r"load shards lost: shard \d: its worker was lost mid-cell"):
                run_spec(write_spec(tmp_path, *CLOSED), store, on_created=created.append, load_executor=ShardedLoad(local, 2))
        finally:
            stop.set()
            killer.join(5)
        assert killed, "no load shard was seen running"
        run_id = created[0].run_id
        view = store.load_run(run_id)
        assert view.manifest.status == "failed" and view.rows == []
        error = (store.run_dir(run_id) / "cells" / "single-thread__echo-size-32__c4" / "rep-1" / "error.txt").read_text()
        assert "its worker was lost mid-cell" in error
        # The nanny brings the worker back; the resumed run completes the repetition.
        local.client.wait_for_workers(2, timeout=60)
        deadline = time.monotonic() + 60
        while len(local.load_workers()) < 2 and time.monotonic() < deadline:
            local.client.wait_for_workers(2, timeout=10)
        resumed = resume_run(run_id, store, load_executor=ShardedLoad(local, 2))
        row = only_row(store, resumed.run_id)
        assert row.measurement.requests > 0
    assert [p for p, cmd in processes_with_token(token) if "archlab-engine" in cmd] == []


def test_no_dask_on_the_local_path():
    # The default run path and the CLI's parser never import Dask (item 4 of the issue).
    code = ("import importlib, sys, archlab.lab.session, archlab.lab.runner, archlab.sim.cli\n"
            "importlib.import_module('archlab.cli.main').build_parser(['run'])\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed') or m.startswith('archlab.cluster'))\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=60)
    assert done.returncode == 0, done.stderr


def test_cluster_errors_are_archlab_errors():
    from archlab.cluster import ClusterError

    assert issubclass(ClusterError, ArchlabError) and issubclass(ClusterFault, ArchlabError)


# --- processes of a system under test on a named worker (archlab.cluster.remote) -------------

SERVE = ["{engine}", "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"]


def test_a_server_on_a_named_worker_is_started_probed_and_stopped_there(engine_path, cluster, tmp_path):
    import http.client

    from archlab.cluster.remote import RemoteHost
    from archlab.lab import probes

    worker = next(w for w in cluster.workers() if w.name == "load-1")
    (worker_pid,) = cluster.client.run(os.getpid, workers=[worker.address]).values()
    with RemoteHost(cluster, "load-1") as host:
        server = host.start("server", SERVE, tmp_path / "server.stderr")
        # It runs as a child of that worker process, in its own session.
        assert int(Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == worker_pid
        address = server.expect("listening ", 10.0).split(" ", 1)[1].strip()
        before = host.sample(server)
        ip, port = address.rsplit(":", 1)
        for _ in range(50):
            conn = http.client.HTTPConnection(ip, int(port), timeout=5)
            conn.request("GET", "/echo?size=16")
            assert conn.getresponse().status == 200
            conn.close()
        after = host.sample(server)
        cost = probes.cost_between(before, after, 50)
        # The server's own report, read on the worker, counted the 50 requests: each needed at
        # least one socket read, and some CPU time.
        assert before.rusage is not None and after.rusage is not None and cost.cpu_us_per_request > 0
        assert after.rusage.read_syscalls - before.rusage.read_syscalls >= 50
        assert server.poll() is None and host.pids() == [server.pid]
        code = host.stop(server)
        assert code is not None and code in (0, -signal.SIGTERM) and not alive(server.pid)
        assert (tmp_path / "server.stderr").exists()
        with pytest.raises(ArchlabError, match=r"host 'load-7': no worker of that name in the cluster tcp://\S+ \(its workers: \['load-0', 'load-1'\]"):
            RemoteHost(cluster, "load-7")


CLIENT = """
import sys, time
from archlab.cluster import open_cluster
from archlab.cluster.remote import RemoteHost
cluster = open_cluster(sys.argv[1])
host = RemoteHost(cluster, "load-0", lease_s=2.0)
server = host.start("server", {serve!r}, __import__("pathlib").Path(sys.argv[2]))
server.expect("listening ", 10.0)
print(server.pid, flush=True)
time.sleep(600)
"""


def test_no_process_outlives_a_client_killed_outright(engine_path, scheduler, tmp_path):
    # A client killed with SIGKILL runs no finally block: the lease on the worker ends its server.
    client = subprocess.Popen([sys.executable, "-c", CLIENT.format(serve=SERVE), scheduler, str(tmp_path / "s.stderr")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    pid = kill_client_after_its_pid(client)
    # Bounded wait on the condition: the lease (2 s) plus its watchdog's period and the grace.
    wait_until_gone(lambda: not alive(pid))
    assert not alive(pid), f"server {pid} outlived its client on the worker"


def test_an_interrupted_client_stops_its_remote_processes(engine_path, cluster, tmp_path):
    from archlab.cluster.remote import RemoteHost

    pids = []
    with pytest.raises(KeyboardInterrupt):
        with RemoteHost(cluster, "load-0") as host:
            for k in range(2):
                server = host.start("server", SERVE, tmp_path / f"s{k}.stderr")
                server.expect("listening ", 10.0)
                pids.append(server.pid)
            raise KeyboardInterrupt
    assert len(pids) == 2 and not any(alive(p) for p in pids)


def test_a_spec_places_its_servers_on_a_named_worker(engine_path, scheduler, tmp_path):
    store = tmp_path / "runs"
    load, factors = CLOSED
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=load, factors=factors,
                              cluster=f'address = "{scheduler}"\nshards = 1\nload_hosts = ["load-0"]\nserver_host = "load-1"'))
    done = run_cli("run", str(spec), "--store", str(store), "--no-report")
    assert done.returncode == 0, done.stderr
    (summary,) = store.glob("*/cells/*/rep-1/summary.json")
    rep = summary.parent
    (facts,) = json.loads(next(store.glob("*/manifest.json")).read_text())["load_hosts"]
    assert facts["server_host"]["name"] == "load-1" and facts["chosen"]["server_host"] == "load-1"
    # The server's accounting came from its worker: rusage read there, over the window's requests.
    probe = json.loads((rep / "probe.json").read_text())
    assert probe["start"]["rusage"] is not None and probe["cost"]["cpu_us_per_request"] > 0
    assert probe["server_exit"] in ("exit code 0", "killed by signal 15 (SIGTERM)")
    assert (rep / "server.stderr").exists() and json.loads(summary.read_text())["requests"] > 0


def _kill_the_worker_of_a_server(token: str, killed: list, stop: threading.Event) -> None:
    """Once a shard's `archlab-engine load` of this test runs, SIGKILL the worker process that
    runs the `archlab-engine serve` it loads (the server's parent)."""
    while not stop.is_set():
        procs = processes_with_token(token)
        if any(re.search(r"archlab-engine\S* load", cmd) for _, cmd in procs):
            for pid, cmd in procs:
                if re.search(r"archlab-engine\S* serve", cmd) and _kill_parent(pid, killed):
                    return
        stop.wait(0.01)


def test_a_server_host_lost_mid_cell_fails_the_repetition_and_resume_completes_it(engine_path, tmp_path, token):
    from archlab.cluster.remote import RemoteHost

    store = Store(tmp_path / "runs")
    created: list = []
    with open_cluster("local:2") as local:
        local.client.wait_for_workers(2, timeout=60)
        names = sorted(w.name for w in local.workers())
        load_host, server_host = (names[0],), names[1]
        killed: list[int] = []
        stop = threading.Event()
        killer = threading.Thread(target=_kill_the_worker_of_a_server, args=(token, killed, stop), daemon=True)
        killer.start()
        try:
            with pytest.raises(ClusterFault, match=rf"server host '{server_host}' lost mid-cell"):
                executor = ShardedLoad(local, 1, load_hosts=load_host)
                with RemoteHost(local, server_host) as executor.server_host:
                    run_spec(write_spec(tmp_path, *CLOSED), store, on_created=created.append, load_executor=executor)
        finally:
            stop.set()
            killer.join(5)
        assert killed, "no remote server was seen under load"
        run_id = created[0].run_id
        view = store.load_run(run_id)
        assert view.manifest.status == "failed" and view.rows == []  # nothing half-written in the catalog
        # The nanny brings the worker back under its name; the resumed run completes the repetition there.
        deadline = time.monotonic() + 60
        while server_host not in {w.name for w in local.workers()} and time.monotonic() < deadline:
            local.client.wait_for_workers(2, timeout=10)
        executor = ShardedLoad(local, 1, load_hosts=load_host)
        with RemoteHost(local, server_host) as executor.server_host:
            resumed = resume_run(run_id, store, load_executor=executor)
        assert only_row(store, resumed.run_id).measurement.requests > 0
    assert [p for p, cmd in processes_with_token(token) if "archlab-engine" in cmd] == []


def test_an_interrupted_cli_leaves_no_process_on_any_worker(engine_path, tmp_path, token):
    # `archlab run` with its servers on one worker and its load on another of a local cluster:
    # Ctrl-C while the server is under load leaves nothing behind, on either worker or here.
    load, factors = CLOSED
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment='name = "cluster"\nrepetitions = 1\nwarmup = "200ms"\nduration = "30s"', load=load,
                              factors=factors, cluster='address = "local:2"\nshards = 1\nload_hosts = ["0"]\nserver_host = "1"'))
    cli = start_cli("run", str(spec), "--store", str(tmp_path / "runs"), "--no-report")
    code, err = interrupt_when_running(cli, token, [r"archlab-engine\S* load", r"archlab-engine\S* serve"], "the cell under load")
    assert code == 130, err[-3000:]
    assert "Resume it with" in err
    assert wait_no_process(token) == []


def test_the_lease_holds_while_the_workers_actor_is_busy(engine_path, cluster, tmp_path):
    # Renewals are served on the worker's event loop, not behind a slow call on the actor's one
    # thread: a call that blocks the actor for 2.5 leases does not end the client's processes.
    from archlab.cluster.remote import RemoteHost

    with RemoteHost(cluster, "load-0", lease_s=2.0) as host:
        server = host.start("server", SERVE, tmp_path / "server.stderr")
        server.expect("listening ", 10.0)
        with pytest.raises(ArchlabError, match=r"did not print 'never' within 5 s"):
            server.expect("never", 5.0)  # the server prints nothing more: the actor waits 5 s
        assert server.poll() is None and alive(server.pid) and host.pids() == [server.pid]
