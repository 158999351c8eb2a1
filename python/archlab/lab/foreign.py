"""Starting, watching and stopping a system under test the lab did not build (a ``[[systems]]``
entry): its set-up commands, then its command with the placeholders filled, in its own session,
pinned to its CPUs from its first instruction, with its output in a file of the run; readiness is
a port that accepts or an HTTP path that answers 2xx, polled until the timeout while the process
is watched (an exit before readiness is its own failure). While it runs, a sampler thread reads
its whole process tree (:mod:`archlab.lab.process_tree`) every ``SAMPLE_PERIOD_S`` for resident
memory over time; the runner takes tree samples at the edges of the measurement window for CPU
time and context switches. Stopping sends the stop signal to its process group, waits the grace
period, SIGKILLs the group if the leader is still there, then kills and reaps every member of the
tree still alive (also one that left the group) and says what happened, so the runner can fail
the cell for a system that ignored its stop signal or left a process behind."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from archlab.errors import ProcessFailed
from archlab.lab import presets, process_tree
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.spec.systems import SystemSpec, fill
from archlab.spec.units import format_cpu_list

SAMPLE_PERIOD_S = 0.1  # resident memory over time: ten readings a second
SETUP_TIMEOUT_S = 120.0  # a set-up or tear-down command that takes longer is a failure
OUTPUT_TAIL_LINES = 20
#: Builds a command line from the filled placeholders and the scratch directory.
CommandBuilder = Callable[[dict[str, str], Path], list[str]]


def free_port(host: str) -> int:
    """A port the kernel just handed out on ``host``. Released before the system binds it, so
    another process could take it in between; the readiness check then fails and says so."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class StopOutcome:
    """How a stop went: the leader's exit, whether it needed SIGKILL, and what was left behind."""

    exit: str
    ignored_stop_signal: bool
    left_behind: tuple[str, ...]  # "pid (name)" of members alive after the leader exited
    survivors: tuple[str, ...] = ()  # members that could not be killed at all

    def problem(self, system: SystemSpec) -> str | None:
        """The named fault of this stop, if any."""
        parts = []
        if self.ignored_stop_signal:
            parts.append(f"ignored {system.stop_signal} for {system.stop_grace_s:g} s (stop_grace); killed with SIGKILL")
        if self.left_behind:
            parts.append(f"left {len(self.left_behind)} process(es) behind after its stop: {', '.join(self.left_behind)} (killed)")
        if self.survivors:
            parts.append(f"{', '.join(self.survivors)} could not be killed")
        return "; ".join(parts) or None

    def to_dict(self) -> dict:
        return {"exit": self.exit, "ignored_stop_signal": self.ignored_stop_signal, "left_behind": list(self.left_behind)}


@dataclass
class RunningSystem:
    """A started foreign system: where it listens and how to watch it."""

    spec: SystemSpec
    process: ManagedProcess
    host: str
    port: int
    tree: process_tree.ProcessTree
    log_path: Path
    values: dict[str, str] = field(default_factory=dict)  # the placeholders as filled
    rss_samples: list[tuple[float, int, int]] = field(default_factory=list)  # (monotonic s, RSS KiB, threads)
    _sampler: threading.Thread | None = None
    _stop_sampling: threading.Event = field(default_factory=threading.Event)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def name(self) -> str:
        return self.process.name

    def failure(self, detail: str) -> ProcessFailed:
        return ProcessFailed(self.name, detail, output_tail(self.log_path))

    def check_alive(self, when: str) -> None:
        code = self.process.poll()
        if code is not None:
            raise self.failure(f"{describe_exit(code)} {when}")

    def sample(self) -> process_tree.TreeSample:
        return process_tree.sample(self.tree)

    def start_sampling(self) -> None:
        def loop() -> None:
            while not self._stop_sampling.wait(SAMPLE_PERIOD_S):
                s = self.sample()
                self.rss_samples.append((s.taken_at, s.rss_kib, s.threads))

        self._sampler = threading.Thread(target=loop, name=f"rss:{self.name}", daemon=True)
        self._sampler.start()

    def stop_sampling(self) -> None:
        self._stop_sampling.set()
        if self._sampler is not None:
            self._sampler.join(timeout=2.0)


def output_tail(path: Path, lines: int = OUTPUT_TAIL_LINES, max_bytes: int = 8192) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _values(spec: SystemSpec, host: str, port: int, cpus: tuple[int, ...], scratch: Path, database: Mapping[str, str] | None) -> dict[str, str]:
    values = {"port": str(port), "cpus": format_cpu_list(cpus), "dir": str(scratch), "host": host}
    if spec.uses_database:
        if database is None:
            raise ProcessFailed(f"system {spec.name}", "it names the lab database ({db_...} placeholders) but the run has none")
        values.update(database)
    return values


