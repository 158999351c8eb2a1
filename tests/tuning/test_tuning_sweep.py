"""The sweep's best-level logic (objective, latency limit, ties by overlapping intervals), the
controller replayed on a measured curve, and the three tuners' regrets on a synthetic sweep.

Synthetic sweeps are written by hand so that the answer is known: the best level, which levels
overlap it (the Student-t 95% interval of two values a and b is their mean +- 12.71 |a - b| / 2,
t(0.975, 1) = 12.706), and the regret at any level (the ratio of the curve's values)."""

from __future__ import annotations

import math

import pytest

from archlab.tuning import Dataset, Features, Objective, SweepRow
from archlab.tuning.evaluate import Setting, evaluate, replay_controller
from archlab.tuning.sweep import SweepObjective, choose


def feats(db: int = 0, http: int = 0, wait_s: float = 0.0, cpu_s: float = 1e-3) -> Features:
    return Features(http_calls=http, db_calls=db, grpc_calls=0, loops_with_http=0, loops_with_db=0, loops_with_grpc=0,
                    http_calls_executed=http, db_calls_executed=db, grpc_calls_executed=0, max_fanout=0, cpu_s=cpu_s,
                    db_s=db * 1e-4, wait_s=wait_s, sleep_s=0.0)


def rows(program: str, curve: dict[int, tuple[float, ...]], p99: float = 0.0, throughput: dict[int, float] | None = None):
    """One row per (level, repetition) with the given mean latencies (seconds)."""
    out = []
    for m, values in curve.items():
        for rep, v in enumerate(values, 1):
            x = throughput[m] if throughput else 1 / v
            out.append(SweepRow(program, m, rep, v, p99 or 2 * v, x))
    return out


def test_the_best_level_and_its_ties_by_overlapping_intervals():
    # Pairs 0.2 ms apart: interval = mean +- 12.71 * 0.1 ms = +- 1.27 ms. Level 8: [8.73, 11.27] ms.
    # Level 4: 10.5 ms, [9.23, 11.77]: overlaps. Level 16: 14 ms, [12.73, 15.27]: clear. Level 1: far.
    ds = Dataset(rows("p", {1: (0.050, 0.0502), 4: (0.0104, 0.0106), 8: (0.0099, 0.0101), 16: (0.0139, 0.0141)}), {"p": feats()})
    c = choose(ds, "p", SweepObjective(Objective.MEAN_LATENCY))
    assert c.best == 8
    assert c.ties == (4,)
    assert c.interval is not None and c.interval.low < 0.010 < c.interval.high


def test_one_repetition_claims_no_tie():
    ds = Dataset(rows("p", {1: (0.02,), 2: (0.0100001,), 4: (0.01,)}), {"p": feats()})
    c = choose(ds, "p", SweepObjective(Objective.MEAN_LATENCY))
    assert (c.best, c.ties) == (4, ())


def test_throughput_under_a_p99_limit_skips_the_levels_over_it():
    # Throughput grows with the level, but level 16's p99 breaks the 30 ms limit.
    r = [SweepRow("p", m, 1, 0.01, p99, x) for m, p99, x in ((1, 0.005, 100.0), (4, 0.02, 300.0), (16, 0.05, 400.0))]
    ds = Dataset(r, {"p": feats()})
    limited = SweepObjective(Objective.THROUGHPUT, p99_limit_s=0.03)
    assert limited.best(ds, "p") == 4
    assert SweepObjective(Objective.THROUGHPUT).best(ds, "p") == 16
    assert limited.regret(ds, "p", 1) == pytest.approx(300 / 100 - 1)
    assert SweepObjective(Objective.THROUGHPUT, p99_limit_s=0.001).best(ds, "p") is None
    assert math.isnan(SweepObjective(Objective.THROUGHPUT, p99_limit_s=0.001).regret(ds, "p", 4))


def test_regret_reads_the_nearest_swept_level():
    ds = Dataset(rows("p", {1: (0.04,), 4: (0.01,), 16: (0.02,)}), {"p": feats()})
    obj = SweepObjective(Objective.MEAN_LATENCY)
    assert obj.regret(ds, "p", 4) == 0
    assert obj.regret(ds, "p", 14) == pytest.approx(1.0)  # read at 16
    assert obj.regret(ds, "p", 2) == pytest.approx(3.0)  # read at 1


def test_the_replayed_controller_climbs_to_the_measured_peak_and_stays():
    # Throughput peaks at level 16 (a plateau within 5% would be a tie; 16 is 20% over 8 and 32).
    curve = {1: [10.0, 10.2], 2: [19.0, 20.0], 4: [38.0, 40.0], 8: [70.0, 72.0], 16: [88.0, 90.0], 32: [70.0, 71.0], 64: [50.0, 49.0]}
    assert replay_controller(curve, start=1) == 16
    assert replay_controller(curve, start=64) == 16
    # A flat curve: no probe wins by the 5% threshold, so it stays where it started.
    assert replay_controller({1: [10.0], 2: [10.1], 4: [10.2]}, start=2) == 2


def test_the_tuners_on_a_synthetic_sweep_with_a_known_best():
    """Programs whose throughput at level m is min(m, m*) / hold (a pool of m threads each
    holding a request `hold` seconds, saturating at m* by a capacity elsewhere), latency
    N / throughput at concurrency N = 64. The controller and the model-based tuner must find a
    level within the plateau (regret 0); the default (level 2) is far worse for every program."""
    levels = [1, 2, 4, 8, 16, 32]
    n = 64
    data, features, cpu = [], {}, {}
    for i, (m_star, hold) in enumerate([(4, 0.010), (8, 0.020), (16, 0.040), (32, 0.080), (8, 0.010), (16, 0.020)]):
        p = f"p{i}"
        x = {m: min(m, m_star) / hold for m in levels}
        data += rows(p, {m: (n / x[m], n / x[m] * 1.001) for m in levels}, throughput=x)
        features[p] = feats(http=m_star // 4, wait_s=hold * 0.9, cpu_s=hold * 0.1)
        cpu[p] = hold * 0.1 / m_star  # CPU is not the limit below m*
    ds = Dataset(data, features)
    ev = evaluate("blocking", ds, SweepObjective(Objective.MEAN_LATENCY), default=2, setting=Setting(cores=64, concurrency=n),
                  cpu_s_at_one=cpu)
    tuners = {t.name: t for t in ev.tuners}
    assert set(tuners) == {"learned", "model-based", "controller"}
    assert all(v > 0.5 for v in ev.default_regret.values())
    assert tuners["controller"].median_regret == pytest.approx(0.0, abs=0.002)
    assert set(tuners["learned"].picks) == set(ds.programs)
    assert ev.learned_scores and set(ev.learned_scores) == {"MAPE %", "MSE", "accuracy", "F1 (macro)"}
    for t in tuners.values():
        assert set(t.regret) <= set(ds.programs)
        assert all(m in levels for m in t.picks.values())


def test_the_model_based_tuner_needs_level_one():
    ds = Dataset(rows("a", {2: (0.01,), 4: (0.005,)}) + rows("b", {2: (0.02,), 4: (0.01,)}) + rows("c", {2: (0.02,), 4: (0.01,)}),
                 {p: feats() for p in "abc"})
    ev = evaluate("blocking", ds, SweepObjective(Objective.MEAN_LATENCY), default=2, setting=Setting(cores=1, concurrency=8),
                  cpu_s_at_one={})
    mb = next(t for t in ev.tuners if t.name == "model-based")
    assert mb.picks == {} and "level 1" in mb.note
