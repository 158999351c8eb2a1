"""The issue's test that a server option is defined once, in Rust. The cargo feature
``contract-probe`` adds one option to the declaration in ``crates/server/src/options.rs`` and
changes nothing else; this test builds the engine and the native module with it (into
``target/contract-probe``, beside the normal build) and shows, with no Python change, that a
spec accepts ``[server] contract_probe``, that the server options the runner writes carry it,
that the engine built with it reads them, and that a value out of range is refused against the
TOML key. The normal build, which lacks the option, refuses the key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, spec_text

from archlab.errors import SpecError
from archlab.lab.engine import DataPlaneRegistry
from archlab.spec import SpecEnvironment, parse_spec

PROBE_TARGET = REPO / "target" / "contract-probe"
FEATURES = "archlab-engine/contract-probe,archlab-py/contract-probe,pyo3/extension-module"
PROBE_FACTORS = 'architecture = ["single-thread"]\nworkload = ["/echo?size=8"]\nconcurrency = [1]'

# In a subprocess: load the probe build's extension as archlab._native, then use the package as
# it is: validate a spec and compute the server options the runner would write.
VALIDATE = textwrap.dedent(
    """
    import importlib.machinery, importlib.util, json, sys
    path, text = sys.argv[1], sys.stdin.read()
    loader = importlib.machinery.ExtensionFileLoader("archlab._native", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("archlab._native", loader))
    loader.exec_module(module)
    sys.modules["archlab._native"] = module
    from archlab.errors import SpecError
    from archlab.lab.engine import DataPlaneRegistry, serve_options
    from archlab.spec import SpecEnvironment, parse_spec
    try:
        exp = parse_spec(text, "probe.toml", SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1})))
    except SpecError as e:
        print(json.dumps({"error": str(e)}))
    else:
        print(json.dumps({"server": exp.to_dict()["server"], "options": serve_options(exp.cells()[0], exp.placement)}))
    """
)


@pytest.fixture(scope="module")
def probe_build():
    """(engine, extension) built with the probe option; cargo only rebuilds what changed."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is required to build the probe option (install Rust with rustup)", pytrace=False)
    env = {**os.environ, "PYO3_PYTHON": sys.executable}
    argv = [cargo, "build", "--quiet", "-p", "archlab-engine", "-p", "archlab-py", "--features", FEATURES, "--target-dir", str(PROBE_TARGET)]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    engine, extension = PROBE_TARGET / "debug" / "archlab-engine", PROBE_TARGET / "debug" / "lib_native.so"
    assert engine.is_file() and extension.is_file()
    return engine, extension


def _validate(extension, server: str) -> dict:
    text = spec_text(server=server, factors=PROBE_FACTORS)
    done = subprocess.run(
        [sys.executable, "-c", VALIDATE, str(extension)], input=text, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO / "python")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.timeout(3600)  # the first build compiles every dependency once
def test_a_server_option_declared_in_rust_reaches_specs_and_the_engine(probe_build, tmp_path):
    engine, extension = probe_build
    out = _validate(extension, "contract_probe = 7")
    assert out["server"]["contract_probe"] == 7  # the spec keeps it (and hashes it)
    assert out["options"]["contract_probe"] == 7
    options = tmp_path / "serve.options.json"
    options.write_text(json.dumps(out["options"]))
    done = subprocess.run(
        [str(engine), "serve", "--arch", "single-thread", "--options", str(options), "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["contract_probe"] == 7
    # Its range comes from the declaration too, and the error names the TOML key.
    assert _validate(extension, "contract_probe = 0") == {"error": "server.contract_probe: expected an integer in 1..=65536, got 0"}


def test_the_normal_build_has_no_probe_option():
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(server="contract_probe = 7", factors=PROBE_FACTORS), "t", SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1})))
    assert str(e.value).startswith("server.contract_probe: expected a key one of threads, loops, ")
