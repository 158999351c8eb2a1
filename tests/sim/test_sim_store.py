"""Simulated runs in the result store: `archlab simulate MODEL.toml --store DIR` records every
cell and replication in the same shape as a measured run (catalog rows with ``source =
"simulated"``, an HDR interval log per repetition), so that `archlab report RUN_ID` builds its
HTML page and archlab.latency reads the simulated histogram, whose counts and quantiles must
equal the simulation's own."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from archlab.cli.main import main
from archlab.latency.readers.archlab import read_run_cell
from archlab.sim import Simulation
from archlab.sim.record import cell_id, record_simulation
from archlab.sim.spec import parse_spec
from archlab.store import Store

MODEL = textwrap.dedent("""
    [simulation]
    name = "mm1-store"
    horizon = 300.0
    warmup = "mser"
    replications = 3
    seed = 7

    [[stations]]
    name = "cpu"

    [[sources]]
    kind = "closed"
    name = "users"
    clients = 4
    think = { dist = "exponential", mean = 0.2 }
    route = [{ step = "serve", station = "cpu", service = { dist = "exponential", mean = 0.05 } }]

    [sweep]
    "sources.0.clients" = [2, 8]
""")


def test_simulate_store_report_latency_round_trip(tmp_path, capsys):
    path = tmp_path / "model.toml"
    path.write_text(MODEL)
    store_dir = tmp_path / "runs"
    assert main(["simulate", str(path), "--store", str(store_dir), "--json", str(tmp_path / "cells.jsonl")]) == 0
    store = Store(store_dir)
    (info,) = store.runs()
    # Planned: cells x replications, as for an experiment (the rows a complete run has).
    assert (info.experiment, info.status, info.cells_planned, info.cells_ok) == ("mm1-store", "complete", 6, 6)
    view = store.load_run(info.run_id)
    manifest, rows = view.manifest, view.rows
    assert manifest.kind == "simulation" and manifest.cells == ("clients-2", "clients-8")
    assert {r.source for r in rows} == {"simulated"} and {r.cell.concurrency for r in rows} == {2, 8}
    # Written through the store's one writer: the row's load model is the model's sources', and
    # no Little's-law verdict is claimed for a simulated window.
    assert {r.load_model for r in rows} == {"closed"} and all(r.littles_law is None for r in rows)
    assert {r.cell.architecture for r in rows} == {"sim:mm1-store"} and rows[0].summary_path.name == "replication.json"

    # The report verb builds its page from the store alone.
    assert main(["report", info.run_id, "--store", str(store_dir)]) == 0
    html = (store.run_dir(info.run_id) / "report.html").read_text()
    assert "sim:mm1-store" in html
    assert "<svg" in html or "<img" in html  # its figures were drawn from the simulated rows

    # archlab.latency reads the simulated histogram like a measured run's, and it holds what the
    # simulation recorded: the same counts and (HDR bucket) quantiles, in nanoseconds.
    cell = read_run_cell(store.run_dir(info.run_id), "clients-8")
    assert cell.repetitions == (1, 2, 3)
    # The log was written by crates/metrics, the writer of the load generator's logs: its header
    # states the unit and the base time (model time 0 = the epoch).
    log = (store.run_dir(info.run_id) / "cells" / "clients-8" / "rep-1" / "hdr.log").read_text()
    assert "#[Latency values and Interval_Max in nanoseconds (ns)]" in log and "#[BaseTime: 0.000" in log
    again = Simulation(horizon=300.0, warmup="mser", replications=3, seed=7).run(parse_spec(_toml(MODEL)).cells()[1].model)
    assert cell.samples.n == sum(rep.total.completed for rep in again.replications)
    pooled = again.response.pooled
    assert cell.samples.n == pooled.count
    q = np.quantile(np.repeat(cell.samples.values, cell.samples.counts), 0.99, method="inverted_cdf") / 1e9
    assert q == pytest.approx(pooled.p99, rel=2e-3)


def test_time_unit_scales_stored_times(tmp_path):
    spec = parse_spec(_toml(MODEL))
    simulation = Simulation(horizon=100.0, warmup=10.0, replications=2, seed=3)
    cell = spec.cells()[0]
    result = simulation.run(cell.model)
    run_id = record_simulation(tmp_path / "runs", "scaled", [(cell.levels, cell.model, result)], simulation,
                               time_unit_s=1e-3)
    rows = Store(tmp_path / "runs").load_run(run_id).rows
    rep = result.replications[0]
    assert rows[0].measurement.throughput_rps == pytest.approx(rep.total.throughput * 1e3)
    assert rows[0].measurement.mean_us == pytest.approx(rep.total.mean * 1e3)
    samples = read_run_cell(Store(tmp_path / "runs").run_dir(run_id), cell_id(cell.levels)).samples
    assert samples.n == sum(r.total.completed for r in result.replications)
    # Mean of the bucket values, in ns: model time x 1e9 x 1e-3, within HDR's 0.1 %.
    mean_ns = float((samples.values * samples.counts).sum() / samples.counts.sum())
    exact = sum(r.total.mean * r.total.completed for r in result.replications) / samples.n
    assert mean_ns == pytest.approx(exact * 1e6, rel=2e-3)


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


def test_interval_log_refuses_what_is_not_a_histogram():
    from archlab import _native

    with pytest.raises(ValueError) as caught:
        _native.interval_log("not a histogram", 0.0, 1.0)
    field, allowed, received = caught.value.args
    assert (field, allowed) == ("histogram", "an HdrHistogram, base64 of its V2 deflate encoding")
    assert received.startswith('"not a histogram"')
    with pytest.raises(ValueError) as caught:
        _native.interval_log("", -1.0, 1.0)
    assert caught.value.args[:2] == ("start_s", "a finite number of seconds >= 0")
