"""The DuckDB catalog (``runs/archlab.duckdb``): one ``runs`` row per run and one ``results`` row
per cell and repetition. The database file is opened for each operation and closed right after,
because DuckDB lets only one process hold it for writing: a long run must not lock out
``archlab runs`` or a report in another terminal for its whole duration. A ``results`` row is
written in one transaction, after every file of its cell is complete, so the catalog never
points at a half-written directory."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import duckdb

from archlab.errors import StoreError

RUN_STATUSES = ("running", "complete", "interrupted", "failed")

# (column, type): the one definition of the results table, used for CREATE and INSERT alike.
RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR NOT NULL"),
    ("cell_id", "VARCHAR NOT NULL"),
    ("repetition", "INTEGER NOT NULL"),
    ("architecture", "VARCHAR"),
    ("workload", "VARCHAR"),
    ("concurrency", "INTEGER"),
    ("threads", "INTEGER"),
    ("loops", "INTEGER"),
    ("think_time_s", "DOUBLE"),
    ("factors", "JSON"),
    ("status", "VARCHAR NOT NULL"),  # ok | failed
    ("error", "VARCHAR"),
    ("duration_s", "DOUBLE"),
    ("requests", "BIGINT"),
    ("throughput_rps", "DOUBLE"),
    ("p50_us", "DOUBLE"),
    ("p90_us", "DOUBLE"),
    ("p99_us", "DOUBLE"),
    ("p999_us", "DOUBLE"),
    ("max_us", "DOUBLE"),
    ("mean_us", "DOUBLE"),
    ("errors", "BIGINT"),
    ("errors_by_class", "JSON"),
    ("cpu_user_s", "DOUBLE"),
    ("cpu_sys_s", "DOUBLE"),
    ("cpu_us_per_request", "DOUBLE"),
    ("voluntary_cs_per_request", "DOUBLE"),
    ("involuntary_cs_per_request", "DOUBLE"),
    ("read_syscalls_per_request", "DOUBLE"),
    ("write_syscalls_per_request", "DOUBLE"),
    ("peak_rss_kib", "BIGINT"),
    ("server_threads", "INTEGER"),
    ("summary_path", "VARCHAR"),
    ("hdr_log_path", "VARCHAR"),
    ("recorded_at", "TIMESTAMP"),
    # Added after the first catalogs were written: _MIGRATIONS adds it to those.
    ("handoffs_per_request", "DOUBLE"),
    ("generator_bound", "BOOLEAN"),
    # The open and partly-open models (NULL for closed-model rows and older catalogs).
    ("load_model", "VARCHAR"),
    ("rate_rps", "DOUBLE"),  # planned arrival rate of the cell, open model (req/s)
    ("session_rate", "DOUBLE"),  # planned session rate of the cell, partly-open model (sessions/s)
    ("offered_rps", "DOUBLE"),  # arrivals per second the generator planned in the window
    ("service_p50_us", "DOUBLE"),
    ("service_p99_us", "DOUBLE"),
    ("service_p999_us", "DOUBLE"),
    ("schedule_lag_p99_us", "DOUBLE"),
    ("sent_late", "BIGINT"),
    ("never_started", "BIGINT"),
    # measured | simulated (archlab simulate); NULL in rows written before it existed: measured.
    ("source", "VARCHAR"),
    # The think time's distribution ('exp:5ms', 'uniform:2ms-8ms'); NULL for a constant one
    # (and in older catalogs): think_time_s, its mean, says it all then.
    ("think_time", "VARCHAR"),
    # Little's law on the window (archlab.littles_law): X (R + Z) / N with R the row's mean
    # latency, the same with R from the planned send, the tolerance sampling explains, and
    # whether the row passes (the ratio within the tolerance, and the tolerance at most 10 %,
    # the window long enough to tell). NULL where the law is not checked (open models,
    # simulations, failed repetitions, rows written before the check existed).
    ("littles_law_ratio", "DOUBLE"),
    ("littles_law_planned_ratio", "DOUBLE"),
    ("littles_law_tolerance", "DOUBLE"),
    ("littles_law_ok", "BOOLEAN"),
    # B / (N D): the share of the users' time the window's edges add, when the load generator
    # reported the boundary term (the law is then an identity); NULL where it did not.
    ("littles_law_boundary_share", "DOUBLE"),
    # What else ran on the machine during the window (archlab.lab.interference): the share of
    # the measured CPUs' time that went to work not the lab's, the share stolen by the
    # hypervisor, the 1-minute load average at the window's edges. NULL where not read.
    ("foreign_share", "DOUBLE"),
    ("steal_share", "DOUBLE"),
    ("load_avg_start", "DOUBLE"),
    ("load_avg_end", "DOUBLE"),
    ("measured_cpus", "INTEGER"),  # the CPUs the measured processes may use
)
_JSON_COLUMNS = ("factors", "errors_by_class")

# (column, type): the classes of a request mix, one row per run, cell, repetition and class.
# A table of its own rather than columns of ``results``: a mix has any number of classes (1 to
# 255), each with the same measures, and a row per class lets SQL group or join by path.
CLASS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR NOT NULL"),
    ("cell_id", "VARCHAR NOT NULL"),
    ("repetition", "INTEGER NOT NULL"),
    ("class_index", "INTEGER NOT NULL"),  # position in the mix: the class byte of raw records
    ("path", "VARCHAR NOT NULL"),
    ("weight", "DOUBLE"),
    ("share", "DOUBLE"),  # weight over the total weight
    ("sent", "BIGINT"),
    ("responses", "BIGINT"),
    ("requests", "BIGINT"),  # 2xx responses
    ("errors", "BIGINT"),
    ("throughput_rps", "DOUBLE"),
    # Latency of 2xx responses on the row's basis (response time for the open models, service
    # time for the closed one), and the service time's p99.
    ("p50_us", "DOUBLE"),
    ("p90_us", "DOUBLE"),
    ("p99_us", "DOUBLE"),
    ("p999_us", "DOUBLE"),
    ("mean_us", "DOUBLE"),
    ("service_p99_us", "DOUBLE"),
)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    experiment VARCHAR NOT NULL,
    spec_hash VARCHAR NOT NULL,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL,
    cells_planned INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    {", ".join(f"{name} {sqltype}" for name, sqltype in RESULT_COLUMNS)},
    PRIMARY KEY (run_id, cell_id, repetition)
);
CREATE TABLE IF NOT EXISTS result_classes (
    {", ".join(f"{name} {sqltype}" for name, sqltype in CLASS_COLUMNS)},
    PRIMARY KEY (run_id, cell_id, repetition, class_index)
);
"""

