"""The runner: every pending (cell, repetition) of a run, one after the other, on real processes.
For each pair it starts the server pinned to the server CPUs, waits for its ``listening`` line
and for an HTTP answer to the cell's workload, runs the load generator pinned to the client CPUs,
probes the server when the generator announces ``phase measure`` and ``phase end`` (falling back
to just before the generator starts / just after it exits), stops the server, and records one
catalog row. A pair that fails (server dies, generator cannot connect, summary missing) becomes a
``failed`` row carrying the error and the stderr tail, and the run goes on. An interruption stops
every process, marks the run ``interrupted`` and re-raises, so the CLI can exit 130. A cell whose
architecture is a ``system:NAME`` level runs a foreign system or a remote target instead of the
server (:mod:`archlab.lab.system_cell`), with the same load driver (:func:`drive_load`). A spec
whose repetitions are a rule (``{min, max, extra_time}``) gets, after its pending pairs, the
rounds :mod:`archlab.lab.adaptive` adds, run and recorded the same way.

The load generator of a server cell, or of a ``system:NAME`` cell, runs here, as a child of
this process (the default), or through a :class:`LoadExecutor` (e.g.
``archlab.cluster.ShardedLoad``: shards on a cluster's load hosts, merged into the same summary
and interval log); :func:`run_load` is that one seam.
A :class:`~archlab.errors.ResumableFault` of an executor stops the run with the pair unrecorded."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Protocol, TextIO

from archlab.errors import ArchlabError, Interrupted, ProcessFailed, ResumableFault
from archlab.lab import adaptive, disturbed, interference, network, probes
from archlab.lab.engine import Engine, load_params, serve_options
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.lab.progress import Progress
from archlab.lab.services import DatabaseMeter, Postgres, needs_postgres, postgres, start_for_cell
from archlab.spec.model import Cell, Experiment
from archlab.spec.systems import is_system_level
from archlab.store.records import CellRecord, Conditions, ServerCost
from archlab.store.runs import RunHandle
from archlab.store.summary import LoadSummary, read_summary

if TYPE_CHECKING:
    from archlab.lab.system_cell import SystemPool


@dataclass(frozen=True)
class RunnerConfig:
    ready_timeout_s: float = 10.0  # until the server prints `listening`
    health_timeout_s: float = 10.0  # until it answers the workload's URL with 200
    stop_grace_s: float = 3.0  # between SIGTERM and SIGKILL
    load_slack_s: float = 30.0  # beyond warm-up + duration + timeout before a load run is abandoned
    rusage_timeout_s: float = 2.0  # for the server's answer to SIGUSR1


@dataclass(frozen=True)
class RepFiles:
    """The files of one (cell, repetition) directory."""

    directory: Path

    @property
    def load_params(self) -> Path:
        """The load generator's parameters, as ``archlab-engine load --params`` read them."""
        return self.directory / "load.params.json"

    @property
    def summary(self) -> Path:
        return self.directory / "summary.json"

    @property
    def hdr_log(self) -> Path:
        return self.directory / "hdr.log"

    @property
    def records(self) -> Path:
        """Raw per-request records (``load --records``), when the spec keeps them."""
        return self.directory / "records.bin"

    @property
    def serve_options(self) -> Path:
        """The server's options, as ``archlab-engine serve --options`` read them."""
        return self.directory / "serve.options.json"

    @property
    def server_stderr(self) -> Path:
        return self.directory / "server.stderr"

    @property
    def load_stderr(self) -> Path:
        return self.directory / "load.stderr"

    @property
    def probe(self) -> Path:
        return self.directory / "probe.json"

    @property
    def error(self) -> Path:
        return self.directory / "error.txt"


