"""Processes of a system under test on a named worker of the cluster (a server, a proxy, a
middleware, memcached, the lab's PostgreSQL...), started, made ready, probed and stopped there
by the lab's own local machinery. A :class:`RemoteHost` is the client's handle on one worker; on
that worker a Dask actor (:class:`ProcessHost`) owns a lab
:class:`~archlab.lab.processes.ProcessGroup` and does what the runner does locally: start a
command in its own session with ``PR_SET_PDEATHSIG`` (so it dies with the worker), read its
stdout lines (readiness such as ``listening HOST:PORT``), take :mod:`archlab.lab.probes` samples
of it (CPU, context switches, system calls, memory: the same accounting as a local server's),
and stop it with SIGTERM then SIGKILL to its whole process group, handing back its stderr.

Nothing on the worker may outlive the client: the client renews a lease on a thread of its own
(every third of ``lease_s``; the renewal is an ``async`` actor method, so it is served on the
worker's event loop even while a slow call holds the actor's one thread), and the actor's
watchdog stops every process it started once no renewal came for ``lease_s``. A client that is
interrupted stops them in its ``finally`` (:meth:`RemoteHost.close`); one that is killed
outright stops renewing, and the lease ends them. Files a command reads (``serve --options``)
are shipped with it and written in a private directory on the worker; ``{engine}`` in a command
is the worker's own ``archlab-engine`` and ``{dir}`` that directory."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from archlab.cluster.connect import Cluster, ClusterError
from archlab.cluster.sharded import ClusterFault
from archlab.errors import ArchlabError, ProcessFailed
from archlab.lab import foreign, probes
from archlab.lab.engine import find_engine
from archlab.lab.process_tree import TreeSample
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.spec.systems import SystemSpec

#: Without a renewal for this long the worker stops what it started for the client.
DEFAULT_LEASE_S = 10.0
#: An actor's private directory on its worker: the prefix, then the worker's pid.
DIR_PREFIX = "archlab-remote-"


def remove_orphaned_dirs(root: Path) -> list[Path]:
    """Remove the private directories under ``root`` of actors whose worker process is gone (a
    worker killed outright never runs :meth:`ProcessHost.close`); the ones removed. Directories
    of live processes, and any not named ``archlab-remote-<pid>-...``, are left alone."""
    removed = []
    for path in root.glob(f"{DIR_PREFIX}*-*"):
        pid_text = path.name[len(DIR_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or not path.is_dir():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except PermissionError:  # alive, another user's
            pass
    return removed


class ProcessHost:
    """The actor on the worker: the processes it started for one client, by pid."""

    def __init__(self, lease_s: float, grace_s: float = 3.0):
        self._group = ProcessGroup(grace_s)  # not entered: signal handlers belong to the main thread
        self._procs: dict[int, ManagedProcess] = {}
        self._systems: dict[str, foreign.RunningSystem] = {}
        self._database: Any = None  # the lab's PostgreSQL (archlab.lab.services.postgres), when placed here
        self._database_sampler: Any = None
        # Named after this worker's pid, so that a later actor can tell it from a live one and
        # remove it once this worker was killed without closing it.
        remove_orphaned_dirs(Path(tempfile.gettempdir()))
        self._dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
        self._lease_s = lease_s
        self._renewed = time.monotonic()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.expired = False
        threading.Thread(target=self._watch, name="archlab-lease", daemon=True).start()

    async def renew(self) -> bool:
        """The client is alive; False once the lease has ended (its processes are gone)."""
        self._renewed = time.monotonic()
        return not self._closed.is_set()

    def _watch(self) -> None:
        while not self._closed.wait(self._lease_s / 4):
            if time.monotonic() - self._renewed > self._lease_s:
                self.expired = True
                self.close()

    def start(self, name: str, argv: Sequence[str], files: dict[str, bytes], cpus: Sequence[int] | None) -> dict:
        with self._lock:
            if self._closed.is_set():
                raise ProcessFailed(name, "not started: the client's lease on this worker ended")
            for file_name, content in files.items():
                (self._dir / file_name).write_bytes(content)
            engine = str(find_engine())
            command = [a.replace("{engine}", engine).replace("{dir}", str(self._dir)) for a in argv]
            proc = self._group.start(name, command, self._dir / f"{name}.{len(self._procs)}.stderr", cpus=cpus)
            self._procs[proc.pid] = proc
            return {"pid": proc.pid, "worker_pid": os.getpid()}

    def expect(self, pid: int, prefix: str, timeout_s: float) -> str:
        return self._procs[pid].expect(prefix, timeout_s)

    def poll(self, pid: int) -> int | None:
        return self._procs[pid].poll()

    def wait_exit(self, pid: int, timeout_s: float) -> int | None:
        return self._procs[pid].wait_exit(timeout_s)

    def stderr_tail(self, pid: int) -> str:
        return self._procs[pid].stderr_tail()

    def sample(self, pid: int, rusage_timeout_s: float) -> probes.ProcSample:
        return probes.sample(self._procs[pid], rusage_timeout_s)

    def final_counters(self, pid: int, timeout_s: float) -> dict | None:
        return probes.final_counters(self._procs[pid], timeout_s)

    def stop(self, pid: int) -> tuple[int | None, bytes]:
        """Stop the process; its exit status and its whole stderr."""
        with self._lock:
            proc = self._procs.pop(pid)
            code = self._group.stop(proc)
            try:
                stderr = proc.stderr_path.read_bytes()
            except OSError:
                stderr = b""
            return code, stderr

    def pids(self) -> list[int]:
        return sorted(self._procs)

    # --- [[systems]] entries, started and stopped by the lab's own machinery (archlab.lab.foreign)

    def start_system(self, key: str, spec: SystemSpec, default_cpus: tuple[int, ...], database: dict[str, str] | None,
                     command: foreign.CommandBuilder | None = None) -> dict:
        """Set up, start and wait for ``spec`` as the client would locally; its files in a
        directory of its own here (``{dir}`` is on this host); ``command`` (a picklable
        builder, run here) makes the command line of a system that has none of its own."""
        with self._lock:
            if self._closed.is_set():
                raise ProcessFailed(f"system {spec.name}", "not started: the client's lease on this worker ended")
            directory = self._dir / key
            directory.mkdir(parents=True, exist_ok=True)
            running = foreign.start(self._group, spec, directory, default_cpus, command, database=database)
            self._systems[key] = running
            return {"host": running.host, "port": running.port, "pid": running.process.pid, "values": running.values}

    def sample_system(self, key: str) -> TreeSample:
        return self._systems[key].sample()

    def check_system(self, key: str, when: str) -> None:
        self._systems[key].check_alive(when)

    def poll_system(self, key: str) -> int | None:
        return self._systems[key].process.poll()

    def system_rss(self, key: str) -> list[tuple[float, int, int]]:
        return list(self._systems[key].rss_samples)

    def stop_system(self, key: str, teardown_cpus: tuple[int, ...]) -> dict:
        """Stop it, run its tear-down commands, and hand back how the stop went, its memory over
        time and its files (its output, the set-up and tear-down logs); a failing tear-down is
        handed back too (``teardown_error``), after its files."""
        with self._lock:
            running = self._systems.pop(key)
            outcome = foreign.stop(self._group, running)
            teardown_error = None
            try:
                foreign.run_commands(self._group, running.spec, "teardown", running.values, self._dir / key, teardown_cpus)
            except ProcessFailed as e:
                teardown_error = e
            files = {f.name: f.read_bytes() for f in (self._dir / key).iterdir() if f.is_file()}
            shutil.rmtree(self._dir / key, ignore_errors=True)
            return {"outcome": outcome, "rss": list(running.rss_samples), "files": files, "teardown_error": teardown_error}

    # --- the lab's PostgreSQL ([db] worker = NAME), made, started and stopped by the lab's own code

    def start_database(self, host: str, rows: int, max_connections: int, cpus: tuple[int, ...] | None,
                       settings: tuple[tuple[str, str], ...]) -> dict:
        """``initdb``, start and fill the lab database here, listening on ``host`` (this
        worker's address); what the client needs to hand it to servers and systems."""
        from archlab.lab.services import postgres

        with self._lock:
            if self._closed.is_set():
                raise ProcessFailed("postgres", "not started: the client's lease on this worker ended")
            db = postgres.start(self._group, self._dir, rows=rows, max_connections=max_connections, cpus=cpus, settings=settings, host=host)
            self._database, self._database_sampler = db, db.tree_sampler()
            return {"url": db.url, "placeholders": db.placeholders(), "version": db.version, "pid": db.process.pid}

    def sample_database(self) -> TreeSample:
        return self._database_sampler()

    def poll_database(self) -> int | None:
        return self._database.process.poll()

    def stop_database(self) -> bytes:
        """``pg_ctl stop``, then its directory removed; its server log handed back."""
        with self._lock:
            db, self._database = self._database, None
            if db is None:
                return b""
            db.stop(self._group)
            try:
                return db.process.stderr_path.read_bytes()
            except OSError:
                return b""

    def close(self) -> None:
        """Stop everything this actor started and remove its directory."""
        with self._lock:
            self._closed.set()
            if self._database is not None:  # cleanly (pg_ctl stop), and its data directory removed
                self._database.stop(self._group)
                self._database = None
            for key in list(self._systems):  # each whole process tree, as a local stop does
                foreign.stop(self._group, self._systems.pop(key))
            self._group.stop_all()
            self._procs.clear()
            shutil.rmtree(self._dir, ignore_errors=True)


@dataclass
class RemoteProcess:
    """A process on a worker, seen from the client: what the runner reads of a local
    :class:`~archlab.lab.processes.ManagedProcess` (``name``, ``pid``, ``poll``, ``expect``,
    ``failure``), plus where it runs."""

    name: str
    pid: int
    worker: str
    worker_name: str
    host: str
    stderr_path: Path
    _actor: Any = field(repr=False)  # a Dask actor proxy of ProcessHost: each call returns a future
    #: What the worker is to the run, for the message when it is lost ("server host", "system host").
    role: str = "server host"

    @property
    def _who(self) -> str:
        return f"{self.role} {self.worker_name!r}"

    def poll(self) -> int | None:
        return _call(self._who, self._actor, "poll", self.pid)

    def expect(self, prefix: str, timeout_s: float) -> str:
        return _call(self._who, self._actor, "expect", self.pid, prefix, timeout_s)

    def wait_exit(self, timeout_s: float) -> int | None:
        return _call(self._who, self._actor, "wait_exit", self.pid, timeout_s)

    def stderr_tail(self) -> str:
        try:
            return self._actor.stderr_tail(self.pid).result()
        except Exception:  # already stopped: its stderr is on this host
            try:
                return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-20:])
            except OSError:
                return ""

    def failure(self, detail: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} on {self.worker_name} ({self.host})", detail, self.stderr_tail())

    def sample_remote(self, rusage_timeout_s: float) -> probes.ProcSample:
        """:func:`archlab.lab.probes.sample` of the process, taken on its worker."""
        return _call(self._who, self._actor, "sample", self.pid, rusage_timeout_s)

    def final_counters(self, timeout_s: float) -> dict | None:
        """:func:`archlab.lab.probes.final_counters` of the process, asked on its worker."""
        return _call(self._who, self._actor, "final_counters", self.pid, timeout_s)


