"""The PostgreSQL server of ``/db?id=N``, made and thrown away by the lab: ``initdb`` into a fresh
temporary directory, ``postgres`` listening on 127.0.0.1 only (a free port; its unix socket in
that directory, reachable only by its owner; on a cluster's worker, on that worker's address,
:mod:`archlab.cluster.remote`), one table ``emp(id integer primary key,
first_name varchar(100))`` filled deterministically (row i is named :func:`first_name` (i),
the shape of seed 003's ``emp`` table), then ``pg_ctl stop -m fast`` and the directory removed.
Nothing is left behind on a failure or Ctrl-C: the server runs under the lab's
:class:`~archlab.lab.processes.ProcessGroup` (own session, SIGTERM/SIGKILL of its group, and
``PR_SET_PDEATHSIG`` if the orchestrator is killed outright; its backends then exit on their own
when they see their postmaster gone), and :meth:`Postgres.stop` runs in ``finally`` blocks.

PostgreSQL refuses to run as root (``initdb``, ``postgres`` and ``pg_ctl`` all check), and the
lab often runs as root (containers, CI). It therefore runs every PostgreSQL program as an
unprivileged user: the invoking user when that is not root, else the ``postgres`` system user
that Debian's package creates, else a system user ``archlab-postgres`` created here. The
temporary directory is owned by that user. The measured server connects over TCP as role
``archlab`` with a random password (SCRAM-SHA-256), as a real application would.

The settings are for a disposable, read-only lab database: ``fsync``, ``synchronous_commit`` and
``full_page_writes`` are off because the data is recreated from scratch every time and the
workload only reads, so durability buys nothing and would only slow the initial load (and make
the lab's disk I/O depend on the machine's fsync latency)."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from archlab.errors import ArchlabError, ProcessFailed
from archlab.lab import process_tree
from archlab.lab.foreign import free_port
from archlab.lab.process_tree import ProcessTree, TreeSample
from archlab.lab.processes import ManagedProcess, ProcessGroup, RunAs, die_with_parent
from archlab.spec.model import DB_ROWS_DEFAULT, DB_ROWS_MAX, needs_database

#: Rows of table ``emp`` unless the caller (a spec's ``[db] rows``) says otherwise (ids 1..=ROWS_DEFAULT).
ROWS_DEFAULT = DB_ROWS_DEFAULT
#: Largest table: :func:`first_name` pads ids to 8 digits.
ROWS_MAX = DB_ROWS_MAX
DATABASE = "archlab"
ROLE = "archlab"
#: The system user created when the lab runs as root and no ``postgres`` user exists.
FALLBACK_USER = "archlab-postgres"
_INSTALL_HINT = "install PostgreSQL (Debian: `apt-get install postgresql`, or run scripts/bootstrap)"
_READY_LINE = "ready to accept connections"
_PORT_ATTEMPTS = 5


class PostgresUnavailable(ArchlabError):
    """PostgreSQL is not installed, or cannot be set up on this machine."""


def needs_postgres(workload: str) -> bool:
    """Whether a cell's workload (a request target such as ``/db?id=1``) queries the database."""
    return needs_database(workload)


def first_name(row_id: int) -> str:
    """The ``first_name`` of row ``row_id``: ``name-00000042`` (13 characters, like seed 003's
    ``'Lakindu Akash'``, and the same length for every row so every response is the same size)."""
    return f"name-{row_id:08d}"


def expected_body(row_id: int) -> str:
    """What ``/db?id=row_id`` answers for a row of the lab's table."""
    return f'{{"id":{row_id},"firstName":"{first_name(row_id)}"}}'


