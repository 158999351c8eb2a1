"""Models built from stored runs: synthetic catalog rows generated from known USL parameters
(so the fit must recover them and the comparison must be near zero), a 2^2 r design whose
effects are known by construction, the operational laws on rows that obey or break them, the
`archlab model --run` verb on a run written through the store's writer (``Store.begin_run``,
``RunWriter.record``) into a real catalog and read back by the verb, and the HTML fragment for
the report."""

from __future__ import annotations

import argparse
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from archlab.models import (
    USL,
    Amdahl,
    ModelError,
    check_run_laws,
    design_from_run,
    fit_run,
    report_section,
    scalability_points,
    usl_throughput,
)
from archlab.models.cli import add_arguments, run
from archlab.models.fromrun import fit_text, server_cpu_count
from archlab.store import CellKey, CellRecord, LittlesLaw, Manifest, Measurement, ResultRow, RunPlan, Store

# Known parameters per architecture (synthetic; the fit must recover them).
TRUTH = {"netty": (0.02, 2e-4, 1000.0), "blocking": (0.1, 1e-3, 800.0)}
LEVELS = [1, 2, 4, 8, 16, 32, 64]
PLACEMENT = {"server_cpus": "2-3", "client_cpus": "0-1"}
MANIFEST = Manifest.from_document({"load_model": "closed", "placement": PLACEMENT, "cells": []})
OPEN = Manifest.from_document({"load_model": "open"})


def synthetic_rows(noise=0.01, reps=2, seed=7, levels=LEVELS, think=0.0) -> list[ResultRow]:
    return [ResultRow.from_columns(row) for row in synthetic_columns(noise, reps, seed, levels, think)]


def synthetic_columns(noise=0.01, reps=2, seed=7, levels=LEVELS, think=0.0) -> list[dict]:
    """Catalog-shaped rows: throughput from the USL with multiplicative noise, mean latency
    from Little's law N = X (R + Z), CPU figures consistent with the utilisation law."""
    rng = np.random.default_rng(seed)
    rows = []
    for arch, (s, k, lam) in TRUTH.items():
        for workload in ["/echo?size=1024"]:
            for n in levels:
                for rep in range(reps):
                    x = float(usl_throughput(n, s, k, lam)) * (1 + noise * rng.standard_normal())
                    duration, d = 0.5, 2e-5  # 20 us of CPU per request: U < 1 on 2 CPUs
                    cpu = x * d * duration
                    mean_us = (n / x - think) * 1e6
                    rows.append({
                        "run_id": "r", "cell_id": f"{arch}-{n}", "repetition": rep, "architecture": arch,
                        "workload": workload, "concurrency": n, "threads": None, "think_time_s": think,
                        "factors": {"architecture": arch, "workload": workload, "concurrency": n},
                        "status": "ok", "throughput_rps": x, "mean_us": mean_us,
                        "duration_s": duration, "requests": round(x * duration), "errors": 0,
                        "p50_us": mean_us, "p90_us": mean_us, "p99_us": mean_us, "p999_us": mean_us, "max_us": mean_us,
                        "cpu_user_s": 0.7 * cpu, "cpu_sys_s": 0.3 * cpu, "cpu_us_per_request": d * 1e6,
                    })
    rows.append({"run_id": "r", "cell_id": "netty-1", "repetition": 9, "architecture": "netty",
                 "workload": "/echo?size=1024", "concurrency": 1, "status": "failed", "error": "boom", "factors": {}})
    return rows


def _replace_measurement(row: ResultRow, **changes) -> ResultRow:
    import dataclasses

    return dataclasses.replace(row, measurement=dataclasses.replace(row.measurement, **changes))


def test_scalability_points_keep_repetitions_and_skip_failures():
    points = scalability_points(synthetic_rows())
    key = (("architecture", "netty"), ("workload", "/echo?size=1024"))
    n, x = points[key]
    assert n.tolist() == [lv for lv in LEVELS for _ in range(2)] and x.size == 14 and np.all(x > 0)


