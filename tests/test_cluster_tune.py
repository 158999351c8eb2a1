"""`archlab tune` on a real Dask `LocalCluster` of this machine (worker processes over TCP on
loopback, no mocks): the learned tuner's outer folds (one per held-out program) run as tasks on
the workers and give exactly the local cross-validation (every fit is a function of its data and
`random_state`, gathered in the folds' order); a sweep run with `--cluster local:2` measures its
cells as load shards (as `archlab run --cluster`) and prints the analysis a local `--analyse` of
the stored run prints, as does `--analyse --cluster local:2`; a worker lost while it computes a
fold is one line naming the fold (in the library, and through the CLI, whose worker process the
test kills while it fits a fold); a malformed or unreachable `--cluster`, or `--shards` with
`--analyse`, is one line naming the flag. The synthetic dataset is the learned tuner's own
(`tests/tuning/test_tuning_learned.py`); the sweep is the one of `tests/test_cli_tune.py`: three
programs at two levels, 0.8 s per cell."""

from __future__ import annotations

import functools
import os
import re
import signal
import time
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import processes_with_token, run_cli, start_cli
from test_cli_tune import PROGRAMS, spec
from tuning.test_tuning_learned import DEFAULT, synthetic

from archlab.cluster import ClusterError, open_cluster
from archlab.cluster.fanout import map_in_order
from archlab.tuning import Dataset, Features, cross_validate
from archlab.lab.foreign import free_port

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster():
    with open_cluster("local:2") as c:
        c.client.wait_for_workers(2, timeout=60)
        yield c


def _counting(cluster, submitted: list[int]):
    """``map_in_order`` on ``cluster``, recording how many items each call submitted."""

    def mapper(function, items, name):
        submitted.append(len(items))
        return map_in_order(cluster, function, items, name)

    return mapper


@pytest.mark.parametrize("model, task", [("svm", "regression"), ("decision-tree", "classification")])
def test_the_learned_tuners_folds_on_the_workers_equal_the_local_ones(cluster, model, task):
    ds, _ = synthetic(n_programs=16, repetitions=2)
    args = dict(default_size=DEFAULT, n_splits=len(ds.programs), inner_splits=3)
    local = cross_validate(ds, model, task, **args)
    submitted: list[int] = []
    remote = cross_validate(ds, model, task, **args, mapper=_counting(cluster, submitted))
    assert submitted == [16]  # one task per held-out program, all through the cluster
    assert remote == local  # folds, picks, regrets, MAPE, MSE, accuracy, F1: to the last bit
    # The comparison is of a real result: the picks spread over several sizes.
    assert len(local.folds) == 16 and len(set(local.picks.values())) >= 3, local.picks


class _KillsItsWorker(Features):
    """Features whose unpickling on any process but the test's kills that process on the spot
    (SIGKILL, as a host lost mid-way would): the fold that carries them loses its worker."""

    def __reduce__(self):
        return (_die_unless_in, (os.getpid(), tuple(getattr(self, f.name) for f in fields(Features))))


def _die_unless_in(pid: int, values: tuple) -> Features:
    if os.getpid() != pid:
        os.kill(os.getpid(), signal.SIGKILL)
    # Still deadly when pickled again: the scheduler, in this process, unpickles a task and
    # pickles it again for its worker.
    return _KillsItsWorker(*values)


def test_a_worker_lost_mid_way_is_one_line_naming_the_fold():
    ds, _ = synthetic(n_programs=6, repetitions=2)
    victim = ds.programs[3]
    feats = {p: (_KillsItsWorker(*(getattr(f, k.name) for k in fields(Features))) if p == victim else f) for p, f in ds.features.items()}
    doomed = Dataset(ds.rows, feats)
    first = cross_validate(ds, "decision-tree", "regression", default_size=DEFAULT, n_splits=6, inner_splits=2).folds[0]
    # A cluster of its own: the killed workers do not disturb the other tests' cluster.
    with open_cluster("local:2") as c:
        c.client.wait_for_workers(2, timeout=60)
        with pytest.raises(ClusterError) as caught:
            cross_validate(doomed, "decision-tree", "regression", default_size=DEFAULT, n_splits=6, inner_splits=2,
                           mapper=functools.partial(map_in_order, c))
    # The victim's features travel in every fold's task (held out in one, trained on in the
    # others), so the first fold, the first result awaited, has lost its worker: it is named.
    assert str(caught.value) == (f"--cluster local:2: learned tuner, outer fold holding out {', '.join(first.test_programs)}: "
                                 "the worker computing it was lost; nothing was written, run it again")


