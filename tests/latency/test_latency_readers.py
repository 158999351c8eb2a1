"""Readers on files produced by the real tools: JMeter 2.13 JTL and wrk 4.1 output (made by
data/regenerate.py), HdrHistogram logs and .hgrm written by the ``hdrhistogram`` package, and a
memtier JSON document laid out as memtier's run_stats.cpp writes it (memtier is not installable
here), its histogram encoded by the ``hdrhistogram`` package."""

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from archlab.latency import LatencyError, quantile
from archlab.latency.readers import (Trim, convert_to_parquet, detect_format, read, read_column, read_hdr_log, read_jtl,
                                     read_memtier_json, read_percentile_text)

DATA = Path(__file__).resolve().parent / "data"


def csv_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("name", ["jmeter213_default.jtl", "jmeter213_connect.jtl"])
def test_jtl_reads_elapsed_of_successful_samples_by_header(name):
    # Reference: Python's csv module on the same JMeter-written file (quoted label with a comma).
    rows = csv_rows(DATA / name)
    assert any(r["label"] == "GET /, with comma" for r in rows)
    expected = sorted(int(r["elapsed"]) for r in rows if r["success"] == "true")
    samples = read_jtl(DATA / name)
    assert samples.expand().tolist() == expected and samples.unit == "ms"
    latency = sorted(int(r["Latency"]) for r in rows if r["success"] == "true")
    assert read_jtl(DATA / name, measure="Latency").expand().tolist() == latency
    everything = read_jtl(DATA / name, success_only=False)
    assert everything.n == len(rows) == 400
    assert read_jtl(DATA / name, labels=["GET /missing"], success_only=False).n == 200


def test_jtl_warmup_and_cooldown_trim_by_timestamp():
    rows = csv_rows(DATA / "jmeter213_default.jtl")
    stamps = [int(r["timeStamp"]) for r in rows]
    first, last = min(stamps), max(stamps)
    expected = sorted(int(r["elapsed"]) for r in rows if r["success"] == "true"
                      and first + 200 <= int(r["timeStamp"]) <= last - 100)
    trimmed = read_jtl(DATA / "jmeter213_default.jtl", warmup_s=0.2, cooldown_s=0.1)
    assert trimmed.expand().tolist() == expected and 0 < trimmed.n < 200


def test_headerless_jtl_uses_given_layout(tmp_path):
    lines = (DATA / "jmeter213_default.jtl").read_text().splitlines()
    header = lines[0].split(",")
    (tmp_path / "bare.jtl").write_text("\n".join(lines[1:]) + "\n")
    assert read_jtl(tmp_path / "bare.jtl", columns=header).expand().tolist() == \
        read_jtl(DATA / "jmeter213_default.jtl").expand().tolist()


def test_parquet_conversion_round_trip_and_multiple_files(tmp_path):
    output = convert_to_parquet([DATA / "jmeter213_default.jtl", DATA / "jmeter213_connect.jtl"], tmp_path / "all.parquet",
                                ["timeStamp", "elapsed", "success", "label"])
    both = read_jtl(output)
    separate = read_jtl(DATA / "jmeter213_default.jtl").merge(read_jtl(DATA / "jmeter213_connect.jtl"))
    assert both.values.tolist() == separate.values.tolist() and both.counts.tolist() == separate.counts.tolist()
    assert read_jtl([DATA / "jmeter213_default.jtl", DATA / "jmeter213_connect.jtl"]).n == 400


