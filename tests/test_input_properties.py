"""Property tests of everything that reads a user's input: whatever comes in, a result or the
library's own clean error comes out, never another exception.

* the experiment spec loader (``archlab.spec``): any bytes, any TOML document built from the spec's
  vocabulary with values of every TOML type, and valid specs with one value replaced -> an
  ``Experiment`` or a ``SpecError``;
* every reader of ``archlab.latency.readers``: any bytes, and the real tools' files
  (tests/latency/data) cut short or with bytes changed -> samples (or a report) or a
  ``LatencyError``;
* the simulation model loader (``archlab.sim.spec``, through the Rust core's parser): any bytes,
  and a valid model with one value replaced -> a ``SimulationSpec`` or a ``SpecError``.

Example counts keep the file well under a minute on a shared machine; every test is
deterministic (``derandomize``), so a failure reproduces. ``ARCHLAB_PROPERTY_EXAMPLES=5000`` runs
longer searches (then seeded at random, as Hypothesis prints the seed of a failure).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import spec_text
from archlab.errors import SpecError
from archlab.latency.errors import LatencyError
from archlab.latency.readers import (read_column, read_file, read_hdr_log, read_jtl_rows, read_load_summary,
                                     read_memtier_json, read_percentile_text)
from archlab.sim.spec import load_spec as load_model
from archlab.spec import Experiment, SpecEnvironment, parse_spec
from archlab.spec import load_spec as load_experiment
from archlab.spec.raw import sections

DATA = Path(__file__).resolve().parent / "latency" / "data"
_EXAMPLES = int(os.environ.get("ARCHLAB_PROPERTY_EXAMPLES", "0"))
PROPERTIES = settings(max_examples=_EXAMPLES or 60, deadline=None, derandomize=not _EXAMPLES, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _environment() -> SpecEnvironment:
    from archlab.lab.engine import DataPlaneRegistry  # the real registry and workload parser, in Rust

    return SpecEnvironment(registry=DataPlaneRegistry(), cpus=frozenset({0, 1}))


ENV = _environment()


_SCRATCH = tempfile.TemporaryDirectory(prefix="archlab-properties-")  # removed when the module is


def _file(data: bytes, name: str) -> Path:
    """``data`` in a file of that name (overwritten by the next example)."""
    path = Path(_SCRATCH.name) / name
    path.write_bytes(data)
    return path


# --- TOML values of every type, and a writer for them ----------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_scalar = st.one_of(st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
                    st.floats(allow_nan=True, allow_infinity=True), _text,
                    st.sampled_from(["1s", "200ms", "exp:5ms", "uniform:2ms-8ms", "/prime?n=100", "/echo?size=64",
                                     "closed", "open", "partly-open", "poisson", "blocking", "netty", "0-1", "1", ""]))
_value = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(_text, inner, max_size=3)), max_leaves=8)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string without surrogates is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(tables: dict[str, dict[str, object]]) -> str:
    return "".join(f"[{name}]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in keys.items())
                   for name, keys in tables.items())


_section = st.sampled_from(sorted(sections()))
_spec_document = st.dictionaries(
    _section,
    _section.flatmap(lambda name: st.dictionaries(st.sampled_from(sections()[name]), _value, max_size=6)),
    max_size=6,
)


def _experiment_or_spec_error(text: str) -> None:
    try:
        assert isinstance(parse_spec(text, "prop.toml", ENV), Experiment)
    except SpecError as e:
        assert "\n" not in str(e), str(e)  # the CLI prints it as one line


@PROPERTIES
@given(st.binary(max_size=600))
def test_any_bytes_give_an_experiment_or_a_spec_error(data):
    try:
        load_experiment(_file(data, "spec.toml"), ENV)
    except SpecError as e:
        assert "\n" not in str(e), str(e)


@PROPERTIES
@given(_spec_document)
def test_any_document_of_the_spec_vocabulary_gives_an_experiment_or_a_spec_error(tables):
    _experiment_or_spec_error(toml_document(tables))


def _valid_tables() -> dict[str, dict[str, object]]:
    import tomllib

    return tomllib.loads(spec_text(server="threads = 2", db=None))


@PROPERTIES
@given(st.data())
def test_a_valid_spec_with_one_value_replaced_gives_an_experiment_or_a_spec_error(data):
    tables = _valid_tables()
    section = data.draw(st.sampled_from(sorted(tables)))
    key = data.draw(st.sampled_from(sorted(sections()[section])))
    tables[section][key] = data.draw(_value)
    _experiment_or_spec_error(toml_document(tables))


# --- latency readers ------------------------------------------------------------------------------

_FIXTURES = sorted(p for p in DATA.iterdir() if p.is_file() and p.suffix in (".jtl", ".txt", ".hgrm"))


def _mutated(fixture: Path, data: st.DataObject) -> bytes:
    """A real tool's file cut short or with a few bytes changed."""
    original = fixture.read_bytes()
    edit = data.draw(st.sampled_from(["cut", "flip", "both"]))
    out = bytearray(original)
    if edit in ("flip", "both"):
        for _ in range(data.draw(st.integers(1, 4))):
            out[data.draw(st.integers(0, len(out) - 1))] = data.draw(st.integers(0, 255))
    if edit in ("cut", "both"):
        out = out[: data.draw(st.integers(0, len(out)))]
    return bytes(out)


