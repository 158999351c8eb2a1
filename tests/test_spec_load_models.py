"""Specs for the three load models: each model accepts its own parameters with the data plane's
defaults, refuses parameters of another model (naming the TOML key, what the data plane allows
and the value received), and reaches ``archlab-engine load`` as the parameters it reads
(``load --params``); the closed model's hash is that of the specs written before the open models
existed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, spec_text

from archlab.errors import SpecError
from archlab.lab.engine import Engine, load_params
from archlab.spec import parse_spec

ARCH = 'architecture = ["blocking"]\nworkload = ["/echo?size=64"]\n'


def parse(env, load: str, factors: str):
    return parse_spec(spec_text(load=load, factors=ARCH + factors), "t.toml", env)


# The load generator's default seed (crates/load/src/config/mod.rs: DEFAULT_SEED = 0x5eed), which
# the seeds of existing runs were drawn from.
DEFAULT_SEED = 0x5EED


def params(exp, cell, **kw):
    return load_params(cell, exp, "127.0.0.1:9", **kw)


def test_open_model_defaults_and_cells(env):
    exp = parse(env, 'model = "open"', "rate = [1000, 2500.5]")
    load = exp.load
    assert (load.model, load.schedule, load.connections, load.max_connections, load.seed) == ("open", "poisson", 16, 16, None)
    assert [c.cell_id for c in exp.cells()] == ["blocking__echo-size-64__r1000", "blocking__echo-size-64__r2500.5"]
    assert [(c.rate_rps, c.concurrency, c.session_rate) for c in exp.cells()] == [(1000.0, None, None), (2500.5, None, None)]
    assert exp.to_dict()["load"] == {
        "model": "open", "think_time_s": 0.0, "timeout_s": 5.0, "schedule": "poisson", "connections": 16,
        "max_connections": 16, "seed": None,
    }  # fmt: skip


def test_open_model_parameters(env, tmp_path):
    exp = parse(env, 'model = "open"\nschedule = "poisson"\nconnections = 4\nmax_connections = 64\nseed = 7', "rate = [2500.5]")
    p = params(exp, exp.cells()[0], records_path=tmp_path / "r.bin", repetition=3)
    assert (p["model"], p["rate"], p["arrivals"], p["target"]) == ("open", 2500.5, "poisson", "127.0.0.1:9")
    assert (p["connections"], p["max_connections"]) == (4, 64)
    assert p["seed"] == 9  # seed + repetition - 1: each repetition its own schedule
    assert p["records"] == str(tmp_path / "r.bin")
    assert p["think_time"] == "0s" and "session_rate" not in p
    argv = Engine(Path("archlab-engine")).load_argv(tmp_path / "p.json", tmp_path / "s.json", tmp_path / "h.log")
    assert argv == ["archlab-engine", "load", "--params", str(tmp_path / "p.json"), "--json", str(tmp_path / "s.json"), "--hdr-log", str(tmp_path / "h.log")]


def test_constant_schedule_has_no_seed(env, tmp_path):
    exp = parse(env, 'model = "open"\nschedule = "constant"', "rate = [100]")
    p = params(exp, exp.cells()[0])
    assert p["arrivals"] == "constant" and "seed" not in p
    with pytest.raises(SpecError, match=r"^load.seed: expected only when something is random \(Poisson arrivals, .*\), got 3"):
        parse(env, 'model = "open"\nschedule = "constant"\nseed = 3', "rate = [100]")


def test_partly_open_model(env, tmp_path):
    exp = parse(
        env,
        'model = "partly-open"\nrequests_per_session = "geometric:2.5"\nthink_time = "1ms"\n'
        'session_connection = "pooled"\nmax_connections = 32',
        "session_rate = [50, 100]",
    )
    cell = exp.cells()[1]
    assert cell.cell_id == "blocking__echo-size-64__s100" and cell.session_rate == 100.0
    p = params(exp, cell)
    assert p["model"] == "partly-open" and p["session_rate"] == 100
    assert p["requests_per_session"] == "geometric:2.5" and p["session_connection"] == "pooled"
    assert p["think_time"] == "1ms" and p["max_connections"] == 32 and p["seed"] == DEFAULT_SEED
    assert "rate" not in p


@pytest.mark.parametrize(
    ("value", "engine"),
    [(3, "fixed:3"), ("fixed:4", "fixed:4"), ("geometric:1", "geometric:1"), ("geometric:12.5", "geometric:12.5")],
)
def test_requests_per_session_syntax(env, value, engine):
    toml = f"requests_per_session = {value!r}".replace("'", '"')
    exp = parse(env, f'model = "partly-open"\n{toml}', "session_rate = [10]")
    assert exp.load.requests_per_session.text == engine


def test_closed_model_is_unchanged(env, tmp_path):
    """A closed spec hashes and runs exactly as before the open models existed."""
    exp = parse(env, 'model = "closed"\nthink_time = "0s"\ntimeout = "2s"', "concurrency = [8]")
    assert exp.to_dict()["load"] == {"model": "closed", "think_time_s": 0.0, "timeout_s": 2.0}
    p = params(exp, exp.cells()[0])
    assert p["model"] == "closed" and p["connections"] == 8 and "records" not in p and "seed" not in p


OPEN = 'model = "open"'
PARTLY = 'model = "partly-open"'
REFUSALS = [
    pytest.param(OPEN, "concurrency = [4]",
                 "factors.concurrency: expected no concurrency levels for the 'open' model, got [4] (concurrency applies to the "
                 "'closed' model; the 'open' model sets its load with factors.rate", id="open-concurrency"),
    pytest.param(OPEN, "",
                 "factors.rate: expected a non-empty list of levels (the open model's arrival rates in req/s), got 'nothing'",
                 id="open-no-rate"),
    pytest.param(OPEN + '\nthink_time = "1ms"', "rate = [10]",
                 "load.think_time: expected only with the closed or partly-open model (this run is open), got '1ms'",
                 id="open-think-time"),
    pytest.param(OPEN, "rate = [10]\nthink_time = [0, 1]",
                 "factors.think_time[1]: expected only with the closed or partly-open model (this run is open), got 1",
                 id="open-think-factor"),
    pytest.param(OPEN + "\nrequests_per_session = 3", "rate = [10]",
                 "load.requests_per_session: expected only with the partly-open model (this run is open), got 3",
                 id="open-session-length"),
    pytest.param(OPEN, "rate = [10]\nsession_rate = [5]",
                 "factors.session_rate: expected no session_rate levels for the 'open' model, got [5]", id="open-session-rate"),
    pytest.param(OPEN + '\nschedule = "uniform"', "rate = [10]",
                 "load.schedule: expected one of constant, poisson, got 'uniform'", id="schedule-typo"),
    pytest.param(OPEN + "\nconnections = 8\nmax_connections = 4", "rate = [10]",
                 "load.max_connections: expected an integer in max(1, connections (8))..=1000000, got 4", id="cap-below-connections"),
    pytest.param(OPEN + "\nconnections = 2000000", "rate = [10]",
                 "load.connections: expected an integer in 0..=1000000, got 2000000", id="connections-too-many"),
    pytest.param(OPEN, "rate = [0]", "factors.rate[0]: expected a number > 0 and <= 1e8 per second, got 0", id="rate-0"),
    pytest.param(OPEN, 'rate = ["1000"]', "factors.rate[0]: expected a number per second, got '1000'", id="rate-str"),
    pytest.param(OPEN, "rate = [1000, 1000.0]",
                 "factors.rate[1]: expected levels that differ from each other, got 1000.0", id="rate-duplicate"),
    pytest.param('model = "closed"\nschedule = "poisson"', "concurrency = [1]",
                 "load.schedule: expected only with the open or partly-open model (this run is closed), got 'poisson'",
                 id="closed-schedule"),
    pytest.param('model = "closed"\nmax_connections = 9', "concurrency = [1]",
                 "load.max_connections: expected only with the open or partly-open model (this run is closed), got 9",
                 id="closed-cap"),
    pytest.param('model = "closed"', "concurrency = [1]\nrate = [100]",
                 "factors.rate: expected no rate levels for the 'closed' model, got [100] (rate applies to the 'open' model; "
                 "the 'closed' model sets its load with factors.concurrency", id="closed-rate"),
    pytest.param(PARTLY, "rate = [10]",
                 "factors.rate: expected no rate levels for the 'partly-open' model, got [10]", id="partly-rate"),
    pytest.param(PARTLY, "",
                 "factors.session_rate: expected a non-empty list of levels (the partly-open model's session arrival rates "
                 "in sessions/s), got 'nothing'", id="partly-no-session-rate"),
    pytest.param(PARTLY + '\nrequests_per_session = "geometric:0.5"', "session_rate = [1]",
                 "load.requests_per_session: expected fixed:N with N >= 1, or geometric:MEAN with 1 <= MEAN <= 1e6, "
                 "got 'geometric:0.5'", id="geometric-mean-below-1"),
    pytest.param(PARTLY + '\nrequests_per_session = "fixed:2.5"', "session_rate = [1]",
                 "load.requests_per_session: expected fixed:N (or N) or geometric:MEAN, got 'fixed:2.5'", id="fixed-fraction"),
    pytest.param(PARTLY + "\nrequests_per_session = 0", "session_rate = [1]",
                 "load.requests_per_session: expected fixed:N with N >= 1, or geometric:MEAN with 1 <= MEAN <= 1e6, got 0",
                 id="fixed-0"),
    pytest.param(PARTLY + '\nsession_connection = "reuse"', "session_rate = [1]",
                 "load.session_connection: expected one of new, pooled, got 'reuse'", id="session-connection"),
    pytest.param('model = "half-open"', "rate = [1]",
                 "load.model: expected one of closed, open, partly-open, got 'half-open'", id="model-unknown"),
    pytest.param(OPEN + '\nrecords = "yes"', "rate = [1]", "load.records: expected true or false, got 'yes'", id="records-bool"),
]  # fmt: skip


@pytest.mark.parametrize(("load", "factors", "message"), REFUSALS)
def test_refusals_name_parameter_allowed_and_received(env, load, factors, message):
    with pytest.raises(SpecError) as e:
        parse(env, load, factors)
    assert str(e.value).startswith(message)
    assert str(e.value).startswith(e.value.field + ": expected " + e.value.allowed)


def test_example_open_tail_latency_spec_validates(env):
    exp = parse_spec((REPO / "experiments" / "open-tail-latency.toml").read_text(), "open-tail-latency.toml", env)
    assert exp.load.model == "open" and exp.load.records
    rates = exp.factor("rate").levels
    assert len(rates) >= 3 and list(rates) == sorted(rates)
    assert all(c.rate_rps in rates and c.concurrency is None for c in exp.cells())
