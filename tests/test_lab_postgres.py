"""The ``/db?id=N`` workload against a real PostgreSQL that the lab makes on loopback: the service
starts as an unprivileged user, fills table ``emp`` deterministically and leaves nothing behind;
``archlab-engine serve --db`` answers every id with the row PostgreSQL itself returns (several
architectures, and a short bounded load run without errors); an exhausted pool answers 503 after
its wait instead of hanging; a connection killed by the database is reopened; and a spec with
``/db`` runs through the orchestrator, which stops PostgreSQL afterwards, also on Ctrl-C. PostgreSQL missing is
a failure naming its Debian package, as for the engine."""

from __future__ import annotations

import glob
import http.client
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import missing_dependency, processes_with_token, spec_text, start_cli
from test_lab_runner import wait_no_engine

from archlab.lab.engine import serve_options
from archlab.lab.processes import ProcessGroup
from archlab.lab.services import needs_postgres, postgres
from archlab.lab.session import run_spec
from archlab.store.summary import read_summary
from archlab.spec import load_spec
from archlab.store import Store

ROWS = 500


@pytest.fixture(scope="module")
def bindir() -> Path:
    try:
        return postgres.find_bindir()
    except postgres.PostgresUnavailable as e:
        missing_dependency("PostgreSQL", str(e), "the Debian package `postgresql`")


@pytest.fixture
def database(bindir, tmp_path, token):
    with ProcessGroup() as group:
        db = postgres.start(group, tmp_path, rows=ROWS)
        try:
            yield group, db
        finally:
            db.stop(group)


def _serve(group: ProcessGroup, engine_path: Path, directory: Path, arch: str, url: str, *extra: str) -> tuple[str, int]:
    argv = [str(engine_path), "serve", "--arch", arch, "--port", "0", "--db", url, *extra]
    proc = group.start(f"server {arch}", argv, directory / f"{arch}.stderr")
    host, _, port = proc.expect("listening ", 10.0).split(" ", 1)[1].rpartition(":")
    return host, int(port)


def _get(host: str, port: int, path: str, timeout: float = 15.0) -> tuple[int, str]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def _no_postgres_left(token: str, timeout_s: float = 10.0) -> list:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in processes_with_token(token) if "postgres" in p[1]]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_only_db_needs_postgres():
    assert needs_postgres("/db?id=1") and needs_postgres("/db")
    for w in ("/dbx?id=1", "/call?ms=1", "/echo?size=1", "/"):
        assert not needs_postgres(w), w


def test_rows_are_named_deterministically():
    assert postgres.first_name(42) == "name-00000042"
    assert postgres.expected_body(7) == '{"id":7,"firstName":"name-00000007"}'


def test_server_options_pass_the_database_url(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(factors='architecture = ["blocking"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'))
    exp, _ = load_spec(path)
    options = serve_options(exp.cells()[0], exp.placement, db="postgresql://a:b@127.0.0.1:9/c")
    assert options["db"] == "postgresql://a:b@127.0.0.1:9/c"


def test_service_is_unprivileged_filled_and_removed(bindir, tmp_path, token):
    with ProcessGroup() as group:
        db = postgres.start(group, tmp_path, rows=ROWS)
        try:
            owner = os.stat(db.directory).st_uid
            assert owner != 0 or os.geteuid() != 0  # never root: PostgreSQL refuses it
            status = Path(f"/proc/{db.process.pid}/status").read_text()
            uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
            assert uid == owner
            assert db.psql("SELECT count(*), min(id), max(id) FROM emp").strip() == f"{ROWS}|1|{ROWS}"
            names = db.psql("SELECT first_name FROM emp WHERE id IN (1, 250, 500) ORDER BY id").split()
            assert names == [postgres.first_name(i) for i in (1, 250, 500)]
            # Listening on loopback only.
            assert db.psql("SHOW listen_addresses").strip() == "127.0.0.1"
        finally:
            db.stop(group)
    assert not db.directory.exists()
    assert _no_postgres_left(token) == []


