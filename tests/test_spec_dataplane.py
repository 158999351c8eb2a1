"""Spec validation against the real data plane: the registry the extension reports is the one
the binary reports, workloads are checked by the Rust parser (its message reaches the user), and
the CLI turns a typo in an architecture into exit code 2."""

from __future__ import annotations

import pytest
from conftest import run_cli, spec_text

from archlab.errors import SpecError
from archlab.lab.engine import DataPlaneRegistry, Engine
from archlab.spec import SpecEnvironment, parse_spec


def test_extension_and_binary_agree(native, engine_path):
    via_native = DataPlaneRegistry().architectures()
    via_binary = Engine(engine_path).architectures()
    assert via_native == via_binary
    assert {"thread-per-connection", "blocking", "single-thread", "netty", "async-4", "async-fix", "seda-ring"} <= {a.name for a in via_binary}


@pytest.mark.parametrize(("target", "detail"), [("/prime?n=abc", "parameter n"), ("/nope", "no workload at")])
def test_workloads_checked_by_the_data_plane(native, target, detail):
    env = SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1}))
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors=f'architecture = ["netty"]\nworkload = ["{target}"]\nconcurrency = [1]'), "t", env)
    assert str(e.value).startswith("factors.workload[0]: expected a workload target such as '/prime?n=27059'")
    assert f"got {target!r} (" in str(e.value) and detail in str(e.value)


def test_quickstart_validates_against_the_data_plane(native):
    from conftest import REPO

    exp = parse_spec((REPO / "experiments" / "quickstart.toml").read_text(), "quickstart.toml", SpecEnvironment.local(DataPlaneRegistry()))
    assert exp.cells_planned == 4 * 2 * 2 * exp.repetitions


def test_cli_architecture_typo_exits_2(native, tmp_path):
    spec = tmp_path / "typo.toml"
    spec.write_text(spec_text(factors='architecture = ["single-thread", "blocking", "blockin"]\nworkload = ["/echo?size=64"]\nconcurrency = [1]'))
    done = run_cli("run", str(spec), "--store", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert done.stderr.startswith(
        "archlab: error: factors.architecture[2]: expected one of thread-per-connection, sync, blocking, blocking-ring, "
    )


def test_every_run_spec_in_experiments_validates(native):
    """Each spec for `archlab run` in experiments/ parses against the real registry and workload
    parser on a two-CPU machine (the smallest this project supports), so a shipped spec never
    fails at its first line. Simulation specs (experiments/sim, seed000-table8.*) are checked by
    tests/sim."""
    from conftest import REPO

    specs = [p for p in sorted((REPO / "experiments").glob("*.toml")) if "[factors]" in p.read_text()]
    assert len(specs) >= 4, [p.name for p in specs]
    env = SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1}))
    for path in specs:
        exp = parse_spec(path.read_text(), path.name, env)
        assert exp.cells_planned > 0, path.name
