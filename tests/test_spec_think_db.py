"""Think-time distributions and ``[db]`` settings in specs: the three think-time forms of the
engine (``5ms``, ``exp:5ms``, ``uniform:2ms-8ms``) are accepted wherever a think time is, refused
with the TOML key, the forms the data plane allows and the value received, reach the load
generator's ``think_time`` with the same meaning (and a seed, since they draw at random), name
their cells readably and are stored apart; ``[db]`` sets the ``/db`` server's pool and wait and
the table's rows, is refused when no cell queries the database, and reaches the server's options.
The hash of a spec with a constant think time is the one it had before distributions existed."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ARCHITECTURES, CheckingRegistry, spec_text

from archlab.errors import SpecError
from archlab.lab.engine import Engine, load_params, serve_options
from archlab.spec import SpecEnvironment, parse_spec
from archlab.spec.model import DbSettings, ThinkTime
from archlab.store import CellRecord, Store

ARCH = 'architecture = ["blocking"]\nworkload = ["/echo?size=64"]\n'
ENGINE = Engine(Path("/bin/archlab-engine"))


class DbRegistry(CheckingRegistry):
    """Also knows ``/db?id=N``, as the data plane does."""

    def check_workload(self, target: str) -> None:
        if target.split("?", 1)[0] != "/db":
            super().check_workload(target)


@pytest.fixture
def db_env() -> SpecEnvironment:
    return SpecEnvironment(registry=DbRegistry(ARCHITECTURES), cpus=frozenset({0, 1}))


def parse(env, load: str, factors: str, **sections: str):
    return parse_spec(spec_text(load=load, factors=ARCH + factors, **sections), "t.toml", env)


# The load generator's default seed (crates/load/src/config/mod.rs: DEFAULT_SEED = 0x5eed), which
# the seeds of existing runs were drawn from.
DEFAULT_SEED = 0x5EED


def params(exp, cell_index: int = 0, repetition: int = 1) -> dict:
    """The load generator's parameters of a cell, as the runner writes them."""
    return load_params(exp.cells()[cell_index], exp, "127.0.0.1:9", repetition=repetition)


# --- think times ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "think", "engine", "text"),
    [
        ('"5ms"', ThinkTime("constant", 0.005), "5ms", "5ms"),
        ("0.25", ThinkTime("constant", 0.25), "250ms", "250ms"),
        ('"exp:5ms"', ThinkTime("exp", 0.005), "exp:5ms", "exp:5ms"),
        ('"exponential:1.5s"', ThinkTime("exp", 1.5), "exp:1500ms", "exp:1500ms"),
        ('"uniform:2ms-8ms"', ThinkTime("uniform", 0.002, 0.008), "uniform:2ms-8ms", "uniform:2ms-8ms"),
        ('"uniform: 250us - 1ms"', ThinkTime("uniform", 0.00025, 0.001), "uniform:250us-1ms", "uniform:250us-1ms"),
    ],
)
def test_think_time_forms_reach_the_engine(env, value, think, engine, text):
    exp = parse(env, f'model = "closed"\nthink_time = {value}', "concurrency = [4]")
    assert exp.load.think_time == think and exp.load.think_time.text == text
    p = params(exp)
    assert p["think_time"] == engine
    # The engine's own parser read these (crates/load/src/dist.rs); random ones need a seed.
    assert ("seed" in p) == think.is_random


def test_means_are_the_distributions_means(env):
    exp = parse(env, 'model = "closed"\nthink_time = "uniform:2ms-8ms"', "concurrency = [4]")
    assert exp.load.think_time_s == pytest.approx(0.005) and exp.cells()[0].think_time_s == pytest.approx(0.005)
    exp = parse(env, 'model = "closed"\nthink_time = "exp:7ms"', "concurrency = [4]")
    assert exp.cells()[0].think_time_s == pytest.approx(0.007)


def test_random_think_time_seeds_each_repetition(env):
    exp = parse(env, 'model = "closed"\nthink_time = "exp:5ms"\nseed = 11', "concurrency = [4]")
    assert [params(exp, repetition=r)["seed"] for r in (1, 2, 3)] == [11, 12, 13]
    exp = parse(env, 'model = "closed"\nthink_time = "exp:5ms"', "concurrency = [4]")
    assert [params(exp, repetition=r)["seed"] for r in (1, 2)] == [DEFAULT_SEED, DEFAULT_SEED + 1]