@dataclass
class Window:
    """The server probes bracketing the measurement window, and where each came from (a
    :class:`probes.ProcSample` of an archlab server, a tree sample of a foreign system), with
    the machine at each edge (:mod:`archlab.lab.interference`). Its edges are set only through
    :meth:`opened`, :meth:`reopen` and :meth:`close`, so the machine is read with every probe."""

    start: Any
    start_source: str
    end: Any | None = None
    end_source: str = "after load exit"
    machine_start: interference.Snapshot | None = None
    machine_end: interference.Snapshot | None = None
    #: The processes the lab started, whose CPU time is the lab's (the rest is foreign).
    group: ProcessGroup | None = field(default=None, repr=False)

    @classmethod
    def opened(cls, sample: Any, source: str, group: ProcessGroup) -> "Window":
        return cls(start=sample, start_source=source, machine_start=_machine(group), group=group)

    def reopen(self, sample: Any, source: str) -> None:
        """Move the start to now (the generator announced its measurement)."""
        self.start, self.start_source, self.machine_start = sample, source, _machine(self.group)

    def close(self, sample: Any, source: str) -> None:
        self.end, self.end_source, self.machine_end = sample, source, _machine(self.group)

    def interference(self, measured_cpus: Iterable[int]) -> interference.Interference | None:
        """What else ran on the machine between the edges, about ``measured_cpus``."""
        if self.machine_start is None or self.machine_end is None:
            return None
        return interference.between(self.machine_start, self.machine_end, measured_cpus)


def _machine(group: ProcessGroup | None) -> interference.Snapshot:
    return interference.take(p.pid for p in group.processes) if group is not None else interference.take()


class LoadExecutor(Protocol):
    """Runs a cell's load command elsewhere than in this process (see :func:`run_load`)."""

    def run_load(self, argv: list[str], directory: Path, limit_s: float, label: str) -> None:
        """Run the load of ``argv`` within ``limit_s`` and leave in ``directory`` what a local
        run leaves there (``summary.json``, ``hdr.log``, ``load.stderr``); raise an
        :class:`ArchlabError` naming the cause on failure."""
        ...

    def describe(self) -> dict:
        """Where the load runs (hosts, clocks...), recorded under ``load_hosts`` in the manifest
        each time a run starts or resumes with this executor."""
        ...

    def check_workers(self, names: dict[str, str]) -> None:
        """Refuse (naming the field, and the workers there are) any of ``names`` (field ->
        worker name) that is not a worker of the cluster."""
        ...

    def system_host(self, name: str) -> Any:
        """The worker ``name`` as a place to run ``[[systems]]`` entries (e.g.
        ``archlab.cluster.remote.RemoteHost``): ``start_system(spec, directory, default_cpus,
        database)`` returns a system with the ``sample``/``check_alive``/``rss_samples`` of a
        local one, ``stop_system(system, teardown_cpus)`` stops it there."""
        ...

    #: Where a server cell's server runs instead of here, when not None (e.g.
    #: ``archlab.cluster.remote.RemoteHost``, a named worker): ``start_server(argv, stderr_path)``
    #: returns a process with the ``poll``/``expect``/``failure``/``sample_remote`` of a local
    #: one, and ``stop(process)`` stops it there and returns its exit status.
    server_host: Any


class CellFailed(ArchlabError):
    """A pair ran to the end but its result is unusable (e.g. no request completed)."""


class Measured(NamedTuple):
    """What one repetition of any kind of cell gives: the generator's summary, the cost of the
    system under test (None for a remote target), the probe file's content, and what else ran on
    the machine meanwhile (None where it was not read)."""

    summary: LoadSummary
    cost: ServerCost | None
    probe_doc: dict
    conditions: Conditions | None = None


def with_interference(window: Window, measured_cpus: Iterable[int], probe_doc: dict) -> Conditions | None:
    """Add the window's interference on ``measured_cpus`` to ``probe_doc``; the row's summary of it."""
    found = window.interference(measured_cpus)
    if found is None:
        return None
    probe_doc["interference"] = found.to_dict()
    return found.conditions()