@pytest.fixture(scope="module")
def swept_on_the_cluster(engine_path, tmp_path_factory):
    """`archlab tune SPEC --cluster local:2`: (its result, the store, the run directory)."""
    directory = tmp_path_factory.mktemp("tune")
    programs = directory / "programs.toml"
    programs.write_text(PROGRAMS)
    spec_file = directory / "tune.toml"
    spec_file.write_text(spec(programs))
    store = directory / "runs"
    done = run_cli("tune", str(spec_file), "--store", str(store), "--cluster", "local:2", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = [d for d in store.iterdir() if d.is_dir()]
    return done, store, run_dir


def test_a_sweep_on_the_cluster_is_sharded_and_analysed_as_the_local_analysis_of_its_run(swept_on_the_cluster):
    done, store, run_dir = swept_on_the_cluster
    # The cells ran as `archlab run --cluster` runs them: two load shards each.
    shards = sorted(run_dir.glob("cells/*/rep-*/shards.json"))
    assert len(shards) == 6, sorted(p.name for p in run_dir.glob("cells/*"))
    assert all(len(list(p.parent.glob("shards/shard-*"))) == 2 for p in shards)
    # Its tuners (computed on the workers) say what a local analysis of the stored run says.
    local = run_cli("tune", "--analyse", run_dir.name, "--store", str(store))
    assert local.returncode == 0, local.stderr
    assert "learned model on held-out programs" in local.stdout and local.stdout.strip() in done.stdout
    page = (run_dir / "report.html").read_text()
    assert '<section id="tuning">' in page and "learned model on held-out programs" in page


def test_analyse_on_the_cluster_prints_the_local_analysis(swept_on_the_cluster):
    _, store, run_dir = swept_on_the_cluster
    local = run_cli("tune", "--analyse", run_dir.name, "--store", str(store))
    remote = run_cli("tune", "--analyse", run_dir.name, "--store", str(store), "--cluster", "local:2")
    assert local.returncode == 0 and remote.returncode == 0, (local.stderr, remote.stderr)
    assert remote.stdout == local.stdout and "learned" in local.stdout


def _computing_a_fold(pid: int) -> bool:
    """Whether a worker process has loaded scikit-learn, which it does only inside a fold's
    task (the learned tuner imports it when it fits; Dask and the task's data do not)."""
    try:
        return "/sklearn/" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_the_cli_says_in_one_line_that_a_worker_was_lost(swept_on_the_cluster, token):
    _, store, run_dir = swept_on_the_cluster
    cli = start_cli("tune", "--analyse", run_dir.name, "--store", str(store), "--cluster", "local:2")
    try:
        # Wait (on the condition, at most 120 s) until a worker computes a fold, then kill it:
        # a fold takes seconds, this poll notices it within milliseconds.
        deadline = time.monotonic() + 120
        busy: list[int] = []
        while not busy:
            assert cli.poll() is None, cli.communicate()
            assert time.monotonic() < deadline, f"no worker started a fold within 120 s: {processes_with_token(token)}"
            busy = [pid for pid, cmd in processes_with_token(token) if "spawn_main" in cmd and _computing_a_fold(pid)]
            time.sleep(0.01)
        os.kill(busy[0], signal.SIGKILL)
        out, err = cli.communicate(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"archlab: error: --cluster local:2: learned tuner, outer fold holding out \w+: the worker "
                                            r"computing it was lost; nothing was written, run it again", lines[0]), err
    assert out == ""  # nothing printed of a partial analysis


@pytest.mark.parametrize("extra, status, message", [
    (("--cluster", "127.0.0.1:8786"), 2, r"--cluster: expected tcp://HOST:PORT .* or local:N .*, got '127\.0\.0\.1:8786'"),
    (("--cluster", "local:0"), 2, r"--cluster: expected .*, got 'local:0'"),
    (("--cluster", "unreachable"), 1, r"--cluster tcp://127\.0\.0\.1:\d+: no Dask scheduler answered within 5 s"),
    (("--shards", "2"), 2, r"--shards: .*--analyse"),
])  # fmt: skip
def test_a_bad_cluster_with_analyse_is_one_line_naming_the_flag(swept_on_the_cluster, extra, status, message):
    _, store, run_dir = swept_on_the_cluster
    extra = tuple(f"tcp://127.0.0.1:{free_port('127.0.0.1')}" if a == "unreachable" else a for a in extra)
    done = run_cli("tune", "--analyse", run_dir.name, "--store", str(store), *extra)
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archlab: error: ") and re.search(message, lines[0]), done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("address, status", [("127.0.0.1:8786", 2), ("unreachable", 1)])
def test_a_bad_cluster_for_a_sweep_is_one_line_and_creates_no_run(tmp_path, address, status):
    programs = tmp_path / "programs.toml"
    programs.write_text(PROGRAMS)
    spec_file = tmp_path / "tune.toml"
    spec_file.write_text(spec(programs))
    store = tmp_path / "runs"
    address = f"tcp://127.0.0.1:{free_port('127.0.0.1')}" if address == "unreachable" else address
    done = run_cli("tune", str(spec_file), "--store", str(store), "--cluster", address)
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("archlab: error: --cluster"), done.stderr
    assert not store.exists() or not [d for d in store.iterdir() if d.is_dir()]
