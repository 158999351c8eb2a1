"""Interference measured per repetition (archlab.lab.interference): the arithmetic on snapshots
with known truth, ``/proc/stat`` read as proc(5) lays it out, and a real run of the engine with
a busy loop pinned to the server's CPU (flagged: at least half of that CPU was foreign) and
without it (not flagged)."""

from __future__ import annotations

import io
import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import spec_text
from pytest import approx

from archlab.lab import interference
from archlab.lab.interference import CpuClock, LabProcess, Snapshot
from archlab.lab.session import run_spec
from archlab.store import Store
from archlab.store.records import DEFAULT_MAX_FOREIGN

TICK = os.sysconf("SC_CLK_TCK")


def snapshot(at: float, cpus: dict[int, tuple[float, float]], lab: dict[tuple[int, int], tuple[float, set[int]]], load: float) -> Snapshot:
    return Snapshot(
        taken_at=at,
        cpus={c: CpuClock(busy_s=b, steal_s=s) for c, (b, s) in cpus.items()},
        lab={k: LabProcess(cpu_s=t, cpus=frozenset(a)) for k, (t, a) in lab.items()},
        load_avg_1m=load,
    )


def test_foreign_time_is_busy_time_less_the_labs_spread_over_its_affinity():
    # 2 s window. CPU 1: 1.6 s busy; the server (pinned to 1) spent 1.0 s, the runner (on 0-1)
    # 0.4 s, half of it counted on each CPU: foreign 1.6 - 1.0 - 0.2 = 0.4 s, 20% of CPU 1.
    # CPU 0: 1.8 s busy, the generator (pinned to 0) 1.5 s, the runner 0.2 s: foreign 0.1 s.
    # A lab process that started inside the window counts whole (the link forwarder, 0.05 s on
    # 0); one that ended inside it is not seen at the end, so its time shows as foreign.
    start = snapshot(10.0, {0: (100.0, 3.0), 1: (200.0, 5.0)},
                     {(11, 1): (4.0, {1}), (12, 1): (7.0, {0}), (13, 1): (1.0, {0, 1}), (14, 1): (9.0, {1})}, 0.3)
    end = snapshot(12.0, {0: (101.8, 3.0), 1: (201.6, 5.5)},
                   {(11, 1): (5.0, {1}), (12, 1): (8.5, {0}), (13, 1): (1.4, {0, 1}), (15, 1): (0.05, {0})}, 0.7)
    found = interference.between(start, end, measured_cpus=[1])
    by_cpu = {c.cpu: c for c in found.per_cpu}
    assert found.window_s == approx(2.0)
    assert by_cpu[1].lab_s == approx(1.2) and by_cpu[1].foreign_s == approx(0.4)
    assert by_cpu[0].lab_s == approx(1.75) and by_cpu[0].foreign_s == approx(0.05)
    assert found.foreign_share == approx(0.2)
    assert found.share([0]) == approx(0.025) and found.share([0, 1]) == approx(0.1125)
    assert by_cpu[1].steal_s == approx(0.5) and found.steal_share == approx(0.25)
    assert (found.load_avg_start, found.load_avg_end) == (0.3, 0.7)
    conditions = found.conditions()
    assert conditions.foreign_share == approx(0.2) and conditions.disturbed(0.05) and not conditions.disturbed(0.5)
    # A pid recycled by another process is a new process, not a continuation of the old one.
    recycled = snapshot(12.0, {0: (101.8, 3.0), 1: (201.6, 5.5)}, {(11, 2): (5.0, {1})}, 0.7)
    assert {c.cpu: c.lab_s for c in interference.between(start, recycled, [1]).per_cpu}[1] == approx(5.0)


def test_proc_stat_is_read_as_proc5_lays_it_out():
    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks; guest time
    # is already inside user, iowait is idle.
    text = (f"cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 {TICK} 0 {TICK} 999 999 0 0 {TICK // 2} {TICK} 0\n"
            f"cpu1 0 {TICK} 0 999 0 {TICK} {TICK}\nintr 1 2 3\nctxt 5\n")
    clocks = interference.read_cpu_clocks(text)
    assert set(clocks) == {0, 1}
    assert clocks[0].busy_s == approx(2.0) and clocks[0].steal_s == approx(0.5)
    assert clocks[1].busy_s == approx(3.0) and clocks[1].steal_s == 0.0
    live = interference.read_cpu_clocks()
    assert set(live) == set(range(len(live))) and all(c.busy_s > 0 for c in live.values())


