"""Spec validation: the quick start validates; every invalid input raises a SpecError whose
message names the field, the allowed values and the value received; cells are enumerated in a
stable order with stable ids; the spec hash depends on the design, not on the TOML's layout."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import REPO, spec_text

from archlab.errors import SpecError
from archlab.spec import FixedRegistry, SpecEnvironment, parse_spec
from archlab.spec.units import format_cpu_list, parse_cpu_list, parse_duration, short_duration


def test_quickstart_validates(env):
    exp = parse_spec((REPO / "experiments" / "quickstart.toml").read_text(), "quickstart.toml", env)
    cells = exp.cells()
    assert exp.name == "quickstart"
    assert len(cells) == 4 * 2 * 2
    assert exp.cells_planned == len(cells) * exp.repetitions
    assert exp.adaptive is not None and exp.repetitions == exp.adaptive.min == 3
    assert exp.placement.server_cpus == (1,) and exp.placement.client_cpus == (0,)
    assert exp.load.model == "closed"
    assert "netty__echo-size-1024__c128" in {c.cell_id for c in cells}


# --- units ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3s", 3.0), ("500ms", 0.5), ("1m", 60.0), ("250us", 250e-6), ("1.5", 1.5), (2, 2.0), (0.2, 0.2), ("0s", 0.0)],
)
def test_durations(value, seconds):
    assert parse_duration(value, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["3h", "abc", "", "-1s", -1, True, [1], "1e3s"])
def test_bad_durations(value):
    with pytest.raises(SpecError) as e:
        parse_duration(value, "experiment.warmup")
    assert str(e.value).startswith("experiment.warmup: expected ")


def test_durations_are_the_exact_product_of_number_and_unit():
    # Specs hash these seconds, so they must not change: 9 * 0.001 is not 9 / 1000 in binary.
    assert parse_duration("9ms", "f") == 9 * 1e-3 != 9 / 1000
    assert parse_duration("19us", "f") == 19 * 1e-6


def test_duration_labels_for_ids():
    assert [short_duration(s) for s in (0, 0.01, 0.0015, 2)] == ["0s", "10ms", "1500us", "2s"]


@pytest.mark.parametrize(("text", "cpus"), [("1", (1,)), ("0-1", (0, 1)), ("0,2-3", (0, 2, 3)), (3, (3,)), ("2,0", (0, 2))])
def test_cpu_lists(text, cpus):
    assert parse_cpu_list(text, "f") == cpus
    assert parse_cpu_list(format_cpu_list(cpus), "f") == cpus


@pytest.mark.parametrize("text", ["", "a", "1-0", "1,,2", "-1", True])
def test_bad_cpu_lists(text):
    with pytest.raises(SpecError, match=r"^placement.server_cpus: expected a CPU list"):
        parse_cpu_list(text, "placement.server_cpus")


# --- errors name field, allowed values and value received -------------------------------------

ERRORS = [
    pytest.param(
        {"factors": 'architecture = ["netty", "blocking", "blockin"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'},
        "factors.architecture[2]: expected one of thread-per-connection, blocking, single-thread, netty, got 'blockin'",
        id="architecture-typo",
    ),
    pytest.param({"servr": "threads = 4"}, "servr: expected a section one of experiment, factors, server, load, placement, db, network, tune, cluster, systems, got '[servr]'", id="unknown-section"),
    pytest.param(
        {"experiment": 'name = "t"\nrepetition = 2'},
        "experiment.repetition: expected a key one of name, description, repetitions, warmup, duration, max_foreign, got 'repetition'",
        id="unknown-key",
    ),
    pytest.param({"experiment": 'name = "t"\nrepetitions = 0'}, "experiment.repetitions: expected an integer >= 1, got 0", id="repetitions-0"),
    *(
        pytest.param({"experiment": f'name = "t"\nmax_foreign = {v}'},
                     f"experiment.max_foreign: expected a share of the measured CPUs' time above 0 and below 1, e.g. 0.05, got {shown}",
                     id=f"max-foreign-{v}")
        for v, shown in (("0", "0"), ("1", "1"), ("1.5", "1.5"), ('"5%"', "'5%'"), ("true", "True"), ("-0.1", "-0.1"))
    ),
    pytest.param({"experiment": 'name = "t"\nrepetitions = "2"'}, "experiment.repetitions: expected an integer >= 1, or a table {min = N, max = M, extra_time = \"90s\"} with 2 <= min <= max, got '2'", id="repetitions-str"),
    pytest.param({"experiment": 'name = "t"\nduration = "3h"'}, "experiment.duration: expected a duration such as", id="duration-unit"),
    pytest.param({"experiment": 'name = "t"\nduration = "0s"'}, "experiment.duration: expected a duration > 0 and <= 24h, got '0s'", id="duration-zero"),
    pytest.param({"experiment": 'name = "t"\nwarmup = -1'}, "experiment.warmup: expected a duration such as 10s, 500ms, 2m or a number of seconds, got -1", id="warmup-negative"),
    pytest.param({"experiment": 'name = "quick start"'}, "experiment.name: expected 1 to 64 letters, digits", id="name-space"),
    pytest.param({"experiment": 'description = "x"'}, "experiment.name: expected a name of letters", id="name-missing"),
    pytest.param({"experiment": None}, "experiment: expected a [experiment] section, got 'nothing'", id="no-experiment"),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1, 0]'},
        "factors.concurrency[1]: expected an integer in 1..=1000000, got 0",
        id="concurrency-0",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = ["16"]'},
        "factors.concurrency[0]: expected an integer, got '16'",
        id="concurrency-str",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = []\nconcurrency = [1]'},
        "factors.workload: expected a non-empty list of levels, got []",
        id="empty-levels",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = "/echo?size=1"\nconcurrency = [1]'},
        "factors.workload: expected a non-empty list of levels, got '/echo?size=1'",
        id="levels-not-list",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]'},
        "factors.concurrency: expected a non-empty list of levels, got 'nothing'",
        id="missing-factor",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]\nthreeds = [2]'},
        "factors.threeds: expected a key one of architecture, workload, mix, concurrency, rate, session_rate, threads, loops, think_time, rcvbuf, got 'threeds'",
        id="unknown-factor",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1", "/nope?n=1"]\nconcurrency = [1]'},
        "factors.workload[1]: expected a workload target such as '/prime?n=27059', '/sort?n=100000' or '/echo?size=1024', "
        "got '/nope?n=1' (no workload at '/nope'",
        id="workload-path",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/prime?n=x"]\nconcurrency = [1]'},
        "factors.workload[0]: expected a workload target such as",
        id="workload-parameter",
    ),
    pytest.param(
        {"factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [4, 4]'},
        "factors.concurrency[1]: expected levels that differ from each other, got 4 (it is the same level as factors.concurrency[0])",
        id="duplicate-level",
    ),
    pytest.param({"load": 'model = "closd"'}, "load.model: expected one of closed, open, partly-open, got 'closd'", id="model-typo"),
    pytest.param({"load": 'timeout = "0s"'}, "load.timeout: expected a duration > 0 and <= 24h, got '0s'", id="timeout-zero"),
    pytest.param(
        {"server": "threads = 4", "factors": 'architecture = ["blocking", "single-thread"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'},
        "server.threads: expected no threads value for architecture 'single-thread', which accepts options: sndbuf, rcvbuf, got 4 "
        "(threads applies to blocking, ",
        id="threads-not-applicable",
    ),
    pytest.param(
        {"factors": 'architecture = ["blocking", "netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]\nthreads = [2, 4]'},
        "factors.threads[0]: expected no threads value for architecture 'netty', which accepts options: loops, write_spin, sndbuf, rcvbuf, "
        "got 2 (threads applies to blocking, ",
        id="threads-factor-not-applicable",
    ),
    pytest.param(
        {"server": "loops = 0", "factors": 'architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'},
        "server.loops: expected an integer in 1..=65536, got 0",
        id="loops-0",
    ),
    pytest.param(
        {"server": "threads = 4", "factors": 'architecture = ["blocking"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]\nthreads = [2]'},
        "server.threads: expected no value, since [factors] varies threads, got 4",
        id="fixed-and-varied",
    ),
    pytest.param({"placement": 'server_cpus = "1"\nclient_cpus = "0-1"'}, "placement.client_cpus: expected CPUs not used by the server (1), got '0-1'", id="overlap"),
    pytest.param({"placement": 'server_cpus = "7"'}, "placement.server_cpus: expected CPUs that exist here (0-1), got '7' (CPU 7 is not available)", id="no-such-cpu"),
    pytest.param({"placement": 'server_cpus = "1-0"'}, "placement.server_cpus: expected a CPU list such as 1, 0-1 or 0,2-3, got '1-0'", id="cpu-range"),
    pytest.param({"load": "model = closed"}, "t.toml: expected valid TOML, got 'model = closed'", id="toml-syntax"),
]


@pytest.mark.parametrize(("sections", "message"), ERRORS)
def test_errors_name_field_allowed_and_received(env, sections, message):
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(**sections), "t.toml", env)
    assert str(e.value).startswith(message)
    # The structured parts are there for programs too.
    assert str(e.value).startswith(e.value.field + ": expected " + e.value.allowed)


def test_levels_that_would_share_a_cell_id(registry):
    lenient = SpecEnvironment(FixedRegistry(registry.entries), frozenset({0, 1}))
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors='architecture = ["netty"]\nworkload = ["/echo?size=1", "/Echo?size=1"]\nconcurrency = [4]'), "t", lenient)
    assert str(e.value) == (
        "factors.workload[1]: expected levels that differ from each other, got '/Echo?size=1' "
        "(it would get the same cell id as factors.workload[0])"
    )


def test_architecture_typo_suggests(env):
    with pytest.raises(SpecError, match=r"did you mean 'blocking'\?"):
        parse_spec(spec_text(factors='architecture = ["blockin"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'), "t", env)


def test_factors_must_be_a_table(env):
    with pytest.raises(SpecError, match=r"^factors: expected a table"):
        parse_spec('factors = 3\n[experiment]\nname = "t"\n', "t", env)


# --- placement -----------------------------------------------------------------------------


def _placement(registry, cpus, placement=None):
    exp = parse_spec(spec_text(placement=placement), "t", SpecEnvironment(registry, frozenset(cpus)))
    return exp.placement.server_cpus, exp.placement.client_cpus


def test_default_placement_server_on_last_cpu(registry):
    assert _placement(registry, {0, 1, 2, 3}) == ((3,), (0, 1, 2))
    assert _placement(registry, {0, 1}) == ((1,), (0,))


def test_single_cpu_machine_shares_it(registry):
    assert _placement(registry, {0}) == ((0,), (0,))
    assert _placement(registry, {0}, 'server_cpus = "0"\nclient_cpus = "0"') == ((0,), (0,))


def test_partial_placement_fills_in_the_other_side(registry):
    assert _placement(registry, {0, 1, 2, 3}, 'client_cpus = "3"') == ((2,), (3,))
    assert _placement(registry, {0, 1, 2, 3}, 'server_cpus = "0-1"') == ((0, 1), (2, 3))


# --- cells and hash ------------------------------------------------------------------------


def test_cells_stable_order_and_ids(env):
    exp = parse_spec(
        spec_text(factors='concurrency = [16, 1]\nworkload = ["/echo?size=1024", "/prime?n=7"]\narchitecture = ["netty", "blocking"]'),
        "t",
        env,
    )
    ids = [c.cell_id for c in exp.cells()]
    # Canonical factor order (architecture slowest), levels in the order the spec lists them.
    assert ids == [
        "netty__echo-size-1024__c16",
        "netty__echo-size-1024__c1",
        "netty__prime-n-7__c16",
        "netty__prime-n-7__c1",
        "blocking__echo-size-1024__c16",
        "blocking__echo-size-1024__c1",
        "blocking__prime-n-7__c16",
        "blocking__prime-n-7__c1",
    ]
    assert [c.index for c in exp.cells()] == list(range(8))
    assert exp.cells() == exp.cells()
    first = exp.cells()[0]
    assert (first.architecture, first.workload, first.concurrency, first.threads, first.loops) == ("netty", "/echo?size=1024", 16, None, None)
    assert first.factor_levels() == {"architecture": "netty", "workload": "/echo?size=1024", "concurrency": 16}


def test_optional_factors_in_cells(env):
    exp = parse_spec(
        spec_text(
            factors='architecture = ["blocking"]\nworkload = ["/echo?size=1"]\nconcurrency = [2]\nthreads = [1, 8]\nthink_time = ["0s", "10ms"]',
            load='model = "closed"',
        ),
        "t",
        env,
    )
    cells = exp.cells()
    assert [c.cell_id for c in cells] == [
        "blocking__echo-size-1__c2__t1__think-0s",
        "blocking__echo-size-1__c2__t1__think-10ms",
        "blocking__echo-size-1__c2__t8__think-0s",
        "blocking__echo-size-1__c2__t8__think-10ms",
    ]
    assert cells[1].think_time_s == pytest.approx(0.01) and cells[2].threads == 8


def test_fixed_server_options_reach_cells(env):
    exp = parse_spec(spec_text(server="loops = 3", factors='architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]'), "t", env)
    assert exp.cells()[0].loops == 3 and exp.cells()[0].cell_id == "netty__echo-size-1__c1"


def test_hash_ignores_layout_but_not_design(env):
    a = parse_spec(spec_text(), "t", env)
    reordered = spec_text(
        factors='# same design, other order and spacing\nconcurrency=[1,2]\nworkload=["/echo?size=64"]\narchitecture=["blocking","netty"]',
        experiment='duration = 0.5\nname = "t"\nwarmup = 0.2',
    )
    b = parse_spec(reordered, "t", env)
    assert a == b
    assert a.spec_hash() == b.spec_hash()
    assert len(a.spec_hash()) == 64 and int(a.spec_hash(), 16) >= 0
    c = parse_spec(spec_text(factors='architecture = ["blocking", "netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [2, 1]'), "t", env)
    assert c.spec_hash() != a.spec_hash()  # level order changes the cell order, so the design


def test_to_dict_is_canonical_json(env):
    exp = parse_spec(spec_text(), "t", env)
    d = exp.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["placement"] == {"server_cpus": "1", "client_cpus": "0"}
    assert d["factors"]["architecture"] == ["blocking", "netty"]


def test_experiment_is_frozen(env):
    exp = parse_spec(spec_text(), "t", env)
    with pytest.raises(dataclasses.FrozenInstanceError):
        exp.repetitions = 5  # type: ignore[misc]
    assert isinstance(exp.factors, tuple) and isinstance(exp.factors[0].levels, tuple)


@pytest.fixture
def options_env() -> SpecEnvironment:
    """A registry whose netty takes the socket and write-spin options, as the data plane's does."""
    from archlab.spec.registry import ArchitectureInfo

    archs = (
        ArchitectureInfo("blocking", "pool", frozenset({"threads", "sndbuf", "rcvbuf", "cpus"})),
        ArchitectureInfo("netty", "loops", frozenset({"loops", "write_spin", "sndbuf", "rcvbuf", "cpus"})),
    )
    return SpecEnvironment(registry=FixedRegistry(archs), cpus=frozenset({0, 1}))