def test_partly_open_takes_a_think_distribution(env):
    load = 'model = "partly-open"\nschedule = "constant"\nrequests_per_session = 3\nthink_time = "uniform:1ms-3ms"'
    exp = parse(env, load, "session_rate = [20]")
    p = params(exp)
    assert p["think_time"] == "uniform:1ms-3ms" and p["model"] == "partly-open"
    assert p["seed"] == DEFAULT_SEED  # constant arrivals and fixed sessions, but random thinks


def test_think_factor_mixes_forms_with_readable_distinct_cells(env):
    exp = parse(env, 'model = "closed"\nseed = 5', 'concurrency = [2]\nthink_time = ["5ms", "exp:5ms", "uniform:0ms-10ms"]')
    cells = exp.cells()
    assert [c.cell_id for c in cells] == [
        "blocking__echo-size-64__c2__think-5ms",
        "blocking__echo-size-64__c2__think-exp-5ms",
        "blocking__echo-size-64__c2__think-uniform-0s-10ms",
    ]
    assert [c.think_time_s for c in cells] == pytest.approx([0.005] * 3)  # same mean, three cells
    assert [c.think_time.stored for c in cells] == [None, "exp:5ms", "uniform:0s-10ms"]
    engine = [params(exp, i) for i in range(3)]
    assert [p["think_time"] for p in engine] == ["5ms", "exp:5ms", "uniform:0s-10ms"]
    # The engine refuses a seed when nothing is random: the constant cell runs without it.
    assert [p.get("seed") for p in engine] == [None, 5, 5]
    assert exp.to_dict()["factors"]["think_time"] == [0.005, "exp:5ms", "uniform:0s-10ms"]


def test_same_distribution_twice_is_refused(env):
    with pytest.raises(SpecError, match=r"^factors.think_time\[1\]: expected levels that differ from each other, got 'exp:0.005s'"):
        parse(env, 'model = "closed"', 'concurrency = [2]\nthink_time = ["exp:5ms", "exp:0.005s"]')


# The data plane's words (crates/load: the think-time syntax and its bounds).
SYNTAX = "a think time: a duration (constant), exp:MEAN (exponential) or uniform:MIN-MAX"
BOUNDS = "durations <= 24h; for exp:MEAN, MEAN > 0; for uniform:MIN-MAX, MIN <= MAX"
NO_SEED = "only when something is random (Poisson arrivals, a random think time or session length"


@pytest.mark.parametrize(
    ("load", "factors", "message"),
    [
        pytest.param('model = "closed"\nthink_time = "gamma:5ms"', "concurrency = [2]",
                     f"load.think_time: expected {SYNTAX}, got 'gamma:5ms' (\"gamma:5ms\": unknown think-time distribution \"gamma\")",
                     id="unknown-distribution"),
        pytest.param('model = "closed"\nthink_time = "exp:fast"', "concurrency = [2]",
                     f"load.think_time: expected {SYNTAX}, got 'exp:fast' (\"fast\" is not a duration", id="bad-mean"),
        pytest.param('model = "closed"\nthink_time = "exp:0ms"', "concurrency = [2]",
                     f"load.think_time: expected {BOUNDS}, got 'exp:0ms'", id="exp-zero"),
        pytest.param('model = "closed"\nthink_time = "uniform:8ms-2ms"', "concurrency = [2]",
                     f"load.think_time: expected {BOUNDS}, got 'uniform:8ms-2ms'", id="uniform-backwards"),
        pytest.param('model = "closed"\nthink_time = "uniform:5ms"', "concurrency = [2]",
                     f"load.think_time: expected {SYNTAX}, got 'uniform:5ms' (\"uniform:5ms\": uniform needs MIN-MAX)", id="uniform-one-bound"),
        pytest.param('model = "closed"\nthink_time = "fast"', "concurrency = [2]",
                     f"load.think_time: expected {SYNTAX}, got 'fast'", id="not-a-duration"),
        pytest.param('model = "closed"\nthink_time = true', "concurrency = [2]",
                     f"load.think_time: expected {SYNTAX}, got True", id="bool"),
        pytest.param('model = "closed"\nthink_time = "exp:1500m"', "concurrency = [2]",
                     f"load.think_time: expected {BOUNDS}, got 'exp:1500m'", id="too-long"),
        pytest.param('model = "closed"', 'concurrency = [2]\nthink_time = ["1ms", "uniform:x-2ms"]',
                     f"factors.think_time[1]: expected {SYNTAX}, got 'uniform:x-2ms' (\"x\" is not a duration", id="factor-level"),
        pytest.param('model = "open"\nthink_time = "exp:1ms"', "rate = [10]",
                     "load.think_time: expected only with the closed or partly-open model (this run is open), got 'exp:1ms'",
                     id="open-refuses"),
        pytest.param('model = "closed"\nthink_time = "1ms"\nseed = 3', "concurrency = [2]",
                     f"load.seed: expected {NO_SEED}", id="seed-with-constant-think"),
        pytest.param('model = "closed"\nseed = 3', 'concurrency = [2]\nthink_time = ["0s", "1ms"]',
                     f"load.seed: expected {NO_SEED}", id="seed-with-constant-factor"),
    ],
)
def test_think_time_refusals(env, load, factors, message):
    with pytest.raises(SpecError) as e:
        parse(env, load, factors)
    assert str(e.value).startswith(message), str(e.value)