def execute(handle: RunHandle, engine: Engine, config: RunnerConfig = RunnerConfig(), stream: TextIO | None = None,
            load_executor: LoadExecutor | None = None) -> str:
    """Run the pending pairs of ``handle``, the load generator locally or through
    ``load_executor``; returns the run's final status (``complete``)."""
    pending = handle.pending()
    planned = handle.experiment.cells_planned
    progress = Progress(total=planned, done=planned - len(pending), stream=stream)
    if load_executor is not None:
        handle.store.append_manifest_fact(handle.run_id, "load_hosts", load_executor.describe())
    if handle.experiment.network is not None:  # which link each cell runs over
        handle.store.append_manifest_fact(handle.run_id, "network", network.describe(handle.experiment))
    _record_topology_facts(handle)
    _record_system_workers(handle, load_executor)
    try:
        with ProcessGroup(config.stop_grace_s) as group:
            try:
                # The database of /db lives for the whole run (see archlab.lab.services).
                database = _start_database(group, handle, load_executor) if any(_needs_db(handle.experiment, c) for c, _ in pending) else None
                # Systems declared reusable live for the run too (see archlab.lab.system_cell).
                systems = _system_pool(group, handle, database, load_executor)
                try:
                    # The base repetitions, then any the spec's adaptive rule adds (archlab.lab.adaptive).
                    for cell, rep in adaptive.schedule(handle, pending, progress.extend):
                        for attempt in range(1 + disturbed.MAX_REPEATS):
                            progress.cell_started(cell, rep)
                            record = _run_pair(group, engine, handle, cell, rep, config, database, systems, load_executor)
                            with group.critical():  # a finished pair is not thrown away by a late Ctrl-C
                                handle.record(cell, rep, record)
                            progress.cell_finished(cell, rep, record)
                            if attempt == disturbed.MAX_REPEATS or not disturbed.should_repeat(handle.experiment, record):
                                break
                            # Disturbed ([experiment] max_foreign): the cell again (archlab.lab.disturbed).
                            again = disturbed.next_repetition(handle, cell)
                            progress.note(disturbed.repeat_note(cell, rep, record, again))
                            progress.extend(1)
                            rep = again
                finally:
                    try:
                        if systems is not None:
                            systems.stop_all()
                    finally:
                        if database is not None:
                            database.stop(group)
                with group.critical():
                    handle.remove_unrecorded_rep_dirs()
                    handle.set_status("complete")
            except Interrupted:
                _abort(group, handle, "interrupted")
                raise
            except BaseException:
                _abort(group, handle, "failed")
                raise
    finally:
        progress.close()
    return "complete"


def _record_topology_facts(handle: RunHandle) -> None:
    """The CPU caps a topology asks for, and whether this machine can apply them (see archlab.lab.topology)."""
    if any(s.topology is not None for s in handle.experiment.systems):
        from archlab.lab.topology import quota_fact  # it builds on this module

        if (fact := quota_fact(handle.experiment)) is not None:
            handle.store.append_manifest_fact(handle.run_id, "cpu_quota", fact)


def _record_system_workers(handle: RunHandle, load_executor: LoadExecutor | None) -> None:
    """Where each part of the spec placed on a worker runs (a ``[[systems]]`` entry, a
    topology's backends ``NAME.backends`` or front ``NAME.front``: its worker's name, address
    and host), recorded when the run starts or resumes; opening the workers here also proves
    them reachable before the first cell."""
    placed = {label: worker for _, label, worker in handle.experiment.placed_workers()}
    if placed and load_executor is not None:
        fact = {name: load_executor.system_host(worker).describe() for name, worker in placed.items()}
        handle.store.append_manifest_fact(handle.run_id, "system_workers", fact)


