"""archlab's own results, produced by the real engine: a single-thread server and the closed-model
generator on loopback, twice for half a second, filed as two repetitions of one cell of a stored
run. References: the engine's own JSON summary (its HdrHistogram, Rust ``hdrhistogram`` crate) and
the ``hdrhistogram`` Python package's decoding of the same interval logs."""

from __future__ import annotations

import json
import subprocess
import textwrap

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from archlab.latency import LatencyError, quantile
from archlab.latency.cli import add_arguments, run
from archlab.latency.readers import detect_format, read, read_file, read_load_summary, read_run_cell, run_cells

SPEC = textwrap.dedent("""\
    [experiment]
    name = "lat"
    repetitions = 2
    warmup = "100ms"
    duration = "500ms"
    [factors]
    architecture = ["single-thread"]
    workload = ["/echo?size=100"]
    concurrency = [4]
    [load]
    model = "closed"
    think_time = "0s"
    timeout = "2s"
    """)


@pytest.fixture(scope="module")
def stored_run(engine_path, tmp_path_factory):
    from archlab.spec import ArchitectureInfo, FixedRegistry, SpecEnvironment, parse_spec
    from archlab.store import CellRecord, Store, read_summary

    registry = FixedRegistry((ArchitectureInfo("single-thread", "one epoll reactor thread", frozenset({"cpus"})),))
    experiment = parse_spec(SPEC, "lat", SpecEnvironment(registry=registry, cpus=frozenset({0, 1})))
    (cell,) = experiment.cells()
    store = Store(tmp_path_factory.mktemp("store") / "runs")
    server = subprocess.Popen([str(engine_path), "serve", "--arch", "single-thread", "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    summaries = []
    try:
        target = server.stdout.readline().split()[1]
        with store.create_run(experiment, SPEC, None) as handle:
            for rep in (1, 2):
                directory = handle.prepare_rep_dir(cell, rep)
                subprocess.run([str(engine_path), "load", "--target", target, "--path", "/echo?size=100",
                                "--connections", "4", "--warmup", "100ms", "--duration", "500ms",
                                "--json", str(directory / "summary.json")], check=True, capture_output=True, timeout=30)
                summary = json.loads((directory / "summary.json").read_text())
                typed = read_summary(directory / "summary.json")
                handle.record(cell, rep, CellRecord("ok", None, typed.measurement, None, directory / "summary.json",
                                                    typed.hdr_log, typed.littles_law))
                summaries.append((directory / "summary.json", summary))
            handle.set_status("complete")
    finally:
        server.terminate()
        server.wait(5)
    return store, handle.run_id, cell.cell_id, summaries


def _hdrh_total(log_path) -> HdrHistogram:
    reader = HistogramLogReader(str(log_path), HdrHistogram(1, 3_600_000_000_000, 3))
    total = HdrHistogram(1, 3_600_000_000_000, 3)
    while (h := reader.get_next_interval_histogram()) is not None:
        total.add(h)
    return total


def test_load_summary_reads_the_log_it_names_in_nanoseconds(stored_run):
    _, _, _, summaries = stored_run
    path, summary = summaries[0]
    assert summary["schema"] == "archlab/load-summary" and summary["schema_version"] in (1, 2)
    assert detect_format(path) == "load-summary"
    samples = read(path)
    assert samples.unit == "ns" and samples.n == summary["requests"] > 0
    # Nearest-rank percentiles of the bucket maxima are HdrHistogram's own percentiles; the
    # engine prints them in µs with 3 decimals (i.e. exact integer ns).
    highest = read_load_summary(path, bucket_value="highest")
    for q, key in ((0.5, "p50"), (0.99, "p99")):
        assert quantile(highest, q, method="inverted_cdf") == pytest.approx(summary["latency_us"][key] * 1000, abs=0.5)
    assert highest.max == pytest.approx(summary["latency_us"]["max"] * 1000, abs=0.5)
    # The same counts as HdrHistogram's Python port, bucket by bucket (median-equivalent values).
    total = _hdrh_total(path.parent / summary["hdr_log"])
    assert samples.n == total.get_total_count()
    assert samples.mean == pytest.approx(total.get_mean_value(), rel=1e-9)


def test_a_summary_without_its_log_is_refused(stored_run, tmp_path):
    _, _, _, summaries = stored_run
    document = dict(summaries[0][1], hdr_log=None)
    (tmp_path / "s.json").write_text(json.dumps(document))
    with pytest.raises(LatencyError, match="names no HDR log"):
        read_load_summary(tmp_path / "s.json")
    (tmp_path / "v9.json").write_text(json.dumps(dict(summaries[0][1], schema_version=9)))
    with pytest.raises(LatencyError, match="schema_version 9; expected 'archlab/load-summary'"):
        read_load_summary(tmp_path / "v9.json")


def test_run_cell_merges_repetitions_exactly(stored_run):
    store, run_id, cell_id, summaries = stored_run
    by_id = read_run_cell(run_id, cell_id, store=store.root)
    by_dir = read_run_cell(store.run_dir(run_id), cell_id)
    assert by_id.repetitions == by_dir.repetitions == (1, 2)
    parts = [read_load_summary(path) for path, _ in summaries]
    assert by_id.samples.n == sum(s["requests"] for _, s in summaries) == parts[0].n + parts[1].n
    # Exact merge: the pooled count vector is the sum of the two, value by value.
    pooled = np.concatenate([parts[0].expand(), parts[1].expand()])
    assert np.array_equal(by_dir.samples.expand(), np.sort(pooled))
    assert read_run_cell(run_id, cell_id, store=store.root, repetitions=[2]).samples.n == parts[1].n
    assert run_cells(store.run_dir(run_id))[1] == [cell_id]
    with pytest.raises(LatencyError, match="no cell"):
        read_run_cell(store.run_dir(run_id), "nope")


def test_cli_analyzes_a_run_directory_and_a_summary(stored_run, capsys):
    import argparse

    store, run_id, cell_id, summaries = stored_run
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args([run_id, "--store", str(store.root), "--boot", "50", "--json"])) == 0
    document = json.loads(capsys.readouterr().out)
    cell = document["cells"][cell_id]
    assert document["run_id"] == run_id and cell["repetitions"] == [1, 2]
    assert cell["count"] == sum(s["requests"] for _, s in summaries) and cell["unit"] == "ns"
    assert run(parser.parse_args([str(summaries[0][0]), "--boot", "50"])) == 0
    table = capsys.readouterr().out
    assert f"n = {summaries[0][1]['requests']:,}" in table and " µs" in table and "e+0" not in table.split("fits")[0]
    with pytest.raises(LatencyError, match="no cell 'nope'"):
        run(parser.parse_args([str(store.run_dir(run_id)), "--cell", "nope"]))


def test_cli_reports_every_cell_of_a_run(stored_run, tmp_path, capsys):
    import argparse

    store, run_id, cell_id, _ = stored_run
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "run.html"
    assert run(parser.parse_args([run_id, "--store", str(store.root), "--boot", "50", "--report", str(out)])) == 0
    err = capsys.readouterr().err
    assert f"analyze: cell 1/1 {cell_id}" in err and "report: figures 1/1" in err
    page = out.read_text()
    assert f"latency analysis of run {run_id}" in page and f"{cell_id} (repetitions 1, 2)" in page
    assert "<details" in page and "data:image/png;base64" in page


def test_failed_requests_of_a_summary_are_said_to_be_missing_from_its_log(stored_run, tmp_path):
    # The engine's HDR log holds 2xx responses only: a summary with errors says so instead of
    # analysing the successes as if they were every request.
    _, _, _, summaries = stored_run
    path, summary = summaries[0]
    document = json.loads(path.read_text())
    document["errors"]["total"] = 7
    document["hdr_log"] = str(path.parent / summary["hdr_log"])
    (tmp_path / "s.json").write_text(json.dumps(document))
    reading = read_file(tmp_path / "s.json")
    assert reading.samples.n == summary["requests"]
    assert reading.notes == ("7 failed requests are not in the HDR log (the load generator records 2xx responses only; "
                             "the summary's errors.by_class counts them)",)
    assert summary["errors"]["total"] == 0 and read_file(path).notes == ()
