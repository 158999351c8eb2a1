"""Probes of a server process, taken at the start and the end of the measurement window. From
``/proc/<pid>``: CPU time and thread count (``stat``), read/write system calls (``io``), peak
resident memory (``status`` VmHWM). From the server itself, via SIGUSR1 and its ``rusage {...}``
stdout line: ``getrusage`` of the whole process, whose context-switch counts include every
thread, even exited ones; ``/proc/<pid>/status`` counts only the main thread, and summing
``/proc/<pid>/task/*`` misses threads that ended (a thread-per-connection server's threads end
with their connections), so that sum is only a fallback and is labelled as such. CPU time also
comes from rusage when available: microseconds instead of 10 ms clock ticks. System calls:
``/proc/<pid>/io`` counts only read()/write()-family calls, not recv()/send() (which Rust's
``TcpStream`` uses), so when the rusage line carries the server's own ``read_syscalls`` /
``write_syscalls`` counts, those are used instead."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from archlab.lab.processes import ManagedProcess
from archlab.store.records import ServerCost

_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Rusage:
    user_cpu_s: float
    system_cpu_s: float
    voluntary_context_switches: int
    involuntary_context_switches: int
    max_rss_kib: int
    # Optional: socket read/write calls the server counted itself (see the module docstring).
    read_syscalls: int | None = None
    write_syscalls: int | None = None
    # Optional: hand-offs between threads the server counted itself (queue, ring, actor sends).
    handoffs: int | None = None
    # Everything else the line reports, kept as printed so that probe.json carries it: the
    # counts at the server's limits, the adaptive pool's sizes, HybridNetty's routing.
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse_line(cls, line: str) -> "Rusage":
        """``rusage {"user_cpu_s": .., ...}`` as printed by ``archlab-engine serve``."""
        d = json.loads(line.split(" ", 1)[1])
        return cls(
            user_cpu_s=float(d["user_cpu_s"]),
            system_cpu_s=float(d["system_cpu_s"]),
            voluntary_context_switches=int(d["voluntary_context_switches"]),
            involuntary_context_switches=int(d["involuntary_context_switches"]),
            max_rss_kib=int(d["max_rss_kib"]),
            read_syscalls=int(d["read_syscalls"]) if d.get("read_syscalls") is not None else None,
            write_syscalls=int(d["write_syscalls"]) if d.get("write_syscalls") is not None else None,
            handoffs=int(d["handoffs"]) if d.get("handoffs") is not None else None,
            extra={k: v for k, v in d.items() if k not in _RUSAGE_FIELDS},
        )


_RUSAGE_FIELDS = frozenset(f.name for f in fields(Rusage)) - {"extra"}


@dataclass(frozen=True)
class ProcSample:
    taken_at: float  # time.monotonic()
    utime_s: float
    stime_s: float
    num_threads: int
    syscr: int | None  # None: /proc/<pid>/io not readable (another user's process, no ptrace right)
    syscw: int | None
    vm_hwm_kib: int | None
    task_voluntary_cs: int  # summed over live threads only (fallback)
    task_involuntary_cs: int
    rusage: Rusage | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def read_proc(pid: int) -> ProcSample:
    """One reading of ``/proc/<pid>``; ``ProcessLookupError`` if the process is gone."""
    base = Path(f"/proc/{pid}")
    try:
        stat = (base / "stat").read_text()
        status = _key_values(base / "status")
    except FileNotFoundError:
        raise ProcessLookupError(pid) from None
    # Fields after the command name, which is in parentheses and may contain spaces.
    rest = stat[stat.rindex(")") + 2 :].split()
    try:
        io = _key_values(base / "io")
    except (PermissionError, FileNotFoundError):
        io = {}
    vol, invol = _task_context_switches(base)
    return ProcSample(
        taken_at=time.monotonic(),
        utime_s=int(rest[11]) / _CLK_TCK,  # field 14 of proc(5)
        stime_s=int(rest[12]) / _CLK_TCK,  # field 15
        num_threads=int(rest[17]),  # field 20
        syscr=_int_or_none(io.get("syscr")),
        syscw=_int_or_none(io.get("syscw")),
        vm_hwm_kib=_int_or_none(status.get("VmHWM", "").split(" ")[0]),
        task_voluntary_cs=vol,
        task_involuntary_cs=invol,
    )


def sample(server: ManagedProcess, rusage_timeout_s: float = 2.0) -> ProcSample:
    """``/proc`` reading plus the server's own rusage report (absent if it does not answer)."""
    return replace(read_proc(server.pid), rusage=request_rusage(server, rusage_timeout_s))