# Hashes of these specs computed before think-time distributions existed: a constant think time
# (fixed or as a factor) must keep its spec hash, so older runs still match their specs.
OLD_HASHES = {
    ('model = "closed"\nthink_time = "5ms"', "concurrency = [4]"):
        "8aa576768e02cd2040986c970bb43b0dd3a40683870f2f334348f5f3bcf09d1d",
    ('model = "closed"', 'concurrency = [4]\nthink_time = ["0s", "10ms"]'):
        "ad60537c6bb26cba975867f39d747b277fd9f825f86500aab9849a283a431f4e",
    ('model = "partly-open"\nthink_time = "1ms"', "session_rate = [50]"):
        "e142df3c05669eb30f4a373ee9e043ce47d0277aba96b7092d89396eb8c73165",
}  # fmt: skip


@pytest.mark.parametrize(("spec", "digest"), list(OLD_HASHES.items()))
def test_constant_think_specs_keep_their_hash(env, spec, digest):
    assert parse(env, *spec).spec_hash() == digest


def test_distributions_change_the_hash(env):
    constant = parse(env, 'model = "closed"\nthink_time = "5ms"', "concurrency = [4]")
    random = parse(env, 'model = "closed"\nthink_time = "exp:5ms"', "concurrency = [4]")
    assert constant.to_dict()["load"]["think_time_s"] == random.to_dict()["load"]["think_time_s"]
    assert random.to_dict()["load"]["think_time"] == "exp:5ms" and "think_time" not in constant.to_dict()["load"]
    assert constant.spec_hash() != random.spec_hash()


def test_catalog_keeps_the_distribution(env, tmp_path):
    exp = parse(env, 'model = "closed"', 'concurrency = [2]\nthink_time = ["5ms", "exp:5ms"]')
    store = Store(tmp_path / "runs")
    handle = store.create_run(exp, "x", None)
    for cell in exp.cells():
        handle.record(cell, 1, CellRecord.failed("not run"))
    rows = store.load_run(handle.run_id).rows
    assert [(r.cell.think_time_s, r.cell.think_time) for r in rows] == [(0.005, None), (0.005, "exp:5ms")]


def test_report_labels_tell_the_distributions_apart(env):
    from archlab.report.aggregate import aggregate
    from archlab.store import ResultRow

    base = {"run_id": "r", "cell_id": "c", "repetition": 1, "architecture": "blocking", "workload": "/echo?size=64",
            "concurrency": 2, "status": "ok", "throughput_rps": 100.0}
    rows = [
        {**base, "think_time_s": 0.005, "think_time": None, "factors": {"think_time": 0.005}},
        {**base, "think_time_s": 0.005, "think_time": "exp:5ms", "factors": {"think_time": "exp:5ms"}},
    ]
    cells = aggregate(ResultRow.from_columns(row) for row in rows)
    assert sorted(c.label for c in cells) == ["blocking (think_time=5ms)", "blocking (think_time=exp:5ms)"]


