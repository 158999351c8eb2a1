"""Seed 000 (Tennage 2020) §8, Tables 8.1 and 8.2, from the specs in experiments/: each published
value (one SimPy run per cell) must lie in the 99 % prediction interval of one run of the same
experiment, computed from 30 replications. The disagreements listed in KNOWN are explained in
experiments/sim/README.md; the test also fails if one of them disappears, so the README stays
true."""

from __future__ import annotations

from pathlib import Path

import pytest

from archlab.sim.compare import compare_cell
from archlab.sim.spec import load_spec
from sim_helpers import run_checked

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SPECS = ["seed000-table8.1.toml", "seed000-table8.2-calls0.toml", "seed000-table8.2-calls1.toml",
         "seed000-table8.2-calls2.toml"]

# (spec, cell levels, metric): why the published value is outside (README, "Disagreements").
KNOWN = {
    # 39.35 for k = 1 at every N; Fig. 8.2 as printed gives 40.01 with seed 42 (replayed in the README).
    ("seed000-table8.1.toml", (("sources.0.clients", 100), ("stations.0.servers", 1)), "throughput"),
    ("seed000-table8.1.toml", (("sources.0.clients", 200), ("stations.0.servers", 1)), "throughput"),
    ("seed000-table8.1.toml", (("sources.0.clients", 500), ("stations.0.servers", 1)), "throughput"),
    # Published p99 14242.6 > our interval [13427, 14156]; the same run's mean agrees.
    ("seed000-table8.1.toml", (("sources.0.clients", 500), ("stations.0.servers", 1)), "p99"),
    # Published p99 31621.5, just above our interval [27127, 31461].
    ("seed000-table8.2-calls1.toml", (("sources.0.clients", 200),), "p99"),
}


@pytest.mark.parametrize("name", SPECS)
def test_published_values_inside_one_run_prediction_intervals(name):
    spec = load_spec(EXPERIMENTS / name)
    outside = set()
    compared = 0
    for cell in spec.cells():
        result = run_checked(cell.model, spec.simulation)
        row = spec.reference.row(cell.levels)
        assert row is not None, f"no published row for {cell.levels}"
        for c in compare_cell(result, spec.reference, row, level=0.99):
            compared += 1
            if not c.inside:
                outside.add((name, tuple(cell.levels.items()), c.metric))
    assert compared == 3 * len(spec.cells())
    assert outside == {k for k in KNOWN if k[0] == name}
