"""The type stub python/archlab/_native.pyi against the compiled module: mypy's stubtest checks
names and signatures (it imports the module and compares), and a plain comparison of the public
names runs as well, so a function added to crates/py without a stub fails here."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from conftest import missing_dependency

import archlab
from archlab import _native

STUB = Path(archlab.__file__).parent / "_native.pyi"


def test_stub_names_match_the_module():
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
    public = {name for name in dir(_native) if not name.startswith("_")}
    assert stubbed == public


def test_stubtest_passes():
    if importlib.util.find_spec("mypy") is None:
        missing_dependency("mypy (its stubtest checks the stub)", "it is not installed", "the Python test extras (pyproject.toml, into .venv)")
    env = {**os.environ, "PYTHONPATH": str(Path(archlab.__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-m", "mypy.stubtest", "archlab._native"],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