# --- [db] -----------------------------------------------------------------------------------

DB_FACTORS = 'architecture = ["blocking"]\nworkload = ["/db?id=42", "/echo?size=8"]\nconcurrency = [2]'


def parse_db(env, db: str | None, factors: str = DB_FACTORS):
    sections = {"factors": factors} if db is None else {"factors": factors, "db": db}
    return parse_spec(spec_text(**sections), "t.toml", env)


def test_db_defaults_are_the_servers(db_env):
    exp = parse_db(db_env, None)
    assert exp.db is None and exp.db_settings == DbSettings(pool=10, wait_ms=1000, rows=10_000)
    assert "db" not in exp.to_dict()  # specs without [db] keep their hash
    exp = parse_db(db_env, "")
    assert exp.db == DbSettings.defaults() and exp.to_dict()["db"] == {"pool": 10, "wait_ms": 1000, "rows": 10_000}


def test_db_cpus_and_settings_are_kept_and_hashed_only_when_given(db_env):
    exp = parse_db(db_env, 'cpus = "0"\nsettings = { shared_buffers = "64MB", jit = false, work_mem = 4096 }')
    assert exp.db.cpus == (0,)
    assert exp.db.settings == (("shared_buffers", "64MB"), ("jit", "off"), ("work_mem", "4096"))
    assert exp.to_dict()["db"] == {"pool": 10, "wait_ms": 1000, "rows": 10_000, "cpus": [0],
                                   "settings": {"shared_buffers": "64MB", "jit": "off", "work_mem": "4096"}}  # fmt: skip
    assert parse_db(db_env, "").spec_hash() != exp.spec_hash()
    assert "cpus" not in parse_db(db_env, "rows = 20000").to_dict()["db"]


def test_db_settings_reach_serve_for_db_cells_only(db_env):
    exp = parse_db(db_env, 'pool = 2\nwait = "250ms"\nrows = 500')
    assert exp.db == DbSettings(pool=2, wait_ms=250, rows=500)
    db_cell, echo_cell = exp.cells()
    options = serve_options(db_cell, exp.placement, db="postgresql://a:b@127.0.0.1:9/c", db_settings=exp.db_settings)
    assert (options["db"], options["db_pool"], options["db_wait_ms"]) == ("postgresql://a:b@127.0.0.1:9/c", 2, 250)
    # Without a database the pool options keep the server's defaults (they mean nothing there).
    options = serve_options(echo_cell, exp.placement, db_settings=exp.db_settings)
    assert "db" not in options and (options["db_pool"], options["db_wait_ms"]) == (10, 1000)


