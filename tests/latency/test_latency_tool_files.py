"""Files other tools write, as users bring them to ``archlab analyze``: JMeter results without a
header line (2.13's default, from a real ``jmeter -n`` run; 5.x's default layout), JMeter XML,
results of a JMeter killed mid-run (CSV and XML, real), rows that are not JMeter's, failed
samples and labels, wrk --latency output and HdrHistogram .hgrm files in any unit. The fixtures
in data/ come from the real tools (data/regenerate.py); every expected value is computed here
from the file itself by an independent reader (Python's csv module, ElementTree)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from archlab.latency import LatencyError, quantile
from archlab.latency import cli
from archlab.latency.readers import (JMETER5_DEFAULT_COLUMNS, JMETER213_DEFAULT_COLUMNS, detect_format, read_file,
                                     read_jtl, read_jtl_rows)

DATA = Path(__file__).resolve().parent / "data"


def rows_of(path: Path, columns=None, complete_only: bool = False) -> list[dict]:
    """The CSV rows as Python's csv module reads them (only lines ending in a newline if asked)."""
    text = path.read_text()
    if complete_only:
        text = text[: text.rfind("\n") + 1]
    return list(csv.DictReader(io.StringIO(text), fieldnames=columns))


def elapsed_of(rows, success=True, key="elapsed") -> list[int]:
    return sorted(int(r[key]) for r in rows if success is None or (r["success"] == "true") == success)


def test_jmeter_213_default_csv_has_no_header_and_is_recognised_by_its_layout():
    # Real `jmeter -n` output with JMeter 2.13's own jmeter.properties (print_field_names=false).
    path = DATA / "jmeter213_noheader.jtl"
    assert not path.read_text().startswith("timeStamp")
    rows = rows_of(path, JMETER213_DEFAULT_COLUMNS)
    found = read_jtl_rows(path)
    assert found.layouts == ("CSV without a header, JMeter 2.13 default layout",)
    assert found.samples.expand().tolist() == elapsed_of(rows)
    assert found.rows == len(rows) == 200 and found.failed == 100
    assert found.notes() == ["100 failed samples left out (--failed include counts them)"]
    assert read_jtl(path, measure="Latency").expand().tolist() == elapsed_of(rows, key="Latency")


