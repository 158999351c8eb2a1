"""Model features beyond a single queue, each against a closed form or an exact property:
synchronous calls, fork-join, load-balancing policies, bounded queues with drops, partly-open
sessions, trace arrivals, batch means and the stop rule on interval width."""

from __future__ import annotations

import pytest

from archlab import sim
from archlab.errors import SpecError
from archlab.models import mm1, mmmb
from sim_helpers import assert_within, run_checked

RUN = sim.Simulation(horizon=22_000, warmup=2_000, replications=12, seed=21)


def test_call_holds_the_callers_server_during_the_callee():
    # The caller's single thread is held for before + callee + after = Exp(1) at a delay
    # station, so the thread pool is an M/M/1 queue: R = 1/(mu - lambda) (archlab.models.mm1).
    m = sim.Model()
    pool = m.station("pool", servers=1)
    backend = m.station("backend", discipline="delay")
    m.open("requests", rate=0.5, route=[sim.call(pool, callee=[sim.serve(backend, sim.Exponential(1.0))])])
    res = run_checked(m, RUN)
    exact = mm1(0.5, 1.0)
    assert_within(res.response.mean, exact.mean_response, what="R")
    assert_within(res.stations["pool"].utilisation, 0.5, what="U pool")
    assert_within(res.stations["backend"].mean_jobs, 0.5, what="N backend")


def test_fork_join_waits_for_the_slowest_branch():
    # Two branches at an infinite-server station, Exp(1) each: R = E[max] = 1 + 1/2.
    m = sim.Model()
    d = m.station("shards", discipline="delay")
    m.open("requests", rate=1.0, route=[sim.fork([sim.serve(d, sim.Exponential(1.0))], [sim.serve(d, sim.Exponential(1.0))])])
    res = run_checked(m, RUN)
    assert_within(res.response.mean, 1.5, what="E[max]")
    assert_within(res.stations["shards"].throughput, 2.0, what="X shards")


def _balanced(policy: str) -> sim.SimulationResult:
    m = sim.Model()
    replicas = [m.station(f"r{i}") for i in range(4)]
    m.open("requests", rate=3.2, route=[sim.balance(replicas, sim.Exponential(1.0), policy=policy)])
    return run_checked(m, RUN)


def test_load_balancing_policies():
    # Random splitting makes each replica M/M/1 with lambda/4 (Poisson thinning), so
    # R = 1/(1 - 0.8) = 5; round robin, power-of-two and JSQ must each do better (Mitzenmacher
    # 2001 for power of two), and every policy spreads load evenly.
    results = {p: _balanced(p) for p in ["random", "round-robin", "power-of-two", "jsq"]}
    assert_within(results["random"].response.mean, mm1(0.8, 1.0).mean_response, what="random")
    means = {p: r.response.mean.mean for p, r in results.items()}
    assert means["round-robin"] < means["random"] and means["power-of-two"] < means["round-robin"]
    assert means["jsq"] < means["power-of-two"]
    for p, r in results.items():
        for i in range(4):
            assert_within(r.stations[f"r{i}"].utilisation, 0.8, what=f"{p} U r{i}")


def test_bounded_queue_drops_like_mm1k():
    # Reference: archlab.models.mmmb (M/M/1/B, Jain Box 31.3): lambda = 1.2, mu = 1, B = 5.
    exact = mmmb(1.2, 1.0, 1, 5)
    m = sim.Model()
    cpu = m.station("cpu", capacity=5)
    m.open("requests", rate=1.2, route=[sim.serve(cpu, sim.Exponential(1.0))])
    res = run_checked(m, RUN)
    assert_within(res.response.drop_rate, 1.2 * exact.loss_probability, what="drop rate")
    assert_within(res.response.throughput, exact.throughput, what="X")
    assert_within(res.response.mean, exact.mean_response, what="R")