@pytest.mark.parametrize("arch", ["blocking", "single-thread", "tokio"])
def test_db_answers_match_the_table(engine_path, database, tmp_path, arch):
    group, db = database
    host, port = _serve(group, engine_path, tmp_path, arch, db.url, "--db-pool", "2")
    for row_id in (1, 17, ROWS):
        status, body = _get(host, port, f"/db?id={row_id}")
        assert status == 200, body
        # What PostgreSQL itself has for the row, read independently through psql.
        stored = db.psql(f"SELECT id, first_name FROM emp WHERE id = {row_id}").strip()
        assert json.loads(body) == {"id": int(stored.split("|")[0]), "firstName": stored.split("|")[1]}
        assert body == postgres.expected_body(row_id)
    status, body = _get(host, port, f"/db?id={ROWS + 1}")
    assert (status, body.strip()) == (404, f"/db: no row with id {ROWS + 1} in table emp")
    status, body = _get(host, port, "/db?id=0")
    assert status == 400 and "1..=2147483647" in body


def test_short_load_run_on_db(engine_path, database, tmp_path):
    group, db = database
    host, port = _serve(group, engine_path, tmp_path, "blocking", db.url, "--db-pool", "4")
    summary = tmp_path / "summary.json"
    argv = [str(engine_path), "load", "--target", f"{host}:{port}", "--path", "/db?id=123", "--connections", "4",
            "--warmup", "100ms", "--duration", "400ms", "--timeout", "5s", "--json", str(summary)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    m = read_summary(summary).measurement
    assert m.requests > 0 and m.errors == 0, m.errors_by_class
    # Every backend the pool opened is one of the server's (application_name archlab).
    assert db.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'archlab'").strip() == "4"


def test_exhausted_pool_answers_503_instead_of_hanging(engine_path, database, tmp_path):
    group, db = database
    host, port = _serve(group, engine_path, tmp_path, "thread-per-connection", db.url, "--db-pool", "1", "--db-wait-ms", "50")
    # Another session locks the table, so the pool's only connection blocks inside PostgreSQL.
    argv = [str(db.bindir / "psql"), "-X", "-q", "-A", "-t", "-h", str(db.directory), "-p", str(db.port), "-U", "archlab", "-d", "archlab"]
    holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **(db.run_as.popen_kwargs() if db.run_as else {}))
    try:
        holder.stdin.write("BEGIN; LOCK TABLE emp IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "locked"
        first: list = []
        blocked = threading.Thread(target=lambda: first.append(_get(host, port, "/db?id=1")))
        blocked.start()
        deadline = time.monotonic() + 10
        while db.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'archlab' AND wait_event_type = 'Lock'").strip() != "1":
            assert time.monotonic() < deadline, "the first request never reached the lock"
            time.sleep(0.02)
        status, body = _get(host, port, "/db?id=2")
        assert status == 503
        assert "no database connection came free within 50 ms (all 1 in use" in body
        holder.stdin.write("COMMIT;\n")
        holder.stdin.flush()
        blocked.join(15)
        assert first == [(200, postgres.expected_body(1))]
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_connections_killed_by_the_database_are_reopened(engine_path, database, tmp_path):
    group, db = database
    host, port = _serve(group, engine_path, tmp_path, "blocking", db.url, "--db-pool", "2")
    assert _get(host, port, "/db?id=5") == (200, postgres.expected_body(5))
    killed = db.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'archlab'")
    assert killed.strip() == "2"
    for row_id in (6, 7, 8):
        assert _get(host, port, f"/db?id={row_id}") == (200, postgres.expected_body(row_id))


def test_db_spec_runs_and_stops_postgres(engine_path, bindir, tmp_path, token):
    before = set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "archlab-pg-*")))
    path = tmp_path / "spec.toml"
    factors = 'architecture = ["single-thread", "blocking"]\nworkload = ["/db?id=42", "/echo?size=8"]\nconcurrency = [2]'
    path.write_text(spec_text(experiment='name = "db"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"', factors=factors))
    store = Store(tmp_path / "runs")
    handle = run_spec(path, store)
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete"
    assert len(view.rows) == 4
    for r in (row.to_json() for row in view.rows):
        assert r["status"] == "ok", r["error"]
        assert r["requests"] > 0
    assert "ready to accept connections" in (handle.directory / "postgres.stderr").read_text()
    assert wait_no_engine(token) == []
    assert _no_postgres_left(token) == []
    assert set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "archlab-pg-*"))) <= before


