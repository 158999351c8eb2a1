"""Reading the engine's raw records file and exporting it to Parquet, on files written here with
the layout the engine documents (crates/load/src/records.rs): every field lands in its column
with its value, across chunk boundaries and in file order; a missing first byte and a success's
error class are NULL; a truncated or foreign file is refused with a clear error. The real
engine's files are exercised end to end in test_lab_load_models.py."""

from __future__ import annotations

import struct
from pathlib import Path

import duckdb
import pytest

from archlab.lab.rawrecords import ERROR_CLASSES, RecordsError, RecordsFile, export_parquet

LABEL = "GET http://127.0.0.1:1/a,'b'"
NO_BYTE = 2**64 - 1


def header(label: str = LABEL, connections: int = 3) -> bytes:
    text = label.encode()
    return b"ALRECv1\0" + struct.pack("<IIIIQQ", 1, 40 + len(text), 48, connections, 123, 1_700_000_000_000_000_000) + text


def record(i: int, first_byte: int | None = None, status: int = 200, error: int = 0, mix_class: int = 0) -> bytes:
    planned, sent, done = 1000 * i, 1000 * i + 10, 1000 * i + 900
    first = NO_BYTE if first_byte is None else first_byte
    return struct.pack("<QQQQIIIHBB", planned, sent, first, done, 100 + i, 40, i % 3, status, error, mix_class)


def write(tmp_path: Path, body: bytes, label: str = LABEL) -> Path:
    path = tmp_path / "run.rec"
    path.write_bytes(header(label) + body)
    return path


def test_header_and_chunks(tmp_path):
    path = write(tmp_path, b"".join(record(i, 1000 * i + 500) for i in range(7)))
    f = RecordsFile.open(path)
    assert (f.count, f.header.connections, f.header.t0_mono_ns, f.header.label) == (7, 3, 123, LABEL)
    chunks = list(f.chunks(3))
    assert [c.size for c in chunks] == [3, 3, 1]
    assert [int(x) for c in chunks for x in c["planned_ns"]] == [1000 * i for i in range(7)]


def test_parquet_columns_values_and_order(tmp_path):
    body = [record(i, 1000 * i + 500, mix_class=i % 2) for i in range(5)]
    body.append(record(5, None, status=0, error=2))  # a timeout: no byte, no status
    body.append(record(6, 6400, status=503, error=8))  # a 5xx
    path = write(tmp_path, b"".join(body))
    out = tmp_path / "out" / "run.parquet"
    assert export_parquet(RecordsFile.open(path), out, chunk_records=2) == 7
    con = duckdb.connect()
    rows = con.execute("SELECT * FROM read_parquet(?)", [str(out)]).fetchall()
    names = [d[0] for d in con.description]
    assert names == ["planned_ns", "sent_ns", "first_byte_ns", "done_ns", "status", "bytes_received", "bytes_sent", "connection", "error_class", "mix_class"]
    assert rows[0] == (0, 10, 500, 900, 200, 100, 40, 0, None, 0)
    assert rows[3] == (3000, 3010, 3500, 3900, 200, 103, 40, 0, None, 1)
    assert rows[4] == (4000, 4010, 4500, 4900, 200, 104, 40, 1, None, 0)
    assert rows[5] == (5000, 5010, None, 5900, 0, 105, 40, 2, "timeout", 0)
    assert rows[6][2] == 6400 and rows[6][4] == 503 and rows[6][8] == "status_5xx" == ERROR_CLASSES[8 - 1]
    meta = dict((k.decode(), v.decode()) for _, k, v in con.execute("SELECT * FROM parquet_kv_metadata(?)", [str(out)]).fetchall())
    assert meta["archlab_label"] == LABEL and meta["archlab_connections"] == "3"
    assert meta["archlab_t0_wall_unix_ns"] == "1700000000000000000"


def test_empty_file_gives_the_columns(tmp_path):
    out = tmp_path / "e.parquet"
    assert export_parquet(RecordsFile.open(write(tmp_path, b"")), out) == 0
    assert duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [str(out)]).fetchone() == (0,)


def test_truncated_and_foreign_files_are_refused(tmp_path):
    path = write(tmp_path, record(0) + record(1)[:-1])
    with pytest.raises(RecordsError, match=r"truncated last record"):
        RecordsFile.open(path)
    other = tmp_path / "other.rec"
    other.write_bytes(b"garbage-garbage-garbage-garbage-garbage-garbage")
    with pytest.raises(RecordsError, match=r"not an archlab records file"):
        RecordsFile.open(other)
    v2 = tmp_path / "v2.rec"
    v2.write_bytes(b"ALRECv1\0" + struct.pack("<IIIIQQ", 2, 40, 56, 1, 0, 0))
    with pytest.raises(RecordsError, match=r"unsupported records file \(version 2, record length 56"):
        RecordsFile.open(v2)
