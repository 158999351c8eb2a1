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
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import cli_env, processes_with_token, run_cli, spec_text

from archlab.cluster import ClusterFault, ShardedLoad, open_cluster
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_clusters_are_refused_in_one_line_before_any_run(scheduler, engine_path, tmp_path):
    spec = str(write_spec(tmp_path, *CLOSED))
    store = str(tmp_path / "runs")
    cases = [
        (["--cluster", f"tcp://127.0.0.1:{free_port()}"], 1, r"--cluster tcp://127\.0\.0\.1:\d+: no Dask scheduler answered within 5 s"),
        (["--cluster", "127.0.0.1:8786"], 2, r"--cluster: expected tcp://HOST:PORT .* or local:N .*, got '127\.0\.0\.1:8786'"),
        (["--cluster", "local:0"], 2, r"--cluster: expected .*, got 'local:0'"),
        (["--cluster", scheduler, "--shards", "3"], 1, r"--shards 3: the cluster tcp://.* has 2 load worker\(s\)"),
        (["--shards", "2"], 2, r"--shards: expected --shards only with --cluster, got 2"),
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


def _kill_a_load_worker_when_its_shard_runs(token: str, killed: list, stop: threading.Event) -> None:
    """Wait for an `archlab-engine load` process of this test, then SIGKILL its parent (the
    worker process that runs the shard)."""
    while not stop.is_set():
        for pid, cmd in processes_with_token(token):
            if "archlab-engine load" in cmd or re.search(r"archlab-engine\S* load", cmd):
                try:
                    parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    os.kill(parent, signal.SIGKILL)
                except (OSError, ValueError):
                    continue
                killed.append(parent)
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
