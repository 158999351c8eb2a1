"""Running a topology (a ``[[systems]]`` entry with ``backends`` and a ``front``,
:mod:`archlab.spec.topology`) for one cell: its processes started in dependency order (every
backend, each waited for until it is ready; the memcached keys preloaded; then the front, given
the backends' addresses, waited for too), the load generator pointed at the front (at M fronts
side by side: one generator per front, merged exactly by :mod:`archlab.lab.spread`), every
process probed at the window's edges, and everything stopped afterwards in reverse order, also
when a start fails. archlab's own processes (``serve``, ``proxy``, ``middleware``) are started
on their ``listening`` line; ``serve`` and ``proxy`` are probed through their ``rusage`` answer
to SIGUSR1 (CPU, context switches, socket calls, hand-offs: :mod:`archlab.lab.probes`), the
middleware and the peers (presets, commands: :mod:`archlab.lab.foreign`) from ``/proc`` as a
process tree. A Ctrl-C or SIGTERM reaches the lab's :class:`ProcessGroup`, which stops every
process of the topology (each is one of its children). Optional ``cpu_quota`` caps a process
with cgroup v2 ``cpu.max``; where that is not writable the row says why and nothing is capped.
Backends and fronts placed on a worker (``backends.worker``, ``front.worker``, a run on a
cluster) are started, probed and stopped there through the run's load executor
(``system_host``, :mod:`archlab.cluster.remote`): archlab's ``serve`` and ``proxy`` by the
worker's ``archlab-engine`` listening on the worker's address and probed there through their
``rusage`` line, the middleware and the peers by the same :mod:`archlab.lab.foreign` machinery
with their process tree read from that host's ``/proc``. A front is given its backends'
addresses as they listen (a placed backend's worker address, a local one's loopback).

Where requests queue: in the front (its sockets, its hand-off, its backend pools) and in each
backend as in a single server. Where the lab blocks: on each readiness line or check, and on the
load generator's output, as for one server."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from archlab import contract
from archlab.errors import ProcessFailed, ResumableFault
from archlab.lab import foreign, presets, probes, process_tree, spread
from archlab.lab.engine import Engine, load_params
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.lab.runner import CellFailed, LoadExecutor, Measured, RepFiles, RunnerConfig, run_load, with_interference
from archlab.spec.model import Cell, Experiment
from archlab.spec.systems import SystemSpec, column_sources, find_system
from archlab.spec.topology import Topology, memcached_workload
from archlab.spec.units import format_cpu_list
from archlab.store.records import ServerCost
from archlab.store.summary import read_summary

Probe = Literal["rusage", "tree"]
CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_MAX_PERIOD_US = 100_000  # cpu.max's default period
FINAL_COUNTERS_TIMEOUT_S = 2.0  # for the rusage answer of a process about to be stopped
PRELOAD_BATCH = 1000  # sets written before the loader reads anything back (noreply: nothing comes back)


@dataclass
class Member:
    """One process of a running topology."""

    name: str  # backend-0, ..., front
    what: str  # e.g. "serve --arch netty", "preset memcached", "proxy round-robin (single-thread)"
    host: str
    port: int
    cpus: tuple[int, ...]
    probe_kind: Probe
    process: Any  # a ManagedProcess, or the remote system itself for one on a worker
    system: Any = None  # a peer or command (foreign.RunningSystem, or a worker's): its tree and stop rule
    tree: process_tree.ProcessTree | None = None  # archlab's middleware, read from outside
    quota: dict = field(default_factory=dict)
    final_lines: list[str] = field(default_factory=list)  # the middleware's last `stats` line
    final_counters: dict | None = None  # archlab's serve/proxy: its rusage line at the stop
    on: Any = None  # the worker it runs on (archlab.cluster.remote.RemoteHost); None: this host
    log: Path | None = None  # a placed middleware's output, copied here when it stops (its `stats` line)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def check_alive(self, when: str) -> None:
        if self.system is not None:
            self.system.check_alive(when)
        elif (code := self.process.poll()) is not None:
            raise self.process.failure(f"{describe_exit(code)} {when}")

    def sample(self, config: RunnerConfig) -> object:
        if self.probe_kind == "rusage":
            try:
                if self.on is not None:  # probed where it runs
                    return self.process.sample_remote(config.rusage_timeout_s)
                return probes.sample(self.process, config.rusage_timeout_s)
            except ProcessLookupError:
                raise self.process.failure("exited during the load run") from None
        if self.system is not None:
            return self.system.sample()  # read where it runs
        assert self.tree is not None
        return process_tree.sample(self.tree)

    def cost(self, start: object, end: object, requests: int) -> ServerCost:
        if self.probe_kind == "rusage":
            assert isinstance(start, probes.ProcSample) and isinstance(end, probes.ProcSample)
            return probes.cost_between(start, end, requests)
        assert isinstance(start, process_tree.TreeSample) and isinstance(end, process_tree.TreeSample)
        samples = self.system.rss_samples if self.system is not None else []
        return process_tree.tree_cost(start, end, requests, samples)

    def row(self) -> dict:
        return {
            "process": self.name,
            "what": self.what,
            "pid": self.process.pid,
            "address": self.address,
            "cpus": format_cpu_list(self.cpus) if self.cpus else None,
            "cpu_quota": self.quota or None,
            "measured": "by itself (rusage line)" if self.probe_kind == "rusage" else "from outside (/proc of its process tree)",
            **({"worker": self.on.describe()} if self.on is not None else {}),
        }


@dataclass
class RunningTopology:
    spec: SystemSpec
    members: list[Member]

    @property
    def targets(self) -> list[Member]:
        """The processes the load targets (one load generator each): the fronts, else every
        backend."""
        t = self.spec.topology
        assert t is not None
        return self.members[-t.load_targets :]

    def check_alive(self, when: str) -> None:
        for m in self.members:
            m.check_alive(when)

    def sample(self, config: RunnerConfig) -> dict[str, object]:
        return {m.name: m.sample(config) for m in self.members}


# --- start and stop ------------------------------------------------------------------------


def start(
    group: ProcessGroup, engine: Engine, spec: SystemSpec, directory: Path, default_cpus: tuple[int, ...], config: RunnerConfig,
    systems: tuple[SystemSpec, ...] = (), hosts: Callable[[str], Any] | None = None,
) -> RunningTopology:
    """Every process of ``spec``'s topology, backends first, each ready before the next starts;
    on any failure what was started is stopped again before the error is raised. ``systems``
    are the spec's, where a ``backends.system`` entry is found; backends and fronts placed on a
    worker (``backends.worker``, ``front.worker``) start there through ``hosts(name)`` (the
    run's load executor's ``system_host``)."""
    topology = spec.topology
    assert topology is not None
    directory.mkdir(parents=True, exist_ok=True)
    running = RunningTopology(spec, [])
    try:
        for i in range(topology.backends.copies):
            running.members.append(_start_backend(group, engine, spec, topology, i, directory, default_cpus, systems, hosts))
        if topology.preload:
            for m in running.members:
                preload_memcached(m.host, m.port, topology, spec.ready_timeout_s)
        if topology.front is not None:
            backends = [m.address for m in running.members]
            for name in topology.front.names:
                running.members.append(_start_front(group, engine, spec, topology, backends, directory, default_cpus, name, hosts))
    except BaseException:
        # What was started is stopped before the error goes on, and the run keeps how.
        (directory / "failed-start.stop.json").write_text(json.dumps(stop(group, running), indent=2) + "\n")
        raise
    return running


def stop(group: ProcessGroup, running: RunningTopology) -> list[dict]:
    """Every process stopped, the front first (the backends still answer what it relays), and
    every cgroup the lab made removed; returns how each stop went. A worker lost under a placed
    member (a :class:`~archlab.errors.ResumableFault`) does not keep the others from being
    stopped: its fault is raised once every member was."""
    outcomes: list[dict] = []
    lost: ResumableFault | None = None
    with group.critical():
        for m in reversed(running.members):
            try:
                _stop_member(group, m, outcomes)
            except ResumableFault as e:  # the worker's processes died with it, or its lease ends them
                lost = lost or e
                outcomes.append({"process": m.name, "problem": str(e)})
            _remove_cgroup(m.quota)
    if lost is not None:
        raise lost
    return outcomes


def _stop_member(group: ProcessGroup, m: Member, outcomes: list[dict]) -> None:
    if m.system is not None:
        teardown_error = None
        if m.on is not None:
            outcome, teardown_error = m.system.stop(m.cpus)
        else:
            outcome = foreign.stop(group, m.system)
            # Its tear-down commands, as on a worker: a failing one is reported, and the other
            # members are still stopped.
            try:
                foreign.run_commands(group, m.system.spec, "teardown", m.system.values, m.system.log_path.parent, m.cpus)
            except ProcessFailed as e:
                teardown_error = e
        if teardown_error is not None:
            outcomes.append({"process": m.name, "problem": str(teardown_error)})
        outcomes.append({"process": m.name, **outcome.to_dict(), "problem": outcome.problem(m.system.spec)})
        if m.log is not None and m.log.is_file():
            m.final_lines = m.log.read_text(errors="replace").splitlines()
    elif m.on is not None:  # archlab's own process on a worker: asked and stopped there
        if m.probe_kind == "rusage" and m.process.poll() is None:
            m.final_counters = m.process.final_counters(FINAL_COUNTERS_TIMEOUT_S)
        outcomes.append({"process": m.name, "exit": describe_exit(m.on.stop(m.process))})
    else:
        if m.probe_kind == "rusage" and m.process.poll() is None:
            m.final_counters = probes.final_counters(m.process, FINAL_COUNTERS_TIMEOUT_S)
        code = group.stop(m.process)
        m.final_lines = _remaining_lines(m.process)
        outcomes.append({"process": m.name, "exit": describe_exit(code)})


def _stats_line(lines: list[str]) -> dict | None:
    """The middleware's last ``stats {json}`` line (printed on SIGTERM), if it printed one."""
    for line in reversed(lines):
        if line.startswith("stats "):
            try:
                return dict(json.loads(line.split(" ", 1)[1]))
            except ValueError:
                return None
    return None


