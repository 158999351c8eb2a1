"""The Rust JTL reader (crates/jtl, the default) against DuckDB's (``reader="duckdb"``), row for
row: on the JMeter-written fixtures under every option, and on generated files with what real
results hold -- labels quoted with commas, doubled quotes and line breaks, CRLF line ends, failed
samples, rows that are not JMeter's, a run cut mid-row, no header line -- large enough that rows
straddle the reader's 1 MiB blocks. The values are also checked against Python's csv module."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from archlab.latency.readers import JMETER5_DEFAULT_COLUMNS, read_jtl_rows

DATA = Path(__file__).resolve().parent / "data"
CSV_FIXTURES = ["jmeter213_default.jtl", "jmeter213_connect.jtl", "jmeter213_noheader.jtl", "jmeter213_killed.jtl"]


def same(path, **options):
    """Both readers' accounts of ``path``; every count and every kept value must agree."""
    native = read_jtl_rows(path, reader="native", **options)
    duck = read_jtl_rows(path, reader="duckdb", **options)
    for field in ("rows", "failed", "other_labels", "trimmed", "malformed", "cut", "unfinished", "layouts"):
        assert getattr(native, field) == getattr(duck, field), (field, getattr(native, field), getattr(duck, field))
    assert (native.samples is None) == (duck.samples is None)
    if native.samples is not None:
        assert native.samples.values.tolist() == duck.samples.values.tolist()
        assert native.samples.counts.tolist() == duck.samples.counts.tolist()
    return native


@pytest.mark.parametrize("name", CSV_FIXTURES)
@pytest.mark.parametrize("options", [
    {}, {"failed": "include"}, {"failed": "only"}, {"measure": "Latency"},
    {"labels": ["GET /missing"], "failed": "include"}, {"warmup_s": 0.2, "cooldown_s": 0.1},
], ids=["default", "include", "only", "latency", "label", "trim"])
def test_fixtures_read_the_same_under_every_option(name, options):
    found = same(DATA / name, **options)
    assert found.rows > 0


def jmeter5_row(rng, i: int, label: str, success: bool) -> list[str]:
    elapsed = int(rng.lognormal(3, 1))
    return [str(1_700_000_000_000 + 3 * i), str(elapsed), label, "200" if success else "500",
            "OK" if success else "Internal, Server \"Error\"", f"Thread Group 1-{i % 7 + 1}", "text",
            "true" if success else "false", "" if success else "Server said \"no\"\nsecond line", "1523", "118",
            "8", "8", "http://127.0.0.1:8080/api?x=1,2", str(elapsed // 2), "0", "1"]


def generated(path: Path, rows: int, *, header: bool, crlf: bool, seed: int, cut: bool = False,
              bad: bool = True) -> list[list[str]]:
    """A JMeter 5 CSV file written by Python's csv module (which quotes as JMeter does); returns
    the rows written, bad ones included, so that a reference can be computed independently."""
    rng = np.random.default_rng(seed)
    labels = ["GET /", "GET /, with comma", 'say "hi"', "multi\nline", "POST /api"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n" if crlf else "\n")
    if header:
        writer.writerow(JMETER5_DEFAULT_COLUMNS)
    written = []
    for i in range(rows):
        row = jmeter5_row(rng, i, labels[i % len(labels)], rng.random() > 0.1)
        if bad and i % 997 == 5:
            row[1] = "not-a-number"
        if bad and i % 1499 == 7:
            row[1] = "-4"
        if bad and i % 1999 == 11:
            row = row[:5]  # a row of the wrong width
        writer.writerow(row)
        written.append(row)
    text = buffer.getvalue()
    if cut:
        text = text[: len(text) - 25]  # a killed JMeter: the last row ends mid-way
    path.write_bytes(text.encode())
    return written


@pytest.mark.parametrize(("header", "crlf", "cut"), [(True, False, False), (False, True, False), (True, True, True),
                                                      (False, False, True)],
                         ids=["header-lf", "headerless-crlf", "header-crlf-cut", "headerless-lf-cut"])
def test_generated_files_read_the_same_across_block_boundaries(tmp_path, header, crlf, cut):
    path = tmp_path / "run.jtl"
    written = generated(path, 25_000, header=header, crlf=crlf, seed=7, cut=cut)
    assert path.stat().st_size > 2 << 20, "rows must straddle the 1 MiB blocks"
    found = same(path)
    same(path, failed="only")
    same(path, labels=["GET /, with comma", "multi\nline"], warmup_s=1.0, cooldown_s=2.0)
    # Reference: the rows written, the cut one left out.
    complete = written[:-1] if cut else written
    expected = sorted(int(r[1]) for r in complete if len(r) == 17 and r[7] == "true" and r[1].isdigit())
    assert found.samples.expand().tolist() == expected
    assert found.malformed == sum(len(r) != 17 or not r[1].isdigit() for r in complete)
    assert found.cut == int(cut)


def test_quotes_line_ends_and_an_open_quote_in_mixed_line_ends(tmp_path):
    # DuckDB gives up on this file (mixed CRLF and LF line ends: "the CSV Parser state machine
    # reached an invalid state"); the Rust reader reads it as RFC 4180 says: quoted commas,
    # doubled quotes and a quoted CRLF belong to their field, and a quote left open runs to the
    # end of the input, which makes the last two lines one malformed row.
    path = tmp_path / "quotes.jtl"
    path.write_bytes(b'timeStamp,elapsed,label,success\r\n1,5,"a ""quoted"", label",true\r\n2,6,"line\r\nbreak",true\n'
                     b'3,7,"unclosed,true\n4,8,plain,true\n')
    found = read_jtl_rows(path, labels=['a "quoted", label', "line\r\nbreak"])
    assert found.samples.expand().tolist() == [5, 6]
    assert (found.rows, found.malformed, found.other_labels) == (3, 1, 0)
    assert found.problems == (f"{path}: line 5: a quoted field is never closed",)


def test_the_native_reader_is_flat_in_memory_and_counts_a_large_file(tmp_path):
    # 200,000 rows in 1 MiB blocks: the counts are exact (reference: NumPy on the generated
    # values), and the values never pass through a Python list of rows.
    rng = np.random.default_rng(3)
    values = rng.integers(0, 5000, 200_000)
    lines = "".join(f"{1700000000000 + i},{v},GET /,true\n" for i, v in enumerate(values))
    path = tmp_path / "large.jtl"
    path.write_text("timeStamp,elapsed,label,success\n" + lines)
    found = same(path)
    distinct, counts = np.unique(values, return_counts=True)
    assert found.samples.values.tolist() == distinct.tolist() and found.samples.counts.tolist() == counts.tolist()
