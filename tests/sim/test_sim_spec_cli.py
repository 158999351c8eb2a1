"""Model files and the `archlab simulate` verb: TOML to model, sweeps, overrides, references,
and precise errors for a malformed file."""

from __future__ import annotations

import argparse
import textwrap

import pytest

from archlab.errors import SpecError
from archlab.sim import cli
from archlab.sim.spec import load_spec, parse_spec

MODEL = textwrap.dedent("""
    [simulation]
    name = "tiny"
    horizon = 200.0
    warmup = 20.0
    replications = 3
    seed = 5

    [[stations]]
    name = "cpu"
    servers = 1

    [[sources]]
    kind = "closed"
    name = "users"
    clients = 2
    think = { dist = "exponential", mean = 1.0 }
    route = [{ step = "serve", station = "cpu", service = { dist = "exponential", mean = 0.1 } }]

    [sweep]
    "sources.0.clients" = [2, 4]
    "stations.0.servers" = [1, 2]

    [reference]
    source = "made up for the test"
    time_scale = 1000.0
    [[reference.rows]]
    levels = { "sources.0.clients" = 2, "stations.0.servers" = 1 }
    mean_response = 110.0
""")


def test_sweep_cells_and_overrides(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(MODEL)
    spec = load_spec(path)
    cells = spec.cells()
    assert [c.levels for c in cells] == [
        {"sources.0.clients": 2, "stations.0.servers": 1}, {"sources.0.clients": 2, "stations.0.servers": 2},
        {"sources.0.clients": 4, "stations.0.servers": 1}, {"sources.0.clients": 4, "stations.0.servers": 2}]
    assert cells[3].model["sources"][0]["clients"] == 4 and spec.model["sources"][0]["clients"] == 2

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser.add_subparsers())
    out = tmp_path / "out.jsonl"
    assert cli.run(parser.parse_args(["simulate", str(path), "--replications", "2", "--json", str(out)])) == 0
    text = capsys.readouterr().out
    assert "2 replications" in text and text.count("[clients=") == 4
    assert "mean_response  published 110" in text and "made up for the test" in text
    assert len(out.read_text().splitlines()) == 4


def test_malformed_files_name_the_problem():
    raw = {"simulation": {"horizon": 10.0}, "stations": [], "sources": [], "sweep": {"sources.3.clients": [1]}}
    with pytest.raises(SpecError, match=r"sweep.sources.3.clients"):
        parse_spec(raw).cells()
    with pytest.raises(SpecError, match=r"simulation: expected horizon"):
        parse_spec({"simulation": {"horizon": 1.0, "horizn": 2}})
    with pytest.raises(SpecError, match=r"model file: expected tables"):
        parse_spec({"simulaton": {}})
