"""``archlab tune`` end to end on real processes: the sweep runs through the lab's runner (real
``blocking`` servers on loopback, the real load generator, the downstream the programs call),
is stored, and is analysed from the store.

Known by construction: each program holds its thread for a fixed wait (a sleep, or a downstream
call answered after ms), and CPU work is negligible, so with N = 8 closed-loop clients a pool of
1 serves them one at a time (mean latency ~ 8 waits) while a pool of 8 serves them all at once
(~ 1 wait): level 8 is the best of {1, 8} for every program by a factor near 8, far beyond any
noise, and the default (1) pays a regret of several hundred percent."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from conftest import run_cli

pytestmark = pytest.mark.timeout(300)

PROGRAMS = """
[programs.sleep_10]
steps = [{ step = "sleep", ms = 10 }]
[programs.sleep_20]
steps = [{ step = "sleep", ms = 20 }]
[programs.call_10]
steps = [{ step = "call", ms = 10 }]
"""


def spec(programs, extra: str = "") -> str:
    return textwrap.dedent(f"""\
        [experiment]
        name = "tune-e2e"
        repetitions = 1
        warmup = "200ms"
        duration = "800ms"
        [factors]
        architecture = ["blocking"]
        concurrency = [8]
        [load]
        model = "closed"
        timeout = "5s"
        [tune]
        programs = "{programs}"
        parameter = "threads"
        levels = [1, 8]
        default = 1
        {extra}
        """)


def test_tune_runs_the_sweep_and_finds_the_best_level_of_each_program(tmp_path, engine_path):
    programs = tmp_path / "programs.toml"
    programs.write_text(PROGRAMS)
    spec_file = tmp_path / "tune.toml"
    spec_file.write_text(spec(programs))
    store = tmp_path / "runs"
    done = run_cli("tune", str(spec_file), "--store", str(store), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for program in ("sleep_10", "sleep_20", "call_10"):
        line = next(line for line in out.splitlines() if line.strip().startswith(program + " "))
        fields = line.split()
        assert fields[1] == "8", line  # the measured best level
        default_regret = float(re.search(r"\+(\d+(?:\.\d+)?)%", line).group(1))  # type: ignore[union-attr]
        assert default_regret > 300, line  # ~ +700%: 8 clients served one at a time
    assert "median regret vs the measured best" in out
    assert "learned" in out and "model-based" in out and "controller" in out
    (run_dir,) = [d for d in store.iterdir() if d.is_dir()]
    assert (run_dir / "programs.toml").read_text() == PROGRAMS
    page = (run_dir / "report.html").read_text()
    assert '<section id="tuning">' in page and "figure-tuning-blocking" in page
    # The analysis is a pure function of the stored run.
    again = run_cli("tune", "--analyse", run_dir.name, "--store", str(store))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() in out


def test_tune_refuses_a_spec_without_a_tune_section(tmp_path):
    spec_file = tmp_path / "plain.toml"
    spec_file.write_text('[experiment]\nname = "x"\n[factors]\narchitecture = ["blocking"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]\n')
    done = run_cli("tune", str(spec_file), "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("archlab: error: tune:"), done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_tune_refuses_a_bad_level_before_anything_runs(tmp_path):
    programs = tmp_path / "programs.toml"
    programs.write_text(PROGRAMS)
    spec_file = tmp_path / "tune.toml"
    spec_file.write_text(spec(programs).replace("levels = [1, 8]", "levels = [0, 8]"))
    done = run_cli("tune", str(spec_file), "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "tune.levels[0]" in done.stderr, done.stderr


def test_tune_runs_the_adaptive_pool_live_with_tune_controller(tmp_path, engine_path):
    # `controller` instead of a sweep: one cell per program, the server started with its
    # adaptive pool under the one level (the ceiling); the summary is the latency per program.
    programs = tmp_path / "programs.toml"
    programs.write_text(PROGRAMS)
    spec_file = tmp_path / "live.toml"
    spec_file.write_text(spec(programs).replace("levels = [1, 8]\ndefault = 1", 'levels = [8]\ncontroller = "hill-climb"'))
    store = tmp_path / "runs"
    done = run_cli("tune", str(spec_file), "--store", str(store), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "blocking with pool_control = hill-climb (threads <= 8): mean-latency" in done.stdout, done.stdout
    for program in ("sleep_10", "sleep_20", "call_10"):
        line = next(line for line in done.stdout.splitlines() if line.strip().startswith(program + " "))
        assert re.search(r"\d ms", line), line
    (run_dir,) = [d for d in store.iterdir() if d.is_dir()]
    options = [json.loads(p.read_text()) for p in run_dir.rglob("serve.options.json")]
    assert len(options) == 3 and all(o["pool_control"] == "hill-climb" and o["threads"] == 8 for o in options), options
    again = run_cli("tune", "--analyse", run_dir.name, "--store", str(store))
    assert again.returncode == 0 and again.stdout.strip() in done.stdout, again.stderr