def _remaining_lines(proc: ManagedProcess) -> list[str]:
    lines = []
    try:
        while (line := proc.read_line(0)) is not None:
            lines.append(line)
    except TimeoutError:
        pass
    return lines


def _cpus_of(cpus: tuple[int, ...] | None, default_cpus: tuple[int, ...]) -> tuple[int, ...]:
    return cpus or default_cpus


def _start_backend(
    group: ProcessGroup, engine: Engine, spec: SystemSpec, topology: Topology, i: int, directory: Path, default_cpus: tuple[int, ...],
    systems: tuple[SystemSpec, ...], hosts: Callable[[str], Any] | None = None,
) -> Member:
    b = topology.backends
    name = f"backend-{i}"
    cpus = _cpus_of(b.cpus[i], default_cpus)
    if b.kind == "architecture":
        options = contract.check_server(b.name, {**dict(b.options), "cpus": format_cpu_list(cpus)})
        path = directory / f"{name}.options.json"
        path.write_text(json.dumps(options, indent=2) + "\n")
        on = _host(b.worker, hosts)
        proc, host, port = _start_own(group, f"{spec.name} {name}", engine.serve_argv(b.name, path), directory / f"{name}.stderr", spec.ready_timeout_s,
                                      on=on)  # fmt: skip
        member = Member(name, f"serve --arch {b.name}", host, port, cpus, "rusage", proc, on=on)
        if on is None:
            member.quota = apply_cpu_quota(proc.pid, b.cpu_quota, f"{spec.name}-{name}")
        return member
    if b.kind == "preset":
        copy = SystemSpec(name=f"{spec.name}.{name}", preset=b.name, cpus=cpus, ready="port", ready_timeout_s=spec.ready_timeout_s, stop_grace_s=spec.stop_grace_s)
        return _start_foreign(group, copy, name, f"preset {b.name}", directory, cpus, b.cpu_quota, host=_host(b.worker, hosts))
    # Another [[systems]] entry (validation made sure it has a command): each copy on its own port.
    named = find_system(systems, "system:" + b.name)
    cpus = b.cpus[i] or named.cpus or default_cpus
    copy = dataclasses.replace(named, name=f"{named.name}.{i}", cpus=cpus, reusable=False)
    return _start_foreign(group, copy, name, f"system {named.name}", directory, cpus, b.cpu_quota, host=_host(b.worker, hosts))