def test_plain_csv_column_with_unit_and_time_trim(tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("t,latency_us\n0,100\n1000,250.5\n2000,250.5\n3000,900\n")
    samples = read_column(path, "latency_us", "us")
    assert samples.values.tolist() == [100, 250.5, 900] and samples.counts.tolist() == [1, 2, 1]
    trimmed = read_column(path, "latency_us", "us", trim=Trim("t", warmup_s=1.0, cooldown_s=1.0, time_unit="ms"))
    assert trimmed.expand().tolist() == [250.5, 250.5]
    with pytest.raises(LatencyError, match="no such file"):
        read_column(tmp_path / "missing.csv", "x", "ms")


def test_wrk_latency_text_from_real_wrk():
    # Reference: the values printed in data/wrk_latency.txt by wrk 4.1.0 --latency.
    report = read_percentile_text(DATA / "wrk_latency.txt")
    text = (DATA / "wrk_latency.txt").read_text()
    printed = {float(line.split()[0][:-1]): line.split()[1] for line in text.splitlines() if line.strip().endswith("ms")
               and line.strip()[0].isdigit() and "%" in line}
    assert set(report.percentiles) == {50.0, 75.0, 90.0, 99.0}
    for p, value in printed.items():
        assert report.percentiles[p] == pytest.approx(float(value[:-2]))
    assert report.count == int(text.split(" requests in")[0].split()[-1])
    assert report.samples is None
    with pytest.raises(LatencyError, match="holds only a few percentiles"):
        read(DATA / "wrk_latency.txt")


def recorded_histogram(values_us):
    histogram = HdrHistogram(1, 60_000_000, 3)
    for value in values_us:
        histogram.record_value(int(value))
    return histogram


def test_hgrm_percentile_spectrum_rebuilds_counts(tmp_path):
    rng = np.random.default_rng(0)
    histogram = recorded_histogram(rng.lognormal(7, 1, 5000))
    buffer = io.BytesIO()
    histogram.output_percentile_distribution(buffer, 1000.0)  # values printed in ms
    path = tmp_path / "run.hgrm"
    path.write_bytes(buffer.getvalue())
    report = read_percentile_text(path)
    assert report.samples is not None and report.samples.n == 5000
    # Rebuilt counts sit at the value of the next spectrum row (an upper bound); rows around the
    # median are less than 10 percentiles apart, so the rebuilt median lies in [p50, p60].
    median = quantile(report.samples, 0.5, "nearest_rank")
    assert histogram.get_value_at_percentile(50) / 1000 <= median <= histogram.get_value_at_percentile(60) / 1000
    assert report.percentiles[0.0] == histogram.get_min_value() / 1000.0


def write_hdr_log(path, intervals):
    with open(path, "w") as handle:
        writer = HistogramLogWriter(handle)
        writer.output_legend()
        for start, values in intervals:
            writer.output_interval_histogram(recorded_histogram(values), start, start + 1.0)


def test_hdr_interval_log_totals_percentiles_and_trimming(tmp_path):
    rng = np.random.default_rng(1)
    intervals = [(float(t), rng.integers(100, 100_000, 1000)) for t in range(10)]
    path = tmp_path / "run.hlog"
    write_hdr_log(path, intervals)
    assert detect_format(path) == "hdr-log"
    total = recorded_histogram(np.concatenate([v for _, v in intervals]))
    samples = read_hdr_log(path, unit="us", bucket_value="highest")
    assert samples.n == 10_000
    # HdrHistogram reports the highest equivalent value at rank ceil(p N / 100); for these p the
    # Python port's rounded rank is the same, so it is a valid reference here.
    for p in (50, 90, 99, 99.9):
        assert quantile(samples, p / 100, "nearest_rank") == total.get_value_at_percentile(p)
    assert abs(read_hdr_log(path, unit="us").mean - total.get_mean_value()) <= 1.0
    trimmed = read_hdr_log(path, unit="us", warmup_s=2.0, cooldown_s=3.0)
    assert trimmed.n == 5000  # intervals starting at 2, 3, 4, 5, 6


def test_memtier_json_histogram_and_printed_percentiles(tmp_path):
    rng = np.random.default_rng(2)
    histogram = recorded_histogram(rng.lognormal(6, 0.8, 3000))
    document = {"ALL STATS": {"Totals": {
        "Count": 3000, "Average Latency": histogram.get_mean_value() / 1000, "Max Latency": histogram.get_max_value() / 1000,
        "Percentile Latencies": {"p50.00": histogram.get_value_at_percentile(50) / 1000,
                                 "p99.000": histogram.get_value_at_percentile(99) / 1000,
                                 "Histogram log format": {"Compressed Histogram": histogram.encode().decode()}}}}}
    path = tmp_path / "memtier.json"
    path.write_text(json.dumps(document))
    report = read_memtier_json(path)
    assert report.samples.n == 3000 and report.samples.unit == "us"
    assert report.percentiles[99.0] == pytest.approx(histogram.get_value_at_percentile(99))
    assert read(path).n == 3000
    with pytest.raises(LatencyError, match=r"section: expected one of \['Totals'\], got 'Gets'"):
        read_memtier_json(path, section="Gets")


def test_hdr_intervals_of_different_trackable_ranges_are_summed(tmp_path):
    # The engine encodes each interval with its own range; adding a wide one to a narrow one
    # failed ("values that do not fit"). Reference: the raw values recorded into the intervals.
    narrow, wide = HdrHistogram(1, 10_000, 3), HdrHistogram(1, 10_000_000, 3)
    for value in (100, 200, 300):
        narrow.record_value(value)
    for value in (5_000, 4_000_000):
        wide.record_value(value)
    path = tmp_path / "ranges.hlog"
    with open(path, "w") as handle:
        writer = HistogramLogWriter(handle)
        writer.output_legend()
        writer.output_interval_histogram(narrow, 0.0, 1.0)
        writer.output_interval_histogram(wide, 1.0, 2.0)
    samples = read_hdr_log(path, unit="ns", bucket_value="lowest")
    assert samples.n == 5
    assert samples.values[:3].tolist() == [100, 200, 300] and samples.max == wide.get_lowest_equivalent_value(4_000_000)
