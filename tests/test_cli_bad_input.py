"""Every ``archlab`` subcommand given bad input answers with one line and exit status 2: the
installed ``archlab`` entry point runs in a subprocess on empty, binary, directory, missing,
truncated, wrongly typed and out-of-range inputs of each kind it takes (files, a result store,
run ids, flags). Each case also names what the line must mention (the file, field or flag),
so an answer that is one line but says nothing useful fails too.

Categories that a verb cannot meet are left out where the verb has no such input:
``architectures`` takes none (only its flags can be wrong); a missing ``--store`` is a valid,
empty store for ``runs``; a truncated JMeter file is valid input (its complete rows are read),
so the truncated JTL case is one cut inside its header line. The endless cases hand each
verb that parses a file whole ``/dev/zero``: it must stop at the lab's bound, not take the
machine's memory.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import cli_env

ARCHLAB = Path(sys.executable).parent / "archlab"
# About 80 processes of the CLI, each importing NumPy and SciPy: minutes on a busy shared machine.
pytestmark = pytest.mark.timeout(1200)

MODEL = textwrap.dedent("""
    [simulation]
    horizon = 20.0
    replications = 2
    seed = 1

    [[stations]]
    name = "cpu"

    [[sources]]
    kind = "closed"
    name = "users"
    clients = 2
    think = { dist = "exponential", mean = 1.0 }
    route = [{ step = "serve", station = "cpu", service = { dist = "exponential", mean = 0.1 } }]
""")

SPEC = textwrap.dedent("""
    [experiment]
    name = "bad-input"
    duration = "500ms"

    [factors]
    architecture = ["blocking"]
    workload = ["/echo?size=64"]
    concurrency = [1]

    [load]
    model = "closed"