def _host(worker: str | None, hosts: Callable[[str], Any] | None) -> Any:
    """The worker a placed member starts on, None for this host."""
    if worker is None:
        return None
    assert hosts is not None  # refused before the run exists (archlab.lab.session)
    return hosts(worker)


def _start_foreign(
    group: ProcessGroup, copy: SystemSpec, name: str, what: str, directory: Path, cpus: tuple[int, ...], quota: float | None,
    command: foreign.CommandBuilder | None = None, host: Any = None,
) -> Member:
    if host is not None:  # on a worker, by the same machinery (archlab.cluster.remote); no cgroup cap there
        remote = host.start_system(copy, directory / name, cpus, command=command)
        return Member(name, what, remote.host, remote.port, cpus, "tree", remote, system=remote, on=host)
    running = foreign.start(group, copy, directory / name, cpus, command)
    member = Member(name, what, running.host, running.port, cpus, "tree", running.process, system=running)
    member.quota = apply_cpu_quota(running.process.pid, quota, f"{copy.name}")
    return member


def _start_front(
    group: ProcessGroup, engine: Engine, spec: SystemSpec, topology: Topology, backends: list[str], directory: Path, default_cpus: tuple[int, ...],
    name: str = "front", hosts: Callable[[str], Any] | None = None,
) -> Member:
    """The front ``name`` (``front``, or ``front-K`` of several side by side), given every
    backend; on its worker when the front is placed (``front.worker``)."""
    f = topology.front
    assert f is not None
    cpus = _cpus_of(f.cpus, default_cpus)
    on = _host(f.worker, hosts)
    if f.kind == "preset":
        copy = SystemSpec(name=f"{spec.name}.{name}", cpus=cpus, ready="port", ready_timeout_s=spec.ready_timeout_s, stop_grace_s=spec.stop_grace_s,
                          stop_signal="SIGQUIT" if f.name == "nginx" else "SIGTERM")  # fmt: skip
        command = BalancerCommand(f.name, tuple(backends))
        return _start_foreign(group, copy, name, f"preset {f.name} in front of {len(backends)}", directory, cpus, f.cpu_quota, command, host=on)
    if f.kind == "proxy":
        assert f.architecture is not None
        options = contract.check_proxy(f.architecture, {**dict(f.options), "policy": f.name, "backends": ",".join(backends), "cpus": format_cpu_list(cpus)})
        path = directory / f"{name}.options.json"
        path.write_text(json.dumps(options, indent=2) + "\n")
        argv = [str(engine.path), "proxy", "--arch", f.architecture, "--host", "127.0.0.1", "--port", "0", "--options", str(path)]
        proc, host, port = _start_own(group, f"{spec.name} {name}", argv, directory / f"{name}.stderr", spec.ready_timeout_s, on=on)
        member = Member(name, f"proxy {f.name} ({f.architecture})", host, port, cpus, "rusage", proc, on=on)
    else:
        what = f"middleware {f.name}" + (f", {f.workers} workers" if f.workers else "") + (", sharded" if f.sharded else "")
        middleware = MiddlewareCommand(f.name, tuple(backends), f.sharded, f.workers)
        if on is not None:  # a process tree on the worker, started and read there as a peer's
            copy = SystemSpec(name=f"{spec.name}.{name}", cpus=cpus, ready="port", ready_timeout_s=spec.ready_timeout_s, stop_grace_s=spec.stop_grace_s)
            member = _start_foreign(group, copy, name, what, directory, cpus, None, middleware, host=on)
            member.log = directory / name / "system.log"
            return member
        token = uuid.uuid4().hex
        env = {**os.environ, process_tree.TOKEN_VARIABLE: token}
        argv = middleware.argv(str(engine.path), "127.0.0.1", "0", format_cpu_list(cpus), directory / f"{name}-stats")
        proc, host, port = _start_own(group, f"{spec.name} {name}", argv, directory / f"{name}.stderr", spec.ready_timeout_s, env)
        member = Member(name, what, host, port, cpus, "tree", proc, tree=process_tree.ProcessTree(proc.pid, token))
    if on is None:
        member.quota = apply_cpu_quota(proc.pid, f.cpu_quota, f"{spec.name}-{name}")
    return member


