"""The files `archlab-engine load` writes are readable by the tools users already have: the
HDR interval log by the `hdrhistogram` package (HdrHistogram's own Python port) and by
`archlab.latency.read_hdr_log`, with counts and quantiles that agree with the JSON summary.
A real server and the real generator run on loopback for half a second."""

from __future__ import annotations

import json
import subprocess

import pytest
from hdrh.log import HistogramLogReader
from hdrh.histogram import HdrHistogram

from archlab.latency.readers.hdr import read_hdr_log


@pytest.fixture(scope="module")
def load_run(engine_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("load")
    server = subprocess.Popen([str(engine_path), "serve", "--arch", "single-thread", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        target = server.stdout.readline().split()[1]
        subprocess.run([str(engine_path), "load", "--target", target, "--path", "/echo?size=100",
                        "--connections", "4", "--warmup", "200ms", "--duration", "1s",
                        "--json", str(out / "summary.json")], check=True, capture_output=True, timeout=30)
    finally:
        server.terminate()
        server.wait(5)
    summary = json.loads((out / "summary.json").read_text())
    return summary, out / summary["hdr_log"]


def test_the_interval_log_is_read_by_hdrhistogram(load_run):
    summary, log = load_run
    reader = HistogramLogReader(str(log), HdrHistogram(1, 3_600_000_000_000, 3))
    total = HdrHistogram(1, 3_600_000_000_000, 3)
    intervals = 0
    while (h := reader.get_next_interval_histogram()) is not None:
        total.add(h)
        intervals += 1
    # One interval per second of the measurement window (the last may be partial).
    assert intervals == len(summary["timeline"]) >= 1
    assert total.get_total_count() == summary["requests"] > 0
    # Values are integer nanoseconds; the summary states microseconds.
    for q, key in ((50, "p50"), (99, "p99")):
        assert total.get_value_at_percentile(q) / 1000 == pytest.approx(summary["latency_us"][key], rel=2e-3)


def test_the_interval_log_is_read_by_archlab_latency(load_run):
    summary, log = load_run
    samples = read_hdr_log(log, unit="ns")
    assert samples.n == summary["requests"]
    assert samples.max / 1000 == pytest.approx(summary["latency_us"]["max"], rel=2e-3)
