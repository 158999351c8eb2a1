"""One cell whose system under test is a ``[[systems]]`` entry rather than an archlab server. A
started system (:mod:`archlab.lab.foreign`) is probed from outside at the window's edges (its
process tree's CPU time and context switches from ``/proc``, resident memory sampled through the
cell); its socket system calls are unavailable, never zero, since only archlab's servers count
their own. A remote target gets load only: the row has no server cost and the probe file says
why. Reusable systems are started at their first cell and kept by :class:`SystemPool` until the
run ends. The load generator is the same as for every other cell (:func:`runner.run_load`): a
local one, or a cluster's shards when the run has a load executor (the system is then probed
just before the shards start and just after they end)."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path
from typing import Any, Callable

from archlab.lab import foreign
from archlab.lab.engine import Engine, load_params
from archlab.lab.process_tree import TreeSample, tree_cost
from archlab.lab.processes import ProcessGroup
from archlab.lab.runner import CellFailed, LoadExecutor, Measured, RepFiles, RunnerConfig, run_load, with_interference
from archlab.lab.services import DatabaseMeter, Postgres
from archlab.spec.model import Cell, Experiment
from archlab.spec.systems import SystemSpec, column_sources, find_system
from archlab.store.summary import LoadSummary, read_summary


class SystemPool:
    """The run's reusable systems, started at first use and stopped when the run ends; and where
    every system starts and stops: here (:mod:`archlab.lab.foreign`), or on the worker its
    ``worker`` names, through ``hosts(name)`` (the run's load executor's ``system_host``)."""

    def __init__(self, group: ProcessGroup, run_directory: Path, default_cpus: tuple[int, ...], database: Postgres | None = None,
                 hosts: Callable[[str], Any] | None = None):
        self.group = group
        self.directory = run_directory / "systems"
        self.default_cpus = default_cpus
        # The run's database, for the systems that name it ({db_url}, ...); None when none does.
        self.database = database
        self.hosts = hosts
        self._running: dict[str, Any] = {}

    def start(self, spec: SystemSpec, directory: Path) -> Any:
        """``spec`` started and ready: a :class:`foreign.RunningSystem`, or the remote system of its worker."""
        if spec.worker is None:
            return foreign.start(self.group, spec, directory, self.default_cpus, database=self.database_values)
        assert self.hosts is not None  # refused before the run exists (archlab.lab.session)
        return self.hosts(spec.worker).start_system(spec, directory, self.default_cpus, self.database_values)

    def stop(self, system: Any, directory: Path, stop_file: str) -> foreign.StopOutcome:
        """Stop it, write how the stop went into ``directory / stop_file``, then run its
        tear-down commands (on its worker for a placed system, its files copied into ``directory``)."""
        spec = system.spec
        cpus = spec.cpus or self.default_cpus
        if spec.worker is None:
            outcome = foreign.stop(self.group, system)
            teardown_error = None
        else:
            outcome, teardown_error = system.stop(cpus)
        (directory / stop_file).write_text(json.dumps({**outcome.to_dict(), "problem": outcome.problem(spec)}, indent=2) + "\n")
        if teardown_error is not None:
            raise teardown_error
        if spec.worker is None:
            foreign.run_commands(self.group, spec, "teardown", system.values, directory, cpus)
        return outcome

    def get(self, spec: SystemSpec) -> Any:
        running = self._running.get(spec.name)
        if running is not None and running.process.poll() is not None:  # died in an earlier cell
            self._stop(spec.name)
            running = None
        if running is None:
            directory = self.directory / spec.name
            directory.mkdir(parents=True, exist_ok=True)
            running = self.start(spec, directory)
            self._running[spec.name] = running
        return running

    @property
    def database_values(self) -> dict[str, str] | None:
        return self.database.placeholders() if self.database is not None else None

    def _stop(self, name: str) -> None:
        self.stop(self._running.pop(name), self.directory / name, "stop.json")

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
    group: ProcessGroup, engine: Engine, exp: Experiment, cell: Cell, rep: int, files: RepFiles, config: RunnerConfig, pool: SystemPool,
    load_executor: LoadExecutor | None = None,
) -> Measured:
    spec = find_system(exp.systems, cell.architecture)
    if spec.topology is not None:
        from archlab.lab import topology  # it builds on this module

        return topology.measure(group, engine, exp, cell, rep, files, config, load_executor)
    sources = column_sources(cell.architecture, exp.systems)
    records = files.records if exp.load.records else None
    if spec.target is not None:
        remote = dataclasses.replace(cell, workload=spec.target.base_path + cell.workload)
        address = _target(_connect_host(spec.target.host), spec.target.port)
        argv = _load_argv(engine, address, remote, exp, files, records, rep)
        window = run_load(group, argv, lambda: None, lambda: None, exp, files, config, load_executor, f"{cell.cell_id}-rep{rep}")
        summary = _summary(files)
        probe_doc: dict[str, object] = {"remote_target": spec.target.url, "column_sources": sources}
        # The system is elsewhere: what ran here disturbed the generator, on the client CPUs.
        return Measured(summary, None, probe_doc, with_interference(window, exp.placement.client_cpus, probe_doc))
    if spec.uses_database and pool.database is not None and pool.database.process.poll() is not None:
        raise pool.database.process.failure("exited during the run")
    system = pool.get(spec) if spec.reusable else pool.start(spec, files.directory)
    database = DatabaseMeter.of(pool.database) if spec.uses_database and pool.database is not None else None
    outcome = None
    try:
        address = _target(_connect_host(system.host), system.port)
        argv = _load_argv(engine, address, cell, exp, files, records, rep)
        probe = database.probing(system.sample) if database is not None else system.sample
        window = run_load(group, argv, probe, lambda: system.check_alive("during the load run"), exp, files, config, load_executor,
                          f"{cell.cell_id}-rep{rep}")
    finally:
        if not spec.reusable:
            outcome = pool.stop(system, files.directory, "system.stop.json")
    if outcome is not None and (problem := outcome.problem(spec)) is not None:
        raise system.failure(problem)
    summary = _summary(files)
    start, end = window.start, window.end
    assert end is not None  # drive_load fills it in
    db_window = None
    if database is not None:  # the probe sampled the database too: (system, database)
        (start, db_start), (end, db_end) = start, end
        db_window = (db_start, db_end)
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
    if spec.worker is not None:  # where it ran: the samples above are that host's /proc
        probe_doc["worker"] = system.describe()
    if database is not None and db_window is not None:
        probe_doc["processes"] = [
            {"process": "system", "what": f"system {spec.name}", "measured": "from /proc", "cost": vars(cost)},
            database.row(*db_window, summary.measurement.requests),
        ]
    return Measured(summary, cost, probe_doc, with_interference(window, spec.cpus or exp.placement.server_cpus, probe_doc))


def _summary(files: RepFiles) -> LoadSummary:
    summary = read_summary(files.summary)
    if summary.measurement.requests == 0:
        m = summary.measurement
        raise CellFailed(f"no request completed in the measurement window (errors: {m.errors_by_class or m.errors})")
    return summary