@dataclass(frozen=True)
class BalancerCommand:
    """The command line of a preset front (HAProxy, nginx, twemproxy) in front of ``backends``:
    a picklable builder, so that a front on a worker builds it there (its configuration file in
    that host's scratch directory)."""

    preset: str
    backends: tuple[str, ...]

    def __call__(self, values: dict[str, str], scratch: Path) -> list[str]:
        if self.preset == "nutcracker":
            values = {**values, "stats_port": str(foreign.free_port("127.0.0.1"))}
        return presets.balancer_command(self.preset, values, scratch, list(self.backends))


@dataclass(frozen=True)
class MiddlewareCommand:
    """archlab's memcached middleware in front of ``backends``; as a builder (on a worker) it
    listens on the host and port the lab chose there, with that host's ``archlab-engine``."""

    design: str
    backends: tuple[str, ...]
    sharded: bool
    workers: int | None

    def argv(self, engine: str, host: str, port: str, cpus: str, stats_dir: Path) -> list[str]:
        argv = [engine, "middleware", "--arch", self.design, "--servers", ",".join(self.backends), "--sharded", "true" if self.sharded else "false"]
        argv += ["--workers", str(self.workers)] if self.workers is not None else []
        return argv + ["--host", host, "--port", port, "--cpus", cpus, "--stats-dir", str(stats_dir)]

    def __call__(self, values: dict[str, str], scratch: Path) -> list[str]:
        from archlab.lab.engine import find_engine  # the worker's own build

        return self.argv(str(find_engine()), values["host"], values["port"], values["cpus"], scratch / "stats")


