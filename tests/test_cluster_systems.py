"""Cells of `[[systems]]` entries on a real Dask `LocalCluster` of this machine (two worker
processes over TCP on loopback, no mocks). Their load goes through the same shard executor as a
server cell's: a system started from a plain command (`archlab-engine serve`) and a remote
target (a server this test started) are each loaded by two shards on the two workers, and the
merged row counts exactly the sum of the shards' requests, its histogram their sum; the started
system is still measured from `/proc` over the shards' window. Each window is 0.5 s."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import spec_text

from archlab.cluster import ShardedLoad, open_cluster
from archlab.lab.load_merge import read_interval_log
from archlab.lab.session import run_spec
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
    assert probe["start"]["source"] == "before load start" and eng.cost is not None and eng.cost.cpu_us_per_request > 0
    assert far.cost is None