@pytest.mark.parametrize(
    ("db", "factors", "message"),
    [
        pytest.param("pool = 0", DB_FACTORS, "db.pool: expected an integer in 1..=1024, got 0 (connections of the server's pool)", id="pool-0"),
        pytest.param("pool = 1025", DB_FACTORS, "db.pool: expected an integer in 1..=1024", id="pool-big"),
        pytest.param('pool = "2"', DB_FACTORS, "db.pool: expected an integer in 1..=1024", id="pool-str"),
        pytest.param('wait = "0ms"', DB_FACTORS,
                     "db.wait: expected a duration in whole milliseconds, as the server's db_wait_ms (an integer in 1..=60000), got '0ms'",
                     id="wait-0"),
        pytest.param('wait = "61s"', DB_FACTORS, "db.wait: expected a duration in whole milliseconds, as the server's db_wait_ms (an integer in 1..=60000), got '61s'", id="wait-big"),
        pytest.param('wait = "1500us"', DB_FACTORS, "db.wait: expected a duration in whole milliseconds, as the server's db_wait_ms", id="wait-fraction"),
        pytest.param('wait = "soon"', DB_FACTORS, "db.wait: expected a duration such as", id="wait-syntax"),
        pytest.param("rows = 0", DB_FACTORS, "db.rows: expected an integer in 1..=10,000,000 (rows of table emp), got 0", id="rows-0"),
        pytest.param("rows = 20", DB_FACTORS, "factors.workload: expected /db?id=N with N <= db.rows (20), got '/db?id=42'", id="id-beyond-rows"),
        pytest.param("poool = 2", DB_FACTORS, "db.poool: expected a key one of pool, wait, rows, cpus, settings, worker, got 'poool'", id="typo"),
        pytest.param("worker = 3", DB_FACTORS, "db.worker: expected the name of a Dask worker of the run's cluster (`dask worker --name NAME`) "
                     "to run the lab database on, got 3", id="worker-not-a-name"),
        pytest.param("pool = 2", 'architecture = ["blocking"]\nworkload = ["/echo?size=8"]\nconcurrency = [2]',
                     "db: expected no [db] section, since no workload queries the database (/db?id=N) and no system names it ({db_url}...), "
                     "got 'pool = 2' (the workloads are /echo?size=8; [db] configures the lab database)", id="no-db-cell"),
        pytest.param('cpus = "7"', DB_FACTORS, "db.cpus: expected CPUs that exist here (0-1), got '7' (CPU 7 is not available)", id="cpus-absent"),
        pytest.param("settings = { port = 5433 }", DB_FACTORS,
                     "db.settings.port: expected a parameter the lab does not set itself (config_file, data_directory", id="lab-owned"),
        pytest.param("settings = { max_connections = 5 }", DB_FACTORS, "db.settings.max_connections: expected a parameter the lab does not",
                     id="lab-sized"),
        pytest.param('settings = { "Work-Mem" = "8MB" }', DB_FACTORS,
                     "db.settings.Work-Mem: expected a postgresql.conf parameter name (lower-case letters, digits and _), got 'Work-Mem'", id="bad-name"),
        pytest.param('settings = { work_mem = ["8MB"] }', DB_FACTORS, "db.settings.work_mem: expected a string, number or boolean, got ['8MB']",
                     id="bad-value"),
        pytest.param('settings = { work_mem = "8MB\\n" }', DB_FACTORS, "db.settings.work_mem: expected a non-empty value on one line", id="newline"),
        pytest.param('settings = "work_mem=8MB"', DB_FACTORS, "db.settings: expected a table of postgresql.conf parameters", id="not-a-table"),
        pytest.param(None, 'architecture = ["blocking"]\nworkload = ["/db?id=10001"]\nconcurrency = [2]',
                     "factors.workload: expected /db?id=N with N <= the default db.rows (10000), got '/db?id=10001'", id="id-beyond-default"),
    ],
)
def test_db_refusals(db_env, db, factors, message):
    with pytest.raises(SpecError) as e:
        parse_db(db_env, db, factors)
    assert str(e.value).startswith(message), str(e.value)


def test_db_worker_places_the_database_and_enters_the_hash_only_when_given(db_env):
    placed, plain = parse_db(db_env, 'rows = 100\nworker = "db-host"'), parse_db(db_env, "rows = 100")
    assert placed.db_settings.worker == "db-host" and plain.db_settings.worker is None
    assert placed.to_dict()["db"]["worker"] == "db-host" and "worker" not in plain.to_dict()["db"]
    assert placed.spec_hash() != plain.spec_hash()
    assert placed.placed_workers() == (("db.worker", "db", "db-host"),) and plain.placed_workers() == ()


def test_the_load_generators_backend_is_a_load_key_checked_by_the_data_plane(env):
    exp = parse(env, 'model = "closed"\nbackend = "epoll"', "concurrency = [2]")
    assert exp.load.backend == "epoll" and exp.to_dict()["load"]["backend"] == "epoll"
    (cell,) = exp.cells()
    assert load_params(cell, exp, "127.0.0.1:1")["backend"] == "epoll"
    # Without it the data plane's default applies, and the spec keeps the hash it had.
    plain = parse(env, 'model = "closed"', "concurrency = [2]")
    assert "backend" not in plain.to_dict()["load"] and load_params(plain.cells()[0], plain, "127.0.0.1:1")["backend"] == "auto"
    with pytest.raises(SpecError) as e:
        parse(env, 'model = "closed"\nbackend = "uring"', "concurrency = [2]")
    assert e.value.field == "load.backend" and "io-uring" in e.value.allowed and e.value.received == "uring"