def _start_own(
    group: ProcessGroup, name: str, argv: list[str], stderr: Path, timeout_s: float, env: dict[str, str] | None = None, on: Any = None,
) -> tuple[Any, str, int]:
    """An ``archlab-engine`` process (here, or on the worker ``on``, listening on its address)
    and the address of its ``listening`` line; stopped again when it never prints one (it is
    not yet a member the topology's stop would find)."""
    from archlab.lab.runner import _listening_address  # the one reader of `listening HOST:PORT`

    proc = group.start(name, argv, stderr, env=env) if on is None else on.start_server(argv, stderr, name)
    try:
        host, port = _listening_address(proc, timeout_s)
    except BaseException:
        if on is None:
            group.stop(proc)
        else:
            on.stop(proc)
        raise
    return proc, host, port


# --- memcached preloading --------------------------------------------------------------------


def preload_memcached(host: str, port: int, topology: Topology, timeout_s: float) -> int:
    """Write keys ``PREFIX0`` .. ``PREFIX(N-1)`` (the load's ``key_prefix``, memtier's by default)
    into one memcached server, pipelined with ``noreply``, each value the load's ``data_size``
    bytes (its largest, for a range); a final ``version`` round trip proves every set was read.
    The load generator then finds every key of ``key_min..key_max`` below N (seed 002 §2 read
    its keys after a write-only warm-up to the same end)."""
    load = dict(topology.load)
    prefix = str(load.get("key_prefix", "memtier-"))
    size_text = str(load.get("data_size", "32"))
    size = int(size_text.rsplit("-", 1)[-1]) if size_text.startswith("uniform:") else int(size_text)
    value = b"x" * size
    deadline = time.monotonic() + max(timeout_s, 30.0)
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        for first in range(0, topology.preload, PRELOAD_BATCH):
            batch = b"".join(
                b"set %s 0 0 %d noreply\r\n%s\r\n" % ((prefix + str(k)).encode(), size, value) for k in range(first, min(first + PRELOAD_BATCH, topology.preload))
            )
            s.sendall(batch)
        s.sendall(b"version\r\n")
        reply = b""
        while b"\r\n" not in reply:
            if time.monotonic() > deadline:
                raise ProcessFailed(f"memcached {host}:{port}", f"preloading {topology.preload} keys: no answer to version within {timeout_s:g} s")
            chunk = s.recv(4096)
            if not chunk:
                raise ProcessFailed(f"memcached {host}:{port}", f"closed the connection while {topology.preload} keys were preloaded")
            reply += chunk
    if not reply.startswith(b"VERSION"):
        raise ProcessFailed(f"memcached {host}:{port}", f"preloading {topology.preload} keys: answered {reply[:200]!r}")
    return topology.preload


