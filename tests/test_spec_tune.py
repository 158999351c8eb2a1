"""The ``[tune]`` section: a valid one becomes the sweep's factors (one ``/program?name=P``
workload per program, the parameter's levels, the server's ``programs`` option), and every bad
input is refused with one line naming the ``tune.*`` key (or the key it conflicts with), the
allowed values and the value received, before anything runs. Validated against the data plane
of this checkout (the program parser and the server's option checks are its own)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from archlab.errors import SpecError
from archlab.spec import SpecEnvironment, parse_spec
from archlab.spec.registry import DataPlaneRegistry
from archlab.spec.tune import os_thread_limit

PROGRAMS = """
[programs.http_1]
steps = [{ step = "call", ms = 5 }]
[programs.grpc_2]
steps = [{ step = "fanout", ms = [5, 5] }]
[programs.db_2]
steps = [{ step = "repeat", times = 2, steps = [{ step = "db", id = 1 }] }]
"""


@pytest.fixture
def programs(tmp_path: Path) -> Path:
    p = tmp_path / "programs.toml"
    p.write_text(PROGRAMS)
    return p


def spec(programs: Path, tune: str = "", factors: str = 'architecture = ["blocking"]\nconcurrency = [16]', extra: str = "") -> str:
    tune = tune or 'parameter = "threads"\nlevels = [1, 4, 16]\ndefault = 4'
    return textwrap.dedent(f"""\
        [experiment]
        name = "t"
        [factors]
        {factors}
        [load]
        model = "closed"
        {extra}
        [tune]
        programs = "{programs}"
        """) + tune + "\n"


def parse(text: str):
    return parse_spec(text, "t.toml", SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1})))


def test_a_tune_section_becomes_the_sweeps_factors(programs):
    exp = parse(spec(programs))
    tune = exp.tune
    assert tune is not None
    assert tune.programs == ("db_2", "grpc_2", "http_1")
    assert tune.db_programs == ("db_2",)
    assert (tune.parameter, tune.levels, tune.default, tune.objective, tune.concurrency) == ("threads", (1, 4, 16), 4, "mean-latency", 16)
    cells = exp.cells()
    assert len(cells) == 3 * 3
    assert {(c.workload, c.threads) for c in cells} == {(f"/program?name={p}", m) for p in tune.programs for m in (1, 4, 16)}
    assert all(dict(c.server_options)["programs"] == str(programs) for c in cells)
    assert exp.to_dict()["tune"]["levels"] == [1, 4, 16]
    assert tune.program_of("/program?name=grpc_2") == "grpc_2" and tune.program_of("/echo?size=1") is None


def test_a_throughput_objective_takes_a_p99_limit(programs):
    exp = parse(spec(programs, 'levels = [1, 4]\ndefault = 4\nobjective = "throughput"\np99_limit = "50ms"'))
    assert exp.tune is not None and exp.tune.p99_limit_s == pytest.approx(0.05)


def test_a_controller_runs_the_adaptive_pool_under_its_ceiling(programs):
    exp = parse(spec(programs, 'levels = [32]\ncontroller = "hill-climb"'))
    tune = exp.tune
    assert tune is not None and tune.controller == "hill-climb" and tune.levels == (32,)
    cells = exp.cells()
    assert len(cells) == 3  # one per program, no sweep
    assert all(c.threads == 32 and dict(c.server_options)["pool_control"] == "hill-climb" for c in cells)
    assert exp.to_dict()["tune"]["controller"] == "hill-climb"
    # A sweep's section keeps its old keys (and so its spec hash): no controller key.
    assert "controller" not in parse(spec(programs)).to_dict()["tune"]


LIMIT = os_thread_limit()[0]


@pytest.mark.parametrize(
    ("tune", "factors", "field", "mentions"),
    [
        ('levels = [1, 4]\ndefault = 4\nobjective = "p95-latency"', None, "tune.objective", "mean-latency, p99-latency, throughput"),
        ("levels = [0, 4]\ndefault = 4", None, "tune.levels[0]", "got 0"),
        (f"levels = [1, {LIMIT + 1}]\ndefault = 1", None, "tune.levels[1]", "OS thread limit"),
        ('parameter = "pool"\nlevels = [1, 4]\ndefault = 4', None, "tune.parameter", "not an option"),
        ('parameter = "handlers"\nlevels = [1, 4]\ndefault = 4', None, "tune.parameter", "only fix"),
        ("levels = [1, 4]\ndefault = 8", None, "tune.default", "one of tune.levels"),
        ("levels = [1, 4]", None, "tune.default", "got 'nothing'"),
        ("levels = [4]\ndefault = 4", None, "tune.levels", "at least 2"),
        ("levels = [1, 4]\ndefault = 4\nonly = [\"http_1\"]", None, "tune.only", "at least 2 programs"),
        ("levels = [1, 4]\ndefault = 4\nonly = [\"http_9\"]", None, "tune.only[0]", "http_9"),
        ('levels = [1, 4]\ndefault = 4\np99_limit = "5ms"', None, "tune.p99_limit", "throughput"),
        ("levels = [1, 4]\ndefault = 4", 'architecture = ["blocking"]\nconcurrency = [4, 16]', "tune.concurrency", "several levels"),
        ("levels = [1, 4]\ndefault = 4\nconcurrency = 8", None, "tune.concurrency", "got 8"),
        ("levels = [1, 4]\ndefault = 4", 'architecture = ["blocking"]\nconcurrency = [16]\nthreads = [2]', "factors.threads", "[tune]"),
        ("levels = [1, 4]\ndefault = 4", 'architecture = ["blocking"]\nconcurrency = [16]\nworkload = ["/echo?size=1"]', "factors.workload", "[tune]"),
        ("levels = [1, 4]\ndefault = 4", 'architecture = ["single-thread"]\nconcurrency = [16]', "factors.architecture[0]", "blocking"),
        ("levels = [1, 4]\ndefault = 4\ncolour = 1", None, "tune.colour", "a key one of"),
        ('levels = [4, 32]\ncontroller = "hill-climb"', None, "tune.levels", "one level of threads with tune.controller"),
        ('levels = [32]\ncontroller = "pid"', None, "tune.controller", "hill-climb"),
        ('levels = [32]\ncontroller = "hill-climb"', 'architecture = ["blocking"]\nconcurrency = [16]\n[server]\npool_control = "hill-climb"',
         "server.pool_control", "[tune] sets it"),
    ],
)
def test_bad_tune_input_is_one_line_naming_the_key(programs, tune, factors, field, mentions):
    text = spec(programs, tune) if factors is None else spec(programs, tune, factors)
    with pytest.raises(SpecError) as e:
        parse(text)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(field + ":"), message
    assert mentions in message, message


def test_a_bad_program_file_is_refused_with_the_parsers_field(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[programs.p]\nsteps = [{ step = "repeat", times = 5000, steps = [{ step = "sleep", ms = 1 }] }]\n')
    with pytest.raises(SpecError) as e:
        parse(spec(bad))
    assert str(e.value).startswith("tune.programs (") and "times" in str(e.value) and "5000" in str(e.value)


def test_a_missing_program_file_is_refused(tmp_path):
    with pytest.raises(SpecError) as e:
        parse(spec(tmp_path / "nowhere.toml"))
    assert str(e.value).startswith("tune.programs:") and "nowhere.toml" in str(e.value)


def test_the_open_model_is_refused(programs):
    text = spec(programs, factors='architecture = ["blocking"]\nrate = [100]').replace('model = "closed"', 'model = "open"')
    with pytest.raises(SpecError) as e:
        parse(text)
    assert str(e.value).startswith("load.model:")
