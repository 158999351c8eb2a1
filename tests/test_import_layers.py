"""The import layers of the two planes, checked from the source (issue: one contract per
concept, guardrails). Python: each of ``archlab``'s parts may import only the parts below it, so
specs can be validated without the runner, the statistics run without the store's writers, and
nothing but the command line imports the command line. Rust: the data plane's crates never
depend on the Python extension crate, and the workspace's dependency graph has no cycle.

The layers are read from ``import`` statements with :mod:`ast` (lazy imports inside functions
included), so a new module lands in its package's layer without an edit here."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "python" / "archlab"

# Which parts of the package each part may import. Modules named ``cli.py`` inside a part
# belong to the command-line layer wherever they live (they are glue, like ``archlab.cli``).
FOUNDATION = {"errors", "documents", "contract", "stats", "separation", "plotstyle", "littles_law", "_native"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "documents": set(),
    "contract": {"errors", "_native"},
    "stats": {"errors"},
    "separation": {"errors", "stats"},
    "plotstyle": set(),
    "littles_law": {"errors", "stats"},
    "spec": FOUNDATION,
    "store": FOUNDATION | {"spec"},
    "lab": FOUNDATION | {"spec", "store"},
    "latency": FOUNDATION | {"store"},
    "models": FOUNDATION | {"store"},
    "sim": FOUNDATION | {"spec", "store", "latency"},
    "report": FOUNDATION | {"spec", "store", "models", "latency", "tuning"},
    "compare": FOUNDATION | {"store", "report"},
    "tuning": FOUNDATION | {"spec", "models", "sim", "store"},
    # Above the runner and the simulator: it gives them a cluster; only the CLI imports it.
    "cluster": FOUNDATION | {"spec", "store", "lab", "sim", "latency"},
}


def _part_and_layer(path: Path, package: Path) -> tuple[str, str]:
    """(part of the package, layer it is checked as) for a module file."""
    rel = path.relative_to(package)
    part = rel.parts[0].removesuffix(".py")
    if path.name == "cli.py" or part in {"cli", "__main__"}:
        return part, "cli"
    return part, part


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, imported part of archlab) for every import in a module, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = list(path.relative_to(root.parent).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            elif node.module:
                names = [node.module]
            if names == ["archlab"]:  # from archlab import x, y
                names = [f"archlab.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "archlab" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def layer_violations(package: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(package.rglob("*.py")):
        part, layer = _part_and_layer(path, package)
        if layer == "cli" or part == "__init__":
            continue
        allowed = ALLOWED.get(layer)
        where = path.relative_to(package.parent)
        assert allowed is not None, f"{where}: part `{part}` has no layer in this test; add it to ALLOWED"
        for line, target in _imports(path, package):
            if target != part and target not in allowed:
                bad.append(f"{where}:{line}: `{part}` imports `archlab.{target}` (allowed: {sorted(allowed)})")
    return bad


def test_every_part_imports_only_the_layers_below_it():
    assert layer_violations() == []


def test_the_check_sees_a_forbidden_import(tmp_path):
    # The check must fail when spec imports lab (lazily, absolutely or relatively), the
    # violation that motivated it, and must let a command-line module import anything.
    fake = tmp_path / "archlab"
    (fake / "spec").mkdir(parents=True)
    (fake / "spec" / "x.py").write_text("def f():\n    from archlab.lab.engine import Engine\n    from .. import lab\n")
    (fake / "spec" / "cli.py").write_text("from archlab.lab import run_spec\n")
    allowed = str(sorted(ALLOWED["spec"]))
    assert layer_violations(fake) == [
        f"archlab/spec/x.py:2: `spec` imports `archlab.lab` (allowed: {allowed})",
        f"archlab/spec/x.py:3: `spec` imports `archlab.lab` (allowed: {allowed})",
    ]


def test_the_data_plane_never_depends_on_the_extension_and_has_no_cycle():
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"], cwd=REPO, capture_output=True, text=True, check=True)
    packages = {p["name"]: p for p in json.loads(out.stdout)["packages"]}
    local = {name for name in packages}
    deps = {name: {d["name"] for d in p["dependencies"] if d["name"] in local and d.get("kind") in (None, "normal")} for name, p in packages.items()}
    depends_on_py = sorted(n for n, ds in deps.items() if "archlab-py" in ds)
    assert depends_on_py == [], f"crates depending on the Python extension crate: {depends_on_py}"
    assert all("pyo3" not in {d["name"] for d in p["dependencies"]} for n, p in packages.items() if n != "archlab-py")
    # No cycle among the workspace's crates (depth-first search with colours).
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for d in sorted(deps[n]):
            assert state.get(d) != 1, f"dependency cycle: {' -> '.join(path + [n, d])}"
            if d not in state:
                visit(d, path + [n])
        state[n] = 2

    for n in sorted(deps):
        if n not in state:
            visit(n, [])