@dataclass
class RemoteSystem:
    """A ``[[systems]]`` entry running on a worker, seen from the client: what the lab reads of
    a local :class:`~archlab.lab.foreign.RunningSystem` (``spec``, ``host``, ``port``,
    ``values``, ``sample``, ``check_alive``, ``rss_samples``, ``failure``, ``process.poll``),
    each answered by the worker (samples of its process tree from that host's ``/proc``)."""

    spec: SystemSpec
    key: str
    host: str
    port: int
    pid: int
    values: dict[str, str]
    on: "RemoteHost"
    _stopped_rss: list[tuple[float, int, int]] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def name(self) -> str:
        return f"system {self.spec.name}"

    @property
    def process(self) -> "RemoteSystem":
        return self  # the runner asks ``system.process.poll()``

    def poll(self) -> int | None:
        return self.on.call("poll_system", self.key)

    def sample(self) -> TreeSample:
        return self.on.call("sample_system", self.key)

    def check_alive(self, when: str) -> None:
        self.on.call("check_system", self.key, when)

    @property
    def rss_samples(self) -> list[tuple[float, int, int]]:
        return self._stopped_rss if self._stopped_rss is not None else self.on.call("system_rss", self.key)

    def failure(self, detail: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} on {self.on.worker_name} ({self.on.host})", detail)

    def stop(self, teardown_cpus: tuple[int, ...]) -> tuple[foreign.StopOutcome, ProcessFailed | None]:
        """:meth:`RemoteHost.stop_system` of this system."""
        return self.on.stop_system(self, teardown_cpus)

    def describe(self) -> dict:
        """Where it runs, for the probe file."""
        return self.on.describe()