def test_fixed_architecture_options_reach_the_server_options(options_env):
    from archlab.lab.engine import serve_options

    env = options_env

    spec = spec_text(server='sndbuf = 16384\nwrite_spin = 8', factors='architecture = ["netty"]\nworkload = ["/echo?size=102400"]\nconcurrency = [1]')
    exp = parse_spec(spec, "t", env)
    cell = exp.cells()[0]
    assert cell.server_options == (("write_spin", 8), ("sndbuf", 16384))
    options = serve_options(cell, exp.placement)
    assert (options["write_spin"], options["sndbuf"], options["cpus"]) == (8, 16384, "1")
    assert exp.to_dict()["server"]["sndbuf"] == 16384


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ('wait = "spin"', "server.wait: expected one of blocking, yielding, busy-spin, got 'spin'"),
        ("ring_size = 1000", "server.ring_size: expected a power of two in 2..=16777216, got 1000"),
        ("sndbuf = 10", "server.sndbuf: expected an integer in 1024..=1073741824, got 10"),
    ],
)
def test_fixed_architecture_options_are_range_checked(options_env, server, message):
    env = options_env
    spec = spec_text(server=server, factors='architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]')
    with pytest.raises(SpecError) as e:
        parse_spec(spec, "t", env)
    assert str(e.value).startswith(message)


