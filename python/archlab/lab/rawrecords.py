"""The load generator's raw per-request records (``archlab-engine load --records FILE``): reading
the binary file in fixed-size chunks with NumPy, and exporting it to Parquet (through DuckDB) or
to JMeter's JTL CSV (through the engine, which owns that format). Memory stays flat however
large the file: at most one chunk of records is in Python at a time, and DuckDB spills the table
it builds to disk before it writes the Parquet file.

The binary layout is the engine's (``crates/load/src/records.rs``), all little-endian: a header
of ``header_len`` bytes (magic ``ALRECv1\\0``, version u32 = 1, header_len u32, record_len u32 =
48, connections u32, t0 monotonic ns u64, t0 wall-clock ns since the Unix epoch u64, then the
UTF-8 label), then records of 48 bytes: planned, sent, first byte, done (u64 ns since t0; first
byte all ones when no byte arrived), bytes received u32, bytes sent u32, connection u32, status
u16 (HTTP status; 0 for memcached), error class u8 (0 none, else 1 + its index in
:data:`ERROR_CLASSES`), mix class u8 (the request's class in the run's request mix, 0 without a
mix; files written before mixes have 0 there, their reserved byte)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archlab.errors import ArchlabError, InvalidValue

MAGIC = b"ALRECv1\0"
VERSION = 1
HEADER_FIXED = 40
RECORD_DTYPE = np.dtype(
    [
        ("planned_ns", "<u8"),
        ("sent_ns", "<u8"),
        ("first_byte_ns", "<u8"),
        ("done_ns", "<u8"),
        ("bytes_received", "<u4"),
        ("bytes_sent", "<u4"),
        ("connection", "<u4"),
        ("status", "<u2"),
        ("error", "u1"),
        ("mix_class", "u1"),
    ]
)
assert RECORD_DTYPE.itemsize == 48
NO_FIRST_BYTE = np.iinfo(np.uint64).max
# The engine's ErrorClass::ALL, in order (crates/load/src/stats.rs): code n is ERROR_CLASSES[n-1].
ERROR_CLASSES = (
    "connect", "timeout", "read", "write", "closed", "parse", "status_4xx", "status_5xx",
    "mc_error", "mc_client_error", "mc_server_error", "mc_verify",
)  # fmt: skip
# Records per chunk: 64 Ki records are 3 MiB, enough to amortise each DuckDB insert.
CHUNK_RECORDS = 1 << 16
FORMATS = ("parquet", "jtl")
SUFFIXES = {"parquet": ".parquet", "jtl": ".jtl.csv"}


class RecordsError(ArchlabError):
    """A records file that is not one, is of another version, or is cut short: the file a user
    gave, so the CLI exits 2 on it."""

    exit_status = 2


@dataclass(frozen=True)
class RecordsHeader:
    header_len: int
    connections: int
    t0_mono_ns: int
    t0_wall_unix_ns: int
    label: str


@dataclass(frozen=True)
class RecordsFile:
    path: Path
    header: RecordsHeader
    count: int

    @classmethod
    def open(cls, path: str | Path) -> "RecordsFile":
        p = Path(path)
        try:
            with p.open("rb") as f:
                fixed = f.read(HEADER_FIXED)
                if len(fixed) < HEADER_FIXED or fixed[:8] != MAGIC:
                    raise RecordsError(f"{p}: not an archlab records file (bad magic)")
                version, header_len, record_len, connections = np.frombuffer(fixed, "<u4", 4, 8).tolist()
                t0_mono, t0_wall = np.frombuffer(fixed, "<u8", 2, 24).tolist()
                if version != VERSION or record_len != RECORD_DTYPE.itemsize or not HEADER_FIXED <= header_len <= HEADER_FIXED + 4096:
                    raise RecordsError(
                        f"{p}: unsupported records file (version {version}, record length {record_len}, header {header_len}); "
                        f"this archlab reads version {VERSION} with {RECORD_DTYPE.itemsize}-byte records"
                    )
                label = f.read(header_len - HEADER_FIXED)
            size = p.stat().st_size
        except FileNotFoundError:
            raise InvalidValue("RUN_OR_FILE", "a run id or a records file written by `archlab-engine load --records`", str(path)) from None
        count, rest = divmod(size - header_len, RECORD_DTYPE.itemsize)
        if rest or count < 0:
            raise RecordsError(f"{p}: truncated last record ({size} bytes: header {header_len} + {count} records + {rest} bytes)")
        try:
            text = label.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordsError(f"{p}: label is not UTF-8") from None
        return cls(p, RecordsHeader(header_len, connections, t0_mono, t0_wall, text), count)

    def chunks(self, records: int = CHUNK_RECORDS) -> Iterator[np.ndarray]:
        """The records in file order, ``records`` at a time (the last chunk may be shorter)."""
        with self.path.open("rb") as f:
            f.seek(self.header.header_len)
            left = self.count
            while left > 0:
                chunk = np.fromfile(f, dtype=RECORD_DTYPE, count=min(records, left))
                if chunk.size == 0:  # the file shrank under us
                    raise RecordsError(f"{self.path}: ended after {self.count - left} of {self.count} records")
                left -= chunk.size
                yield chunk


# Parquet columns: times in ns since the run's t0 (the header's wall clock t0 is in the file's
# metadata), NULL first byte when none arrived, NULL error for a success.
_COLUMNS_SQL = """
    planned_ns::BIGINT AS planned_ns,
    sent_ns::BIGINT AS sent_ns,
    NULLIF(first_byte_ns, {no_first_byte})::BIGINT AS first_byte_ns,
    done_ns::BIGINT AS done_ns,
    status::USMALLINT AS status,
    bytes_received::UINTEGER AS bytes_received,
    bytes_sent::UINTEGER AS bytes_sent,
    connection::UINTEGER AS connection,
    CASE WHEN error = 0 THEN NULL ELSE {classes}[error] END AS error_class,
    mix_class::UTINYINT AS mix_class
