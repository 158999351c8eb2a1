"""The split of a cell's load into shards and the exact merge of their outputs, without a
cluster: users and rates add up exactly, seeds differ per shard and across repetitions, an
impossible split is refused naming ``--shards``; and on real ``archlab-engine load`` outputs
(two generators against one real server on loopback), the merge reproduces each generator's own
headline statistics from its interval log (so the quantile convention is the engine's), its
histogram is the bucket-by-bucket sum of the shards', and counts are sums."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from fractions import Fraction

import pytest
from hdrh.histogram import HdrHistogram

from archlab.lab.load_merge import latency_summary_us, merge_shards, read_interval_log
from archlab.lab.load_shards import shard_seed, split_integer, split_load, split_params, with_outputs
from archlab.errors import InvalidValue
from archlab.lab.processes import ProcessGroup
from archlab.latency.readers.hdr import read_hdr_log
from archlab.store.summary import parse_summary

CLOSED = ["/e/archlab-engine", "load", "--target", "127.0.0.1:1", "--path", "/echo", "--connections", "10", "--duration", "1s",
          "--think-time", "exp:5ms", "--seed", "24301", "--json", "/r/summary.json", "--hdr-log", "/r/hdr.log"]
OPEN = ["/e/archlab-engine", "load", "--target", "127.0.0.1:1", "--path", "/echo", "--model", "open", "--arrivals", "poisson",
        "--connections", "4", "--max-connections", "3", "--rate", "1000", "--seed", "7", "--json", "/r/s.json", "--hdr-log", "/r/h.log"]


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_closed_users_are_divided_exactly_and_seeds_derived():
    plans = split_load(CLOSED, 3)
    assert [p.users for p in plans] == [4, 3, 3] == [int(flag(p.argv, "--connections")) for p in plans]
    seeds = [int(flag(p.argv, "--seed")) for p in plans]
    assert len(set(seeds)) == 3 and 24301 not in seeds and all(0 <= s < 2**63 for s in seeds)
    # Reproducible from the cell's seed alone; repetition r+1 (cell seed + 1) shares no shard seed.
    assert seeds == [shard_seed(24301, k) for k in range(3)]
    assert not set(seeds) & {shard_seed(24302, k) for k in range(3)}
    # Everything else is the cell's command.
    for p in plans:
        assert [a for i, a in enumerate(p.argv) if i == 0 or p.argv[i - 1] not in ("--connections", "--seed")] == \
               [a for i, a in enumerate(CLOSED) if i == 0 or CLOSED[i - 1] not in ("--connections", "--seed")]


def test_open_rates_add_up_exactly():
    plans = split_load(OPEN, 3)
    rates = [Fraction(flag(p.argv, "--rate")) for p in plans]
    assert abs(sum(rates) - 1000) < Fraction(1, 10**9)  # 333.333... each, printed to full float precision
    assert [flag(p.argv, "--connections") for p in plans] == ["2", "1", "1"]
    assert [flag(p.argv, "--max-connections") for p in plans] == ["1", "1", "1"]  # room for one each, at least
    assert split_integer(7, 7) == [1] * 7 and sum(split_integer(1001, 4)) == 1001


def test_impossible_splits_name_the_flag():
    with pytest.raises(InvalidValue, match=r"--shards: expected at most the cell's 10 closed-model users .* got 11"):
        split_load(CLOSED, 11)
    with pytest.raises(InvalidValue, match="--shards: expected an integer >= 1, got 0"):
        split_load(CLOSED, 0)


def test_outputs_are_replaced_by_the_shards_own():
    argv = with_outputs(CLOSED + ["--records", "/r/records.bin"], "/w/archlab-engine", {"--json": "/t/s.json", "--hdr-log": "/t/h.log"})
    assert argv[0] == "/w/archlab-engine" and "--records" not in argv
    assert flag(argv, "--json") == "/t/s.json" and flag(argv, "--hdr-log") == "/t/h.log" and flag(argv, "--seed") == "24301"


def s_requests(docs) -> int:
    return sum(d["requests"] for d in docs)


def counts(h: HdrHistogram) -> Counter:
    return Counter({i.value_iterated_to: i.count_at_value_iterated_to for i in h.get_recorded_iterator()})


@pytest.fixture(scope="module")
def two_generators(engine_path, tmp_path_factory):
    """Two closed-model generators (3 and 2 users) run one after the other against one real
    server: their summaries and interval logs."""
    tmp = tmp_path_factory.mktemp("shards")
    with ProcessGroup(3.0) as group:
        server = group.start("server", [str(engine_path), "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"],
                             tmp / "server.stderr")
        address = server.expect("listening ", 10.0).split(" ", 1)[1].strip()
        out = []
        for k, users in enumerate((3, 2)):
            argv = [str(engine_path), "load", "--target", address, "--path", "/echo?size=32", "--connections", str(users),
                    "--duration", "1s", "--warmup", "100ms", "--think-time", "exp:1ms", "--seed", str(100 + k),
                    "--json", str(tmp / f"s{k}.json"), "--hdr-log", str(tmp / f"h{k}.log")]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            out.append((json.loads((tmp / f"s{k}.json").read_text()), (tmp / f"h{k}.log").read_text()))
        group.stop(server)
    return out


def test_one_shard_merges_to_itself(two_generators):
    # The headline statistics recomputed from a generator's own interval log are the ones it
    # reported: the merge reads histograms with the engine's conventions.
    for doc, log in two_generators:
        merged = merge_shards([doc], [log]).summary
        for key in ("min", "p50", "p90", "p99", "p99.9", "max"):
            assert merged["latency_us"][key] == doc["latency_us"][key], key
        for key in ("mean", "stdev"):
            assert merged["latency_us"][key] == pytest.approx(doc["latency_us"][key], rel=1e-12), key
        assert [e["p99_us"] for e in merged["timeline"]] == [e["p99_us"] for e in doc["timeline"]]


def test_the_merged_histogram_is_the_sum_of_the_shards(two_generators, tmp_path):
    docs, logs = [d for d, _ in two_generators], [log for _, log in two_generators]
    merged = merge_shards(docs, logs, seed=100)
    expected = Counter()
    for log in logs:
        for _, _, h in read_interval_log(log).intervals:
            expected.update(counts(h))
    got = Counter()
    for _, _, h in read_interval_log(merged.log_text).intervals:
        got.update(counts(h))
    assert got == expected and sum(got.values()) == merged.summary["requests"] == sum(d["requests"] for d in docs)
    assert merged.summary["latency_us"] == latency_summary_us(merged.histogram)
    # The merged log is an interval log like the engine's: archlab.latency reads it.
    (tmp_path / "hdr.log").write_text(merged.log_text)
    assert read_hdr_log(tmp_path / "hdr.log").n == s_requests(docs)
    s = merged.summary
    assert s["connections"] == 5 and s["seed"] == 100
    assert s["throughput_rps"] == pytest.approx(sum(d["throughput_rps"] for d in docs), rel=1e-12)
    assert s["errors"]["total"] == sum(d["errors"]["total"] for d in docs)
    assert s["generator"]["bound"] == any(d["generator"]["bound"] for d in docs)
    # Little's law's boundary term: the merged window's cycles are the shards' cycles, and the
    # law holds on the merged row with R from the planned send (both shards ran the closed
    # model with fixed users; the headline, from the send, leaves out the think timer's lag).
    assert all(isinstance(d.get("closed_boundary_s"), float) for d in docs), [d.get("closed_boundary_s") for d in docs]
    cycles = sum(d["connections"] * d["duration_s"] - d["closed_boundary_s"] for d in docs)
    assert s["connections"] * s["duration_s"] - s["closed_boundary_s"] == pytest.approx(cycles, rel=1e-12)
    law = parse_summary(s).littles_law
    assert law is not None and law.boundary_share is not None and law.planned_holds, law
    # The merged quantiles lie between the shards' (a sum of histograms cannot leave their range).
    for key in ("p50", "p99"):
        lo, hi = sorted(d["latency_us"][key] for d in docs)
        assert lo <= s["latency_us"][key] <= hi


def test_a_params_file_is_divided_like_the_flags():
    # `load --params FILE`: the same split, on the file's object.
    argv = ["/e/archlab-engine", "load", "--params", "/r/load.params.json", "--json", "/r/s.json", "--hdr-log", "/r/h.log"]
    closed = {"model": "closed", "connections": 10, "seed": 24301, "think_time": "exp:5ms", "records": "/r/records.bin"}
    plans = split_params(argv, closed, 3)
    assert [p.params["connections"] for p in plans] == [4, 3, 3] == [p.users for p in plans]
    assert [p.params["seed"] for p in plans] == [shard_seed(24301, k) for k in range(3)]
    assert all(p.params["think_time"] == "exp:5ms" and p.argv == tuple(argv) for p in plans)
    open_model = {"model": "open", "connections": 4, "max_connections": 3, "rate": 1000}
    plans = split_params(argv, open_model, 3)
    assert abs(sum(Fraction(p.params["rate"]) for p in plans) - 1000) < Fraction(1, 10**9)
    assert [p.params["max_connections"] for p in plans] == [1, 1, 1] and all("seed" not in p.params for p in plans)
    with pytest.raises(InvalidValue, match=r"--shards: expected at most the cell's 10 closed-model users"):
        split_params(argv, closed, 11)
    command = with_outputs(argv, "/w/archlab-engine", {"--params": "/t/p.json", "--json": "/t/s.json", "--hdr-log": "/t/h.log"})
    assert flag(command, "--params") == "/t/p.json" and flag(command, "--json") == "/t/s.json"


def test_a_shards_engine_opens_no_connection_before_its_instant(engine_path, tmp_path):
    # `load --start-at`: the engine sets up, sleeps to the absolute instant, says when it woke
    # (its own wall clock, ns) before its window opens; an absolute sleep never ends early.
    from archlab.cluster.loadshard import format_unix_time

    assert format_unix_time(1764115896.25) == "1764115896.250000000"
    with ProcessGroup(3.0) as group:
        server = group.start("server", [str(engine_path), "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"],
                             tmp_path / "server.stderr")
        address = server.expect("listening ", 10.0).split(" ", 1)[1].strip()
        instant = time.time() + 0.3
        argv = [str(engine_path), "load", "--target", address, "--path", "/echo?size=8", "--connections", "1", "--duration", "200ms",
                "--warmup", "0s", "--json", str(tmp_path / "s.json"), "--start-at", format_unix_time(instant)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        group.stop(server)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["phase", "start"], ["phase", "measure"], ["phase", "end"]], lines
    assert int(lines[0].split()[2]) >= int(format_unix_time(instant).replace(".", ""))
    assert json.loads((tmp_path / "s.json").read_text())["requests"] > 0


@pytest.mark.parametrize("given, message", [
    ("1e9", r"invalid --start-at \"1e9\" \(allowed: seconds since the Unix epoch as SECONDS\[\.FRACTION\]"),
    ("12:00", r"invalid --start-at \"12:00\""),
    (str(int(time.time()) + 10 * 86400), r"invalid --start-at \d+\.000000000: \d+ s from now \(allowed: an instant at most 86400 s ahead\)"),
])
def test_a_bad_start_instant_is_one_line(engine_path, tmp_path, given, message):
    argv = [str(engine_path), "load", "--target", "127.0.0.1:1", "--path", "/", "--connections", "1", "--duration", "1s",
            "--json", str(tmp_path / "s.json"), "--start-at", given]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and re.search(message, done.stderr), done.stderr
    assert not (tmp_path / "s.json").exists()
