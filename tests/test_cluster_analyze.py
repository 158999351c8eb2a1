"""`archlab analyze --cluster` on a real Dask `LocalCluster` of this machine (worker processes
over TCP on loopback, no mocks): the per-cell analyses of a stored run, and the reads of several
latency files, fan out over the workers and print exactly what the local run prints (same JSON,
same table: every statistic is a function of its data and the seed, wherever it is computed);
a worker lost while it computes an item is one line naming the item, not a traceback (in the
library and through the CLI, whose worker process the test kills mid-way), while the
computation's own errors pass through as locally; a malformed or unreachable `--cluster` is one
line naming the flag. The run analysed is real: two
cells of 0.5 s each against an archlab server."""

from __future__ import annotations

import os
import re
import signal

import pytest
from conftest import processes_with_token, run_cli, spec_text, start_cli

from archlab.cluster import ClusterError, open_cluster
from archlab.cluster.fanout import map_in_order
from archlab.lab.session import run_spec
from archlab.store import Store
from archlab.lab.foreign import free_port

WINDOW = 'name = "analyze"\nrepetitions = 2\nwarmup = "200ms"\nduration = "500ms"'
LOAD = 'model = "closed"\nthink_time = "exp:2ms"\ntimeout = "2s"'
FACTORS = 'architecture = ["single-thread"]\nworkload = ["/echo?size=32"]\nconcurrency = [2, 4]'
# Small bootstrap counts keep each analysis short; the output must match to the last digit anyway.
FAST = ("--boot", "50", "--no-stable", "--pot-threshold", "none")


@pytest.fixture(scope="module")
def stored_run(engine_path, tmp_path_factory):
    """A real run of two cells x two repetitions: (store directory, run id)."""
    directory = tmp_path_factory.mktemp("analyze")
    spec = directory / "spec.toml"
    spec.write_text(spec_text(experiment=WINDOW, load=LOAD, factors=FACTORS))
    store = Store(directory / "runs")
    handle = run_spec(spec, store)
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete" and len(view.rows) == 4 and all(r.ok for r in view.rows), [r.error for r in view.rows]
    return store, handle.run_id


def test_a_runs_cells_analysed_on_the_cluster_print_what_the_local_run_prints(stored_run):
    store, run_id = stored_run
    common = ("analyze", run_id, "--store", str(store.root), "--json", *FAST)
    local = run_cli(*common)
    assert local.returncode == 0, local.stderr
    remote = run_cli(*common, "--cluster", "local:2")
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    # Both cells are in it, each with its two repetitions merged: the comparison is not of two empty outputs.
    assert local.stdout.count('"repetitions": [\n        1,\n        2\n      ]') == 2, local.stdout[:2000]
    progress = [line for line in remote.stderr.splitlines() if line.startswith("analyze: cell ")]
    assert [line.split(":")[1].strip().split(" ")[1] for line in progress] == ["1/2", "2/2"], remote.stderr


def test_several_files_read_on_the_cluster_give_the_local_table(stored_run):
    store, run_id = stored_run
    logs = sorted(str(p) for p in store.run_dir(run_id).glob("cells/*/rep-*/hdr.log"))
    assert len(logs) == 4
    local = run_cli("analyze", *logs, *FAST)
    assert local.returncode == 0, local.stderr
    remote = run_cli("analyze", *logs, *FAST, "--cluster", "local:2")
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and "p99" in local.stdout


def _die_on(target: int, item: int) -> int:
    """The task of ``item``: the worker computing ``target`` dies on the spot (SIGKILL, as a
    host lost mid-way would)."""
    if item == target:
        os.kill(os.getpid(), signal.SIGKILL)
    return item * item


def test_a_worker_lost_mid_way_is_one_line_naming_the_item(engine_path):
    import functools

    with open_cluster("local:2") as cluster:
        cluster.client.wait_for_workers(2, timeout=60)
        done = []
        with pytest.raises(ClusterError) as caught:
            for result in map_in_order(cluster, functools.partial(_die_on, 3), [1, 2, 3, 4], lambda k: f"item {k}"):
                done.append(result)
        # The computation's own error is not the cluster's: it comes back as a local run raises it.
        with pytest.raises(ZeroDivisionError):
            list(map_in_order(cluster, _inverse, [1, 0, 2]))
    message = str(caught.value)
    # The first item whose result was lost is named (item 3, or one queued on the same worker
    # before it: every task of a lost worker fails); the items before it came back, in order.
    lost = re.fullmatch(r"--cluster local:2: item (\d): the worker computing it was lost; nothing was written, run it again", message)
    assert lost is not None, message
    assert 1 <= int(lost.group(1)) <= 3 and done == [1, 4][: int(lost.group(1)) - 1], (message, done)


def _inverse(item: int) -> float:
    return 1 / item


def test_the_cli_says_in_one_line_that_a_worker_was_lost(stored_run, token):
    # The same cell eight times keeps both workers busy; once the first result is printed, one
    # worker (a process the CLI's local cluster spawned) is killed while it computes another.
    store, run_id = stored_run
    cell = store.load_run(run_id).rows[0].cell_id
    cli = start_cli("analyze", run_id, "--store", str(store.root), "--json", *[a for _ in range(8) for a in ("--cell", cell)],
                    "--cluster", "local:2")
    try:
        first = cli.stderr.readline()
        assert first.startswith(f"analyze: cell 1/8 {cell}: "), first + cli.stderr.read()
        workers = [pid for pid, cmd in processes_with_token(token) if "spawn_main" in cmd]
        assert len(workers) == 2, processes_with_token(token)
        os.kill(workers[0], signal.SIGKILL)
        out, rest = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 1, rest
    lines = rest.strip().splitlines()
    assert all(line.startswith("analyze: cell ") for line in lines[:-1]), rest
    assert re.fullmatch(rf"archlab: error: --cluster local:2: cell {cell} of run {run_id}: the worker computing it was lost; "
                        "nothing was written, run it again", lines[-1]), rest
    assert out == ""  # nothing printed of a partial analysis


@pytest.mark.parametrize("given, status, message", [
    ("127.0.0.1:8786", 2, r"--cluster: expected tcp://HOST:PORT .* or local:N .*, got '127\.0\.0\.1:8786'"),
    ("local:0", 2, r"--cluster: expected .*, got 'local:0'"),
    ("unreachable", 1, r"--cluster tcp://127\.0\.0\.1:\d+: no Dask scheduler answered within 5 s"),
])  # fmt: skip
def test_a_bad_cluster_is_one_line_naming_the_flag(stored_run, given, status, message):
    store, run_id = stored_run
    address = f"tcp://127.0.0.1:{free_port('127.0.0.1')}" if given == "unreachable" else given
    done = run_cli("analyze", run_id, "--store", str(store.root), "--cluster", address)
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archlab: error: ") and re.search(message, lines[0]), done.stderr
