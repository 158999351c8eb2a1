"""Seed 002's models fed from a run of middleware topologies (archlab.models.middleware_run):
the points read from a repetition's probe.json (request-weighted over the middlewares), the
2^k r design built from the topology's levels (seed 002 Table 7 recomputed from its y values),
M/M/1 and M/M/m against their closed forms, and the network of queues against MVA's exact
answers at one client and its bound at many."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from archlab.models import ModelError
from archlab.models.middleware_run import (
    MiddlewarePoint, factorial_from_points, network_comparison, points_from_run, station_comparison, topology_levels,
)
from models_seed002_factorial import FACTORIAL

SPEC = {"systems": [
    {"name": "s3m2w8", "backends": {"preset": "memcached", "copies": 3}, "front": {"middleware": "seed", "workers": 8, "copies": 2}},
    {"name": "s2m1w32", "backends": {"preset": "memcached", "copies": 2}, "front": {"middleware": "seed", "workers": 32}},
    {"name": "lb", "backends": {"architecture": "netty", "copies": 2}, "front": {"proxy": "round-robin"}},
]}  # fmt: skip


def totals(requests: int, response_us: float, wait_us: float, service_us: float, split_ns: dict, queue: float) -> dict:
    return {"requests": requests, "response_us": {"mean": response_us}, "queue_wait_us": {"mean": wait_us}, "service_us": {"mean": service_us},
            "time_split_ns": split_ns, "queue_length": {"time_avg": queue}}  # fmt: skip


def row(tmp_path, arch: str, processes: list[dict], throughput: float = 1000.0, mean_us: float = 900.0):
    cell_id = arch.replace(":", "-")
    d = tmp_path / "cells" / cell_id / "rep-1"
    d.mkdir(parents=True)
    (d / "probe.json").write_text(json.dumps({"processes": processes}))
    cell = SimpleNamespace(architecture=arch, workload="/memcached?ratio=1:0", concurrency=8)
    m = SimpleNamespace(throughput_rps=throughput, mean_us=mean_us)
    return SimpleNamespace(cell=cell, cell_id=cell_id, ok=True, measurement=m, repetition=1)


def test_levels_are_read_from_the_runs_own_spec():
    assert topology_levels(SPEC) == {"system:s3m2w8": (3, 2, 8), "system:s2m1w32": (2, 1, 32)}


def test_a_point_weighs_the_middlewares_by_their_requests_and_sums_their_queues(tmp_path):
    split = lambda bq, bs, sv, af: {"before_queue": bq, "before_service": bs, "service": sv, "after_service": af}  # noqa: E731
    fronts = [
        {"process": "front-0", "final_counters": {"totals": totals(100, 1000, 200, 500, split(10_000_000, 1_000_000, 50_000_000, 4_000_000), 1.5)}},
        {"process": "front-1", "final_counters": {"totals": totals(300, 2000, 400, 700, split(30_000_000, 3_000_000, 210_000_000, 12_000_000), 2.5)}},
        {"process": "backend-0", "final_counters": {"totals": totals(1, 1e9, 1e9, 1e9, split(1, 1, 1, 1), 99.0)}},  # not a front
    ]  # fmt: skip
    (p,) = points_from_run(SPEC, [row(tmp_path, "system:s3m2w8", fronts), row(tmp_path, "system:lb", fronts)], tmp_path)
    assert (p.servers, p.middlewares, p.workers, p.mw_requests) == (3, 2, 8, 400)
    # Request-weighted: (100 * 1.0 + 300 * 2.0) / 400 ms; an unweighted mean of the two would be 1.5.
    assert p.mw_response_ms == pytest.approx(1.75)
    assert p.mw_queue_wait_ms == pytest.approx((100 * 0.2 + 300 * 0.4) / 400)
    assert p.mw_before_queue_ms == pytest.approx(40e6 / 400 / 1e6)
    assert p.mw_worker_ms == pytest.approx((4e6 + 260e6 + 16e6) / 400 / 1e6)
    assert p.mw_queue_length == pytest.approx(4.0)
    assert (p.throughput_rps, p.client_response_ms) == (1000.0, 0.9)


def test_a_run_without_middleware_topologies_is_refused(tmp_path):
    with pytest.raises(ModelError, match="middleware"):
        points_from_run({"systems": SPEC["systems"][2:]}, [], tmp_path)


def point(servers: int, middlewares: int, workers: int, rep: int, x: float, n: int = 32, **times: float) -> MiddlewarePoint:
    base = dict(client_response_ms=1.0, mw_requests=1, mw_response_ms=0.8, mw_queue_wait_ms=0.1, mw_service_ms=0.5,
                mw_before_queue_ms=0.05, mw_worker_ms=0.6, mw_queue_length=0.0)  # fmt: skip
    base.update(times)
    return MiddlewarePoint(f"s{servers}m{middlewares}w{workers}", "w", n, rep, servers, middlewares, workers, x, **base)  # type: ignore[arg-type]


def test_the_design_is_built_from_the_topologys_levels_seed002_table7():
    # seed 002 Table 7 (throughput, write-only): rows in standard order, A servers 2/3 fastest,
    # then B middlewares 1/2, then C workers 8/32; its q row is what the fit must give back.
    table = FACTORIAL[7]
    points = []
    for i, ys in enumerate(table["y"]):
        levels = ((2, 3)[i & 1], (1, 2)[(i >> 1) & 1], (8, 32)[(i >> 2) & 1])
        points += [point(*levels, rep, float(y.replace(",", ""))) for rep, y in enumerate(ys, 1)]
    design, factors = factorial_from_points(points, "throughput_rps", "w")
    assert factors == {"servers": (2, 3), "middlewares": (1, 2), "workers": (8, 32)}
    printed = [float(q.replace(",", "")) for q in table["q"][:8]]
    # Tolerance: every y is printed rounded to the unit (error <= 0.5) and q = sum(+-y) / 24, so
    # q moves by at most 0.5 from the y's rounding; plus q's own printing: units for q0..qC
    # (0.5), hundredths for the interactions (0.005).
    assert design.mean_ == pytest.approx(printed[0], abs=1.0)
    got = [e.estimate for e in design.effects_.values()]
    assert got[:3] == pytest.approx(printed[1:4], abs=1.0)
    assert got[3:] == pytest.approx(printed[4:8], abs=0.505)


def test_a_factor_at_more_than_two_levels_is_refused():
    points = [point(2, 1, w, 1, 1000.0) for w in (8, 16, 32)]
    with pytest.raises(ModelError, match="two levels"):
        factorial_from_points(points, "throughput_rps", "w")


def test_station_models_match_their_closed_forms():
    # mu = the largest throughput (4000/s); at lambda = 2000/s, M/M/1 gives R = 1 / (mu - lambda)
    # = 0.5 ms, W = rho / (mu - lambda) = 0.25 ms, Lq = rho^2 / (1 - rho) = 0.5 (Jain Box 31.1).
    points = [point(3, 1, 2, 1, 2000.0, n=4), point(3, 1, 2, 1, 4000.0, n=16)]
    mu, rows = station_comparison(points, servers=2)
    assert mu == 4000.0
    low, top = rows
    assert low.rho == pytest.approx(0.5)
    assert (low.mm1_response_ms, low.mm1_wait_ms, low.mm1_queue) == pytest.approx((0.5, 0.25, 0.5))
    # M/M/2 with mu/2 = 2000/s per server at lambda = 2000/s: a = 1, rho = 0.5, C(2, 1) = 1/3,
    # W = C / (m mu - lambda) = (1/3) / 2000 s = 0.1667 ms, R = W + 1/mu = 0.6667 ms (Box 31.2).
    assert low.mmm_wait_ms == pytest.approx(1 / 6)
    assert low.mmm_response_ms == pytest.approx(0.5 + 1 / 6)
    # At rho = 1 neither model has a steady state: no number rather than an invented one.
    assert top.mm1_response_ms is None and top.mmm_response_ms is None


def test_the_network_is_exact_at_one_client_and_bounded_by_its_bottleneck():
    # Demands from the lightest level (2 clients over 2 middlewares: one each): net thread
    # 0.1 ms, a worker 1.0 ms, delay 0.4 ms (client 1.5 - middleware 1.1).
    light = dict(mw_before_queue_ms=0.1, mw_worker_ms=1.0, client_response_ms=1.5, mw_response_ms=1.1)
    points = [point(3, 2, 1, 1, 1300.0, n=2, **light), point(3, 2, 1, 1, 1900.0, n=400, **light)]
    demands, (one, many) = network_comparison(points, middlewares=2, workers=1)
    assert (demands.net_thread_ms, demands.worker_ms, demands.delay_ms) == pytest.approx((0.1, 1.0, 0.4))
    # One client per middleware: no queueing, X = 1 / (sum of demands) per middleware, twice that in all.
    assert one.throughput_rps == pytest.approx(2 / 1.5e-3)
    assert one.client_response_ms == pytest.approx(1.5)
    # 200 clients per middleware: the one worker (1 ms) is the bottleneck, X -> 1000/s each.
    assert many.throughput_rps == pytest.approx(2000.0, rel=1e-6)
    assert many.worker_utilisation == pytest.approx(1.0, rel=1e-6)
    assert math.isfinite(many.net_thread_ms) and many.net_thread_utilisation == pytest.approx(0.1, rel=1e-6)


def test_clients_that_do_not_divide_over_the_middlewares_are_refused():
    points = [point(3, 2, 4, 1, 1000.0, n=3), point(3, 2, 4, 1, 1200.0, n=5)]
    with pytest.raises(ModelError, match="multiple of the 2 middlewares"):
        network_comparison(points, middlewares=2, workers=4)
