"""The command line as a user meets it, in a subprocess (``python -m archlab``): help texts, an
invalid spec exits 2 with ``archlab: error: <field>: expected <allowed>, got <received>`` and
creates no run, a missing build exits 1 saying how to build, store commands on an empty store."""

from __future__ import annotations

import pytest
from conftest import REPO, run_cli, spec_text


@pytest.mark.parametrize("verb", [[], ["run"], ["report"], ["runs"], ["architectures"]])
def test_help(verb):
    done = run_cli(*verb, "--help")
    assert done.returncode == 0 and "usage: archlab" in done.stdout


def test_invalid_spec_exits_2_and_creates_nothing(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(spec_text(experiment='name = "bad"\nrepetitions = 0'))
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert done.stderr.strip() == "archlab: error: experiment.repetitions: expected an integer >= 1, got 0"
    assert not (tmp_path / "runs").exists()


def test_unknown_section_exits_2(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(spec_text(placment='server_cpus = "1"'))
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "archlab: error: placment: expected a section one of experiment, factors, server, load, placement, db, network, tune, cluster, systems, got '[placment]'" in done.stderr


def test_missing_spec_file_exits_2(tmp_path):
    done = run_cli("run", str(tmp_path / "nope.toml"))
    assert done.returncode == 2 and "archlab: error: spec: expected a path to an existing TOML file" in done.stderr


def test_missing_engine_exits_1_with_build_hint(tmp_path):
    spec = tmp_path / "ok.toml"
    spec.write_text(spec_text())
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"), extra_env={"ARCHLAB_ENGINE": str(tmp_path / "not-built")})
    assert done.returncode == 1
    assert "archlab: error: ARCHLAB_ENGINE=" in done.stderr and "run `make build`" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "runs").glob("*-t-*"))  # no empty run left behind


def test_resume_takes_no_spec(tmp_path):
    done = run_cli("run", "x.toml", "--resume", "someid", "--store", str(tmp_path))
    assert done.returncode == 2 and "no spec with --resume" in done.stderr


def test_store_commands_on_an_empty_store(tmp_path):
    done = run_cli("runs", "--store", str(tmp_path / "runs"))
    assert done.returncode == 0 and "no runs" in done.stderr
    done = run_cli("report", "nope", "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"archlab: error: RUN_ID: expected a run id of the store {tmp_path / 'runs'} ")
    assert done.stderr.endswith(", got 'nope'\n")


@pytest.mark.parametrize(
    "argv",
    [["runs"], ["report", "x"], ["run", "--resume", "x"], ["model", "--run", "x"], ["records", "export", "x"],
     ["analyze", "x"]],
    ids=lambda argv: argv[0],
)
def test_a_store_that_is_not_one_is_named_as_the_option(tmp_path, argv):
    # Before: a FileExistsError traceback (a file as --store) or exit 1 (a catalog that is not DuckDB's).
    a_file = tmp_path / "file"
    a_file.write_bytes(b"not a directory")
    done = run_cli(*argv, "--store", str(a_file))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"archlab: error: --store: expected a result store directory (made when missing) with a DuckDB catalog archlab.duckdb, got {str(a_file)!r} (not a directory)\n"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "archlab.duckdb").write_bytes(b"\x00garbage" * 100)
    done = run_cli(*argv, "--store", str(bad))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"archlab: error: --store: expected a result store directory (made when missing) with a DuckDB catalog archlab.duckdb, got {str(bad)!r} (cannot open the catalog")


def test_run_prints_table_and_writes_report(engine_path, tmp_path, token):
    spec = tmp_path / "ok.toml"
    spec.write_text(spec_text(factors='architecture = ["single-thread"]\nworkload = ["/echo?size=64"]\nconcurrency = [1, 2]'))
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "single-thread" in done.stdout and "/echo?size=64" in done.stdout
    (report_line,) = [line for line in done.stdout.splitlines() if line.startswith("report: ")]
    assert report_line.endswith("report.html") and (REPO / report_line.split(" ", 1)[1]).is_file()
    run_id = done.stderr.split("run ", 1)[1].split(":", 1)[0]
    listed = run_cli("runs", "--store", str(tmp_path / "runs"))
    assert run_id in listed.stdout and "complete" in listed.stdout
    again = run_cli("report", run_id, "--store", str(tmp_path / "runs"))
    assert again.returncode == 0 and "single-thread" in again.stdout