def _needs_db(exp: Experiment, cell: Cell) -> bool:
    """``/db``, a service program of a sweep with a ``db`` step, or a system that names the
    database (``{db_url}``...)."""
    tune = exp.tune
    if is_system_level(cell.architecture):
        return any(s.level == cell.architecture and s.uses_database for s in exp.systems)
    return needs_postgres(cell.workload) or (tune is not None and tune.program_of(cell.workload) in tune.db_programs)


def _start_database(group: ProcessGroup, handle: RunHandle, load_executor: LoadExecutor | None = None) -> Postgres:
    """The run's PostgreSQL, with the table size, CPU set and settings of the spec's ``[db]``
    and room for its pool (one server at a time, plus the lab's own psql sessions); on the
    worker ``[db] worker`` names (the same code, run there), else here."""
    db = handle.experiment.db_settings
    connections = max(100, db.pool + 10)
    if db.worker is not None:
        assert load_executor is not None  # refused before the run exists (archlab.lab.session)
        host = load_executor.system_host(db.worker)
        return host.start_database(handle.directory, rows=db.rows, max_connections=connections, cpus=db.cpus, settings=db.settings)
    return postgres.start(group, handle.directory, rows=db.rows, max_connections=connections, cpus=db.cpus, settings=db.settings)


def _system_pool(group: ProcessGroup, handle: RunHandle, database: Postgres | None,
                 load_executor: LoadExecutor | None = None) -> "SystemPool | None":
    """The run's pool of reusable foreign systems (and the database they may name), or None
    when the spec declares no system."""
    if not handle.experiment.systems:
        return None
    from archlab.lab.system_cell import SystemPool  # it builds on this module

    hosts = load_executor.system_host if load_executor is not None else None
    return SystemPool(group, handle.directory, handle.experiment.placement.server_cpus, database, hosts)


def _abort(group: ProcessGroup, handle: RunHandle, status: str) -> None:
    with group.critical():
        group.stop_all()  # before anything else: no process may outlive this
        handle.set_status(status)


def _run_pair(
    group: ProcessGroup,
    engine: Engine,
    handle: RunHandle,
    cell: Cell,
    rep: int,
    config: RunnerConfig,
    database: Postgres | None = None,
    systems: "SystemPool | None" = None,
    load_executor: LoadExecutor | None = None,
) -> CellRecord:
    files = RepFiles(handle.prepare_rep_dir(cell, rep))
    try:
        if is_system_level(cell.architecture):
            from archlab.lab import system_cell  # it builds on this module

            assert systems is not None  # a spec with system levels declares systems

            measured = system_cell.measure(group, engine, handle.experiment, cell, rep, files, config, systems, load_executor)
        else:
            measured = _measure(group, engine, handle.experiment, cell, rep, files, config, database, load_executor)
    except ResumableFault as e:
        files.error.write_text(str(e) + "\n")
        raise
    except (ArchlabError, OSError) as e:
        files.error.write_text(str(e) + "\n")
        return CellRecord(
            status="failed",
            error=str(e),
            summary_path=files.summary if files.summary.exists() else None,
            hdr_log_path=files.hdr_log if files.hdr_log.exists() else None,
        )
    files.probe.write_text(json.dumps(measured.probe_doc, indent=2) + "\n")
    # Little's law on the window (closed model): the row says whether X (R + Z) = N holds
    # within its sampling error (archlab.littles_law), so an inconsistent row is flagged.
    return CellRecord(
        status="ok",
        measurement=measured.summary.measurement,
        cost=measured.cost,
        summary_path=files.summary,
        hdr_log_path=files.hdr_log if files.hdr_log.exists() else None,
        littles_law=measured.summary.littles_law,
        conditions=measured.conditions,
    )