@dataclass
class RemoteDatabase:
    """The lab's PostgreSQL on a worker, seen from the client: what the runner reads of a local
    :class:`~archlab.lab.services.Postgres` (``url``, ``placeholders``, ``version``,
    ``process.poll``/``failure``, ``tree_sampler``, ``stop``), each answered by the worker
    (its process tree read from that host's ``/proc``)."""

    url: str
    version: str
    pid: int
    _placeholders: dict[str, str]
    on: "RemoteHost"
    log_dir: Path

    @property
    def process(self) -> "RemoteDatabase":
        return self  # the runner asks ``database.process.poll()``

    def poll(self) -> int | None:
        return self.on.call("poll_database")

    def failure(self, detail: str) -> ProcessFailed:
        return ProcessFailed(f"postgres on {self.on.worker_name} ({self.on.host})", detail)

    def placeholders(self) -> dict[str, str]:
        return dict(self._placeholders)

    def tree_sampler(self) -> Callable[[], TreeSample]:
        return lambda: self.on.call("sample_database")

    def describe(self) -> dict:
        return self.on.describe()

    def stop(self, group: ProcessGroup) -> None:
        """Stopped there (``pg_ctl stop``, its directory removed); its log copied here."""
        (self.log_dir / "postgres.stderr").write_bytes(self.on.call("stop_database"))