def test_jmeter5_default_layout_without_header_reads_elapsed_not_latency(tmp_path):
    # JMeter 5.x's default columns (bin/jmeter.properties of 5.2 to 5.6.3) with
    # print_field_names=false. Latency differs from elapsed, so reading the wrong column (the
    # thesis script took the third field from the end) would show.
    source = rows_of(DATA / "jmeter213_noheader.jtl", JMETER213_DEFAULT_COLUMNS)
    lines = []
    for r in source:
        full = {**r, "failureMessage": "" if r["success"] == "true" else "Not Found", "sentBytes": "118",
                "URL": "http://127.0.0.1/", "Latency": str(int(r["elapsed"]) // 2), "IdleTime": "0", "Connect": "1"}
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow([full[c] for c in JMETER5_DEFAULT_COLUMNS])
        lines.append(buffer.getvalue())
    path = tmp_path / "jmeter5.jtl"
    path.write_text("".join(lines))
    found = read_jtl_rows(path)
    assert found.layouts == ("CSV without a header, JMeter 5.x default layout",)
    assert found.samples.expand().tolist() == elapsed_of(source)
    assert read_jtl(path, measure="Connect").expand().tolist() == [1] * 100


def test_an_unknown_layout_without_header_is_refused_unless_named(tmp_path):
    path = tmp_path / "odd.jtl"
    path.write_text("1795620227852,68,GET /,true\n1795620227853,70,GET /,false\n")
    with pytest.raises(LatencyError, match=r"^.*odd.jtl: expected JMeter CSV results, .* got a first line of 4 fields "):
        read_jtl(path)
    assert read_jtl(path, columns=["timeStamp", "elapsed", "label", "success"]).expand().tolist() == [68]


def test_jmeter_xml_results_read_the_top_level_samples(tmp_path):
    # Real `jmeter -n` XML output; the reference parses the whole document with ElementTree.
    path = DATA / "jmeter213_xml.jtl"
    samples = list(ET.parse(path).getroot())
    assert len(samples) == 200 and {s.tag for s in samples} == {"httpSample"}
    assert detect_format(path) == "jtl"
    assert read_jtl(path).expand().tolist() == sorted(int(s.get("t")) for s in samples if s.get("s") == "true")
    assert read_jtl(path, measure="Latency", success_only=False).expand().tolist() == sorted(int(s.get("lt")) for s in samples)
    # Sub-results (embedded resources, redirects) are part of their sample: counted once.
    nested = tmp_path / "nested.xml"
    nested.write_text('<?xml version="1.0"?>\n<testResults version="1.2">\n'
                      '<httpSample t="30" lt="5" ts="1" s="true" lb="page"><httpSample t="12" lt="2" ts="2" s="true" lb="img"/>'
                      '</httpSample>\n<sample t="7" lt="7" ts="40" s="true" lb="jdbc"/>\n</testResults>\n')
    assert detect_format(nested) == "jtl"
    assert read_jtl(nested).expand().tolist() == [7, 30]


def test_a_csv_cut_by_a_killed_jmeter_reads_its_complete_rows():
    # Real: JMeter 2.13 killed with SIGKILL; its 8 KiB output buffer ends inside a row.
    path = DATA / "jmeter213_killed.jtl"
    text = path.read_text()
    assert not text.endswith("\n")
    rows = rows_of(path, JMETER213_DEFAULT_COLUMNS, complete_only=True)
    found = read_jtl_rows(path, failed="include")
    assert found.cut == 1 and found.rows == len(rows) == text.count("\n")
    assert found.samples.expand().tolist() == elapsed_of(rows, success=None)
    assert "1 row cut short at the end of the file dropped (a killed JMeter)" in found.notes()


def test_an_xml_cut_by_a_killed_jmeter_reads_its_complete_samples(tmp_path):
    # Real: this run was killed between two samples (no </testResults>); a copy cut inside a
    # sample loses that sample only.
    path = DATA / "jmeter213_killed_xml.jtl"
    text = path.read_text()
    assert "</testResults>" not in text
    complete = [ET.fromstring(line) for line in text.splitlines() if line.startswith("<httpSample")]
    found = read_jtl_rows(path, failed="include")
    assert (found.cut, found.unfinished, found.rows) == (0, 1, len(complete))
    assert found.samples.expand().tolist() == sorted(int(s.get("t")) for s in complete)
    assert found.notes() == ["1 file ends early (a killed JMeter), after a complete sample"]
    cut = tmp_path / "cut.jtl"
    cut.write_text(text[: text.rindex("<httpSample") + 40])
    found = read_jtl_rows(cut, failed="include")
    assert (found.cut, found.rows) == (1, len(complete) - 1)
    assert found.samples.expand().tolist() == sorted(int(s.get("t")) for s in complete[:-1])


def test_rows_that_are_not_jmeters_are_counted_and_the_first_is_named(tmp_path):
    # Before: DuckDB's conversion error ended `archlab analyze` with a dump.
    path = tmp_path / "mixed.jtl"
    path.write_text("timeStamp,elapsed,label,success\n1,abc,a,true\n2,5,b,true\n3,6\n4,-1,c,true\n5,9,d,true\n")
    found = read_jtl_rows(path)
    assert found.samples.expand().tolist() == [5, 9]
    assert found.malformed == 3 and found.rows == 5
    assert found.notes()[0].startswith("3 malformed rows dropped (first: ") and "line 2" in found.notes()[0]
    only_bad = tmp_path / "bad.jtl"
    only_bad.write_text("timeStamp,elapsed,label,success\n1,abc,a,true\n")
    with pytest.raises(LatencyError, match=r"bad.jtl: no sample left of 1 rows \(1 malformed rows dropped"):
        read_jtl(only_bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", r"expected JMeter results \(CSV or XML\), got an empty file$"),
     (bytes(range(256)) * 8, r"expected JMeter CSV results, .*got a first line of \d+ fields"),
     (b"<html><body>not results</body></html>", r"expected JMeter XML results \(<testResults>\), got <html>$"),
     (b'<?xml version="1.0"?>\n<testResults>\n<httpSample t="1" s="true"/>\n<httpSample t=2/>\n</testResults>\n',
      r"bad.jtl:4:\d+: expected JMeter XML results, got ")],
    ids=["empty", "binary", "html", "bad-xml"],
)
def test_files_that_are_not_jmeter_results_are_named(tmp_path, content, message):
    path = tmp_path / "bad.jtl"
    path.write_bytes(content)
    with pytest.raises(LatencyError, match=message):
        read_jtl(path)


def test_failed_samples_and_labels_are_chosen_and_counted():
    path = DATA / "jmeter213_default.jtl"
    rows = rows_of(path)
    found = read_jtl_rows(path, failed="only")
    assert found.samples.expand().tolist() == elapsed_of(rows, success=False) and found.failed == 200
    assert found.notes("only") == ["200 successful samples left out (--failed only)"]
    found = read_jtl_rows(path, failed="include", labels=["GET /missing"])
    assert found.samples.expand().tolist() == sorted(int(r["elapsed"]) for r in rows if r["label"] == "GET /missing")
    assert found.notes() == ["200 samples of other labels left out (--label)"]


def test_analyze_says_what_it_left_out_and_takes_the_flags(capsys):
    args = _parse([str(DATA / "jmeter213_killed.jtl"), "--json", "--boot", "20", "--no-stable", "--pot-threshold", "none"])
    assert cli.run(args) == 0
    document = json.loads(capsys.readouterr().out)
    rows = rows_of(DATA / "jmeter213_killed.jtl", JMETER213_DEFAULT_COLUMNS, complete_only=True)
    failed = sum(r["success"] != "true" for r in rows)
    assert document["count"] == len(rows) - failed
    path = DATA / "jmeter213_killed.jtl"
    assert document["notes"][:2] == [f"input {path}: {failed} failed samples left out (--failed include counts them)",
                                     f"input {path}: 1 row cut short at the end of the file dropped (a killed JMeter)"]
    args = _parse([str(path), "--json", "--boot", "20", "--no-stable", "--pot-threshold", "none", "--failed", "include",
                   "--label", "GET /missing"])
    assert cli.run(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["count"] == sum(r["label"] == "GET /missing" for r in rows)


def _parse(argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_wrk_output_through_the_cli_prints_its_percentiles(capsys):
    # Before: refused ("holds only a few percentiles"). Reference: the lines wrk 4.1.0 printed.
    path = DATA / "wrk_latency.txt"
    assert cli.run(_parse([str(path)])) == 0
    out = capsys.readouterr().out
    for line in ("  requests  955", "  mean      4.88 ms", "  p50       3.33 ms", "  p99       21.4 ms"):
        assert line in out.splitlines()
    assert cli.run(_parse([str(path), "--json", "--unit", "us"])) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["unit"] == "us" and document["percentiles"][0] == {"p": 50.0, "value": pytest.approx(3330.0)}
    with pytest.raises(LatencyError, match="cannot be merged"):
        cli.run(_parse([str(path), str(DATA / "jmeter213_default.jtl")]))


def test_hgrm_values_are_read_in_the_unit_the_user_gives():
    # hdrh's output_percentile_distribution with ratio 1000 of values recorded in ns: printed in
    # us, which the file does not say. Before: always read as ms (1000 times too large here).
    path = DATA / "hdrh_us.hgrm"
    with pytest.raises(LatencyError, match=r"expected the unit of its values .* give --unit ns, us, ms or s$"):
        read_file(path)
    true_us = np.loadtxt(DATA / "hdrh_us.values") / 1000.0
    reading = read_file(path, unit="us")
    assert reading.samples.unit == "us" and reading.samples.n == true_us.size == 2000
    # Counts sit at the next printed row's value (an upper bound of the bucket): the rebuilt
    # median lies between the true median and the true p60 (the rows around p50 are < 10 % apart),
    # widened by HdrHistogram's 3-significant-digit buckets (0.1 %).
    median = quantile(reading.samples, 0.5, "nearest_rank")
    assert np.quantile(true_us, 0.5) * 0.999 <= median <= np.quantile(true_us, 0.6) * 1.001
    in_ms = read_file(path, unit="ms").samples
    assert in_ms.unit == "ms" and np.allclose(in_ms.values, reading.samples.values)


def test_wrk2_spectrum_is_in_milliseconds(tmp_path):
    # wrk2 prints its HdrHistogram spectrum in ms under "Detailed Percentile spectrum": detected.
    path = tmp_path / "wrk2.txt"
    path.write_text("  Latency Distribution (HdrHistogram - Recorded Latency)\n 50.000%    1.20ms\n"
                    "  Detailed Percentile spectrum:\n       Value   Percentile   TotalCount 1/(1-Percentile)\n\n"
                    "       0.500     0.000000            1         1.00\n       1.200     0.500000            5         2.00\n"
                    "       3.000     1.000000           10\n")
    samples = read_file(path).samples
    assert samples.unit == "ms" and samples.values.tolist() == [0.5, 1.2, 3.0] and samples.counts.tolist() == [1, 4, 5]


def test_a_directory_is_named_as_such(tmp_path):
    with pytest.raises(LatencyError, match=r"expected a latency file \(or an archlab run directory, with its "
                                           r"manifest.json\), got a directory$"):
        read_file(tmp_path)


def test_parquet_of_several_runs_trims_each_run_by_its_own_timestamps(tmp_path):
    from archlab.latency.readers import convert_to_parquet

    runs = [DATA / "jmeter213_default.jtl", DATA / "jmeter213_connect.jtl"]
    both = convert_to_parquet(runs, tmp_path / "both.parquet", ["timeStamp", "elapsed", "success", "label"])
    trimmed = read_jtl(both, warmup_s=0.2, cooldown_s=0.1)
    separate = read_jtl(runs[0], warmup_s=0.2, cooldown_s=0.1).merge(read_jtl(runs[1], warmup_s=0.2, cooldown_s=0.1))
    assert trimmed.values.tolist() == separate.values.tolist() and trimmed.counts.tolist() == separate.counts.tolist()
    assert trimmed.n < read_jtl(both).n
