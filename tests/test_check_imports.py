"""scripts/check_imports.py, the check that no two files of a crate import each other: it finds
a circle between siblings, one hidden behind a re-export of the crate root and one through
`super::`, and accepts a parent that assembles children which use what it defines. The whole
workspace passes it (also run by `make lint`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = REPO / "scripts" / "check_imports.py"
_spec = importlib.util.spec_from_file_location("check_imports", SCRIPT)
assert _spec is not None and _spec.loader is not None
check_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_imports)


def crate(tmp_path: Path, files: dict[str, str]) -> list[list[str]]:
    src = tmp_path / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    return check_imports.Crate(src).circles()


def test_siblings_that_import_each_other_are_a_circle(tmp_path):
    assert crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::{B, other::{X}};\npub struct A;\n",
            "b.rs": "pub struct B;\nfn f() { crate::c::g() }\n",
            "c.rs": "pub fn g() { let _ = crate::a::A; }\n// use crate::b::B; in a comment is no import\n",
        },
    ) == [["a.rs", "b.rs", "c.rs"]]


def test_a_root_reexport_does_not_hide_a_circle(tmp_path):
    assert crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\npub use a::A;\npub use b::{B as Bee};\n",
            "a.rs": "use crate::Bee;\npub struct A;\n",
            "b.rs": "use crate::A;\npub struct B;\n",
        },
    ) == [["a.rs", "b.rs"]]


def test_super_paths_and_child_modules_count(tmp_path):
    assert crate(
        tmp_path,
        {
            "lib.rs": "mod run;\n",
            "run/mod.rs": "mod driver;\nmod worker;\npub struct Shared;\n",
            "run/driver.rs": "use super::worker::Worker;\n",
            "run/worker.rs": "pub struct Worker { d: super::driver::Driver }\n",
        },
    ) == [["run/driver.rs", "run/worker.rs"]]


def test_a_parent_assembling_its_children_is_no_circle(tmp_path):
    assert (
        crate(
            tmp_path,
            {
                "main.rs": "mod cmd;\nmod args;\npub struct CliError;\nfn main() { cmd::run(); }\n",
                "cmd.rs": "use crate::CliError;\nuse crate::args::parse;\npub fn run() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
                "args.rs": 'pub fn parse() { let _ = "crate::cmd::run"; }\n',
            },
        )
        == []
    )


@pytest.mark.timeout(120)
def test_the_workspace_has_no_circle():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