def test_fit_run_recovers_known_parameters_and_compares():
    fits = fit_run(MANIFEST, synthetic_rows(noise=0.005))
    assert [dict(f.key)["architecture"] for f in fits] == ["netty", "blocking"]
    for f in fits:
        s, k, lam = TRUTH[dict(f.key)["architecture"]]
        m = f.model
        assert isinstance(m, USL) and not isinstance(m, Amdahl)
        assert m.confint_["sigma"][0] <= s <= m.confint_["sigma"][1]
        assert m.confint_["kappa"][0] <= k <= m.confint_["kappa"][1]
        assert m.lambda_ == pytest.approx(lam, rel=0.03)
        assert f.comparison is not None and f.comparison.preferred == "USL"  # kappa > 0 in truth
        assert [lv.concurrency for lv in f.levels] == LEVELS and all(lv.repetitions == 2 for lv in f.levels)
        for lv in f.levels:
            assert abs(lv.throughput_error) < 0.02 and abs(lv.response_error) < 0.02
            assert lv.lower <= lv.predicted_throughput <= lv.upper
            # The model's R is the interactive response-time law on its own X.
            assert lv.predicted_response == pytest.approx(lv.concurrency / lv.predicted_throughput)


def test_fit_run_falls_back_to_amdahl_then_explains():
    rows = [r for r in synthetic_rows() if r.cell.concurrency in (1, 4, 16)]
    fits = fit_run(MANIFEST, rows)
    assert all(isinstance(f.model, Amdahl) and f.comparison is None for f in fits)  # 3 levels: USL unidentifiable
    rows = [r for r in synthetic_rows() if r.cell.concurrency in (1, 16)]
    f = fit_run(MANIFEST, rows)[0]
    assert f.model is None and "USL: n: expected at least 4 distinct" in f.reason
    assert math.isnan(f.levels[0].predicted_throughput) and f.levels[0].measured_throughput > 0
    with pytest.raises(ModelError, match="^load_model: expected 'closed'"):
        fit_run(OPEN, rows)


def test_superlinear_growth_is_noted():
    rows = [
        _replace_measurement(r, throughput_rps=r.measurement.throughput_rps / 2)  # X(2) is now ~4 x X(1)
        if r.cell.concurrency == 1 and r.ok else r
        for r in synthetic_rows()
    ]
    fits = fit_run(MANIFEST, rows)
    assert all(len(f.notes) == 1 and f.notes[0].startswith("superlinear: X(2)") for f in fits)
    assert not fit_run(MANIFEST, synthetic_rows())[0].notes
    assert "superlinear" in report_section(MANIFEST, rows)


def test_operational_laws_on_rows():
    rows = synthetic_rows(think=0.0005)
    checks = check_run_laws(MANIFEST, rows)
    laws = {c.check.law for c in checks}
    assert laws == {"N = X (R + Z)", "U = X D / m", "U <= 1"} and all(c.check.holds for c in checks)
    util = next(c for c in checks if c.check.law == "U = X D / m")
    assert util.check.rhs == pytest.approx(util.check.lhs)  # m = 2 CPUs from "2-3"
    bad = _replace_measurement(rows[0], mean_us=rows[0].measurement.mean_us * 1.5)
    assert not check_run_laws(MANIFEST, [bad])[0].check.holds
    # A row's own stored check (with its sampling tolerance) decides, not the 5 % rule.
    import dataclasses

    stored = dataclasses.replace(rows[0], littles_law=LittlesLaw(0.97, 0.01))
    (little,) = [c for c in check_run_laws(MANIFEST, [stored]) if c.check.law == "N = X (R + Z)"]
    assert not little.check.holds and little.check.rhs == pytest.approx(0.97 * little.check.lhs)
    # Open load: no Little check on the clients (concurrency is not the population).
    assert {c.check.law for c in check_run_laws(OPEN, rows)} == {"U = X D / m", "U <= 1"}
    # CPU time beyond the CPUs' capacity over the window: counted outside it (1 CPU by default).
    x = rows[-2].measurement.throughput_rps
    over = dataclasses.replace(_replace_measurement(rows[-2], duration_s=1.0),
                               cost=dataclasses.replace(rows[-2].cost, cpu_user_s=0.9, cpu_sys_s=0.3, cpu_us_per_request=1.2e6 / x))
    assert [c.check.holds for c in check_run_laws(OPEN, [over])] == [True, False]