def test_db_section_sets_the_pool_and_the_table(engine_path, bindir, tmp_path, token, monkeypatch):
    """``[db] pool = 2, rows = 500``: the database the runner makes has 500 rows, and while the
    cell runs the server holds exactly 2 connections to it, counted by PostgreSQL itself."""
    from archlab.lab import runner

    started: list[postgres.Postgres] = []
    real_start = runner.postgres.start

    def start_and_keep(*args, **kwargs):  # the real service; the test only keeps a handle on it
        db = real_start(*args, **kwargs)
        started.append(db)
        return db

    monkeypatch.setattr(runner.postgres, "start", start_and_keep)
    path = tmp_path / "spec.toml"
    factors = f'architecture = ["blocking"]\nworkload = ["/db?id={ROWS}"]\nconcurrency = [2]'
    experiment = 'name = "dbpool"\nrepetitions = 1\nwarmup = "200ms"\nduration = "1s"'
    path.write_text(spec_text(experiment=experiment, factors=factors) + f'[db]\npool = 2\nwait = "2s"\nrows = {ROWS}\n')
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if started:
                try:
                    seen.append((
                        started[0].psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'archlab'", timeout_s=5).strip(),
                        started[0].psql("SELECT count(*), max(id) FROM emp", timeout_s=5).strip(),
                    ))  # fmt: skip
                except Exception:  # noqa: BLE001 - the run stopped the database under us
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        handle = run_spec(path, Store(tmp_path / "runs"))
    finally:
        done.set()
        watcher.join(30)
    (row,) = [r.to_json() for r in Store(tmp_path / "runs").load_run(handle.run_id).rows]
    assert row["status"] == "ok", row["error"]
    assert row["requests"] > 0 and row["errors"] == 0
    assert started and started[0].rows == ROWS
    assert {table for _, table in seen} == {f"{ROWS}|{ROWS}"}
    # The server opens its pool at start-up (one connection after the other) and holds it: the
    # most backends seen is the pool's size (the default pool would show 10).
    assert max(int(n) for n, _ in seen) == 2, seen
    assert _no_postgres_left(token) == []


def test_ctrl_c_mid_run_stops_postgres_and_removes_its_directory(engine_path, bindir, tmp_path, token):
    before = set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "archlab-pg-*")))
    path = tmp_path / "spec.toml"
    factors = 'architecture = ["single-thread", "blocking"]\nworkload = ["/db?id=1"]\nconcurrency = [1, 2]'
    path.write_text(spec_text(experiment='name = "dbint"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"', factors=factors))
    cli = start_cli("run", str(path), "--store", str(tmp_path / "runs"), "--no-report")
    lines = []
    try:
        while not any(line.startswith("[1/4]") for line in lines):
            line = cli.stderr.readline()
            assert line, f"orchestrator ended early: {''.join(lines)}"
            lines.append(line)
        # PostgreSQL is up (the first cell finished against it); interrupt the second cell.
        assert [p for p in processes_with_token(token) if "postgres" in p[1]]
        cli.send_signal(signal.SIGINT)
        _, rest = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130, "".join(lines) + rest
    assert wait_no_engine(token) == []
    assert _no_postgres_left(token) == []
    assert set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "archlab-pg-*"))) <= before


