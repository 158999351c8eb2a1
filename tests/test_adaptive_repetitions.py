"""Adaptive repetitions (``[experiment] repetitions = {min, max, extra_time}``): the stopping
rule on synthetic repetitions whose separation is known (it stops at the first round that
separates every neighbour, goes on to the cap when the contenders are equal, adds only to the
unresolved cells, keeps within ``extra_time``), the spec's validation of the new keys, the
at-a-glance order and ties, and, on the real engine, a small adaptive run and the resume of a
run interrupted in the middle of its added repetitions."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from conftest import interrupt_mid_cell, run_cli, spec_text, start_cli, wait_no_engine

from archlab.errors import SpecError
from archlab.lab.adaptive import contenders_together, most_added, next_round
from archlab.report.aggregate import aggregate, group_by_load
from archlab.report.glance import glance_lines
from archlab.separation import rank, sequential_level
from archlab.spec import parse_spec
from archlab.spec.repetitions import AdaptiveRepetitions
from archlab.store import ResultRow, Store

#: A fixed pattern of relative deviations (mean 0, standard deviation about 4.6%) that every
#: contender's repetitions follow in turn: the samples are known exactly, so which round
#: separates two means is a property of the data, not of a random draw.
NOISE = (0.00, 0.06, -0.05, 0.03, -0.07, 0.04, -0.02, 0.05, -0.04, 0.0)


def _experiment(env, repetitions: str, architectures=("blocking", "netty", "single-thread"), concurrency="[16]"):
    arch_list = ", ".join(f'"{a}"' for a in architectures)
    text = spec_text(
        experiment=f'name = "t"\nrepetitions = {repetitions}\nwarmup = "500ms"\nduration = "2s"',
        factors=f'architecture = [{arch_list}]\nworkload = ["/echo?size=64"]\nconcurrency = {concurrency}',
    )
    return parse_spec(text, "t.toml", env)


def _row(cell, repetition: int, throughput: float | None) -> ResultRow:
    ok = throughput is not None
    return ResultRow.from_columns({
        "run_id": "r",
        "cell_id": cell.cell_id,
        "repetition": repetition,
        "architecture": cell.architecture,
        "workload": cell.workload,
        "concurrency": cell.concurrency,
        "threads": None,
        "loops": None,
        "think_time_s": 0.0,
        "factors": dict(cell.factors),
        "status": "ok" if ok else "failed",
        "error": None if ok else "server exited with status 1",
        "duration_s": 2.0,
        "requests": int(throughput * 2) if ok else None,
        "throughput_rps": throughput,
        "p50_us": 100.0 if ok else None,
        "p90_us": 150.0 if ok else None,
        "p99_us": 200.0 if ok else None,
        "p999_us": 300.0 if ok else None,
        "max_us": 400.0 if ok else None,
        "mean_us": 110.0 if ok else None,
        "errors": 0,
        "errors_by_class": {},
    })


def _simulate(exp, means: dict[str, float | None]) -> tuple[list[ResultRow], list[list[tuple[str, int]]]]:
    """Run ``exp``'s base repetitions and then the rule's rounds, each repetition of an
    architecture ``mean * (1 + NOISE[rep - 1])`` (None: every repetition fails); returns the rows
    and the rounds as (architecture, repetition) lists."""
    rule = exp.adaptive
    rows = []
    for rep, cell in itertools.product(range(1, exp.repetitions + 1), exp.cells()):
        mean = means[cell.architecture]
        rows.append(_row(cell, rep, None if mean is None else mean * (1 + NOISE[rep - 1])))
    rounds = []
    while pairs := next_round(exp, rows, rule):
        rounds.append([(c.architecture, rep) for c, rep in pairs])
        for cell, rep in pairs:
            mean = means[cell.architecture]
            rows.append(_row(cell, rep, None if mean is None else mean * (1 + NOISE[rep - 1])))
        assert len(rounds) <= rule.max, "the rule must end by max"
    return rows, rounds


def _reps(rows: list[ResultRow]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(r.cell.architecture, []).append(r.repetition)
    return {a: sorted(v) for a, v in out.items()}


def _resolved_after(rows: list[ResultRow], n: int, level: float) -> bool:
    """Whether the first ``n`` repetitions of every contender separate all neighbours."""
    samples: dict[str, list[float]] = {}
    for r in rows:
        if r.repetition <= n and r.ok:
            samples.setdefault(r.cell.architecture, []).append(r.measurement.throughput_rps)
    return rank(samples, level).resolved


def test_the_rule_stops_at_the_first_round_that_separates(env):
    exp = _experiment(env, "{min = 3, max = 10}", architectures=("blocking", "netty"))
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": 11_500.0})
    reps = _reps(rows)
    n = len(reps["netty"])
    assert reps == {"blocking": list(range(1, n + 1)), "netty": list(range(1, n + 1))}
    assert exp.repetitions < n < exp.adaptive.max, "15% apart with 4.6% noise: separable before the cap"
    level = exp.adaptive.level
    assert _resolved_after(rows, n, level) and not _resolved_after(rows, n - 1, level)


def test_three_contenders_each_stop_when_their_neighbours_separate(env):
    exp = _experiment(env, "{min = 3, max = 10}")
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": 11_500.0, "single-thread": 20_000.0})
    level = exp.adaptive.level
    reps = _reps(rows)
    assert rank({a: [r.measurement.throughput_rps for r in rows if r.cell.architecture == a] for a in reps}, level).text() == (
        "single-thread > netty > blocking"
    )
    # single-thread clears netty sooner than netty clears blocking: it stops first, and the
    # others go on exactly until their pair separates.
    assert len(reps["single-thread"]) < len(reps["netty"]) == len(reps["blocking"]) < exp.adaptive.max
    n = len(reps["netty"])
    assert _resolved_after(rows, n, level) and not _resolved_after(rows, n - 1, level)


def test_the_rule_goes_on_to_the_cap_when_contenders_are_equal(env):
    exp = _experiment(env, "{min = 3, max = 7}", architectures=("blocking", "netty"))
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0})
    assert _reps(rows) == {"blocking": [1, 2, 3, 4, 5, 6, 7], "netty": [1, 2, 3, 4, 5, 6, 7]}
    assert len(rounds) == 4
    # Contenders alternate: the round's first contender changes from one round to the next.
    assert len({r[0][0] for r in rounds}) == 2


def test_only_the_unresolved_pair_gets_more(env):
    # single-thread is 40% ahead of the tied pair: after the base it is separated from netty,
    # and only blocking and netty (equal) are repeated, up to the cap.
    exp = _experiment(env, "{min = 3, max = 6}")
    rows, _ = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0, "single-thread": 14_000.0})
    assert _reps(rows) == {"blocking": [1, 2, 3, 4, 5, 6], "netty": [1, 2, 3, 4, 5, 6], "single-thread": [1, 2, 3]}


def test_extra_time_caps_the_added_windows(env):
    # Windows of 2.5 s; 12 s of extra time hold four added repetitions: two rounds of the pair.
    exp = _experiment(env, '{min = 3, max = 20, extra_time = "12s"}', architectures=("blocking", "netty"))
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0})
    assert [len(r) for r in rounds] == [2, 2]
    assert sum(1 for r in rows if r.repetition > 3) * 2.5 <= 12


def test_a_cell_that_always_fails_gets_no_more(env):
    exp = _experiment(env, "{min = 3, max = 6}", architectures=("blocking", "netty"))
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": None})
    assert rounds == []


def test_groups_are_ruled_separately(env):
    # Two concurrencies: separate groups, each a pair of equal contenders; each round holds
    # both groups' pairs, a group's contenders back to back.
    exp = _experiment(env, "{min = 3, max = 4}", architectures=("blocking", "netty"), concurrency="[1, 16]")
    rows, rounds = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0})
    assert len(rounds) == 1 and len(rounds[0]) == 4
    assert len(rows) == 2 * 2 * 4


def test_most_added_counts_max_and_extra_time(env):
    # Three cells of windows of 2.5 s: max allows 5 more each (15), extra_time 30 s allows 12.
    assert most_added(_experiment(env, "{min = 3, max = 8}")) == 15
    assert most_added(_experiment(env, '{min = 3, max = 8, extra_time = "30s"}')) == 12
    assert most_added(_experiment(env, "3")) == 0


def test_sequential_level_is_bonferroni_over_looks():
    assert sequential_level(1) == pytest.approx(0.95)
    assert sequential_level(6) == pytest.approx(1 - 0.05 / 6)
    assert AdaptiveRepetitions(3, 8).level == pytest.approx(1 - 0.05 / 6)


def test_glance_says_the_order_and_the_ties(env):
    exp = _experiment(env, "{min = 3, max = 6}")
    rows, _ = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0, "single-thread": 14_000.0})
    (group,) = group_by_load(aggregate(rows), exp.adaptive.level)
    lines = glance_lines([group])
    assert "'>' the 98.75% interval" in lines[0]  # four looks: 1 - 0.05 / 4
    assert re.search(r"c=16\s+single-thread > (blocking = netty|netty = blocking)$", lines[1]), lines
    # The tie's size: the half-width of the ratio's interval, as the ranking computes it.
    tie = group.ranking().comparisons[1]
    assert not tie.separated and tie.detectable is not None
    shown = re.search(r"tie of (blocking and netty|netty and blocking) \(difference < ([\d.]+)%, the smallest the run could detect\)$", lines[2])
    assert shown, lines
    assert abs(float(shown.group(2)) - 100 * tie.detectable) <= 0.5, (shown.group(2), tie.detectable)  # shown rounded


# --- the spec --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{min = 1, max = 3}", "experiment.repetitions.min: expected an integer >= 2 (fewer repetitions give no interval to compare), got 1"),
        ("{min = 4, max = 3}", "experiment.repetitions.max: expected an integer >= min (4), got 3"),
        ('{min = 3, max = "8"}', "experiment.repetitions.max: expected an integer >= min (3), got '8'"),
        ("{min = 3}", "experiment.repetitions.max: expected an integer >= 2 (the rule needs both min and max), got 'nothing'"),
        ("{min = 3, max = 5, until = 1}", "experiment.repetitions.until: expected a key one of min, max, extra_time, got 'until'"),
        ('{min = 3, max = 5, extra_time = "0s"}', "experiment.repetitions.extra_time: expected a duration > 0"),
        ('{min = 3, max = 5, extra_time = "soon"}', "experiment.repetitions.extra_time: expected"),
        ('"3"', "experiment.repetitions: expected an integer >= 1, or a table {min = N, max = M"),
        ("0", "experiment.repetitions: expected an integer >= 1"),
        ("true", "experiment.repetitions: expected an integer >= 1"),
    ],
)
def test_spec_refuses_bad_repetitions(env, value, message):
    with pytest.raises(SpecError) as e:
        _experiment(env, value)
    assert str(e.value).startswith(message), str(e.value)


def test_spec_accepts_the_rule_and_numbers_keep_their_hash(env):
    fixed = _experiment(env, "3")
    assert fixed.adaptive is None and fixed.to_dict()["repetitions"] == 3
    rule = _experiment(env, '{min = 3, max = 8, extra_time = "1m"}')
    assert rule.repetitions == 3 and rule.adaptive == AdaptiveRepetitions(3, 8, 60.0)
    assert rule.to_dict()["repetitions"] == {"min": 3, "max": 8, "extra_time_s": 60.0}
    assert rule.cells_planned == fixed.cells_planned  # the base repetitions are the plan
    assert rule.spec_hash() != fixed.spec_hash()
    assert AdaptiveRepetitions.from_dict(rule.to_dict()["repetitions"]) == rule.adaptive


# --- real runs -------------------------------------------------------------------------------

ADAPTIVE = 'name = "adaptive"\nrepetitions = {min = 2, max = 3}\nwarmup = "200ms"\nduration = "500ms"'
# Two contenders that tie by construction: the same architecture with pools of 4 and 5 threads
# and 2 connections, so neither pool is ever short of a thread. Separation after the base would
# be a false one, which the rule's level makes rarer than 1 - level (2.5% at max = 3, 0.7% at
# max = 8); the tests below check what the rule did against its own data either way.
TIE = 'architecture = ["blocking"]\nthreads = [4, 5]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'


def _check_rule_satisfied(store: Store, run_id: str, spec: Path):
    """The stored run is what the rule asks for: no further round is due, every cell has its
    min to max repetitions numbered 1..n once each, and each recorded pair has its files."""
    view = store.load_run(run_id)
    exp = parse_spec(spec.read_text(), "spec.toml")
    assert next_round(exp, view.rows, exp.adaptive) == []
    keys = [(r.cell_id, r.repetition) for r in view.rows]
    assert len(keys) == len(set(keys))
    for cell in exp.cells():
        reps = sorted(r.repetition for r in view.rows if r.cell_id == cell.cell_id)
        assert reps == list(range(1, len(reps) + 1)) and exp.adaptive.min <= len(reps) <= exp.adaptive.max, reps
    assert all(r.ok for r in view.rows), [r.error for r in view.rows]
    assert all((r.summary_path.parent / "probe.json").is_file() for r in view.rows)
    return view, exp


def _base_resolved(rows: list[ResultRow], exp) -> bool:
    samples: dict[str, list[float]] = {}
    for r in rows:
        if r.repetition <= exp.adaptive.min and r.ok:
            samples.setdefault(r.cell_id, []).append(r.measurement.throughput_rps)
    return rank(samples, exp.adaptive.level).resolved


def test_small_adaptive_run(engine_path, tmp_path, token):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=ADAPTIVE, factors=TIE))
    store_dir = tmp_path / "runs"
    done = run_cli("run", str(spec), "--store", str(store_dir), "--no-report")
    assert done.returncode == 0, done.stderr
    assert "4 cell runs, then up to 2 more where a comparison is still open" in done.stderr, done.stderr
    store = Store(store_dir)
    (info,) = store.runs()
    view, exp = _check_rule_satisfied(store, info.run_id, spec)
    # The rule added the third round exactly when the base left the pair unresolved, and the
    # progress counted it.
    if _base_resolved(view.rows, exp):
        assert len(view.rows) == 4
    else:
        assert len(view.rows) == 6 and "[6/6]" in done.stderr, done.stderr
    report = run_cli("report", info.run_id, "--store", str(store_dir))
    assert report.returncode == 0, report.stderr
    assert "at a glance: throughput order per workload and load level; '>' the 97.5% interval" in report.stdout
    ranking = group_by_load(aggregate(view.rows), exp.adaptive.level)[0].ranking()
    assert f"c=2  {ranking.text()}\n" in report.stdout, report.stdout
    assert wait_no_engine(token) == []


def test_interrupt_during_added_repetitions_then_resume(engine_path, tmp_path, token):
    # max = 8 for a strict level (99.3%); extra_time bounds the added windows (0.7 s each) to
    # two rounds of the pair.
    experiment = ADAPTIVE.replace("max = 3}", 'max = 8, extra_time = "2800ms"}')
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=experiment, factors=TIE))
    store_dir = tmp_path / "runs"
    cli = start_cli("run", str(spec), "--store", str(store_dir), "--no-report")
    # The base is 2 cells x 2 repetitions; "[5/" is the first added repetition recorded; then
    # into the sixth pair, the round's second: its load generator runs.
    code, stderr = interrupt_mid_cell(cli, token, "[5/", "the sixth pair")
    assert code == 130, stderr
    run_id = re.search(r"archlab run --resume (\S+)", stderr).group(1)
    assert wait_no_engine(token) == []
    store = Store(store_dir)
    assert store.catalog.run(run_id)["status"] == "interrupted"
    before = {(r.cell_id, r.repetition) for r in store.load_run(run_id).rows}
    assert len(before) == 5 and max(rep for _, rep in before) == 3, before

    done = run_cli("run", "--resume", run_id, "--store", str(store_dir), "--no-report")
    assert done.returncode == 0, done.stderr
    view, exp = _check_rule_satisfied(store, run_id, spec)
    after = {(r.cell_id, r.repetition) for r in view.rows}
    assert before < after and len(after) in (6, 8)  # the interrupted round completed, at most one more
    assert view.manifest.status == "complete" and len(view.manifest.document["resumed_at"]) == 1
    # The directories on disk are the rows': no leftover of the interrupted attempt.
    on_disk = {(d.parent.name, int(d.name.removeprefix("rep-"))) for d in (store.run_dir(run_id) / "cells").glob("*/rep-*")}
    assert on_disk == after
    assert wait_no_engine(token) == []


def test_base_repetitions_run_contenders_side_by_side(env):
    exp = _experiment(env, "{min = 2, max = 4}", architectures=("blocking", "netty"), concurrency="[1, 16]")
    pending = [(cell, rep) for rep in (1, 2) for cell in exp.cells()]  # the store's order
    ordered = contenders_together(exp, pending)
    assert sorted((c.cell_id, r) for c, r in ordered) == sorted((c.cell_id, r) for c, r in pending)
    got = [(c.architecture, c.concurrency, r) for c, r in ordered]
    # Repetition-major, each load group's contenders adjacent, the first contender rotating.
    assert got == [
        ("netty", 1, 1), ("blocking", 1, 1), ("netty", 16, 1), ("blocking", 16, 1),
        ("blocking", 1, 2), ("netty", 1, 2), ("blocking", 16, 2), ("netty", 16, 2),
    ]


def test_html_glance_shows_the_order_at_the_rule_level(env, tmp_path):
    from archlab.report import write_html
    from archlab.store import Manifest

    exp = _experiment(env, "{min = 3, max = 6}")
    rows, _ = _simulate(exp, {"blocking": 10_000.0, "netty": 10_000.0, "single-thread": 14_000.0})
    manifest = Manifest.from_document({
        "schema": "archlab/run-manifest", "schema_version": 1, "run_id": "r", "experiment": "t",
        "started_at": "2026-01-01T00:00:00Z", "load_model": "closed", "spec": exp.to_dict(),
        "spec_hash": exp.spec_hash(), "repetitions": exp.repetitions, "cells": [c.cell_id for c in exp.cells()],
    })
    page = write_html(manifest, rows, tmp_path / "report.html").read_text()
    glance = page.split('<section id="glance">')[1].split("</section>")[0]
    (group,) = group_by_load(aggregate(rows), exp.adaptive.level)
    assert "98.75% interval" in glance
    assert group.ranking().text().replace(">", "&gt;") in glance
    assert "the smallest the run could detect)" in glance and 'class="clear"' in glance


def test_a_single_repetition_is_listed_by_mean_not_called_a_tie():
    """Without repetitions there is no interval: the order is the means' and says so once, not
    as '=' (a tie is a measured statement) and not once per pair."""
    from archlab.separation import Comparison, Ranking

    ranking = Ranking(order=("a", "b", "c"), comparisons=(Comparison("a", "b", None), Comparison("b", "c", None)))
    assert ranking.text() == "a, b, c"
    assert ranking.tie_clauses() == ["every pair by mean only, not compared (fewer than 2 successful repetitions)"]