def test_the_lab_is_this_process_and_the_trees_it_started(tmp_path):
    # A child of this process that the lab did not start is not the lab's.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        stranger = pool.apply(os.getpid)
        assert stranger not in interference.lab_pids([])
        assert os.getpid() in interference.lab_pids([])
        assert stranger in interference.lab_pids([stranger])


def _spin(cpu: int, spinning) -> None:  # type: ignore[no-untyped-def]
    # A session of its own: with autogroup scheduling, CPU time is shared fairly between
    # sessions first, and the server runs in a session of its own too.
    os.setsid()
    os.sched_setaffinity(0, {cpu})
    spinning.set()
    while True:
        pass


QUICK = spec_text(
    experiment='name = "interference"\nrepetitions = 1\nwarmup = "300ms"\nduration = "1500ms"',
    factors='architecture = ["single-thread"]\nworkload = ["/prime?n=27059"]\nconcurrency = [4]',
)


def _run(tmp_path: Path, name: str, spec_text: str = QUICK, stream=None):  # type: ignore[no-untyped-def]
    spec = tmp_path / f"{name}.toml"
    spec.write_text(spec_text)
    store = Store(tmp_path / name)
    handle = run_spec(spec, store, stream=stream)
    return handle, store.load_run(handle.run_id)


def _one_row(tmp_path: Path, name: str):
    handle, view = _run(tmp_path, name)
    (row,) = view.rows
    assert row.status == "ok", row.error
    return handle, row


@contextmanager
def spinning_on(cpu: int) -> Iterator[None]:
    """Two busy loops that are not the lab's on ``cpu``, each in a session of its own: with
    the server, each of the three gets about a third of the CPU, so the loops' share (about
    2/3) is clear of 0.5."""
    context = multiprocessing.get_context("spawn")
    spinning = [context.Event() for _ in range(2)]
    spinners = [context.Process(target=_spin, args=(cpu, e), daemon=True) for e in spinning]
    for p in spinners:
        p.start()
    try:
        assert all(e.wait(60) for e in spinning), "the busy loops did not start"
        yield
    finally:
        for p in spinners:
            p.kill()
            p.join()


def test_a_busy_loop_on_the_servers_cpu_is_seen_and_flagged(engine_path, tmp_path):
    # The same short run twice: with processes that are not the lab's spinning on the server's
    # CPU, at least half of that CPU's time is foreign; without them, next to none is. The rows are read back from the
    # catalog, so the conditions survive it.
    handle, quiet = _one_row(tmp_path, "quiet")
    with spinning_on(handle.experiment.placement.server_cpus[0]):
        _, busy = _one_row(tmp_path, "busy")
    assert busy.conditions is not None and quiet.conditions is not None
    assert busy.conditions.foreign_share >= 0.5, busy.conditions
    assert busy.conditions.disturbed(DEFAULT_MAX_FOREIGN)
    assert quiet.conditions.foreign_share < 0.05, quiet.conditions
    assert not quiet.conditions.disturbed(DEFAULT_MAX_FOREIGN)
    probe = (busy.summary_path.parent / "probe.json").read_text()
    assert '"interference"' in probe and '"per_cpu"' in probe


def test_max_foreign_repeats_a_disturbed_repetition_a_bounded_number_of_times(engine_path, tmp_path):
    # Disturbed all along: the repetition is repeated twice (archlab.lab.disturbed.MAX_REPEATS),
    # every attempt is stored, the progress says each time, and the report sets them aside.
    from archlab.lab.disturbed import MAX_REPEATS
    from archlab.report import terminal_table
    from archlab.report.glance import disturbance_limit

    text = QUICK.replace('duration = "1500ms"', 'duration = "1500ms"\nmax_foreign = 0.3')
    progress = io.StringIO()
    probe_handle, _ = _run(tmp_path, "placement", text.replace("max_foreign = 0.3", ""))
    with spinning_on(probe_handle.experiment.placement.server_cpus[0]):
        handle, view = _run(tmp_path, "repeated", text, stream=progress)
    assert handle.experiment.max_foreign == 0.3 and disturbance_limit(view.manifest) == 0.3
    assert [r.repetition for r in view.rows] == list(range(1, 2 + MAX_REPEATS))
    assert all(r.ok and r.conditions is not None and r.conditions.disturbed(0.3) for r in view.rows)
    notes = [ln for ln in progress.getvalue().splitlines() if "disturbed:" in ln and "repeating it as rep" in ln]
    assert [ln.rsplit(" ", 1)[1] for ln in notes] == ["2", "3"], progress.getvalue()
    table = terminal_table(view.rows, color=False, max_foreign=disturbance_limit(view.manifest))
    assert table.count("repeated, left out of the statistics") == 1 + MAX_REPEATS, table
    assert "every repetition disturbed (set aside): single-thread" in table