"""


def export_parquet(source: RecordsFile, out: Path, chunk_records: int = CHUNK_RECORDS, memory_limit: str = "256MB") -> int:
    """Write ``source`` as Parquet at ``out`` (written to a temporary name, then renamed);
    returns the row count. Rows keep the file's order (per load thread, not globally by time)."""
    import duckdb  # the catalog's dependency; imported here so reading records needs only NumPy

    classes = "[" + ", ".join(f"'{c}'" for c in ERROR_CLASSES) + "]"
    select = _COLUMNS_SQL.format(no_first_byte=int(NO_FIRST_BYTE), classes=classes)
    out.parent.mkdir(parents=True, exist_ok=True)
    h = source.header
    metadata = {"archlab_label": h.label, "archlab_connections": str(h.connections), "archlab_t0_wall_unix_ns": str(h.t0_wall_unix_ns)}
    kv = "{" + ", ".join(f"{k}: '{_sql_text(v)}'" for k, v in metadata.items()) + "}"
    with tempfile.TemporaryDirectory(prefix=".records-", dir=out.parent) as scratch:
        con = duckdb.connect(str(Path(scratch) / "records.duckdb"))
        try:
            con.execute(f"SET memory_limit = '{memory_limit}'")
            con.execute(f"SET temp_directory = '{_sql_text(scratch)}'")
            con.execute("SET preserve_insertion_order = true")
            created = False
            rows = 0
            for chunk in source.chunks(chunk_records):
                columns = {name: np.ascontiguousarray(chunk[name]) for name in (RECORD_DTYPE.names or ()) }
                con.register("chunk", columns)
                if created:
                    con.execute(f"INSERT INTO records SELECT {select} FROM chunk")
                else:
                    con.execute(f"CREATE TABLE records AS SELECT {select} FROM chunk")
                    created = True
                con.unregister("chunk")
                rows += chunk.size
            if not created:  # an empty file still gives a Parquet file with the columns
                empty = {name: np.zeros(0, RECORD_DTYPE[name]) for name in (RECORD_DTYPE.names or ()) }
                con.register("chunk", empty)
                con.execute(f"CREATE TABLE records AS SELECT {select} FROM chunk")
            tmp = out.with_name(out.name + ".tmp")
            con.execute(f"COPY records TO '{_sql_text(str(tmp))}' (FORMAT parquet, COMPRESSION zstd, KV_METADATA {kv})")
        finally:
            con.close()
    os.replace(tmp, out)
    return rows


def export_jtl(engine: Path, source: RecordsFile, out: Path) -> int:
    """JMeter's JTL CSV, written by the engine (the one implementation of that mapping)."""
    done = subprocess.run([str(engine), "records", "export", str(source.path), "--jtl", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ArchlabError(f"archlab-engine records export {source.path}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return source.count


def _sql_text(text: str) -> str:
    return text.replace("'", "''")