def test_the_preset_takes_settings_and_cpus_and_fills_placeholders(bindir, tmp_path, token):
    """``[db] settings`` reach PostgreSQL (it reports them itself with SHOW), ``[db] cpus`` pins
    the postmaster and so every backend it forks, and the placeholders a system gets reach the
    same database over TCP with the password (psql, as a foreign client would)."""
    with ProcessGroup() as group:
        db = postgres.start(group, tmp_path, rows=ROWS, cpus=(0,), settings=(("work_mem", "7MB"), ("jit", "off")))
        try:
            assert db.psql("SHOW work_mem").strip() == "7MB" and db.psql("SHOW jit").strip() == "off"
            assert os.sched_getaffinity(db.process.pid) == {0}
            values = db.placeholders()
            assert values["db_url"] == db.url == f"postgresql://{values['db_user']}:{values['db_password']}@127.0.0.1:{values['db_port']}/{values['db_name']}"
            assert values["db_jdbc"] == f"jdbc:postgresql://127.0.0.1:{db.port}/archlab?user=archlab&password={db.password}"
            # A client going the way a system would: TCP and the password, not the lab's socket.
            out = subprocess.run(
                [str(bindir / "psql"), "-X", "-A", "-t", "-d", values["db_url"], "-c", "SELECT first_name FROM emp WHERE id = 42"],
                capture_output=True, text=True, timeout=60, check=False, user=db.run_as.uid if db.run_as else None,
            )  # fmt: skip
            assert (out.returncode, out.stdout.strip()) == (0, postgres.first_name(42)), out.stderr
        finally:
            db.stop(group)
    assert _no_postgres_left(token) == []


def test_a_system_naming_the_database_gets_it_and_the_report_shows_its_cost(engine_path, bindir, tmp_path, token):
    """A foreign system started with ``{db_url}`` (the engine's own ``/db`` server, run as a
    command the lab knows nothing about) answers from the lab database; for it and for an archlab
    architecture on ``/db``, each repetition records what PostgreSQL spent beside the server,
    read from ``/proc``, and the report's "where the CPU went" shows both. A lookup costs the
    database CPU time and a wake-up per request (its backend sleeps in a read between requests)."""
    from archlab.report.processes import process_costs, process_lines

    command = [str(engine_path), "serve", "--arch", "blocking", "--host", "{host}", "--port", "{port}", "--db", "{db_url}", "--db-pool", "2"]
    systems = f'\n[[systems]]\nname = "svc"\ncommand = {json.dumps(command)}\nready = "http"\nready_path = "/db?id=1"\n'
    factors = 'architecture = ["system:svc", "blocking"]\nworkload = ["/db?id=42"]\nconcurrency = [2]'
    path = tmp_path / "spec.toml"
    experiment = 'name = "dbsys"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"'
    path.write_text(spec_text(experiment=experiment, factors=factors) + f"[db]\nrows = {ROWS}\n" + systems)
    store = Store(tmp_path / "runs")
    handle = run_spec(path, store)
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete"
    assert len(view.rows) == 2
    for row in view.rows:
        assert row.status == "ok", row.error
        assert row.measurement.requests > 0 and row.measurement.errors == 0
        probe = json.loads((row.summary_path.parent / "probe.json").read_text())
        server, database = probe["processes"]
        assert database["process"] == "postgres" and database["measured"] == "from /proc"
        cost = database["cost"]
        assert cost["cpu_user_s"] + cost["cpu_sys_s"] > 0 and cost["cpu_us_per_request"] > 0
        assert cost["voluntary_cs_per_request"] > 0.5  # one wake-up of a backend per lookup, at least half of them seen
        assert cost["read_syscalls_per_request"] is None  # from outside: unavailable, not zero
        assert server["cost"]["cpu_us_per_request"] > 0
    costs = process_costs(view.rows)
    assert {(c.cell_id.split("__")[0], c.process) for c in costs} == {
        ("system-svc", "system"), ("system-svc", "postgres"), ("blocking", "server"), ("blocking", "postgres")
    }  # fmt: skip
    assert all(0 < c.cpu_share < 1 for c in costs)
    assert any("postgres" in line for line in process_lines(view.rows))
    assert _no_postgres_left(token) == []
