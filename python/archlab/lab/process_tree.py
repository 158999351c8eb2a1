"""A foreign program's whole process tree, seen through ``/proc``: finding every process it
made, adding up what they spent, and making sure none of them outlives its cell. A process
belongs to the tree when it descends from the root (``PPid`` links) or carries the tree's
environment token (``ARCHLAB_SYSTEM_TOKEN``, inherited by every descendant, so a grandchild that
left the session with ``setsid`` and whose parent died is still found). The orchestrator makes
itself a child subreaper, so such orphans are re-parented to it rather than to PID 1: it can then
reap them, and a killed one never stays a zombie. Processes are named by (pid, start time), so a
recycled pid is never taken for a member. Counters are per process and summed per live member;
threads that ended before a reading are lost for context switches (``/proc/<pid>/task``), but
not for CPU time (``/proc/<pid>/stat`` keeps the whole process's)."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from archlab.store.records import ServerCost

TOKEN_VARIABLE = "ARCHLAB_SYSTEM_TOKEN"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
_PR_SET_CHILD_SUBREAPER = 36

ProcKey = tuple[int, int]  # (pid, start time in clock ticks since boot)


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux >= 3.4); False if not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class ProcStat:
    """One member at one instant: CPU time (whole process), context switches (live threads),
    resident memory and threads."""

    pid: int
    start_ticks: int
    ppid: int
    name: str
    state: str
    utime_s: float
    stime_s: float
    threads: int
    rss_kib: int
    voluntary_cs: int
    involuntary_cs: int

    @property
    def key(self) -> ProcKey:
        return (self.pid, self.start_ticks)


def _stat_fields(pid: int) -> tuple[str, list[str]] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    close = text.rindex(")")
    return text[text.index("(") + 1 : close], text[close + 2 :].split()


def read_stat(pid: int, with_switches: bool = True, per_thread: dict[int, tuple[int, int]] | None = None) -> ProcStat | None:
    """One reading of a process; None when it is gone. ``per_thread``, when given, receives
    each live thread's (voluntary, involuntary) counts by thread id."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    name, rest = fields
    vol = invol = 0
    if with_switches:
        vol, invol = _task_switches(pid, per_thread)
    return ProcStat(
        pid=pid,
        start_ticks=int(rest[19]),  # field 22 of proc(5)
        ppid=int(rest[1]),  # field 4
        name=name,
        state=rest[0],
        utime_s=int(rest[11]) / _CLK_TCK,
        stime_s=int(rest[12]) / _CLK_TCK,
        threads=int(rest[17]),
        rss_kib=int(rest[21]) * _PAGE_KIB,  # field 24, in pages
        voluntary_cs=vol,
        involuntary_cs=invol,
    )


def _task_switches(pid: int, per_thread: dict[int, tuple[int, int]] | None = None) -> tuple[int, int]:
    vol = invol = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0, 0
    for tid in tasks:
        v = i = 0
        try:
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    v = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    i = int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # the thread ended while we looked
        vol, invol = vol + v, invol + i
        if per_thread is not None:
            per_thread[int(tid)] = (v, i)
    return vol, invol


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