# --- cgroup v2 cpu.max ---------------------------------------------------------------------


def apply_cpu_quota(pid: int, share: float | None, label: str) -> dict:
    """Put ``pid`` into a new cgroup under the lab's own with ``cpu.max`` = ``share`` CPUs; the
    answer says what was applied or why nothing was (for the manifest and the probe file)."""
    if share is None:
        return {}
    asked = {"cpu_quota": share}
    if not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return {**asked, "applied": False, "why": f"cgroup v2 is not mounted at {CGROUP_ROOT} (this machine has cgroup v1 or none)"}
    try:
        own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
        parent = CGROUP_ROOT / own.strip().lstrip("/")
        if "cpu" not in (parent / "cgroup.controllers").read_text().split():
            return {**asked, "applied": False, "why": f"the cpu controller is not available in {parent}"}
        if "cpu" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+cpu")
        child = parent / f"archlab-{label}-{pid}"
        child.mkdir()
        quota_us = int(round(share * CPU_MAX_PERIOD_US))
        (child / "cpu.max").write_text(f"{quota_us} {CPU_MAX_PERIOD_US}")
        (child / "cgroup.procs").write_text(str(pid))
    except (OSError, StopIteration) as e:
        return {**asked, "applied": False, "why": f"cgroup v2 not writable here: {e}"}
    return {**asked, "applied": True, "cpu_max": f"{quota_us} {CPU_MAX_PERIOD_US}", "cgroup": str(child)}


def cgroup_v2_support() -> str | None:
    """None when a cpu.max cap can be applied here, else why not (for the manifest)."""
    if not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return f"cgroup v2 is not mounted at {CGROUP_ROOT} (this machine has cgroup v1 or none)"
    try:
        own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration) as e:
        return f"cannot tell the lab's own cgroup: {e}"
    parent = CGROUP_ROOT / own.strip().lstrip("/")
    try:
        if "cpu" not in (parent / "cgroup.controllers").read_text().split():
            return f"the cpu controller is not available in {parent}"
    except OSError as e:
        return f"cannot read {parent}: {e}"
    if not os.access(parent, os.W_OK):
        return f"{parent} is not writable by this user"
    return None


def quota_fact(exp: Experiment) -> dict | None:
    """The manifest's ``cpu_quota``: every cap the spec asks for and whether this machine can
    apply it (each cell's probe.json says what was applied)."""
    asked = []
    for s in exp.systems:
        t = s.topology
        if t is None:
            continue
        if t.backends.cpu_quota is not None:
            asked += [{"system": s.name, "process": f"backend-{i}", "cpu_quota": t.backends.cpu_quota} for i in range(t.backends.copies)]
        if t.front is not None and t.front.cpu_quota is not None:
            asked += [{"system": s.name, "process": name, "cpu_quota": t.front.cpu_quota} for name in t.front.names]
    if not asked:
        return None
    why = cgroup_v2_support()
    return {"mechanism": "cgroup v2 cpu.max", "applicable": why is None, "why_not": why, "asked": asked}


def _remove_cgroup(quota: dict) -> None:
    path = quota.get("cgroup")
    if path:
        try:
            Path(path).rmdir()
        except OSError:
            pass  # still has a process (it is being reaped) or already gone: nothing to undo


# --- one cell ------------------------------------------------------------------------------


