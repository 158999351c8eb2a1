"""Out-of-core exact counts from CSV and Parquet files through DuckDB.

A latency column of any number of files, far larger than memory, is reduced inside DuckDB to
``value, count(*) GROUP BY value`` (exact, lossless for integer milliseconds: U distinct values
instead of n rows), with optional row filters and warm-up/cool-down trimming by a time column
measured from each file's own first and last timestamp (seed 000 trims the first 5 minutes of every
run). DuckDB streams the scan and spills its aggregation to disk under ``memory_limit``.
:func:`convert_to_parquet` is the one-time CSV -> Parquet conversion after which re-analysis never
parses text again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from archlab.latency.errors import LatencyError, ParameterError, check_nonnegative
from archlab.latency.samples import UNIT_SECONDS, Samples


@dataclass(frozen=True)
class Trim:
    """Drop the first ``warmup_s`` and last ``cooldown_s`` seconds of each file, by ``time_column``
    (in ``time_unit``; JMeter's ``timeStamp`` is epoch milliseconds)."""

    time_column: str
    warmup_s: float = 0.0
    cooldown_s: float = 0.0
    time_unit: str = "ms"

    def __post_init__(self) -> None:
        check_nonnegative("warmup_s", self.warmup_s)
        check_nonnegative("cooldown_s", self.cooldown_s)
        if self.time_unit not in UNIT_SECONDS:
            raise ParameterError("time_unit", "one of " + ", ".join(UNIT_SECONDS), self.time_unit)

    def offsets(self) -> tuple[float, float]:
        per_second = 1.0 / UNIT_SECONDS[self.time_unit]
        return self.warmup_s * per_second, self.cooldown_s * per_second


def existing_paths(paths: str | Path | Sequence[str | Path]) -> list[str]:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not items:
        raise ParameterError("paths", "at least one file", paths)
    missing = [str(p) for p in items if not Path(p).exists()]
    if missing:
        raise LatencyError(f"paths: no such file: {', '.join(missing)}")
    return [str(p) for p in items]


FILE_COLUMN = "archlab_file"  # the column DuckDB adds with each row's file name


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def source_sql(paths: Sequence[str], csv_options: str = "") -> str:
    """A DuckDB table function over the files (Parquet by extension, CSV otherwise), with a filename column."""
    listed = "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"
    if all(p.endswith(".parquet") for p in paths):
        return f"read_parquet({listed}, filename = '{FILE_COLUMN}')"
    return f"read_csv({listed}, filename = '{FILE_COLUMN}'{csv_options})"


def duckdb_message(error: duckdb.Error) -> str:
    """The first line of a DuckDB error (the rest quotes the SQL archlab wrote, not the user)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def count_values(paths: str | Path | Sequence[str | Path], value_sql: str, unit: str, *,
                 where_sql: str = "TRUE", trim: Trim | None = None, csv_options: str = "",
                 memory_limit: str | None = None) -> Samples:
    """Exact counts of ``value_sql`` over the rows of the files that satisfy ``where_sql``.

    Trimming windows are measured on *all* rows of a run (failed samples included), per source
    file: the ``source_file`` column of a Parquet file made by :func:`convert_to_parquet`, else
    the physical file."""
    files = existing_paths(paths)
    source = source_sql(files, csv_options)
    connection = duckdb.connect()
    try:
        if memory_limit:
            connection.execute(f"SET memory_limit = '{memory_limit}'")
        connection.execute("SET preserve_insertion_order = false")
        if trim is None:
            query = (f"SELECT v, count(*) AS c FROM (SELECT {value_sql} AS v FROM {source} WHERE {where_sql}) "
                     "WHERE v IS NOT NULL GROUP BY v ORDER BY v")
        else:
            columns = [row[0] for row in connection.execute(f"DESCRIBE SELECT * FROM {source} LIMIT 0").fetchall()]
            run = "source_file" if "source_file" in columns else FILE_COLUMN
            warmup, cooldown = trim.offsets()
            query = (f"WITH rows AS (SELECT {quote(run)} AS run, CAST({quote(trim.time_column)} AS DOUBLE) AS t, "
                     f"{value_sql} AS v, ({where_sql}) AS keep FROM {source}), "
                     "bounds AS (SELECT run, min(t) AS first, max(t) AS last FROM rows GROUP BY run) "
                     "SELECT v, count(*) AS c FROM rows JOIN bounds USING (run) "
                     f"WHERE keep AND v IS NOT NULL AND t >= first + {warmup!r} AND t <= last - {cooldown!r} "
                     "GROUP BY v ORDER BY v")
        rows = connection.execute(query).fetchnumpy()
    except duckdb.Error as error:
        raise LatencyError(f"reading {', '.join(files)}: {duckdb_message(error)}") from None
    finally:
        connection.close()
    values, counts = rows["v"], rows["c"]
    if values.size == 0:
        raise LatencyError(f"reading {', '.join(files)}: no rows left after filtering and trimming")
    return Samples(np.asarray(values, dtype=float), np.asarray(counts, dtype=np.int64), unit)


def read_column(paths: str | Path | Sequence[str | Path], column: str, unit: str, *,
                trim: Trim | None = None, memory_limit: str | None = None) -> Samples:
    """One numeric column of CSV (with a header) or Parquet files, in ``unit``, as exact counts."""
    if unit not in UNIT_SECONDS:
        raise ParameterError("unit", "one of " + ", ".join(UNIT_SECONDS), unit)
    files = existing_paths(paths)
    try:
        described = duckdb.sql(f"DESCRIBE SELECT * FROM {source_sql(files, ', header = true')}")
        assert described is not None  # a SELECT always gives a relation
        found = [row[0] for row in described.fetchall()]
    except duckdb.Error as error:
        raise LatencyError(f"reading {', '.join(files)}: {duckdb_message(error)}") from None
    if column not in found:
        shown = [c for c in found if c != FILE_COLUMN]
        raise LatencyError(f"{', '.join(files)}: expected a column {column!r}, got the columns {', '.join(shown) or 'none'}")
    return count_values(files, f"CAST({quote(column)} AS DOUBLE)", unit, trim=trim,
                        csv_options=", header = true", memory_limit=memory_limit)


def convert_to_parquet(paths: str | Path | Sequence[str | Path], output: str | Path,
                       columns: Sequence[str] | None = None, *, csv_options: str = ", header = true") -> Path:
    """Copy the (CSV) files once into one Parquet file, keeping ``columns`` (default all) and each
    row's original file name as ``source_file`` (trimming stays per run after conversion)."""
    files = existing_paths(paths)
    kept = "* EXCLUDE (" + FILE_COLUMN + ")" if not columns else ", ".join(quote(c) for c in columns)
    selected = f"{kept}, {FILE_COLUMN} AS source_file"
    output = Path(output)
    target = str(output).replace("'", "''")
    try:
        duckdb.execute(f"COPY (SELECT {selected} FROM {source_sql(files, csv_options)}) "
                       f"TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
    except duckdb.Error as error:
        raise LatencyError(f"converting {', '.join(files)} to Parquet: {duckdb_message(error)}") from None
    return output