""")


def archlab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    if not ARCHLAB.exists():
        pytest.fail(f"the archlab entry point is not installed at {ARCHLAB}: run scripts/bootstrap test", pytrace=False)
    return subprocess.run([str(ARCHLAB), *args], capture_output=True, text=True, cwd=cwd, env=cli_env(), timeout=120)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A directory of bad inputs, and a real result store (a simulation recorded by the CLI)."""
    d = tmp_path_factory.mktemp("bad-input")
    (d / "empty").write_bytes(b"")
    (d / "binary").write_bytes(bytes(range(256)) * 16 + b"\xff\xfe\x00")
    (d / "a-directory").mkdir()
    for name in ("empty.toml", "empty.jtl", "empty.csv", "empty.rec"):
        (d / name).write_bytes(b"")
    for name in ("binary.toml", "binary.jtl", "binary.csv", "binary.hgrm"):
        (d / name).write_bytes((d / "binary").read_bytes())
    (d / "spec-truncated.toml").write_text(SPEC[: SPEC.index("[factors]") + 5])
    (d / "spec-types.toml").write_text(SPEC.replace('duration = "500ms"', "duration = true"))
    (d / "spec-range.toml").write_text(SPEC.replace("concurrency = [1]", "concurrency = [99999999999999]"))
    (d / "model.toml").write_text(MODEL)
    (d / "claims.toml").write_text('[[claims]]\nbest = "a"\nof = ["b"]\n')
    (d / "model-truncated.toml").write_text(MODEL[: MODEL.index("[[sources]]") + 4])
    (d / "model-horizon.toml").write_text(MODEL.replace("horizon = 20.0", 'horizon = "long"'))
    (d / "model-warmup.toml").write_text(MODEL.replace("seed = 1", 'seed = 1\nwarmup = "auto"'))
    (d / "model-stop.toml").write_text(MODEL.replace("seed = 1", 'seed = 1\nstop = { metric = "p99", relative_half_width = 0.1, bogus = 1 }'))
    (d / "model-simulation.toml").write_text("simulation = 5\n" + MODEL.split("[[stations]]", 1)[1].join(["[[stations]]", ""]))
    (d / "model-sweep.toml").write_text("sweep = 5\n" + MODEL)
    (d / "model-reference.toml").write_text(MODEL + '\n[reference]\nsource = "x"\ntime_scale = "big"\n')
    (d / "model-discipline.toml").write_text(MODEL.replace('name = "cpu"', 'name = "cpu"\ndiscipline = "fifo"'))
    (d / "model-clients.toml").write_text(MODEL.replace("clients = 2", "clients = 4294967295"))
    (d / "model-batches.toml").write_text(MODEL.replace("seed = 1", "seed = 1\nbatches = 4294967295"))
    (d / "model-zero.toml").write_text(MODEL.replace('{ dist = "exponential", mean = 1.0 }', '{ dist = "deterministic", value = 0 }')
                                       .replace('{ dist = "exponential", mean = 0.1 }', '{ dist = "deterministic", value = 0 }'))
    (d / "model-utf8.toml").write_bytes(MODEL.encode() + b"\n# \xff\xfe\n")
    (d / "points-short.csv").write_text("N,X\n1,100\n2\n4,300\n8,500\n")
    (d / "points-text.csv").write_text("N,X\n1,100\n2,many\n4,300\n8,500\n")
    (d / "points-utf8.csv").write_bytes(b"N,X\n1,100\n2,\xff\xfe\n")
    (d / "points-field.csv").write_text("N,X\n1," + "7" * 200_000 + "\n")
    (d / "points.csv").write_text("N,X\n1,64.9\n18,995.9\n36,1652.4\n72,1853.2\n108,1828.9\n")
    (d / "header-cut.jtl").write_text("timeStamp,elap")
    (d / "elapsed-text.jtl").write_text("timeStamp,elapsed,label,success\n1,abc,a,true\n")
    (d / "records-cut.rec").write_bytes(b"ALRECv1\0" + (1).to_bytes(4, "little") + (40).to_bytes(4, "little")
                                        + (48).to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(16) + bytes(30))
    (d / "points.rec").write_text("N,X\n1,2\n")
    # A whole records file of one record (the layout of crates/load/src/records.rs, as test_rawrecords.py writes it).
    label = b"GET /"
    (d / "records-ok.rec").write_bytes(b"ALRECv1\0" + struct.pack("<IIIIQQ", 1, 40 + len(label), 48, 1, 0, 0) + label
                                       + struct.pack("<QQQQIIIHBB", 0, 10, 500, 900, 100, 40, 0, 200, 0, 0))
    latency_data = Path(__file__).resolve().parent / "latency" / "data"
    shutil.copy(latency_data / "jmeter213_default.jtl", d / "results.jtl")
    shutil.copy(latency_data / "hdrh_us.hgrm", d / "us.hgrm")
    done = archlab("simulate", "model.toml", "--store", "store", cwd=d)
    assert done.returncode == 0, done.stderr
    shutil.copytree(d / "store", d / "store-cut")
    catalog = d / "store-cut" / "archlab.duckdb"
    catalog.write_bytes(catalog.read_bytes()[: catalog.stat().st_size // 3])
    (d / "store-binary").mkdir()
    (d / "store-binary" / "archlab.duckdb").write_bytes((d / "binary").read_bytes())
    return d


# (verb, category, argv, what the line must mention)
CASES = [
    ("run", "empty", ["run", "empty.toml"], "experiment: expected a [experiment] section"),
    ("run", "binary", ["run", "binary.toml"], "spec: expected a readable UTF-8 TOML file"),
    ("run", "directory", ["run", "a-directory"], "spec: expected a readable UTF-8 TOML file"),
    ("run", "missing", ["run", "missing.toml"], "spec: expected a path to an existing TOML file"),
    ("run", "truncated", ["run", "spec-truncated.toml"], "expected valid TOML"),
    ("run", "wrong types", ["run", "spec-types.toml"], "experiment.duration: expected a duration"),
    ("run", "out of range", ["run", "spec-range.toml"], "factors.concurrency[0]: expected an integer in 0..=1000000"),
    ("run", "binary store", ["run", "spec-types.toml", "--store", "binary"], "--store: expected a result store directory"),
    ("run", "missing run", ["run", "--resume", "nope", "--store", "store"], "--resume: expected a run id of the store"),
    ("tune", "empty", ["tune", "empty.toml"], "experiment: expected a [experiment] section"),
    ("tune", "binary", ["tune", "binary.toml"], "spec: expected a readable UTF-8 TOML file"),
    ("tune", "directory", ["tune", "a-directory"], "spec: expected a readable UTF-8 TOML file"),
    ("tune", "missing", ["tune", "missing.toml"], "spec: expected a path to an existing TOML file"),
    ("tune", "truncated", ["tune", "spec-truncated.toml"], "expected valid TOML"),
    ("tune", "wrong types", ["tune", "spec-types.toml"], "experiment.duration: expected a duration"),
    ("tune", "out of range", ["tune", "spec-range.toml"], "factors.concurrency[0]: expected an integer in 0..=1000000"),
    ("tune", "missing run", ["tune", "--analyse", "nope", "--store", "store"], "--analyse: expected a run id of the store"),
    ("tune", "no spec", ["tune", "--store", "store"], "SPEC: expected a spec with a [tune] section"),
    ("report", "empty", ["report", "", "--store", "store"], "RUN_ID: expected a run id of the store"),
    ("report", "binary", ["report", "x", "--store", "binary"], "--store: expected a result store directory"),
    ("report", "directory", ["report", "x", "--store", "store-binary"], "(cannot open the catalog"),
    ("report", "missing", ["report", "nope", "--store", "store"], "RUN_ID: expected a run id of the store"),
    ("report", "truncated", ["report", "x", "--store", "store-cut"], "--store: expected a result store directory"),
    ("report", "out of range", ["report", "../../etc", "--store", "store"], "got '../../etc'"),
    ("runs", "empty", ["runs", "--store", "empty"], "--store: expected a result store directory"),
    ("runs", "binary", ["runs", "--store", "store-binary"], "--store: expected a result store directory"),
    ("runs", "truncated", ["runs", "--store", "store-cut"], "--store: expected a result store directory"),
    ("runs", "wrong types", ["runs", "--store"], "argument --store: expected one argument"),
    ("records", "empty", ["records", "export", "empty.rec"], "empty.rec: not an archlab records file"),
    ("records", "binary", ["records", "export", "binary"], "binary: not an archlab records file"),
    ("records", "directory", ["records", "export", "a-directory"], "RUN_OR_FILE: expected a records file, or a run id"),
    ("records", "missing", ["records", "export", "nope"], "RUN_OR_FILE: expected a records file, or a run id"),
    ("records", "truncated", ["records", "export", "records-cut.rec"], "records-cut.rec: truncated last record"),
    ("records", "wrong types", ["records", "export", "points.rec"], "points.rec: not an archlab records file"),
    ("records", "out of range", ["records", "export", "records-cut.rec", "--format", "xml"], "argument --format: invalid choice"),
    ("records", "missing directory", ["records", "export", "records-ok.rec", "--output", "nope/out.parquet"],
     "--output: expected a file path in an existing directory"),
    ("architectures", "wrong types", ["architectures", "--json"], "unrecognized arguments: --json"),
    ("analyze", "empty", ["analyze", "empty.jtl"], "empty.jtl: expected JMeter results (CSV or XML), got an empty file"),
    ("analyze", "binary", ["analyze", "binary.jtl"], "binary.jtl: expected JMeter CSV results"),
    ("analyze", "binary other", ["analyze", "binary"], "binary: expected a latency file of a known format"),
    ("analyze", "directory", ["analyze", "a-directory"], "a-directory: expected a latency file (or an archlab run directory"),
    ("analyze", "missing", ["analyze", "nope.jtl"], "FILE: expected a latency file, a run directory or a run id"),
    ("analyze", "truncated", ["analyze", "header-cut.jtl"], "header-cut.jtl: expected the JMeter columns elapsed, success"),
    ("analyze", "wrong types", ["analyze", "elapsed-text.jtl"], "elapsed-text.jtl: no sample left of 1 rows (1 malformed rows"),
    ("analyze", "binary hgrm", ["analyze", "binary.hgrm"], "binary.hgrm: expected percentile lines"),
    ("analyze", "hgrm unit", ["analyze", "us.hgrm"], "us.hgrm: expected the unit of its values"),
    ("analyze", "out of range", ["analyze", "results.jtl", "--percentiles", "200"], "--percentiles: expected"),
    ("analyze", "out of range warmup", ["analyze", "elapsed-text.jtl", "--warmup", "-1"], "--warmup: expected a number >= 0"),
    ("analyze", "report path", ["analyze", "elapsed-text.jtl", "--report", "nope/out.html"], "--report: expected a file path"),
    ("fit-usl", "empty", ["fit-usl", "empty.csv"], "empty.csv: expected a header line naming the columns 'N' and 'X'"),
    ("fit-usl", "binary", ["fit-usl", "binary.csv"], "binary.csv: expected a UTF-8 text CSV file"),
    ("fit-usl", "directory", ["fit-usl", "a-directory"], "a-directory: expected a readable CSV file"),
    ("fit-usl", "missing", ["fit-usl", "nope.csv"], "nope.csv: expected a readable CSV file"),
    ("fit-usl", "truncated", ["fit-usl", "points-short.csv"], "points-short.csv:3: expected a row of 2 fields"),
    ("fit-usl", "wrong types", ["fit-usl", "points-text.csv"], "points-text.csv:3: expected a finite number in column 'X'"),
    ("fit-usl", "not utf-8", ["fit-usl", "points-utf8.csv"], "points-utf8.csv: expected a UTF-8 text CSV file"),
    ("fit-usl", "200 kB field", ["fit-usl", "points-field.csv"], "points-field.csv:2: expected a CSV row"),
    ("fit-usl", "out of range", ["fit-usl", "points.csv", "--confidence", "2"], "--confidence: expected a number in (0, 1)"),
    ("model", "empty", ["model", "mm1", "--service-rate", ""], "argument --service-rate: invalid float value"),
    ("model", "binary", ["model", "mm1", "--service-rate", "\udcff\udcfe"], "argument --service-rate: invalid float value"),
    ("model", "directory", ["model", "--run", "x", "--store", "store-binary"], "--store: expected a result store directory"),
    ("model", "missing", ["model", "--run", "nope", "--store", "store"], "--run: expected a run id of the store"),
    ("model", "truncated", ["model", "mm1", "--service-rate", "2"], "--arrival-rate: expected a value for this model"),
    ("model", "wrong types", ["model", "mmm", "--service-rate", "2", "--arrival-rate", "1", "--servers", "2.5"],
     "argument --servers: invalid int value"),
    ("model", "out of range", ["model", "mmm", "--service-rate", "2", "--arrival-rate", "1", "--servers", "100000000"],
     "--servers: expected an integer in 1..=1_000_000"),
    ("model", "out of range rate", ["model", "mm1", "--service-rate", "-1", "--arrival-rate", "1"],
     "--service-rate: expected a finite number > 0"),
    ("simulate", "empty", ["simulate", "empty.toml"], "simulation.horizon: expected a value (the field is required)"),
    ("simulate", "binary", ["simulate", "binary.toml"], "binary.toml: expected a UTF-8 TOML model file"),
    ("simulate", "not utf-8", ["simulate", "model-utf8.toml"], "model-utf8.toml: expected a UTF-8 TOML model file"),
    ("simulate", "directory", ["simulate", "a-directory"], "MODEL: expected a readable TOML model file"),
    ("simulate", "missing", ["simulate", "nope.toml"], "MODEL: expected a readable TOML model file"),
    ("simulate", "truncated", ["simulate", "model-truncated.toml"], "model-truncated.toml: expected valid TOML"),
    ("simulate", "wrong types horizon", ["simulate", "model-horizon.toml"], 'simulation.horizon: expected a number, got "long"'),
    ("simulate", "wrong types warmup", ["simulate", "model-warmup.toml"], 'simulation.warmup: expected a time >= 0 or "mser"'),
    ("simulate", "wrong types stop", ["simulate", "model-stop.toml"], "simulation.stop: expected only the keys"),
    ("simulate", "wrong types simulation", ["simulate", "model-simulation.toml"], "simulation: expected a table [simulation]"),
    ("simulate", "wrong types sweep", ["simulate", "model-sweep.toml"], "sweep: expected a table of dotted model paths"),
    ("simulate", "wrong types reference", ["simulate", "model-reference.toml"], "reference.time_scale: expected a finite number"),
    ("simulate", "wrong types discipline", ["simulate", "model-discipline.toml"], "stations[0].discipline: expected one of fcfs"),
    ("simulate", "out of range clients", ["simulate", "model-clients.toml"], "sources[0].clients: expected an integer in 1..=1000000"),
    ("simulate", "out of range batches", ["simulate", "model-batches.toml"], "simulation.batches: expected 0 (no batch means)"),
    ("simulate", "zero-time cycle", ["simulate", "model-zero.toml"], "sources[0].think: expected a think time > 0"),
    ("simulate", "out of range flag", ["simulate", "model.toml", "--replications", "-1"], "--replications: expected an integer"),
    ("simulate", "missing directory", ["simulate", "model.toml", "--json", "nope/out.json"], "--json: expected a file path"),
    ("simulate", "binary store", ["simulate", "model.toml", "--store", "binary"], "--store: expected a result store directory"),
    ("compare", "empty", ["compare", "", "", "--store", "store"], "RUN_A: expected a run id of the store"),
    ("compare", "binary", ["compare", "x", "y", "--store", "binary"], "--store: expected a result store directory"),
    ("compare", "missing", ["compare", "nope", "nope", "--store", "store"], "RUN_A: expected a run id of the store"),
    ("compare", "truncated", ["compare", "x", "y", "--store", "store-cut"], "--store: expected a result store directory"),
    ("compare", "wrong types", ["compare", "x", "y", "--level", "high"], "argument --level: invalid float value"),
    ("compare", "out of range", ["compare", "x", "y", "--fail-if-slower", "150"], "--fail-if-slower: expected a percentage in [0, 100)"),
    ("compare", "missing directory", ["compare", "x", "y", "--html", "nope/cmp.html"], "--html: expected a file path in an existing directory"),
    ("compare", "out of range metrics", ["compare", "x", "y", "--metrics", "p42"], "--metrics: expected a comma-separated list of"),
    ("orders", "empty", ["orders", "--claims", "empty.toml", "--table", "empty"], "claims: expected one or more [[claims]] tables"),
    ("orders", "binary", ["orders", "--claims", "binary.toml", "--table", "empty"], "--claims: expected a readable UTF-8 TOML file"),
    ("orders", "directory", ["orders", "--claims", "a-directory", "--table", "empty"], "--claims: expected a readable UTF-8 TOML file"),
    ("orders", "missing", ["orders", "nope", "--claims", "claims.toml", "--store", "store"], "RUN: expected a run id of the store"),
    ("orders", "truncated", ["orders", "--claims", "spec-truncated.toml", "--table", "empty"], "--claims: expected valid TOML"),
    ("orders", "wrong types", ["orders", "--claims", "claims.toml", "--table", "binary"], "--table: expected a readable UTF-8 text file"),
    ("orders", "out of range", ["orders", "--claims", "claims.toml", "--table", "points-short.csv"], "--table: expected a results table as archlab prints it"),
    # A file that never ends: every document the lab parses whole is read up to a bound (256 MiB).
    ("run", "endless", ["run", "/dev/zero"], "spec: expected a readable UTF-8 TOML file, got '/dev/zero' (more than 256 MiB"),
    ("tune", "endless", ["tune", "/dev/zero"], "spec: expected a readable UTF-8 TOML file, got '/dev/zero' (more than 256 MiB"),
    ("simulate", "endless", ["simulate", "/dev/zero"], "MODEL: expected a readable TOML model file, got '/dev/zero' (more than"),
    ("fit-usl", "endless", ["fit-usl", "/dev/zero"], "/dev/zero: expected a readable CSV file, got '/dev/zero' (more than"),
    ("analyze", "endless hdr log", ["analyze", "--format", "hdr-log", "/dev/zero"],
     "/dev/zero:1: expected a line of an HdrHistogram interval log (at most 16 Mi characters)"),
    ("analyze", "endless percentiles", ["analyze", "--format", "percentiles", "/dev/zero"],
     "/dev/zero: expected a readable percentile report, got more than 256 MiB"),
    ("analyze", "endless memtier", ["analyze", "--format", "memtier", "/dev/zero"],
     "/dev/zero: expected a readable memtier JSON result, got more than 256 MiB"),
    ("analyze", "endless summary", ["analyze", "--format", "load-summary", "/dev/zero"],
     "unreadable load summary /dev/zero: more than 256 MiB"),
    ("orders", "endless claims", ["orders", "--claims", "/dev/zero", "--table", "empty"],
     "--claims: expected a readable UTF-8 TOML file, got '/dev/zero' (more than 256 MiB"),
    ("orders", "endless table", ["orders", "--claims", "claims.toml", "--table", "/dev/zero"],
     "--table: expected a readable UTF-8 text file, got '/dev/zero' (more than 256 MiB"),
]


IDS = [f"{c[0]}-{c[1]}" for c in CASES]


@pytest.fixture(scope="module")
def answers(inputs) -> dict[str, subprocess.CompletedProcess]:
    """Every case run once, four at a time (each is a fresh Python process importing SciPy)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(lambda case: archlab(*case[2], cwd=inputs), CASES)
        return dict(zip(IDS, done))


@pytest.mark.parametrize(("verb", "category", "argv", "mentions"), CASES, ids=IDS)
def test_bad_input_gets_one_line_and_exit_status_2(answers, verb, category, argv, mentions):
    done = answers[f"{verb}-{category}"]
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(("archlab: error: ", f"archlab {argv[0]}: error: ", "archlab records export: error: "))
    assert mentions in lines[0], lines[0]


def test_every_subcommand_is_in_the_matrix(inputs):
    # A new verb must join the matrix: the verbs `archlab --help` lists against the cases'.
    listed = archlab("--help", cwd=inputs).stdout
    verbs = {line.split()[0] for line in listed.split("COMMAND\n", 1)[1].split("\noptions:")[0].splitlines()
             if line.startswith("    ") and not line.startswith("     ")}
    assert verbs == {c[0] for c in CASES}
    categories = {c[1] for c in CASES}
    assert {"empty", "binary", "directory", "missing", "truncated", "wrong types", "out of range"} <= categories
