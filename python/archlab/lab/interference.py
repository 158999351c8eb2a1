"""Interference: how much of each CPU went to work that is not the lab's during a repetition's
measurement window, so that a row measured on a busy machine says so.

Mechanism: at each edge of the window (the moments the server is probed) a :class:`Snapshot`
reads ``/proc/stat`` per CPU (busy time: user, nice, system, irq, softirq; steal apart), the
load average, and the CPU time and CPU affinity of every process of the lab: this process (the
runner) and the process trees it started and holds in its process group - the servers, the
load generator, a link's forwarder, the database, fronts and foreign systems. Anything else,
even a child of this process that the lab did not start (another test's busy loop), is
foreign. Between two snapshots, a CPU's foreign time is its busy time minus the lab's CPU time
on it, a process's time spread evenly over the CPUs its affinity allows (exact for the lab's
pinned processes, an estimate for the runner, which is not pinned and mostly sleeps). The
process times are exact and the CPU's are counted in clock ticks, so a quiet window can come
out a tick below zero: foreign time is never taken below 0. Steal is time the hypervisor gave another guest while
this one had work: it is counted apart, as the machine's interference, not as the CPU's busy
time. A lab process that started or ended inside the window counts only for the time it was
seen; what it spent unseen shows as foreign time, so the estimate errs towards "disturbed".

The share that matters for a row is the foreign time on the CPUs of the system under test over
the window's length times their number (:meth:`Interference.share`): 0.5 means that half of
the server's CPUs went to something else. Nothing here blocks or starts a process."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from archlab.lab.process_tree import HAS_CHILDREN_FILES, children, read_stat
from archlab.store.records import Conditions

_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuClock:
    """One CPU's cumulative times (s) since boot, from ``/proc/stat``."""

    busy_s: float
    steal_s: float


@dataclass(frozen=True)
class LabProcess:
    """One process of the lab at one instant: its whole CPU time (every thread, ended ones too)
    and the CPUs it may run on."""

    cpu_s: float
    cpus: frozenset[int]


@dataclass(frozen=True)
class Snapshot:
    """The machine at one edge of a window."""

    taken_at: float  # time.monotonic()
    cpus: Mapping[int, CpuClock]
    #: By (pid, start time in clock ticks), so that a recycled pid is never taken for another.
    lab: Mapping[tuple[int, int], LabProcess]
    load_avg_1m: float


def read_cpu_clocks(text: str | None = None) -> dict[int, CpuClock]:
    """Per-CPU times from ``/proc/stat`` (or ``text`` in its format). Fields of a ``cpuN`` line
    (proc(5)): user nice system idle iowait irq softirq steal guest guest_nice; guest time is
    already inside user and nice, and iowait is idle."""
    if text is None:
        with open("/proc/stat") as f:
            text = f.read()
    clocks: dict[int, CpuClock] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        values = [int(v) for v in rest.split()]
        values += [0] * (8 - len(values))
        user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
        clocks[int(name[3:])] = CpuClock(busy_s=(user + nice + system + irq + softirq) / _CLK_TCK, steal_s=steal / _CLK_TCK)
    return clocks


def lab_pids(roots: Iterable[int]) -> list[int]:
    """This process (the runner) and every process that descends from one of ``roots`` (the
    processes the lab started), each once."""
    kids = children if HAS_CHILDREN_FILES else _children_by_parent()
    seen, todo = [os.getpid()], [r for r in roots if r != os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo.extend(kids(pid))
    return seen


def _children_by_parent() -> Callable[[int], list[int]]:
    """Children from every process's parent pid, for kernels without the ``children`` files."""
    by_parent: dict[int, list[int]] = {}
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        stat = read_stat(pid, with_switches=False)
        if stat is not None:
            by_parent.setdefault(stat.ppid, []).append(pid)
    return lambda pid: by_parent.get(pid, [])


def _affinity(pid: int, every: frozenset[int]) -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(pid))
    except OSError:  # gone, or not ours to ask
        return every