def _call(who: str, actor: Any, method: str, *args: Any) -> Any:
    """The result of the actor's ``method(*args)``. What the worker raised on purpose (a process
    failed or is gone) passes through; the cluster failing under it (the worker lost, its
    connection closed) is a :class:`~archlab.cluster.sharded.ClusterFault`, which leaves the
    repetition to ``--resume``."""
    try:
        return getattr(actor, method)(*args).result()
    except (ArchlabError, ProcessLookupError):
        raise
    except Exception as e:
        raise ClusterFault(f"{who} lost mid-cell ({type(e).__name__}: {e})") from None


class RemoteHost:
    """The client's handle on the processes it runs on one named worker (see the module text)."""

    def __init__(self, cluster: Cluster, worker_name: str, lease_s: float = DEFAULT_LEASE_S, role: str = "server host"):
        workers = {w.name: w for w in cluster.workers()}
        if worker_name not in workers:
            raise ClusterError(f"host {worker_name!r}: no worker of that name in the cluster {cluster.address} "
                               f"(its workers: {sorted(workers) or 'none'}; name them with `dask worker --name NAME`)")
        info = workers[worker_name]
        self.worker, self.worker_name, self.host = info.address, worker_name, info.host
        self.lease_s = lease_s
        self.role = role
        self._cluster = cluster
        future = cluster.client.submit(ProcessHost, lease_s, actor=True, workers=[info.address], allow_other_workers=False, pure=False)
        self._future = future
        self._actor: Any = future.result(timeout=30)  # a proxy: each call returns a future
        self._stop = threading.Event()
        self._keys = 0
        self._directories: dict[str, Path] = {}
        self._lease_lost = False
        self._renewer = threading.Thread(target=self._renew, name=f"lease:{worker_name}", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self._actor.renew().result(timeout=self.lease_s):
                    self._lease_lost = True
            except Exception:  # the worker is gone: its processes died with it (PDEATHSIG)
                self._lease_lost = True

    def start(self, name: str, argv: Sequence[str], stderr_path: Path, files: dict[str, bytes] | None = None,
              cpus: Sequence[int] | None = None) -> RemoteProcess:
        """Start ``argv`` on the worker (``{engine}``, ``{dir}`` replaced there); its stderr is
        copied to ``stderr_path`` here when it is stopped."""
        started = _call(self._who, self._actor, "start", name, list(argv), dict(files or {}), list(cpus) if cpus else None)
        return RemoteProcess(name, started["pid"], self.worker, self.worker_name, self.host, stderr_path, self._actor, self.role)

    @property
    def _who(self) -> str:
        return f"{self.role} {self.worker_name!r}"

    def start_server(self, argv: Sequence[str], stderr_path: Path, name: str = "server") -> RemoteProcess:
        """The lab's ``archlab-engine serve`` (or ``proxy``) command, run on the worker: its
        engine, its ``--options`` file shipped there, listening on the worker's address instead
        of this host's loopback (so the load hosts, and a front elsewhere, reach it)."""
        argv = list(argv)
        argv[0] = "{engine}"
        files = {}
        if "--options" in argv:
            i = argv.index("--options") + 1
            path = Path(argv[i])
            files[path.name] = path.read_bytes()
            argv[i] = "{dir}/" + path.name
        if "--host" in argv:
            argv[argv.index("--host") + 1] = self.host
        return self.start(name, argv, stderr_path, files)

    def sample(self, proc: RemoteProcess, rusage_timeout_s: float = 2.0) -> probes.ProcSample:
        return proc.sample_remote(rusage_timeout_s)

    def call(self, method: str, *args: Any) -> Any:
        """The actor's ``method(*args)`` (see :func:`_call`)."""
        return _call(self._who, self._actor, method, *args)

    def start_system(self, spec: SystemSpec, directory: Path, default_cpus: tuple[int, ...],
                     database: dict[str, str] | None = None, command: foreign.CommandBuilder | None = None) -> RemoteSystem:
        """Start ``spec`` on the worker with the lab's own readiness, pinning (its ``cpus``, else
        ``default_cpus``, the worker's CPUs) and process-tree accounting; a spec listening on
        loopback listens on the worker's address instead, so the load hosts reach it.
        ``directory`` (here) receives its files when it is stopped; ``command`` (picklable, run
        there) builds the command line of a spec without one (a topology's front)."""
        if spec.host in ("127.0.0.1", "localhost", "::1"):
            spec = dataclasses.replace(spec, host=self.host)
        self._keys += 1
        key = f"{spec.name}-{self._keys}"
        self._directories[key] = directory
        started = self.call("start_system", key, spec, tuple(default_cpus), database, command)
        return RemoteSystem(spec, key, started["host"], started["port"], started["pid"], started["values"], self)

    def stop_system(self, system: RemoteSystem, teardown_cpus: tuple[int, ...]) -> tuple[foreign.StopOutcome, ProcessFailed | None]:
        """Stop it there (then its tear-down commands), copy its files into its directory here;
        how the stop went, and the tear-down's failure if it failed."""
        done = self.call("stop_system", system.key, tuple(teardown_cpus))
        directory = self._directories.pop(system.key)
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in done["files"].items():
            (directory / name).write_bytes(content)
        system._stopped_rss = done["rss"]
        return done["outcome"], done["teardown_error"]

    def start_database(self, log_dir: Path, rows: int, max_connections: int, cpus: tuple[int, ...] | None,
                       settings: tuple[tuple[str, str], ...]) -> RemoteDatabase:
        """The lab's PostgreSQL made and started on the worker (the lab's own ``initdb``/start
        code), listening on the worker's address; ``log_dir`` (here) receives its log when it
        is stopped."""
        started = self.call("start_database", self.host, rows, max_connections, cpus, tuple(settings))
        return RemoteDatabase(started["url"], started["version"], started["pid"], started["placeholders"], self, log_dir)

    def describe(self) -> dict:
        return {"name": self.worker_name, "address": self.worker, "host": self.host, "lease_s": self.lease_s}

    def stop(self, proc: RemoteProcess) -> int | None:
        code, stderr = _call(self._who, self._actor, "stop", proc.pid)
        proc.stderr_path.write_bytes(stderr)
        return code

    def pids(self) -> list[int]:
        return _call(self._who, self._actor, "pids")

    def close(self) -> None:
        """Stop every process started here (always: call it in a ``finally``)."""
        self._stop.set()
        try:
            self._actor.close().result(timeout=30)
        except Exception:  # the worker is gone, and its processes with it (PDEATHSIG)
            pass
        finally:
            self._future.release()

    def __enter__(self) -> "RemoteHost":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DEFAULT_LEASE_S", "ProcessHost", "RemoteDatabase", "RemoteHost", "RemoteProcess", "describe_exit"]
