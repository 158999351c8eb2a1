"""`archlab-engine serve` and `load` read their options and parameters whole as JSON
(`--options FILE`, `--params FILE`, `-` for stdin), with flags beside the file winning; a bad
value is one line naming the option, and a document that never ends (`/dev/zero`) is refused at
64 MiB; and `load` exits 1 with a one-line reason when no request
succeeded in its window (after writing its outputs), 0 otherwise. Real processes on loopback."""

from __future__ import annotations

import json
import subprocess

import pytest


def run(engine_path, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(engine_path), *args], input=stdin, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def server(engine_path):
    """A single-thread server on a free loopback port: its HOST:PORT."""
    proc = subprocess.Popen([str(engine_path), "serve", "--arch", "single-thread", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # the readiness line, "listening HOST:PORT"
        assert line.startswith("listening "), line
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(5)


def test_serve_options_from_json_with_flags_over_them(engine_path, tmp_path):
    options = tmp_path / "o.json"
    options.write_text(json.dumps({"loops": 2, "wait": None, "max_body_bytes": 10}))
    done = run(engine_path, "serve", "--arch", "netty", "--options", str(options), "--loops", "3", "--check")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "loops": 3, "max_body_bytes": 10, "nodelay": True, "db_pool": 10, "db_wait_ms": 1000,
        "request_timeout_ms": 60_000, "idle_timeout_ms": 75_000, "max_connections": 0, "max_output_bytes": 1024 * 1024,
    }  # fmt: skip
    done = run(engine_path, "serve", "--arch", "netty", "--options", "-", "--check", stdin='{"ring_size": 64}')
    assert done.returncode == 2
    assert done.stderr == (
        "archlab-engine: error: option ring_size does not apply to architecture netty (it accepts: loops, write_spin, sndbuf, rcvbuf)\n"
    )
    done = run(engine_path, "serve", "--arch", "blocking", "--options", "-", "--check", stdin='{"threads": 0}')
    assert done.returncode == 2
    assert done.stderr == "archlab-engine: error: invalid --options -: threads: expected an integer in 1..=65536, got 0\n"


def test_documents_that_never_end_are_refused_at_the_bound(engine_path):
    # /dev/zero given where a document is read whole (options, params, a program file) stops
    # at 64 MiB with one line, instead of reading until memory runs out.
    bound = "more than 64 MiB, the most read of a file parsed whole"
    done = run(engine_path, "serve", "--arch", "single-thread", "--options", "/dev/zero", "--check")
    assert (done.returncode, done.stderr) == (2, f"archlab-engine: error: invalid --options /dev/zero: cannot read it ({bound})\n")
    done = run(engine_path, "load", "--params", "/dev/zero", "--target", "127.0.0.1:9", "--json", "/dev/null")
    assert (done.returncode, done.stderr) == (2, f"archlab-engine: error: invalid --params /dev/zero: cannot read it ({bound})\n")
    done = run(engine_path, "serve", "--arch", "single-thread", "--programs", "/dev/zero", "--check")
    assert done.returncode == 2 and bound in done.stderr and "Traceback" not in done.stderr


def test_load_parameters_from_json_with_flags_over_them(engine_path, server, tmp_path):
    params = {"target": server, "path": "/echo?size=10", "connections": 2, "warmup": "0s", "duration": "300ms"}
    done = run(engine_path, "load", "--params", "-", "--connections", "3", "--quiet", "--json", str(tmp_path / "s.json"), stdin=json.dumps(params))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["connections"] == 3 and summary["path"] == "/echo?size=10" and summary["requests"] > 0


def test_load_fails_in_one_line_when_nothing_succeeded(engine_path, server, tmp_path):
    done = run(engine_path, "load", "--target", server, "--path", "/nope", "--warmup", "0s", "--duration", "300ms", "--quiet",
               "--json", str(tmp_path / "s.json"))  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("archlab-engine: error: no request succeeded in the 0.30 s measurement window (")
    assert "status_4xx" in last
    # What was measured is still written: the summary says what failed.
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["requests"] == 0 and summary["errors"]["by_class"]["status_4xx"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--connections", "-1"], "invalid value '-1' for '--connections <N>': expected an integer in 0..=1000000, got \"-1\""),
        (["--threads", "x"], "invalid value 'x' for '--threads <N>': expected an integer in 0..=1000000, got \"x\""),
        (["--think-time", "gauss:1ms"], "invalid value 'gauss:1ms' for '--think-time <THINK>'"),
    ],
)
def test_load_refuses_a_bad_flag_naming_it(engine_path, tmp_path, args, message):
    done = run(engine_path, "load", "--target", "127.0.0.1:9", *args, "--json", str(tmp_path / "s.json"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {message}"), done.stderr


def test_load_refuses_a_parameter_of_another_model_by_its_flag(engine_path, tmp_path):
    done = run(engine_path, "load", "--params", "-", "--json", str(tmp_path / "s.json"), stdin='{"target": "127.0.0.1:9", "rate": 10}')
    assert done.returncode == 2
    assert done.stderr == "archlab-engine: error: invalid --rate: 10 (allowed: only with the open model (this run is closed))\n"