def measure(
    group: ProcessGroup, engine: Engine, exp: Experiment, cell: Cell, rep: int, files: RepFiles, config: RunnerConfig,
    load_executor: LoadExecutor | None = None,
) -> Measured:
    """One repetition of a cell whose architecture is a topology: start, load the front, probe
    every process, stop; the row's cost is the sum over the processes (per process in the
    probe file). The load of one front goes through ``load_executor`` when given (a cluster's
    shards); that of several fronts is spread here, and the probe file says so."""
    spec = find_system(exp.systems, cell.architecture)
    topology = spec.topology
    assert topology is not None
    hosts = load_executor.system_host if load_executor is not None else None
    running = start(group, engine, spec, files.directory / "topology", exp.placement.server_cpus, config, exp.systems, hosts)
    stops: list[dict] = []
    try:
        targets = [m.address for m in running.targets]
        params = load_params(cell, exp, targets[0], repetition=rep, records_path=files.records if exp.load.records else None)
        if topology.protocol == "memcached":
            # The system's load table, then the workload level's query (/memcached?ratio=0:1);
            # a memcached run has no path.
            params = {**params, **dict(topology.load), **memcached_workload(cell.workload)}
            params.pop("path", None)
            params = contract.check_load(params)
        files.load_params.write_text(json.dumps(params, indent=2) + "\n")
        probe, check_alive = (lambda: running.sample(config)), (lambda: running.check_alive("during the load run"))
        if len(targets) == 1:
            argv = engine.load_argv(files.load_params, files.summary, files.hdr_log)
            window = run_load(group, argv, probe, check_alive, exp, files, config, load_executor, f"{cell.cell_id}-rep{rep}")
        else:
            window = spread.drive_spread(group, engine, params, targets, probe, check_alive, exp, files, config)
    finally:
        stops = stop(group, running)
        (files.directory / "topology.stop.json").write_text(json.dumps(stops, indent=2) + "\n")
    problems = [f"{s['process']}: {s['problem']}" for s in stops if s.get("problem")]
    if problems:
        raise CellFailed("; ".join(problems))
    summary = read_summary(files.summary)
    n = summary.measurement.requests
    if n == 0:
        m = summary.measurement
        raise CellFailed(f"no request completed in the measurement window (errors: {m.errors_by_class or m.errors})")
    assert isinstance(window.start, dict) and isinstance(window.end, dict)
    rows = []
    costs = []
    for member in running.members:
        cost = member.cost(window.start[member.name], window.end[member.name], n)
        costs.append(cost)
        final = member.final_counters or (_stats_line(member.final_lines) if member.final_lines else None)
        rows.append({**member.row(), "cost": vars(cost), **({"final_counters": final} if final else {})})
    total = sum_costs(costs, n)
    probe_doc = {
        "system": spec.name,
        "topology": topology.to_dict(),
        "window_sources": [window.start_source, window.end_source],
        "processes": rows,
        "column_sources": column_sources(cell.architecture, exp.systems),
        "stop": stops,
        "cost": vars(total),
    }
    if load_executor is not None and len(running.targets) > 1:  # not the cluster's shards: say where it ran
        probe_doc["load"] = f"on this host: the load of {len(running.targets)} fronts is spread here (archlab.lab.spread), not sharded"
    cpus = {cpu for member in running.members for cpu in member.cpus}
    return Measured(summary, total, probe_doc, with_interference(window, cpus, probe_doc))


def sum_costs(costs: list[ServerCost], requests: int) -> ServerCost:
    """The topology's cost: CPU and context switches summed over its processes; socket calls
    and hand-offs summed where every process counts them (else unknown, never a partial sum);
    the largest resident set; every thread."""

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    user = sum(c.cpu_user_s for c in costs)
    system = sum(c.cpu_sys_s for c in costs)
    rss = [c.peak_rss_kib for c in costs if c.peak_rss_kib is not None]
    threads = [c.server_threads for c in costs if c.server_threads is not None]
    return ServerCost(
        cpu_user_s=user,
        cpu_sys_s=system,
        cpu_us_per_request=(user + system) * 1e6 / max(requests, 1),
        voluntary_cs_per_request=total([c.voluntary_cs_per_request for c in costs]),
        involuntary_cs_per_request=total([c.involuntary_cs_per_request for c in costs]),
        read_syscalls_per_request=total([c.read_syscalls_per_request for c in costs]),
        write_syscalls_per_request=total([c.write_syscalls_per_request for c in costs]),
        peak_rss_kib=max(rss) if rss else None,
        server_threads=sum(threads) if threads else None,
        handoffs_per_request=total([c.handoffs_per_request for c in costs]),
    )