def _measure(
    group: ProcessGroup,
    engine: Engine,
    exp: Experiment,
    cell: Cell,
    rep: int,
    files: RepFiles,
    config: RunnerConfig,
    database: Postgres | None = None,
    load_executor: LoadExecutor | None = None,
) -> Measured:
    # Services the workload needs (the downstream of /call) live exactly as long as the server.
    downstream = start_for_cell(group, engine.path, cell, exp.placement, files.directory, config.ready_timeout_s)
    try:
        services: dict[str, object] = {}
        if downstream is not None:
            services["downstream"] = downstream.address
        meter = None
        if database is not None and _needs_db(exp, cell):
            if database.process.poll() is not None:
                raise database.process.failure("exited during the run")
            services["db"] = database.url
            services["db_settings"] = exp.db_settings  # [db] pool and wait
            meter = DatabaseMeter.of(database)  # where the CPU went: server vs database
        options = serve_options(cell, exp.placement, **services)  # type: ignore[arg-type]
        files.serve_options.write_text(json.dumps(options, indent=2) + "\n")
        # Loopback, or the emulated link of [network] (archlab.lab.network).
        with network.route_for(group, engine, cell, exp.placement, files.directory, config.ready_timeout_s) as route:
            serve = route.server_argv(engine.serve_argv(cell.architecture, files.serve_options, route.host))
            remote = getattr(load_executor, "server_host", None)
            server = group.start("server", serve, files.server_stderr) if remote is None else remote.start_server(serve, files.server_stderr)
            try:
                host, port = _listening_address(server, config.ready_timeout_s)
                route.from_client(lambda: _wait_until_answers(server, host, port, cell.probe_path, config.health_timeout_s))
                records = files.records if exp.load.records else None
                params = load_params(cell, exp, f"{host}:{port}", repetition=rep, records_path=records)
                files.load_params.write_text(json.dumps(params, indent=2) + "\n")
                argv = route.client_argv(engine.load_argv(files.load_params, files.summary, files.hdr_log))
                window = _run_load(group, argv, server, exp, files, config, load_executor, f"{cell.cell_id}-rep{rep}", meter)
            finally:
                server_exit = group.stop(server) if remote is None else remote.stop(server)
    finally:
        if downstream is not None:
            downstream.stop(group)
    summary = read_summary(files.summary)
    measurement = summary.measurement
    if measurement.requests == 0:
        raise CellFailed(f"no request completed in the measurement window (errors: {measurement.errors_by_class or measurement.errors})")
    start, end = window.start, window.end
    assert end is not None  # run_load fills it in
    if meter is not None:  # (server, database) pairs
        (start, db_start), (end, db_end) = start, end
    cost = probes.cost_between(start, end, measurement.requests)
    probe_doc = {
        "start": {"source": window.start_source, **start.to_dict()},
        "end": {"source": window.end_source, **end.to_dict()},
        "context_switch_source": probes.context_switch_source(start, end),
        "syscall_source": probes.syscall_source(start, end),
        "server_exit": describe_exit(server_exit),
        "cost": vars(cost),
    }
    if meter is not None:
        probe_doc["processes"] = [
            {"process": "server", "what": cell.architecture, "measured": "counted by the server", "cost": vars(cost)},
            meter.row(db_start, db_end, measurement.requests),
        ]
    return Measured(summary, cost, probe_doc, with_interference(window, exp.placement.server_cpus, probe_doc))


def _run_load(group: ProcessGroup, argv: list[str], server: ManagedProcess, exp: Experiment, files: RepFiles, config: RunnerConfig,
              load_executor: LoadExecutor | None, label: str, database: DatabaseMeter | None = None) -> Window:
    """The seam: the cell's load command run here, or by ``load_executor`` (whose processes
    this one does not see: the server is probed just before and just after). With
    ``database``, each edge reads the database too, and the window holds (server, database)
    sample pairs."""
    def probe_server() -> probes.ProcSample:
        return _probe(server, config)

    probe: Callable[[], Any] = probe_server if database is None else database.probing(probe_server)

    def check_alive() -> None:
        # A dead server explains a failing generator better than the generator can.
        if server.poll() is not None:
            raise server.failure(f"{describe_exit(server.poll())} during the load run")

    return run_load(group, argv, probe, check_alive, exp, files, config, load_executor, label)


