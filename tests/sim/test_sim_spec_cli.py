"""Model files and the `archlab simulate` verb: TOML to model, sweeps, overrides, references,
and precise errors for a malformed file."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import cli_env

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
    with pytest.raises(SpecError, match=r"^simulation: expected only the keys name, description, horizon, .*, got 'horizn'$"):
        parse_spec({"simulation": {"horizon": 1.0, "horizn": 2}})
    with pytest.raises(SpecError, match=r"model file: expected tables"):
        parse_spec({"simulaton": {}})


def _model_file(tmp_path, old: str = "", new: str = "", append: str = "") -> str:
    text = MODEL.replace(old, new, 1) + append
    assert old in MODEL, old
    path = tmp_path / "model.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("old", "new", "append", "message"),
    [
        ("horizon = 200.0", 'horizon = "long"', "", r'^simulation.horizon: expected a number, got "long"$'),
        ("warmup = 20.0", 'warmup = "auto"', "", r'^simulation.warmup: expected a time >= 0 or "mser", got "auto"$'),
        ("seed = 5", 'seed = 5\nstop = { metric = "p99", relative_half_width = 0.1, bogus = 1 }', "",
         r"^simulation.stop: expected only the keys metric, relative_half_width, max_replications, method, max_horizon, got 'bogus'$"),
        ("seed = 5", 'seed = 5\nstop = { metric = "p50", relative_half_width = 0.1, max_replications = 9 }', "",
         r'^simulation.stop.metric: expected one of throughput, mean_response, p99, got "p50"$'),
        ("name = \"cpu\"", 'name = "cpu"\ndiscipline = "fifo"', "",
         r'^stations\[0\].discipline: expected one of fcfs, ps, delay, got "fifo"$'),
        ('"sources.0.clients" = [2, 4]', '"sources.0.clients" = [2, 4294967295]', "",
         r'^sweep."sources.0.clients" \(level 4294967295\): expected an integer in 1..=1000000, got 4294967295$'),
        ('"sources.0.clients" = [2, 4]', '"sources.0.think" = [{ dist = "exponential", mean = "slow" }]', "",
         r'^sweep."sources.0.think" \(level .*\) at sources\[0\].think.mean: expected a number, got "slow"$'),
        ("time_scale = 1000.0", 'time_scale = "big"', "", r"^reference.time_scale: expected a finite number > 0, got 'big'$"),
        ("mean_response = 110.0", 'mean_response = "many"', "",
         r"^reference.rows\[0\].mean_response: expected a finite number, got 'many'$"),
        ("servers = 1", "servers = 1\ncapacity = -3", "",
         r"^stations\[0\].capacity: expected an integer in 0..=4294967295, got -3$"),
        ("seed = 5", "seed = 5\nbatches = 4294967295", "",
         r"^simulation.batches: expected 0 \(no batch means\) or an integer in 2..=1000, got 4294967295$"),
    ],
    ids=["horizon-long", "warmup-auto", "stop-unknown-key", "stop-metric", "discipline", "swept-level", "swept-table", "reference-scale", "reference-value", "capacity", "batches-2^32"],
)
def test_refusals_name_the_field_of_the_model_file(tmp_path, old, new, append, message):
    # Before: a ValueError, TypeError or AttributeError traceback, an abort on allocation, or a
    # parse error pointing at a line of an internal JSON copy ("model: ... at line 1 column 50").
    path = _model_file(tmp_path, old, new, append)
    with pytest.raises(SpecError, match=message):
        cli.run(_parse(["simulate", path]))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"simulation": 5}, r"^simulation: expected a table \[simulation\] with horizon and the run's settings, got 5$"),
        ({"simulation": {"horizon": 1, "stop": 5}}, r"^simulation.stop: expected a table of metric, "),
        ({"simulation": {"horizon": 1, "stop": {"metric": "p99"}}},
         r"^simulation.stop.relative_half_width: expected a value \(the field is required\), got nothing$"),
        ({"simulation": {"warmup": 1}}, r"^simulation.horizon: expected a value \(the field is required\), got nothing$"),
        ({"simulation": {"horizon": 1}, "sweep": 5}, r"^sweep: expected a table of dotted model paths and their levels"),
        ({"simulation": {"horizon": 1}, "reference": [1]}, r"^reference: expected a table of source, time_scale, "),
        ({"simulation": {"horizon": 1}, "reference": {"rows": [5]}},
         r"^reference.rows\[0\]: expected a table of levels and published values, got 5$"),
    ],
    ids=["simulation-5", "stop-5", "stop-required", "horizon-required", "sweep-5", "reference-list", "reference-row"],
)
def test_tables_of_the_wrong_type_are_named(raw, message):
    # Before: TypeError ('int' object is not iterable) or AttributeError tracebacks.
    with pytest.raises(SpecError, match=message):
        parse_spec(raw)


def _parse(argv):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser.add_subparsers())
    return parser.parse_args(argv)


def test_a_closed_model_whose_time_cannot_pass_is_refused(tmp_path):
    # Before: zero think time and a route of zero service times spun at t = 0 for ever.
    path = _model_file(tmp_path, 'think = { dist = "exponential", mean = 1.0 }\n'
                       'route = [{ step = "serve", station = "cpu", service = { dist = "exponential", mean = 0.1 } }]',
                       'think = { dist = "deterministic", value = 0 }\n'
                       'route = [{ step = "serve", station = "cpu", service = { dist = "uniform", low = 0, high = 0 } }]')
    with pytest.raises(SpecError, match=r"^sources\[0\].think: expected a think time > 0 when every step of the route takes no time"):
        load_spec(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--horizon", "inf"], r"^--horizon: expected a finite number, got inf$"),
        (["--warmup", "500"], r"^--warmup: expected a time < horizon \(200\), got 500.0$"),
        (["--replications", "-1"], r"^--replications: expected an integer in 0..=4294967295, got -1$"),
        (["--json", "missing-directory/out.json"], r"^--json: expected a file path in an existing directory, got 'missing-directory/out.json'$"),
        (["--time-unit-s", "0"], r"^--time-unit-s: expected seconds per model time unit, a finite number > 0, got 0.0$"),
    ],
    ids=["horizon", "warmup", "replications", "json", "time-unit"],
)
def test_refusals_of_flags_name_the_flag_before_anything_runs(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=message):
        cli.run(_parse(["simulate", _model_file(tmp_path), *argv]))
    assert capsys.readouterr().out == ""


def test_unreadable_model_files_are_named(tmp_path):
    path = tmp_path / "bytes.toml"
    path.write_bytes(b"[simulation]\nhorizon = 1\n\xff\xfe\n")
    with pytest.raises(SpecError, match=rf"^{path}: expected a UTF-8 TOML model file, got 'byte 0xff at offset 25'$"):
        load_spec(path)
    with pytest.raises(SpecError, match=rf"^MODEL: expected a readable TOML model file, got '{tmp_path}' \(Is a directory\)$"):
        load_spec(tmp_path)
    path.write_text("[simulation\n")
    with pytest.raises(SpecError, match=rf"^{path}: expected valid TOML, got '\[simulation'"):
        load_spec(path)


def test_ctrl_c_stops_a_simulation_that_would_not_end(tmp_path):
    # About 10^18 events (times of 1e-6 up to a horizon of 1e12): before, such a run ignored
    # Ctrl-C for as long as it ran; now the CLI exits 130 at once, without a traceback.
    path = tmp_path / "endless.toml"
    path.write_text(textwrap.dedent("""
        [simulation]
        horizon = 1e12
        replications = 1
        [[stations]]
        name = "cpu"
        [[sources]]
        kind = "closed"
        name = "users"
        clients = 2
        think = { dist = "deterministic", value = 1e-6 }
        route = [{ step = "serve", station = "cpu", service = { dist = "deterministic", value = 1e-6 } }]
    """))
    process = subprocess.Popen([sys.executable, "-m", "archlab", "simulate", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=cli_env({"PYTHONUNBUFFERED": "1"}))
    try:
        # The second header line is printed just before the run starts.
        header = [process.stdout.readline(), process.stdout.readline()]
        assert header[1].startswith("horizon 1e+12"), (header, process.stderr.read() if process.poll() is not None else "")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        assert "Traceback" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
