"""Service programs with database steps against a real PostgreSQL that the lab starts on
loopback (``archlab.lab.services.postgres``): ``archlab-engine serve --db URL --programs FILE``
answers ``/program?name=P`` with a checksum over every step's output, and the test recomputes
that checksum from the rows PostgreSQL holds (FNV-1a 64 over each step's bytes, then 0xff per
step: ``crates/workload/src/program/run.rs``), so a server that skipped a lookup, repeated a loop
the wrong number of times or read another row fails. A row that does not exist is a 404 naming
the program and the step. PostgreSQL missing is a failure with the reason, not a skip."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

from archlab.lab.processes import ProcessGroup
from archlab.lab.services import postgres

ROWS = 100
PROGRAMS = """
[programs.db_loop]
steps = [
  { step = "db", id = 1 },
  { step = "repeat", times = 3, steps = [{ step = "db", id = 17 }, { step = "sleep", ms = 0 }] },
]
[programs.db_missing]
steps = [{ step = "sleep", ms = 0 }, { step = "db", id = 101 }]
"""


def fnv_checksum(step_outputs: list[bytes]) -> str:
    h = 0xCBF29CE484222325
    for out in step_outputs:
        for b in out + b"\xff":  # each step's bytes, then its position marker
            h = ((h ^ b) * 0x100000001B3) % 2**64
    return f"0x{h:016x}"


def _get(host: str, port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection(host, port, timeout=15)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def test_db_steps_read_the_rows_postgres_holds(engine_path: Path, tmp_path: Path, token: str):
    try:
        bindir = postgres.find_bindir()
    except postgres.PostgresUnavailable as e:
        pytest.fail(f"PostgreSQL is required for the db steps of service programs: {e}", pytrace=False)
    assert bindir.exists()
    programs = tmp_path / "programs.toml"
    programs.write_text(PROGRAMS)
    with ProcessGroup() as group:
        db = postgres.start(group, tmp_path, rows=ROWS)
        try:
            argv = [str(engine_path), "serve", "--arch", "blocking", "--port", "0", "--db", db.url,
                    "--db-pool", "2", "--programs", str(programs)]
            proc = group.start("server", argv, tmp_path / "server.stderr")
            host, _, port = proc.expect("listening ", 10.0).split(" ", 1)[1].rpartition(":")
            status, body = _get(host, int(port), "/program?name=db_loop")
            assert status == 200, body
            # The rows as PostgreSQL itself returns them, read through psql.
            row = {i: db.psql(f"SELECT id, first_name FROM emp WHERE id = {i}").strip().split("|") for i in (1, 17)}
            as_body = {i: f'{{"id":{int(r[0])},"firstName":"{r[1]}"}}'.encode() for i, r in row.items()}
            outputs = [as_body[1]] + [as_body[17], b""] * 3
            assert body == f'{{"program":"db_loop","steps":7,"checksum":"{fnv_checksum(outputs)}"}}'
            status, body = _get(host, int(port), "/program?name=db_missing")
            assert status == 404 and "program db_missing, steps[1] (db)" in body, body
        finally:
            db.stop(group)