def find_bindir() -> Path:
    """The directory of ``initdb``/``postgres``/``pg_ctl``/``psql``: ``pg_config --bindir`` when it
    has them, else the newest ``/usr/lib/postgresql/*/bin`` (Debian keeps them off ``PATH``)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10).stdout.strip()
            if out:
                candidates.append(Path(out))
        except (OSError, subprocess.TimeoutExpired):
            pass
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: _version_key(Path(p).parent.name), reverse=True)
    candidates += [Path(p) for p in versions]
    for d in candidates:
        if all((d / b).is_file() and os.access(d / b, os.X_OK) for b in ("initdb", "postgres", "pg_ctl", "psql")):
            return d
    looked = ", ".join(str(c) for c in candidates) or "pg_config --bindir and /usr/lib/postgresql/*/bin"
    raise PostgresUnavailable(f"PostgreSQL server programs (initdb, postgres, pg_ctl, psql) not found in {looked}: {_INSTALL_HINT}")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def unprivileged_user() -> RunAs | None:
    """Who runs PostgreSQL: ``None`` (the invoking user) unless we are root (see module doc)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", FALLBACK_USER):
        try:
            entry = pwd.getpwnam(name)
            return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)
        except KeyError:
            continue
    useradd = shutil.which("useradd")
    if useradd is None:
        raise PostgresUnavailable(f"running as root, no 'postgres' user and no useradd to create {FALLBACK_USER!r}: {_INSTALL_HINT}")
    done = subprocess.run(
        [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", FALLBACK_USER],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if done.returncode != 0:
        raise PostgresUnavailable(f"cannot create the system user {FALLBACK_USER!r} to run PostgreSQL as: {done.stderr.strip()}")
    entry = pwd.getpwnam(FALLBACK_USER)
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid)


@dataclass
class Postgres:
    """A running lab database; :attr:`url` is what ``archlab-engine serve --db`` takes."""

    process: ManagedProcess
    bindir: Path
    directory: Path  # the temporary directory: data/ and the unix socket
    port: int
    password: str
    rows: int
    run_as: RunAs | None
    host: str = "127.0.0.1"  # where it listens (a worker's address when placed on one)

    @property
    def url(self) -> str:
        return f"postgresql://{ROLE}:{self.password}@{self.host}:{self.port}/{DATABASE}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def version(self) -> str:
        """The major version of the server (``PG_VERSION`` of its data directory)."""
        try:
            return (self.data_dir / "PG_VERSION").read_text().strip()
        except OSError:
            return "?"

    def placeholders(self) -> dict[str, str]:
        """What a system's ``{db_*}`` placeholders become (:data:`archlab.spec.systems.PLACEHOLDERS`)."""
        return {
            "db_url": self.url,
            "db_jdbc": f"jdbc:postgresql://{self.host}:{self.port}/{DATABASE}?user={ROLE}&password={self.password}",
            "db_host": self.host,
            "db_port": str(self.port),
            "db_user": ROLE,
            "db_password": self.password,
            "db_name": DATABASE,
        }

    def psql(self, sql: str, database: str = DATABASE, timeout_s: float = 120.0) -> str:
        """Run ``sql`` through ``psql`` on the unix socket; returns the unaligned output."""
        argv = [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-h", str(self.directory), "-p", str(self.port), "-U", ROLE, "-d", database, "-c", sql]  # fmt: skip
        return _run(argv, self.run_as, self.directory, timeout_s, "psql").stdout

    def tree_sampler(self) -> Callable[[], TreeSample]:
        """How :class:`~archlab.lab.services.DatabaseMeter` reads its process tree (here)."""
        # The token finds members that left the tree; PostgreSQL's never do, so a fresh one is enough.
        tree = ProcessTree(self.process.pid, secrets.token_hex(16))
        return lambda: process_tree.sample(tree)

    def describe(self) -> dict | None:
        """Where it runs, for the probe file: None here (a worker's database says which)."""
        return None

    def stop(self, group: ProcessGroup) -> None:
        """``pg_ctl stop -m fast`` (disconnect clients, shut down cleanly), then the process group
        machinery for anything left, then the directory."""
        with group.critical():
            try:
                if self.process.poll() is None:
                    argv = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "20"]
                    try:
                        _run(argv, self.run_as, self.directory, 30.0, "pg_ctl stop")
                    except ArchlabError:
                        pass  # group.stop below escalates to SIGTERM/SIGKILL
                group.stop(self.process)
            finally:
                shutil.rmtree(self.directory, ignore_errors=True)


def start(
    group: ProcessGroup,
    log_dir: Path,
    rows: int = ROWS_DEFAULT,
    max_connections: int = 100,
    ready_timeout_s: float = 60.0,
    cpus: tuple[int, ...] | None = None,
    settings: tuple[tuple[str, str], ...] = (),
    host: str = "127.0.0.1",
) -> Postgres:
    """Make, start and fill a lab database (see the module doc); its server's stderr goes to
    ``log_dir/postgres.stderr``. ``cpus`` pins the server and every process it forks;
    ``settings`` are ``postgresql.conf`` parameters given after the lab's own (so they win,
    except those the lab must own: :data:`~archlab.spec.model.LAB_OWNED_DB_SETTINGS`, refused by the spec). The
    caller stops it with :meth:`Postgres.stop` in ``finally``; if anything fails here,
    everything made so far is removed before the error propagates. ``host`` is the address it
    listens on (a cluster worker's, so that servers on other hosts reach it: TCP clients of any
    address then authenticate with the password)."""
    if not 1 <= rows <= ROWS_MAX:
        raise PostgresUnavailable(f"rows: expected an integer in 1..={ROWS_MAX}, got {rows!r}")
    bindir = find_bindir()
    run_as = unprivileged_user()
    directory = Path(tempfile.mkdtemp(prefix="archlab-pg-"))
    service: Postgres | None = None
    try:
        with group.critical():  # a Ctrl-C here would leave a half-made cluster
            if run_as is not None:
                os.chown(directory, run_as.uid, run_as.gid)
            password = secrets.token_hex(16)
            _initdb(bindir, directory, password, run_as)
            if host not in ("127.0.0.1", "localhost"):
                with (directory / "data" / "pg_hba.conf").open("a") as hba:
                    hba.write("host all all 0.0.0.0/0 scram-sha-256\n")
        service = _start_server(group, bindir, directory, password, rows, run_as, log_dir, max_connections, ready_timeout_s, cpus, settings, host)
        service.psql(f"CREATE DATABASE {DATABASE}", database="postgres")
        service.psql(_fill_sql(rows))
        service.psql("VACUUM ANALYZE emp")  # the planner then knows the index is the way
        return service
    except BaseException:
        if service is not None:
            service.stop(group)
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _fill_sql(rows: int) -> str:
    # The same names as first_name().
    return (
        "CREATE TABLE emp (id integer PRIMARY KEY, first_name varchar(100) NOT NULL);"
        f"INSERT INTO emp (id, first_name) SELECT i, 'name-' || lpad(i::text, 8, '0') FROM generate_series(1, {int(rows)}) AS i;"
    )


def _initdb(bindir: Path, directory: Path, password: str, run_as: RunAs | None) -> None:
    pwfile = directory / "pwfile"
    pwfile.write_text(password + "\n")
    if run_as is not None:
        os.chown(pwfile, run_as.uid, run_as.gid)
    os.chmod(pwfile, 0o600)
    argv = [
        str(bindir / "initdb"), "-D", str(directory / "data"), "-U", ROLE, f"--pwfile={pwfile}",
        # The unix socket (in the 0700 directory) is the lab's own door; TCP needs the password.
        "--auth-local=trust", "--auth-host=scram-sha-256",
        "-E", "UTF8", "--locale=C", "--no-sync",
    ]  # fmt: skip
    try:
        _run(argv, run_as, directory, 120.0, "initdb")
    finally:
        pwfile.unlink(missing_ok=True)


def _start_server(
    group: ProcessGroup, bindir: Path, directory: Path, password: str, rows: int, run_as: RunAs | None,
    log_dir: Path, max_connections: int, ready_timeout_s: float, cpus: tuple[int, ...] | None, settings: tuple[tuple[str, str], ...],
    host: str = "127.0.0.1",
) -> Postgres:  # fmt: skip
    last = ""
    for _ in range(_PORT_ATTEMPTS):
        port = free_port(host)  # PostgreSQL cannot bind port 0; a port taken meanwhile is retried
        argv = [
            str(bindir / "postgres"), "-D", str(directory / "data"), "-p", str(port),
            "-c", f"listen_addresses={host}", "-c", f"unix_socket_directories={directory}",
            "-c", f"max_connections={int(max_connections)}",
            # Disposable read-only data: durability buys nothing here (see the module doc).
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "logging_collector=off",
        ]  # fmt: skip
        argv += [a for name, value in settings for a in ("-c", f"{name}={value}")]
        stderr = log_dir / "postgres.stderr"
        proc = group.start("postgres", argv, stderr, run_as=run_as, cwd=directory, cpus=cpus)
        service = Postgres(proc, bindir, directory, port, password, rows, run_as, host)
        try:
            if _wait_ready(proc, ready_timeout_s):
                return service
        except BaseException:
            group.stop(proc)
            raise
        group.stop(proc)
        last = proc.stderr_tail()
        if "already in use" not in last:  # anything but a lost race for the port is final
            raise proc.failure(f"exited before accepting connections (port {port})")
    raise ProcessFailed("postgres", f"no free port after {_PORT_ATTEMPTS} attempts", last)


def _wait_ready(proc: ManagedProcess, timeout_s: float) -> bool:
    """True once the server logs that it accepts connections; False if it exited first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if _READY_LINE in proc.stderr_path.read_text(errors="replace"):
                return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    raise proc.failure(f"did not accept connections within {timeout_s:g} s")


def _run(argv: list[str], run_as: RunAs | None, cwd: Path, timeout_s: float, what: str) -> subprocess.CompletedProcess:
    """A short PostgreSQL program as ``run_as``, dying with the orchestrator like every child."""
    kwargs = run_as.popen_kwargs() if run_as is not None else {}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent(os.getpid()), **kwargs,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ProcessFailed(what, f"did not finish within {timeout_s:g} s") from None
    except OSError as e:
        raise ProcessFailed(what, f"cannot start {argv[0]}: {e}") from None
    if done.returncode != 0:
        raise ProcessFailed(what, f"exit code {done.returncode}", (done.stderr or done.stdout)[-2000:])
    return done