def _environment(spec: SystemSpec, token: str, values: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update((k, fill(v, values)) for k, v in spec.env)
    env[process_tree.TOKEN_VARIABLE] = token
    return env


def run_commands(group: ProcessGroup, spec: SystemSpec, which: str, values: dict[str, str], directory: Path, cpus: tuple[int, ...]) -> None:
    """The set-up (or tear-down) commands, one after the other; a failing one fails the cell."""
    commands = spec.setup if which == "setup" else spec.teardown
    for i, template in enumerate(commands):
        argv = [fill(a, values) for a in template]
        log = directory / f"system.{which}-{i}.log"
        proc = group.start(f"system {spec.name} {which}[{i}]", argv, log, cpus=cpus, env=_environment(spec, uuid.uuid4().hex, values), merge_stdout=True)
        code = proc.wait_exit(SETUP_TIMEOUT_S)
        group.stop(proc)
        if code != 0:
            detail = describe_exit(code) if code is not None else f"did not finish within {SETUP_TIMEOUT_S:g} s"
            raise ProcessFailed(proc.name, f"{' '.join(argv)}: {detail}", output_tail(log))


def start(
    group: ProcessGroup,
    spec: SystemSpec,
    directory: Path,
    default_cpus: tuple[int, ...],
    command: CommandBuilder | None = None,
    database: Mapping[str, str] | None = None,
) -> RunningSystem:
    """Set up, start and wait for readiness; on any failure the system is stopped again and its
    tree reaped before the error is raised. ``command`` builds the command line from the filled
    placeholders and the scratch directory when the spec has none of its own (a topology's
    balancer, whose configuration names its backends). ``database`` fills the ``{db_*}``
    placeholders (:meth:`archlab.lab.services.Postgres.placeholders`) of a system that uses them."""
    assert spec.target is None, "a remote target is not started"
    process_tree.become_subreaper()
    cpus = spec.cpus or default_cpus
    port = spec.port if spec.port is not None else free_port(spec.host)
    scratch = directory / "system-scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    values = _values(spec, spec.host, port, cpus, scratch, database)
    run_commands(group, spec, "setup", values, directory, cpus)
    token = uuid.uuid4().hex
    log = directory / "system.log"
    if command is not None:
        argv = command(values, scratch)
    elif spec.preset is not None:
        argv = presets.command(spec.preset, values, scratch)
    else:
        assert spec.command is not None
        argv = [fill(a, values) for a in spec.command]
    user = presets.run_as(spec.preset) if spec.preset is not None else None
    proc = group.start(f"system {spec.name}", argv, log, run_as=user, cpus=cpus, env=_environment(spec, token, values), cwd=scratch, merge_stdout=True)
    running = RunningSystem(spec, proc, spec.host, port, process_tree.ProcessTree(proc.pid, token), log, values)
    try:
        wait_ready(running)
    except BaseException:
        stop(group, running)
        raise
    running.start_sampling()
    return running


def wait_ready(system: RunningSystem) -> None:
    """Poll the readiness check until it passes, the process exits, or the timeout."""
    spec = system.spec
    deadline = time.monotonic() + spec.ready_timeout_s
    what = f"GET {spec.ready_path} answering 2xx" if spec.ready == "http" else f"{system.address} accepting connections"
    last = "no attempt"
    while True:
        system.check_alive(f"before it was ready ({what})")
        last = _ready_once(system, min(1.0, max(0.05, deadline - time.monotonic())))
        if not last:
            return
        if time.monotonic() >= deadline:
            raise system.failure(f"not ready within {spec.ready_timeout_s:g} s (ready_timeout): waited for {what}; last attempt: {last}")
        # Readiness has no event to wait on: the system's own protocol is the only signal.
        time.sleep(0.05)


def _ready_once(system: RunningSystem, timeout_s: float) -> str:
    """'' when ready, else why not."""
    spec = system.spec
    if spec.ready == "port":
        try:
            with socket.create_connection((system.host, system.port), timeout=timeout_s):
                return ""
        except OSError as e:
            return str(e)
    conn = http.client.HTTPConnection(system.host, system.port, timeout=timeout_s)
    try:
        conn.request("GET", spec.ready_path)
        response = conn.getresponse()
        response.read()
        return "" if 200 <= response.status < 300 else f"answered {response.status} {response.reason}"
    except (OSError, http.client.HTTPException) as e:
        return str(e) or type(e).__name__
    finally:
        conn.close()


def stop(group: ProcessGroup, system: RunningSystem) -> StopOutcome:
    """Stop signal to the group, grace, SIGKILL of the group, then every member of the tree still
    alive killed and reaped. Runs inside a critical section: a Ctrl-C waits for it."""
    spec = system.spec
    with group.critical():
        system.stop_sampling()
        system.tree.members(scan_environ=True)  # remember every member, to find it after the leader is gone
        proc = system.process
        ignored = False
        started = time.monotonic()
        if proc.poll() is None:
            _signal_group(proc.pid, spec.signal_number)
            if proc.wait_exit(spec.stop_grace_s) is None:
                ignored = True
                _signal_group(proc.pid, signal.SIGKILL)
                proc.popen.wait()
        exit_text = describe_exit(proc.popen.returncode)
        # Whatever stayed in the group got the stop signal and its grace already: SIGKILL.
        _signal_group(proc.pid, signal.SIGKILL)
        group.stop(proc)  # the group's bookkeeping (already dead: nothing more is sent)
        # Members outside the group (setsid) got the stop signal from their parent or not at all:
        # give them what is left of the grace period to finish before calling them left behind.
        settle = started + max(spec.stop_grace_s, 0.5)
        while (leftovers := [m for m in system.tree.members(scan_environ=True) if m.pid != proc.pid]) and time.monotonic() < settle:
            time.sleep(0.02)  # no event tells us that an unrelated pid has exited
        survivors = process_tree.kill_and_reap(leftovers)
        return StopOutcome(
            exit=exit_text,
            ignored_stop_signal=ignored,
            left_behind=tuple(f"{m.pid} ({m.name})" for m in leftovers),
            survivors=tuple(f"{m.pid} ({m.name})" for m in survivors),
        )


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