def test_partly_open_sessions():
    # Sessions at rate 0.2 with 5 requests on average (geometric): request rate 1.0; with
    # exponential service 0.5 and think time 2 the station sees... not Poisson, but its
    # throughput is exactly the request rate and its utilisation 0.5 (utilisation law).
    m = sim.Model()
    cpu = m.station("cpu")
    m.sessions("web", rate=0.2, requests_per_session=5, think=sim.Exponential(2.0),
               route=[sim.serve(cpu, sim.Exponential(0.5))])
    res = run_checked(m, RUN)
    assert_within(res.response.throughput, 1.0, what="X")
    assert_within(res.stations["cpu"].utilisation, 0.5, what="U")


def test_trace_arrivals_are_replayed_exactly():
    m = sim.Model()
    cpu = m.station("cpu")
    m.open("trace", arrival_times=[0.0, 1.0, 1.2, 5.0], route=[sim.serve(cpu, sim.Deterministic(0.5))])
    res = sim.Simulation(horizon=10, replications=2).run(m)
    rep = res.replications[0]
    assert rep.total.completed == 4
    # Responses 0.5, 0.5, 0.8 (waits 0.3 behind the second), 0.5: mean 0.575, max 0.8.
    assert rep.total.mean == pytest.approx(0.575)
    assert rep.total.max == pytest.approx(0.8)


def test_batch_means_and_stop_rule():
    m = sim.Model()
    cpu = m.station("cpu")
    m.open("requests", rate=0.5, route=[sim.serve(cpu, sim.Exponential(1.0))])
    one = run_checked(m, sim.Simulation(horizon=201_000, warmup=1_000, replications=1, batches=20, seed=4))
    bm = one.replications[0].classes["requests"].batch_means
    assert bm.batches == 20
    assert_within(bm.mean_response, mm1(0.5, 1.0).mean_response, what="batch means R")
    rule = sim.StopRule("mean_response", relative_half_width=0.01, max_replications=200)
    res = run_checked(m, sim.Simulation(horizon=5_500, warmup=500, replications=4, threads=2, stop=rule, seed=9))
    assert res.stop.met and res.stop.achieved <= 0.01
    assert res.response.mean.half_width / res.response.mean.mean <= 0.01
    assert res.replications_run > 4


def test_invalid_models_name_the_field():
    m = sim.Model()
    m.station("cpu")
    m.closed("users", clients=5, route=[sim.serve("disk", 1.0)])
    with pytest.raises(SpecError, match=r"sources\[0\]\.route\[0\]\.station: expected one of the stations \[\"cpu\"\]"):
        sim.Simulation(horizon=10).run(m)
    with pytest.raises(SpecError, match=r"^simulation.warmup"):
        ok = sim.Model()
        ok.closed("users", clients=1, route=[sim.serve(ok.station("cpu"), 1.0)])
        sim.Simulation(horizon=10, warmup=20).run(ok)
    bad = sim.Model()
    bad.station("cpu")
    bad.open("requests", rate=1.0, route=[sim.branch((0.5, [sim.serve("cpu", 1.0)]), (0.4, []))])
    with pytest.raises(SpecError, match=r"options: expected probabilities p summing to 1"):
        sim.Simulation(horizon=10).run(bad)
    # JSON cannot carry these, so they are found before the core sees the model.
    nan = sim.Model()
    nan.closed("users", clients=1, route=[sim.serve(nan.station("cpu"), float("nan"))])
    with pytest.raises(SpecError, match=r"^sources\[0\]\.route\[0\]\.service\.value: expected a finite number, got nan$"):
        sim.Simulation(horizon=10).run(nan)
    with pytest.raises(SpecError, match=r"^simulation\.horizon: expected a finite number, got inf$"):
        sim.Simulation(horizon=float("inf")).run(ok)
    looped: dict = {"stations": [{"name": "cpu"}]}
    looped["sources"] = [looped]
    with pytest.raises(SpecError, match=r"^model: expected a model the simulator reads, got 'Circular reference detected'$"):
        sim.Simulation(horizon=10).run(looped)