def run_load(group: ProcessGroup, argv: list[str], probe: Callable[[], Any], check_alive: Callable[[], None], exp: Experiment,
             files: RepFiles, config: RunnerConfig, load_executor: LoadExecutor | None, label: str) -> Window:  # fmt: skip
    """The load of every kind of cell (a server's, a ``[[systems]]`` entry's, a remote
    target's): :func:`drive_load` here, or ``load_executor``'s shards, with ``probe`` taken just
    before they start and just after they end (their window lines are not seen here) and
    ``check_alive`` after them."""
    if load_executor is None:
        return drive_load(group, argv, probe, check_alive, exp, files, config)
    window = Window.opened(probe(), "before load start", group)
    limit_s = exp.warmup_s + exp.duration_s + exp.load.timeout_s + config.load_slack_s
    load_executor.run_load(argv, files.directory, limit_s, label)
    check_alive()
    window.close(probe(), "after load exit")
    return window


def drive_load(
    group: ProcessGroup,
    argv: list[str],
    probe: Callable[[], Any],
    check_alive: Callable[[], None],
    exp: Experiment,
    files: RepFiles,
    config: RunnerConfig,
) -> Window:
    """Run the load generator to its end, calling ``probe`` at the window's edges (before it
    starts and after it exits when it does not announce them) and ``check_alive`` after it."""
    window = Window.opened(probe(), "before load start", group)  # if the generator never announces its window
    load = group.start("load generator", argv, files.load_stderr)
    limit_s = exp.warmup_s + exp.duration_s + exp.load.timeout_s + config.load_slack_s
    deadline = time.monotonic() + limit_s
    try:
        while True:
            try:
                line = load.read_line(deadline - time.monotonic())
            except TimeoutError:
                raise load.failure(f"did not finish within {limit_s:g} s") from None
            if line is None:
                break
            if line == "phase measure":
                window.reopen(probe(), "phase measure")
            elif line == "phase end":
                window.close(probe(), "phase end")
        load_exit = load.wait_exit(5.0)
    finally:
        group.stop(load)
    check_alive()
    if load_exit != 0:
        raise load.failure(describe_exit(load_exit))
    if window.end is None:
        window.close(probe(), "after load exit")
    return window


def _probe(server: ManagedProcess, config: RunnerConfig) -> probes.ProcSample:
    try:
        if (remote := getattr(server, "sample_remote", None)) is not None:  # a server on another host probes there
            return remote(config.rusage_timeout_s)
        return probes.sample(server, config.rusage_timeout_s)
    except ProcessLookupError:
        raise server.failure(f"{describe_exit(server.wait_exit(1.0))} during the load run") from None


def _listening_address(server: ManagedProcess, timeout_s: float) -> tuple[str, int]:
    line = server.expect("listening ", timeout_s)
    host, _, port = line.split(" ", 1)[1].strip().rpartition(":")
    if not host or not port.isdigit():
        raise server.failure(f"printed {line!r}; expected 'listening HOST:PORT'")
    return host, int(port)


def _wait_until_answers(server: ManagedProcess, host: str, port: int, path: str, timeout_s: float) -> None:
    """Poll with GET of the cell's own workload until it answers 200: the server is then both up
    and able to serve what the load generator will ask for."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise server.failure(f"{describe_exit(server.poll())} before answering HTTP")
        conn = http.client.HTTPConnection(host, port, timeout=max(0.1, min(2.0, deadline - time.monotonic())))
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read(300).decode("utf-8", "replace").strip()
            if response.status == 200:
                return
            raise ProcessFailed("server", f"answered GET {path} with {response.status} {response.reason}: {body}")
        except (OSError, http.client.HTTPException) as e:
            last_error = e
            time.sleep(0.05)
        finally:
            conn.close()
    raise server.failure(f"did not answer GET {path} within {timeout_s:g} s (last error: {last_error})")