def request_rusage(server: ManagedProcess, timeout_s: float) -> Rusage | None:
    """Send SIGUSR1 and read the ``rusage`` line it triggers."""
    _drain(server)  # a late answer to an earlier request must not be taken for this one
    try:
        os.kill(server.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + timeout_s
    try:
        while (line := server.read_line(deadline - time.monotonic())) is not None:
            if line.startswith("rusage "):
                return Rusage.parse_line(line)
    except (TimeoutError, ValueError, KeyError):
        return None
    return None


def final_counters(server: ManagedProcess, timeout_s: float) -> dict | None:
    """The whole-run counters of archlab's ``serve`` or ``proxy`` (its ``rusage`` line as
    printed, with the proxy's per-backend requests), asked for just before it is stopped."""
    _drain(server)
    try:
        os.kill(server.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while (line := server.read_line(deadline - time.monotonic())) is not None:
            if line.startswith("rusage "):
                return dict(json.loads(line.split(" ", 1)[1]))
    except (ProcessLookupError, TimeoutError, ValueError):
        pass
    return None


def cost_between(start: ProcSample, end: ProcSample, requests: int) -> ServerCost:
    """The server's spending between two samples, per request of the measurement window."""
    if start.rusage is not None and end.rusage is not None:
        user = end.rusage.user_cpu_s - start.rusage.user_cpu_s
        system = end.rusage.system_cpu_s - start.rusage.system_cpu_s
        vol = end.rusage.voluntary_context_switches - start.rusage.voluntary_context_switches
        invol = end.rusage.involuntary_context_switches - start.rusage.involuntary_context_switches
    else:
        user, system = end.utime_s - start.utime_s, end.stime_s - start.stime_s
        vol = end.task_voluntary_cs - start.task_voluntary_cs
        invol = end.task_involuntary_cs - start.task_involuntary_cs
    peak = end.vm_hwm_kib if end.vm_hwm_kib is not None else (end.rusage.max_rss_kib if end.rusage else None)
    n = max(requests, 1)
    return ServerCost(
        cpu_user_s=user,
        cpu_sys_s=system,
        cpu_us_per_request=(user + system) * 1e6 / n,
        voluntary_cs_per_request=vol / n,
        involuntary_cs_per_request=invol / n,
        read_syscalls_per_request=_per(*_syscalls(start, end, "read_syscalls", "syscr"), n),
        write_syscalls_per_request=_per(*_syscalls(start, end, "write_syscalls", "syscw"), n),
        peak_rss_kib=peak,
        server_threads=end.num_threads,
        handoffs_per_request=_per(start.rusage.handoffs if start.rusage else None, end.rusage.handoffs if end.rusage else None, n),
    )


def context_switch_source(start: ProcSample, end: ProcSample) -> str:
    return "rusage" if start.rusage is not None and end.rusage is not None else "proc-tasks (live threads only)"


def syscall_source(start: ProcSample, end: ProcSample) -> str:
    own = start.rusage and end.rusage and start.rusage.read_syscalls is not None and end.rusage.read_syscalls is not None
    return "server counters" if own else "proc io (read/write family only, not recv/send)"


def _syscalls(start: ProcSample, end: ProcSample, own: str, proc: str) -> tuple[int | None, int | None]:
    """The server's own counts if both samples have them, else /proc/<pid>/io's."""
    a = getattr(start.rusage, own, None) if start.rusage else None
    b = getattr(end.rusage, own, None) if end.rusage else None
    if a is not None and b is not None:
        return a, b
    return getattr(start, proc), getattr(end, proc)


def _per(a: int | None, b: int | None, n: int) -> float | None:
    return None if a is None or b is None else (b - a) / n


def _drain(server: ManagedProcess) -> None:
    try:
        while server.read_line(0) is not None:
            pass
    except TimeoutError:
        pass


def _key_values(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def _task_context_switches(base: Path) -> tuple[int, int]:
    vol = invol = 0
    try:
        tasks = list((base / "task").iterdir())
    except FileNotFoundError:
        return 0, 0
    for task in tasks:
        try:
            kv = _key_values(task / "status")
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended while we looked
        vol += int(kv.get("voluntary_ctxt_switches", 0))
        invol += int(kv.get("nonvoluntary_ctxt_switches", 0))
    return vol, invol


def _int_or_none(v: str | None) -> int | None:
    try:
        return int(v) if v else None
    except ValueError:
        return None