def take(roots: Iterable[int] = ()) -> Snapshot:
    """A snapshot of the machine now, and of the lab's processes: this one and the trees of
    ``roots``, the processes the lab started (see :func:`lab_pids`)."""
    cpus = read_cpu_clocks()
    every = frozenset(cpus)
    lab: dict[tuple[int, int], LabProcess] = {}
    for pid in lab_pids(roots):
        stat = read_stat(pid, with_switches=False)
        if stat is not None:
            lab[stat.key] = LabProcess(cpu_s=stat.utime_s + stat.stime_s, cpus=_affinity(pid, every))
    return Snapshot(taken_at=time.monotonic(), cpus=cpus, lab=lab, load_avg_1m=os.getloadavg()[0])


@dataclass(frozen=True)
class CpuShare:
    """One CPU over a window (seconds)."""

    cpu: int
    busy_s: float
    lab_s: float
    steal_s: float

    @property
    def foreign_s(self) -> float:
        """Busy time that was not the lab's (never below 0: clock ticks are coarse)."""
        return max(0.0, self.busy_s - self.lab_s)


@dataclass(frozen=True)
class Interference:
    """What else ran on the machine during one window."""

    window_s: float
    per_cpu: tuple[CpuShare, ...]
    load_avg_start: float
    load_avg_end: float
    #: The CPUs of the system under test, which :attr:`foreign_share` is about.
    measured_cpus: tuple[int, ...] = field(default=())

    def share(self, cpus: Iterable[int]) -> float:
        """Foreign time on ``cpus`` over the window's length times their number."""
        chosen = [c for c in self.per_cpu if c.cpu in set(cpus)]
        if not chosen or self.window_s <= 0:
            return 0.0
        return min(1.0, sum(c.foreign_s for c in chosen) / (self.window_s * len(chosen)))

    def steal(self, cpus: Iterable[int]) -> float:
        """Steal time on ``cpus`` over the window's length times their number."""
        chosen = [c for c in self.per_cpu if c.cpu in set(cpus)]
        if not chosen or self.window_s <= 0:
            return 0.0
        return min(1.0, sum(c.steal_s for c in chosen) / (self.window_s * len(chosen)))

    @property
    def foreign_share(self) -> float:
        """The share of the measured CPUs that went to something else."""
        return self.share(self.measured_cpus)

    @property
    def steal_share(self) -> float:
        return self.steal(self.measured_cpus)

    def conditions(self) -> Conditions:
        """The row's summary of this window."""
        return Conditions(foreign_share=self.foreign_share, steal_share=self.steal_share,
                          load_avg_start=self.load_avg_start, load_avg_end=self.load_avg_end,
                          measured_cpus=len(self.measured_cpus))

    def to_dict(self) -> dict:
        return {
            "window_s": self.window_s,
            "measured_cpus": list(self.measured_cpus),
            "foreign_share": self.foreign_share,
            "steal_share": self.steal_share,
            "load_avg_start": self.load_avg_start,
            "load_avg_end": self.load_avg_end,
            "per_cpu": [
                {"cpu": c.cpu, "busy_s": c.busy_s, "lab_s": c.lab_s, "foreign_s": c.foreign_s, "steal_s": c.steal_s}
                for c in self.per_cpu
            ],
        }


def between(start: Snapshot, end: Snapshot, measured_cpus: Iterable[int]) -> Interference:
    """The interference of the window from ``start`` to ``end``, about ``measured_cpus``."""
    lab_s: dict[int, float] = {cpu: 0.0 for cpu in end.cpus}
    for key, proc in end.lab.items():
        before = start.lab.get(key)
        spent = proc.cpu_s - (before.cpu_s if before is not None else 0.0)
        allowed = [c for c in proc.cpus if c in lab_s] or list(lab_s)
        for cpu in allowed:
            lab_s[cpu] += max(0.0, spent) / len(allowed)
    per_cpu = tuple(
        CpuShare(
            cpu=cpu,
            busy_s=end.cpus[cpu].busy_s - start.cpus[cpu].busy_s,
            lab_s=lab_s[cpu],
            steal_s=end.cpus[cpu].steal_s - start.cpus[cpu].steal_s,
        )
        for cpu in sorted(end.cpus)
        if cpu in start.cpus
    )
    return Interference(
        window_s=end.taken_at - start.taken_at,
        per_cpu=per_cpu,
        load_avg_start=start.load_avg_1m,
        load_avg_end=end.load_avg_1m,
        measured_cpus=tuple(sorted(set(measured_cpus))),
    )