def test_design_from_run_two_levels():
    # 2^2 r=3: threads {1, 4} x architecture {a, b}; y = 100 + 10 xA + 5 xB + 2 xAxB + noise.
    rng = np.random.default_rng(3)
    rows = []
    for arch, xb in (("a", -1), ("b", 1)):
        for threads, xa in ((4, 1), (1, -1)):
            for rep in range(3):
                y = 100 + 10 * xa + 5 * xb + 2 * xa * xb + rng.normal(0, 0.5)
                rows.append(ResultRow("r", CellKey(f"{arch}-{threads}", arch, "w", concurrency=8,
                                                   factors={"architecture": arch, "threads": threads}),
                                      rep, "ok", measurement=Measurement(1.0, round(y), y, *[100.0] * 6, 0)))
    design = design_from_run(rows)
    assert design.factors == ("architecture", "threads") and design.levels["threads"] == (1, 4)
    assert design.levels["architecture"] == ("a", "b") and design.y.shape == (4, 3)
    d = design.fit(confidence=0.95)
    assert d.effects_["architecture"].estimate == pytest.approx(5, abs=0.5)
    assert d.effects_["threads"].estimate == pytest.approx(10, abs=0.5)
    assert d.effects_["architecture:threads"].estimate == pytest.approx(2, abs=0.5)
    with pytest.raises(ModelError, match="^factors: expected two levels"):
        design_from_run(synthetic_rows())
    sub = design_from_run(synthetic_rows(), factors={"architecture": ("netty", "blocking"), "concurrency": (1, 64)})
    assert sub.y.shape == (4, 2)


def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser.add_subparsers())
    return parser.parse_args(argv)


def _write_through_the_store(root, rows: list[ResultRow], flagged: tuple[str, int]) -> str:
    """Record ``rows`` as a run with the store's writer; every ok row carries a Little's-law
    check that holds (the synthetic rows obey N = X (R + Z) exactly) except ``flagged``."""
    store = Store(root)
    cells = tuple(dict.fromkeys(r.cell_id for r in rows))
    plan = RunPlan(name="synthetic", kind="experiment", spec_hash="0" * 64, spec_text="# synthetic\n", cells=cells,
                   repetitions=2, load_model="closed", facts={"placement": PLACEMENT})
    with store.begin_run(plan) as handle:
        for r in rows:
            law = None
            if r.ok:
                law = LittlesLaw(0.9 if (r.cell_id, r.repetition) == flagged else 1.0, 0.01)
            handle.record(r.cell, r.repetition, CellRecord(r.status, r.error, r.measurement, r.cost, littles_law=law))
        handle.set_status("complete")
    return handle.run_id


def test_model_run_verb_reads_a_run_written_through_the_store(tmp_path, capsys):
    rows = synthetic_rows()
    run_id = _write_through_the_store(tmp_path / "runs", rows, flagged=("blocking-8", 1))
    view = Store(tmp_path / "runs").load_run(run_id)
    # The round trip keeps what the models read: the same rows, in the order they were planned.
    order = {cell_id: i for i, cell_id in enumerate(dict.fromkeys(r.cell_id for r in rows))}
    planned = sorted(rows, key=lambda r: (order[r.cell_id], r.repetition))
    assert [(r.cell, r.repetition, r.status, r.measurement, r.cost) for r in view.rows] == [
        (r.cell, r.repetition, r.status, r.measurement, r.cost) for r in planned
    ]
    assert view.manifest.server_cpus == "2-3" and server_cpu_count(view.manifest) == 2

    assert run(parse(["model", "--run", run_id, "--store", str(tmp_path / "runs")])) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {run_id}: 28 successful repetitions of 29;")
    # Each fit printed is the fit of the rows as written: nothing was lost or changed on the way.
    for fit in fit_run(MANIFEST, rows):
        assert fit_text(fit) in out
    # Little's law is the stored check of each row, the flagged one included; the utilisation
    # law is computed from the stored CPU figures on 2 CPUs (the placement "2-3").
    assert "N = X (R + Z): holds on 27 of 28 rows; largest disagreement 10.0% (blocking-8 rep 1" in out
    assert "U = X D / m: holds on 28 of 28 rows" in out
    with pytest.raises(ModelError, match="^kind"):
        run(parse(["model"]))