# Columns appended to RESULT_COLUMNS since the first release, for catalogs created before.
_MIGRATIONS = """
ALTER TABLE results ADD COLUMN IF NOT EXISTS handoffs_per_request DOUBLE;
ALTER TABLE results ADD COLUMN IF NOT EXISTS generator_bound BOOLEAN;
""" + "".join(
    f"ALTER TABLE results ADD COLUMN IF NOT EXISTS {name} {sqltype};\n"
    for name, sqltype in RESULT_COLUMNS[RESULT_COLUMNS.index(("load_model", "VARCHAR")) :]
)

_LOCK_WAIT_S = 10.0


class Catalog:
    """All SQL of the store. Timestamps are naive UTC."""

    def __init__(self, path: Path):
        self.path = path

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                con = duckdb.connect(str(self.path))
                break
            except duckdb.IOException as e:
                # Another archlab process has the file open right now; it closes it quickly.
                if "lock" not in str(e).lower() or time.monotonic() > deadline:
                    raise StoreError(f"cannot open the catalog {self.path}: {e}") from None
                time.sleep(0.1)
        try:
            con.execute(_SCHEMA)
            con.execute(_MIGRATIONS)
            yield con
        finally:
            con.close()

    # --- runs ----------------------------------------------------------------------------

    def add_run(self, run_id: str, experiment: str, spec_hash: str, started_at: datetime, cells_planned: int) -> None:
        with self.connect() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, NULL, 'running', ?)",
                [run_id, experiment, spec_hash, started_at, cells_planned],
            )

    def set_status(self, run_id: str, status: str, finished_at: datetime | None) -> None:
        assert status in RUN_STATUSES, status
        with self.connect() as con:
            con.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?", [status, finished_at, run_id])

    def run(self, run_id: str) -> dict | None:
        rows = self._query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self) -> list[dict]:
        """Every run, newest first, with its count of ok and failed rows."""
        return self._query(
            """
            SELECT r.*,
                   count(x.status) FILTER (WHERE x.status = 'ok') AS cells_ok,
                   count(x.status) FILTER (WHERE x.status = 'failed') AS cells_failed
            FROM runs r LEFT JOIN results x USING (run_id)
            GROUP BY ALL ORDER BY r.started_at DESC, r.run_id DESC
            """
        )

    # --- results -------------------------------------------------------------------------

    def insert_result(self, row: Mapping[str, object], classes: Sequence[Mapping[str, object]] = ()) -> None:
        """Insert one ``results`` row given as column values (``ResultRow.to_columns``) and the
        ``result_classes`` rows of its request mix, if any, in one transaction."""
        names = [name for name, _ in RESULT_COLUMNS]
        unknown = set(row) - set(names)
        assert not unknown, f"not catalog columns: {unknown}"
        values = [json.dumps(row[n]) if n in _JSON_COLUMNS and row.get(n) is not None else row.get(n) for n in names]
        class_names = [name for name, _ in CLASS_COLUMNS]
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)
                for c in classes:
                    assert set(c) <= set(class_names), f"not class columns: {set(c) - set(class_names)}"
                    con.execute(
                        f"INSERT INTO result_classes ({', '.join(class_names)}) VALUES ({', '.join('?' * len(class_names))})",
                        [c.get(n) for n in class_names],
                    )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def done_keys(self, run_id: str) -> set[tuple[str, int]]:
        with self.connect() as con:
            return {(c, r) for c, r in con.execute("SELECT cell_id, repetition FROM results WHERE run_id = ?", [run_id]).fetchall()}

    def results(self, run_id: str) -> list[dict]:
        rows = self._query("SELECT * FROM results WHERE run_id = ? ORDER BY cell_id, repetition", [run_id])
        for row in rows:
            for col in _JSON_COLUMNS:
                if isinstance(row.get(col), str):
                    row[col] = json.loads(row[col])
        return rows

    def classes(self, run_id: str) -> list[dict]:
        """The ``result_classes`` rows of a run, by cell, repetition and class."""
        return self._query("SELECT * FROM result_classes WHERE run_id = ? ORDER BY cell_id, repetition, class_index", [run_id])

    def _query(self, sql: str, params: list | None = None) -> list[dict]:
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, values)) for values in cur.fetchall()]
