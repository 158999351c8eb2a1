"""One cell whose system under test is a ``[[systems]]`` entry rather than an archlab server. A
started system (:mod:`archlab.lab.foreign`) is probed from outside at the window's edges (its
process tree's CPU time and context switches from ``/proc``, resident memory sampled through the
cell); its socket system calls are unavailable, never zero, since only archlab's servers count
their own. A remote target gets load only: the row has no server cost and the probe file says
why. Reusable systems are started at their first cell and kept by :class:`SystemPool` until the
run ends. The load generator is the same as for every other cell (:func:`runner.drive_load`)."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path

from archlab.lab import foreign
from archlab.lab.engine import Engine, load_params
from archlab.lab.process_tree import TreeSample, spending_between
from archlab.lab.processes import ProcessGroup
from archlab.lab.runner import CellFailed, RepFiles, RunnerConfig, drive_load
from archlab.spec.model import Cell, Experiment
from archlab.spec.systems import SystemSpec, column_sources, find_system
from archlab.store.records import ServerCost
from archlab.store.summary import LoadSummary, read_summary


class SystemPool:
    """The run's reusable systems, started at first use and stopped when the run ends."""

    def __init__(self, group: ProcessGroup, run_directory: Path, default_cpus: tuple[int, ...]):
        self.group = group
        self.directory = run_directory / "systems"
        self.default_cpus = default_cpus
        self._running: dict[str, foreign.RunningSystem] = {}

    def get(self, spec: SystemSpec) -> foreign.RunningSystem:
        running = self._running.get(spec.name)
        if running is not None and running.process.poll() is not None:  # died in an earlier cell
            self._stop(spec.name)
            running = None
        if running is None:
            directory = self.directory / spec.name
            directory.mkdir(parents=True, exist_ok=True)
            running = foreign.start(self.group, spec, directory, self.default_cpus)
            self._running[spec.name] = running
        return running

    def _stop(self, name: str) -> None:
        running = self._running.pop(name)
        outcome = foreign.stop(self.group, running)
        stop_doc = {**outcome.to_dict(), "problem": outcome.problem(running.spec)}
        (self.directory / name / "stop.json").write_text(json.dumps(stop_doc, indent=2) + "\n")
        foreign.run_commands(self.group, running.spec, "teardown", running.values, self.directory / name, running.spec.cpus or self.default_cpus)

    def stop_all(self) -> None:
        for name in list(self._running):
            self._stop(name)


def _connect_host(host: str) -> str:
    """Where the load generator connects for a system listening on ``host`` (an IP address)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    try:
        return str(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
    except socket.gaierror as e:
        raise CellFailed(f"cannot resolve host {host!r}: {e}") from None


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _load_argv(engine: Engine, address: str, cell: Cell, exp: Experiment, files: RepFiles, records: Path | None, rep: int) -> list[str]:
    """The load generator's command line for ``cell`` against ``address``, its parameters
    checked by the data plane and written beside the repetition's other files, as the runner
    does for archlab's own servers."""
    params = load_params(cell, exp, address, repetition=rep, records_path=records)
    files.load_params.write_text(json.dumps(params, indent=2) + "\n")
    return engine.load_argv(files.load_params, files.summary, files.hdr_log)


def measure(
    group: ProcessGroup, engine: Engine, exp: Experiment, cell: Cell, rep: int, files: RepFiles, config: RunnerConfig, pool: SystemPool
) -> tuple[LoadSummary, ServerCost | None, dict]:
    spec = find_system(exp.systems, cell.architecture)
    if spec.topology is not None:
        from archlab.lab import topology  # it builds on this module

        return topology.measure(group, engine, exp, cell, rep, files, config)
    sources = column_sources(cell.architecture, exp.systems)
    records = files.records if exp.load.records else None
    if spec.target is not None:
        remote = dataclasses.replace(cell, workload=spec.target.base_path + cell.workload)
        address = _target(_connect_host(spec.target.host), spec.target.port)
        argv = _load_argv(engine, address, remote, exp, files, records, rep)
        drive_load(group, argv, lambda: None, lambda: None, exp, files, config)
        summary = _summary(files)
        return summary, None, {"remote_target": spec.target.url, "column_sources": sources}
    system = pool.get(spec) if spec.reusable else foreign.start(group, spec, files.directory, exp.placement.server_cpus)
    outcome = None
    try:
        address = _target(_connect_host(system.host), system.port)
        argv = _load_argv(engine, address, cell, exp, files, records, rep)
        window = drive_load(group, argv, system.sample, lambda: system.check_alive("during the load run"), exp, files, config)
    finally:
        if not spec.reusable:
            outcome = foreign.stop(group, system)
            (files.directory / "system.stop.json").write_text(json.dumps(outcome.to_dict(), indent=2) + "\n")
            foreign.run_commands(group, spec, "teardown", system.values, files.directory, spec.cpus or exp.placement.server_cpus)
    if outcome is not None and (problem := outcome.problem(spec)) is not None:
        raise system.failure(problem)
    summary = _summary(files)
    start, end = window.start, window.end
    assert isinstance(start, TreeSample) and isinstance(end, TreeSample)
    cost = tree_cost(start, end, summary.measurement.requests, system.rss_samples)
    t0 = system.rss_samples[0][0] if system.rss_samples else start.taken_at
    probe_doc = {
        "system": spec.name,
        "start": {"source": window.start_source, "members": [dataclasses.asdict(m) for m in start.members]},
        "end": {"source": window.end_source, "members": [dataclasses.asdict(m) for m in end.members]},
        "window_s": [start.taken_at - t0, end.taken_at - t0],
        "rss_samples": [[round(t - t0, 3), kib, threads] for t, kib, threads in system.rss_samples],
        "column_sources": sources,
        "stop": outcome.to_dict() if outcome is not None else "reusable: stopped when the run ends",
        "cost": vars(cost),
    }
    return summary, cost, probe_doc


def tree_cost(start: TreeSample, end: TreeSample, requests: int, rss_samples: list[tuple[float, int, int]]) -> ServerCost:
    """What a process tree read from outside spent between two samples, per request; its
    socket calls are unavailable (see :func:`column_sources`)."""
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


def _summary(files: RepFiles) -> LoadSummary:
    summary = read_summary(files.summary)
    if summary.measurement.requests == 0:
        m = summary.measurement
        raise CellFailed(f"no request completed in the measurement window (errors: {m.errors_by_class or m.errors})")
    return summary