def _reads_or_refuses(read, path: Path) -> None:
    try:
        read(path)
    except LatencyError as e:
        assert "\n" not in str(e), str(e)


_READERS = {
    "auto": lambda p: read_file(p),
    "jtl": lambda p: read_jtl_rows(p, warmup_s=0.01, failed="include"),
    "hdr-log": lambda p: read_hdr_log(p),
    "percentiles": lambda p: read_percentile_text(p),
    "memtier": lambda p: read_memtier_json(p),
    "load-summary": lambda p: read_load_summary(p),
    "column": lambda p: read_column(p, "x", "ms"),
}
_SUFFIXES = {"auto": ".txt", "jtl": ".jtl", "hdr-log": ".hlog", "percentiles": ".hgrm", "memtier": ".json",
             "load-summary": ".json", "column": ".csv"}


@PROPERTIES
@given(st.sampled_from(sorted(_READERS)), st.binary(max_size=800))
def test_every_reader_gives_samples_or_a_latency_error_on_any_bytes(reader, data):
    _reads_or_refuses(_READERS[reader], _file(data, "input" + _SUFFIXES[reader]))


@PROPERTIES
@given(st.sampled_from(_FIXTURES), st.data())
def test_real_tool_files_cut_or_changed_give_samples_or_a_latency_error(fixture, data):
    path = _file(_mutated(fixture, data), fixture.name)
    _reads_or_refuses(_READERS["auto"], path)
    _reads_or_refuses(_READERS["jtl"] if fixture.suffix == ".jtl" else _READERS["percentiles"], path)


@PROPERTIES
@given(st.data())
def test_hdr_logs_and_memtier_documents_changed_give_samples_or_a_latency_error(data):
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogWriter
    import io

    histogram = HdrHistogram(1, 60_000_000, 3)
    for value in (100, 250, 250, 4000, 90_000):
        histogram.record_value(value)
    log = io.StringIO()
    writer = HistogramLogWriter(log)
    writer.output_legend()
    writer.output_interval_histogram(histogram, 0.0, 1.0)
    memtier = json.dumps({"ALL STATS": {"Totals": {"Count": 5, "Percentile Latencies": {
        "p50.00": 0.25, "Histogram log format": {"Compressed Histogram": histogram.encode().decode()}}}}})
    for name, text in (("run.hlog", log.getvalue()), ("memtier.json", memtier)):
        original = _file(text.encode(), "original-" + name)
        path = _file(_mutated(original, data), name)
        _reads_or_refuses(_READERS["auto"], path)


# --- the simulation model loader ------------------------------------------------------------------

_MODEL = (
    '[simulation]\nhorizon = 50.0\nreplications = 2\nseed = 1\n\n[[stations]]\nname = "cpu"\nservers = 1\n\n'
    '[[sources]]\nkind = "closed"\nname = "c"\nclients = 2\nthink = { dist = "exponential", mean = 1.0 }\n'
    'route = [{ step = "serve", station = "cpu", service = { dist = "exponential", mean = 0.1 } }]\n\n'
    '[sweep]\n"sources.0.clients" = [1, 2]\n\n[reference]\nsource = "x"\n'
    '[[reference.rows]]\nlevels = { "sources.0.clients" = 1 }\nthroughput = 0.9\n'
)
_MODEL_VALUES = ['horizon = 50.0', 'replications = 2', 'seed = 1', 'name = "cpu"', 'servers = 1', 'kind = "closed"',
                 'clients = 2', 'mean = 1.0', 'step = "serve"', 'station = "cpu"', 'dist = "exponential"', 'mean = 0.1',
                 '"sources.0.clients" = [1, 2]', 'source = "x"', 'throughput = 0.9']


def _model_or_spec_error(path: Path) -> None:
    try:
        load_model(path)
    except SpecError as e:
        assert "\n" not in str(e), str(e)


@PROPERTIES
@given(st.binary(max_size=600))
def test_any_bytes_give_a_simulation_model_or_a_spec_error(data):
    _model_or_spec_error(_file(data, "model.toml"))


@PROPERTIES
@given(st.sampled_from(_MODEL_VALUES), _value)
def test_a_valid_model_with_one_value_replaced_gives_a_model_or_a_spec_error(assignment, value):
    key = assignment.split(" = ")[0]
    _model_or_spec_error(_file(_MODEL.replace(assignment, f"{key} = {toml_value(value)}", 1).encode(), "model.toml"))
