"""The live controller's regret: its measured latency (mean over repetitions) against the sweep's
best level of the same program, worked out by hand on small synthetic runs."""

from __future__ import annotations

import math

import pytest

from archlab.errors import InvalidValue
from archlab.tuning import Dataset, Features, Objective, SweepRow
from archlab.tuning.live import controller_regret
from archlab.tuning.sweep import SweepObjective


def feats() -> Features:
    return Features(http_calls=1, db_calls=0, grpc_calls=0, loops_with_http=0, loops_with_db=0, loops_with_grpc=0,
                    http_calls_executed=1, db_calls_executed=0, grpc_calls_executed=0, max_fanout=0, cpu_s=1e-3,
                    db_s=0.0, wait_s=5e-3, sleep_s=0.0)


def sweep() -> Dataset:
    # Program a: best at 8 (10 ms mean of 9 and 11 ms); program b: best at 32 (20 ms).
    curve = {"a": {1: (40e-3, 40e-3), 8: (9e-3, 11e-3), 32: (12e-3, 12e-3)}, "b": {1: (90e-3, 90e-3), 8: (30e-3, 30e-3), 32: (20e-3, 20e-3)}}
    rows = [SweepRow(p, m, rep, v, 2 * v, 32 / v) for p, c in curve.items() for m, vs in c.items() for rep, v in enumerate(vs, 1)]
    return Dataset(rows, {"a": feats(), "b": feats()})


def live(values: dict[str, tuple[float, ...]]) -> Dataset:
    rows = [SweepRow(p, 32, rep, v, 2 * v, 32 / v) for p, vs in values.items() for rep, v in enumerate(vs, 1)]
    return Dataset(rows, {p: feats() for p in values})


def test_the_controllers_regret_is_its_mean_latency_over_the_sweeps_best():
    scores = controller_regret(sweep(), live({"a": (11e-3, 13e-3), "b": (20e-3, 22e-3)}), SweepObjective(Objective.MEAN_LATENCY))
    # a: mean 12 ms against the best 10 ms (level 8): +20%; b: 21 ms against 20 ms (level 32): +5%.
    assert scores["a"].best_level == 8 and scores["a"].regret == pytest.approx(0.20)
    assert scores["b"].best_level == 32 and scores["b"].regret == pytest.approx(0.05)
    assert scores["a"].value == pytest.approx(12e-3) and scores["a"].best_value == pytest.approx(10e-3)


def test_throughput_regret_is_the_best_rate_over_the_controllers():
    # Throughput 32 / latency: a's best rate is at 8 (mean of 32/9e-3 and 32/11e-3 req/s).
    best = (32 / 9e-3 + 32 / 11e-3) / 2
    scores = controller_regret(sweep(), live({"a": (16e-3,)}), SweepObjective(Objective.THROUGHPUT))
    assert scores["a"].regret == pytest.approx(best / (32 / 16e-3) - 1)
    assert not math.isnan(scores["a"].regret) and "b" not in scores


def test_a_live_run_of_other_programs_is_refused():
    with pytest.raises(InvalidValue, match="live.programs: expected some of the sweep's programs"):
        controller_regret(sweep(), live({"c": (1e-3,)}), SweepObjective(Objective.MEAN_LATENCY))