def test_a_server_option_typo_is_answered_with_the_data_planes_doc(options_env):
    spec = spec_text(server="ring_sise = 8", factors='architecture = ["netty"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]')
    with pytest.raises(SpecError) as e:
        parse_spec(spec, "t", options_env)
    assert str(e.value).startswith("server.ring_sise: expected a key one of threads, loops, handlers, ring_size, ")
    assert str(e.value).endswith("got 'ring_sise' (did you mean 'ring_size': Ring slots, a power of two (default 1024).)")


def test_an_option_the_architecture_lacks_is_refused(options_env):
    env = options_env
    spec = spec_text(server="write_spin = 8", factors='architecture = ["blocking"]\nworkload = ["/echo?size=1"]\nconcurrency = [1]')
    with pytest.raises(SpecError) as e:
        parse_spec(spec, "t", env)
    assert str(e.value).startswith("server.write_spin: expected no write_spin value for architecture 'blocking'")


def test_ncopy_copies_option_reaches_the_server_and_is_range_checked():
    from archlab.lab.engine import serve_options
    from archlab.spec.registry import ArchitectureInfo

    archs = (ArchitectureInfo("ncopy", "N-copy", frozenset({"copies", "sndbuf", "rcvbuf", "cpus"})),)
    env = SpecEnvironment(registry=FixedRegistry(archs), cpus=frozenset({0, 1}))
    factors = 'architecture = ["ncopy"]\nworkload = ["/response?size=102400"]\nconcurrency = [1]'
    exp = parse_spec(spec_text(server="copies = 2", factors=factors), "t", env)
    assert serve_options(exp.cells()[0], exp.placement)["copies"] == 2
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(server="copies = 0", factors=factors), "t", env)
    assert str(e.value) == "server.copies: expected an integer in 1..=65536, got 0"


def test_max_foreign_is_kept_and_hashed_only_when_given(env):
    plain = parse_spec(spec_text(), "t.toml", env)
    strict = parse_spec(spec_text(experiment='name = "t"\nrepetitions = 1\nwarmup = "200ms"\nduration = "500ms"\nmax_foreign = 0.05'),
                        "t.toml", env)
    assert (plain.max_foreign, strict.max_foreign) == (None, 0.05)
    assert "max_foreign" not in plain.to_dict() and strict.to_dict()["max_foreign"] == 0.05
    assert plain.spec_hash() != strict.spec_hash()