def test_report_section_is_a_self_contained_fragment():
    frag = report_section(MANIFEST, synthetic_rows())
    assert frag.startswith('<section id="models">') and frag.endswith("</section>")
    assert frag.count("<svg") == 1 and "<?xml" not in frag and "<script" not in frag
    assert not re.search(r'(href|src)="(http|//)', frag.replace('xmlns="http', "").replace("xlink=\"http", ""))
    ET.fromstring(frag.replace("&sigma;", "s").replace("&kappa;", "k").replace("&lambda;", "l").replace("&minus;", "-"))
    assert "blocking, /echo?size=1024" in frag and "X error" in frag
    # Data it cannot model is explained, never raised.
    assert "No scalability model" in report_section(OPEN, synthetic_rows())
    assert "No scalability model" in report_section(MANIFEST, [])


# A small real run (2 architectures x concurrency {1, 2, 4, 8} x 2 repetitions, ~15 s): the
# whole path store -> fit -> terminal -> HTML on measured rows. Values depend on the machine, so
# only the structure and the identities that hold whatever the timing are checked.
REAL_SPEC = """
[experiment]
name = "models"
repetitions = 2
warmup = "200ms"
duration = "500ms"

[factors]
architecture = ["blocking", "netty"]
workload = ["/echo?size=64"]
concurrency = [1, 2, 4, 8]

[load]
model = "closed"
think_time = "0s"
timeout = "2s"
"""


def test_real_run_end_to_end(engine_path, tmp_path, capsys):
    import io

    from archlab.lab.session import run_spec
    from archlab.store import Store

    spec = tmp_path / "spec.toml"
    spec.write_text(REAL_SPEC)
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, stream=io.StringIO())
    view = store.load_run(handle.run_id)
    manifest, rows = view.manifest, view.rows
    assert len(rows) == 16 and all(r.ok for r in rows), [r.error for r in rows]

    fits = fit_run(manifest, rows)
    assert [dict(f.key)["architecture"] for f in fits] == ["blocking", "netty"]
    for f in fits:
        assert f.n.size == 8 and [lv.concurrency for lv in f.levels] == [1, 2, 4, 8]
        if f.model is not None:  # 4 levels identify the USL unless the points are degenerate
            assert all(math.isfinite(lv.throughput_error) for lv in f.levels)
        else:
            assert f.reason
    # The utilisation law is an identity of how cpu_us_per_request is recorded (archlab.lab.probes).
    util = [c for c in check_run_laws(manifest, rows) if c.check.law == "U = X D / m"]
    assert len(util) == 16 and all(c.check.holds for c in util)
    # Little's law is checked on every row, by the runner, with the row's own tolerance.
    little = [c for c in check_run_laws(manifest, rows) if c.check.law == "N = X (R + Z)"]
    assert len(little) == 16 and all(r.littles_law is not None for r in rows)
    assert [c.check.holds for c in little] == [r.littles_law.ok for r in rows]

    assert run(parse(["model", "--run", handle.run_id, "--store", str(tmp_path / "runs")])) == 0
    assert "blocking, /echo?size=64" in capsys.readouterr().out
    frag = report_section(manifest, rows)
    assert frag.startswith('<section id="models">') and "netty, /echo?size=64" in frag
