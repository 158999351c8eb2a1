"""What running a cell's load through a Dask cluster costs, against running it locally, in one
run on one machine: a `LocalCluster` of two load workers (processes, TCP on loopback), one
closed-model cell (`single-thread`, `/echo?size=32`, 4 users, 1 s window after 0.2 s warm-up)
run alternately locally and as 2 shards, repeated. Printed: the wall time of each cell (server
start to row recorded), the added wall time per cell (median sharded minus median local, and the
median of the paired differences), and the start skew between the shards: between the instants
their engines woke from `load --start-at` (`start_skew_s`, each engine's own `phase start`
stamp) and between the instants their measurement windows opened (`window_skew_s`, as the
workers read the `phase measure` lines), from each repetition's `shards.json`. Targets (issue 17): shards start
within 5 ms of each other on one host; less than 1 s added per cell.

usage: .venv/bin/python bench/cluster_overhead.py [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))

from archlab.cluster import ShardedLoad, open_cluster  # noqa: E402
from archlab.lab.session import run_spec  # noqa: E402
from archlab.store import Store  # noqa: E402
import harness  # noqa: E402

SPEC = """[experiment]
name = "cluster-overhead"
repetitions = 1
warmup = "200ms"
duration = "1s"

[factors]
architecture = ["single-thread"]
workload = ["/echo?size=32"]
concurrency = [4]

[load]
model = "closed"
think_time = "0s"
timeout = "2s"
"""


def one_cell(spec: Path, store: Store, executor) -> tuple[float, dict | None]:
    started = time.perf_counter()
    handle = run_spec(spec, store, load_executor=executor)
    wall = time.perf_counter() - started
    row = store.load_run(handle.run_id).rows[0]
    if row.status != "ok":
        raise SystemExit(f"cell failed: {row.error}")
    shards = row.summary_path.parent / "shards.json"
    return wall, json.loads(shards.read_text()) if shards.exists() else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=harness.count(), default=7)
    args = parser.parse_args()
    local_s, sharded_s, start_skew_ms, window_skew_ms = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="archlab-bench-cluster-") as tmp, open_cluster("local:2") as cluster:
        cluster.client.wait_for_workers(2, timeout=60)
        spec = Path(tmp) / "spec.toml"
        spec.write_text(SPEC)
        store = Store(Path(tmp) / "runs")
        executor = ShardedLoad(cluster, 2)
        one_cell(spec, store, executor)  # warm-up: imports on the workers, page cache
        for rep in range(args.reps):
            order = ("local", "sharded") if rep % 2 == 0 else ("sharded", "local")
            for mode in order:
                wall, shards = one_cell(spec, store, executor if mode == "sharded" else None)
                if mode == "local":
                    local_s.append(wall)
                else:
                    sharded_s.append(wall)
                    start_skew_ms.append(shards["start_skew_s"] * 1e3)
                    if shards["window_skew_s"] is not None:
                        window_skew_ms.append(shards["window_skew_s"] * 1e3)
            print(f"rep {rep + 1}: local {local_s[-1]:.3f} s, sharded {sharded_s[-1]:.3f} s, start skew {start_skew_ms[-1]:.2f} ms",
                  file=sys.stderr, flush=True)
    med = statistics.median
    print(f"cell wall time, median of {args.reps}: local {med(local_s):.3f} s, sharded (2 shards) {med(sharded_s):.3f} s")
    print(f"added wall time per cell: {med(sharded_s) - med(local_s):+.3f} s (median of paired differences "
          f"{med([s - l for s, l in zip(sharded_s, local_s)]):+.3f} s); target < 1 s")
    print(f"start skew between shards (engine starts): median {med(start_skew_ms):.2f} ms, max {max(start_skew_ms):.2f} ms; target < 5 ms")
    if window_skew_ms:
        print(f"skew of the measurement windows' opening: median {med(window_skew_ms):.2f} ms, max {max(window_skew_ms):.2f} ms")
    return 0


if __name__ == "__main__":
    harness.run_main(main)
