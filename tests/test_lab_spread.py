"""A topology with several fronts (seed 002's two middlewares): the spec's `copies` of a front,
the cell's clients split over one load generator per front (archlab.lab.spread), their results
merged exactly, on real memcached servers and real middlewares over loopback."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO, missing_dependency, processes_with_token
from test_lab_topology import _refusal, rep_dir, run, validate_file, pid_alive

from archlab.lab.load_merge import add_histograms, read_interval_log
from archlab.lab.spread import shard_params
from archlab.spec.topology import memcached_workload

TWO = """
[[systems]]
name = "mw2"
backends = { preset = "memcached", copies = 2 }
front = { middleware = "seed", workers = 2, copies = 2 }
preload = 100
load = { protocol = "memcached", key_pattern = "R:R", key_min = 0, key_max = 99 }
"""


def test_two_middlewares_each_serve_their_own_generator_and_the_counts_merge_exactly(engine_path, tmp_path, token):
    if shutil.which("memcached") is None:
        missing_dependency("memcached", "it is not installed", "the Debian package `memcached`")
    factors = 'architecture = ["system:mw2"]\nworkload = ["/memcached?ratio=1:1"]\nconcurrency = [5]'
    store, view = run(tmp_path, TWO, factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    d = rep_dir(store, view, row)
    probe = json.loads((d / "probe.json").read_text())
    assert [p["process"] for p in probe["processes"]] == ["backend-0", "backend-1", "front-0", "front-1"]
    fronts = {p["address"]: p for p in probe["processes"] if p["process"].startswith("front")}
    shards = json.loads((d / "shards.json").read_text())["shard"]
    # 5 clients over 2 fronts: 3 and 2, each generator aimed at its own front.
    assert [s["connections"] for s in shards] == [3, 2]
    assert sorted(s["target"] for s in shards) == sorted(fronts)
    docs = [json.loads((d / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    merged = json.loads((d / "summary.json").read_text())
    assert merged["requests"] == sum(doc["requests"] for doc in docs) == row.measurement.requests
    for key in ("sets", "gets", "hits"):
        assert merged["memcached"][key] == sum(doc["memcached"][key] for doc in docs), key
    assert merged["memcached"]["misses"] == 0  # every key preloaded on both servers
    # The merged log holds every shard's recorded latency: histograms added, not averaged.
    count = lambda text: add_histograms([h for _, _, h in read_interval_log(text).intervals]).get_total_count()  # noqa: E731
    shard_logs = [(d / "shards" / f"shard-{k}" / "hdr.log").read_text() for k in range(2)]
    assert count((d / "hdr.log").read_text()) == sum(count(t) for t in shard_logs) > 0
    for s, doc in zip(shards, docs):
        # What front k relayed (its own statistics, warm-up included) is what generator k sent:
        # its measured and warm-up requests, plus at most one in flight per connection at each edge.
        relayed = fronts[s["target"]]["final_counters"]["totals"]["requests"]
        sent = doc["requests"] + doc["warmup"]["requests"]
        assert sent <= relayed <= sent + 2 * s["connections"], (relayed, sent, s)
    assert not any(pid_alive(p["pid"]) for p in probe["processes"])
    assert processes_with_token(token) == []


def test_without_a_front_the_load_is_spread_over_the_backends(engine_path, tmp_path, token):
    # Seed 002 §2.2: clients straight at two memcached servers, no middleware between.
    if shutil.which("memcached") is None:
        missing_dependency("memcached", "it is not installed", "the Debian package `memcached`")
    systems = TWO.replace('front = { middleware = "seed", workers = 2, copies = 2 }\n', "")
    factors = 'architecture = ["system:mw2"]\nworkload = ["/memcached?ratio=0:1"]\nconcurrency = [2]'
    store, view = run(tmp_path, systems, factors)
    (row,) = view.rows
    assert row.status == "ok", row.error
    d = rep_dir(store, view, row)
    probe = json.loads((d / "probe.json").read_text())
    assert [p["process"] for p in probe["processes"]] == ["backend-0", "backend-1"]
    shards = json.loads((d / "shards.json").read_text())["shard"]
    assert sorted(s["target"] for s in shards) == sorted(p["address"] for p in probe["processes"])
    docs = [json.loads((d / "shards" / f"shard-{k}" / "summary.json").read_text()) for k in range(2)]
    assert all(doc["requests"] > 0 and doc["memcached"]["misses"] == 0 for doc in docs)  # both servers preloaded
    assert row.measurement.requests == sum(doc["requests"] for doc in docs)
    assert processes_with_token(token) == []


def test_shards_split_the_clients_aim_at_their_front_and_keep_their_own_records(tmp_path):
    params = {"model": "closed", "connections": 5, "seed": 7, "target": "127.0.0.1:1", "records": "/x/records.bin"}
    a, b = shard_params(params, ["127.0.0.1:11", "127.0.0.1:12"], tmp_path)
    assert (a["connections"], b["connections"]) == (3, 2)
    assert (a["target"], b["target"]) == ("127.0.0.1:11", "127.0.0.1:12")
    assert a["seed"] != b["seed"] and 7 not in (a["seed"], b["seed"])  # each draws its own stream
    assert (a["records"], b["records"]) == (str(tmp_path / "shard-0" / "records.bin"), str(tmp_path / "shard-1" / "records.bin"))


@pytest.mark.parametrize(
    ("systems", "factors", "key", "words"),
    [
        (TWO.replace("copies = 2 }\npreload", "copies = 0 }\npreload"), None, "systems[0].front.copies", "1..=16"),
        (TWO.replace("copies = 2 }\npreload", "copies = 17 }\npreload"), None, "systems[0].front.copies", "1..=16"),
        (TWO.replace("copies = 2 }\npreload", 'copies = "two" }\npreload'), None, "systems[0].front.copies", "two"),
        (TWO, 'architecture = ["system:mw2"]\nworkload = ["/memcached?ratio=1:1"]\nconcurrency = [1, 4]', "factors.concurrency", "levels >= 2"),
    ],
)
def test_bad_fronts_are_refused_naming_the_key(tmp_path, token, systems, factors, key, words):
    error = _refusal(tmp_path, systems, factors or 'architecture = ["system:mw2"]\nworkload = ["/memcached?ratio=1:1"]\nconcurrency = [4]')
    assert error.field == key, str(error)
    assert words in str(error)
    assert processes_with_token(token) == []


@pytest.mark.parametrize(("name", "fronts"), [("seed002-writes", {2}), ("seed002-multiget", {2}), ("seed002-2kr", {1, 2})])
def test_the_seed002_programme_validates(name, fronts):
    exp = validate_file(REPO / "experiments" / f"{name}.toml")
    assert {s.topology.front.copies for s in exp.systems} == fronts
    assert all(s.topology.preload > 0 and s.topology.front.name == "seed" for s in exp.systems)
    for w in next(f.levels for f in exp.factors if f.name == "workload"):
        params = memcached_workload(w)
        # A multi-get carries at most the gets left in the ratio's cycle (memtier): one k-key
        # multi-get per set needs ratio 1:k.
        assert params.get("multi_get", 1) == 1 or params["ratio"] == f"1:{params['multi_get']}", w