# /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN, Linux >= 4.2 builds it by default).
HAS_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (a child's parent is the thread that forked it)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return out


def _has_token(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return f"{TOKEN_VARIABLE}={token}".encode() in environ.split(b"\0")


class ProcessTree:
    """The members of one foreign program's tree, remembered as they are seen."""

    def __init__(self, root_pid: int, token: str):
        self.root_pid = root_pid
        self.token = token
        self.seen: dict[ProcKey, str] = {}  # every member ever found -> its name
        # The last counts read of every thread ever seen, (member, tid) -> (voluntary,
        # involuntary): a thread that ends keeps what it had at its last reading, so frequent
        # readings (the sampler's) lose at most one period of an ended thread's switches.
        self.thread_switches: dict[tuple[ProcKey, int], tuple[int, int]] = {}
        self._lock = threading.Lock()  # the sampler thread and the runner read concurrently
        root = read_stat(root_pid, with_switches=False)
        if root is not None:  # named by its start time too, so its pid, once recycled, is not taken
            self.seen[root.key] = root.name

    def switches_seen(self) -> tuple[int, int]:
        """Context switches of every thread ever seen, at its last reading."""
        with self._lock:
            return sum(v for v, _ in self.thread_switches.values()), sum(i for _, i in self.thread_switches.values())

    def members(self, scan_environ: bool = False) -> list[ProcStat]:
        """The live members now (zombies excluded): descendants of the root and of every member
        seen before. Without ``scan_environ`` the walk follows ``/proc/PID/task/TID/children``
        from those processes only (cheap enough to run every ``SAMPLE_PERIOD_S``); with it, the
        whole process table is read and every process carrying the token is added (at stop)."""
        if scan_environ or not HAS_CHILDREN_FILES:
            start_of, found = self._scan_all(scan_environ)
        else:
            start_of, found = self._walk_children()
        out = []
        for pid in sorted(found):
            threads: dict[int, tuple[int, int]] = {}
            st = read_stat(pid, per_thread=threads)  # again, with the threads' context switches
            if st is None or st.state in ("Z", "X"):
                continue
            if start_of.get(pid, st.start_ticks) != st.start_ticks:
                continue  # recycled between the two readings
            with self._lock:
                self.seen[st.key] = st.name
                for tid, counts in threads.items():
                    self.thread_switches[(st.key, tid)] = counts
            out.append(st)
        return out

    def _starts(self) -> list[int]:
        """Every member seen before (the root first) that is still the same process."""
        pids = []
        for pid, start in list(self.seen):
            fields = _stat_fields(pid)
            if fields is not None and int(fields[1][19]) == start:
                pids.append(pid)
        return pids

    def _walk_children(self) -> tuple[dict[int, int], set[int]]:
        found: set[int] = set()
        frontier = self._starts()
        while frontier:
            pid = frontier.pop()
            if pid in found:
                continue
            found.add(pid)
            frontier += children(pid)
        return {}, found

    def _scan_all(self, scan_environ: bool) -> tuple[dict[int, int], set[int]]:
        stats = {}
        for pid in _all_pids():
            st = read_stat(pid, with_switches=False)
            if st is not None:
                stats[pid] = st
        by_parent: dict[int, list[int]] = {}
        for st in stats.values():
            by_parent.setdefault(st.ppid, []).append(st.pid)
        frontier = [pid for pid, st in stats.items() if st.key in self.seen]
        if scan_environ:
            known = {pid for pid, _ in self.seen}
            frontier += [pid for pid in stats if pid not in known and pid != os.getpid() and _has_token(pid, self.token)]
        found: set[int] = set()
        while frontier:
            pid = frontier.pop()
            if pid in found:
                continue
            found.add(pid)
            frontier += by_parent.get(pid, [])
        return {pid: st.start_ticks for pid, st in stats.items()}, found

    def alive(self, scan_environ: bool = True) -> list[ProcStat]:
        return self.members(scan_environ=scan_environ)


@dataclass(frozen=True)
class TreeSample:
    """The tree's members at one instant."""

    taken_at: float  # time.monotonic()
    members: tuple[ProcStat, ...]
    # Context switches of every thread of the tree ever seen, at its last reading.
    voluntary_cs_seen: int = 0
    involuntary_cs_seen: int = 0

    @property
    def rss_kib(self) -> int:
        return sum(m.rss_kib for m in self.members)

    @property
    def threads(self) -> int:
        return sum(m.threads for m in self.members)


@dataclass(frozen=True)
class TreeSpending:
    cpu_user_s: float
    cpu_sys_s: float
    voluntary_cs: int
    involuntary_cs: int


def spending_between(start: TreeSample, end: TreeSample) -> TreeSpending:
    """What the tree spent between two samples. CPU time per member, its end reading minus its
    start reading (zero for one born in between; the kernel keeps the time of a process's ended
    threads); members that ended in between are not counted. Context switches: every thread
    ever seen at its last reading, end minus start (see :attr:`ProcessTree.thread_switches`)."""
    before = {m.key: m for m in start.members}
    user = system = 0.0
    for m in end.members:
        b = before.get(m.key)
        user += m.utime_s - (b.utime_s if b else 0.0)
        system += m.stime_s - (b.stime_s if b else 0.0)
    return TreeSpending(
        user, system, end.voluntary_cs_seen - start.voluntary_cs_seen, end.involuntary_cs_seen - start.involuntary_cs_seen
    )


def sample(tree: ProcessTree) -> TreeSample:
    members = tuple(tree.members())
    vol, invol = tree.switches_seen()
    return TreeSample(time.monotonic(), members, vol, invol)


def tree_cost(start: TreeSample, end: TreeSample, requests: int, rss_samples: list[tuple[float, int, int]]) -> ServerCost:
    """What a process tree read from outside spent between two samples, per request; its
    socket calls are unavailable (see :func:`archlab.spec.systems.column_sources`)."""
    spent = spending_between(start, end)
    n = max(requests, 1)
    in_window = [(kib, threads) for t, kib, threads in rss_samples if start.taken_at <= t <= end.taken_at]
    return ServerCost(
        cpu_user_s=spent.cpu_user_s,
        cpu_sys_s=spent.cpu_sys_s,
        cpu_us_per_request=(spent.cpu_user_s + spent.cpu_sys_s) * 1e6 / n,
        voluntary_cs_per_request=spent.voluntary_cs / n,
        involuntary_cs_per_request=spent.involuntary_cs / n,
        read_syscalls_per_request=None,
        write_syscalls_per_request=None,
        peak_rss_kib=max([*(kib for kib, _ in in_window), start.rss_kib, end.rss_kib]),
        # The most threads seen in the window (a thread per connection may end before its edge).
        server_threads=max([*(t for _, t in in_window), start.threads, end.threads]),
    )


def kill_and_reap(members: Iterable[ProcStat], timeout_s: float = 5.0) -> list[ProcStat]:
    """SIGKILL each member (checked by start time, so a recycled pid is spared), reap those that
    are this process's children (orphans re-parented to the subreaper), and wait until each is
    gone. Returns the ones still there after ``timeout_s`` (e.g. stuck in uninterruptible sleep)."""
    targets = list(members)
    for m in targets:
        current = read_stat(m.pid, with_switches=False)
        if current is not None and current.start_ticks == m.start_ticks:
            try:
                os.kill(m.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + timeout_s
    remaining = targets
    while True:
        still = []
        for m in remaining:
            reap(m.pid)
            current = read_stat(m.pid, with_switches=False)
            # A zombie is dead: ours was reaped just above, another parent's is that parent's.
            if current is not None and current.start_ticks == m.start_ticks and current.state not in ("Z", "X"):
                still.append(m)
        remaining = still
        if not remaining or time.monotonic() > deadline:
            return remaining
        time.sleep(0.01)  # polling the kernel's process table: no event tells us a pid is gone


def reap(pid: int) -> None:
    """Collect the exit status of ``pid`` if it is a child of ours that has exited."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
