"""Output analysis of the simulator: MSER-5 warm-up removal (White 1997; Franklin & White 2008)
on synthetic series with a known transient and on an M/M/1 queue started empty at high load;
per-class station metrics against multi-class exact MVA (Bolch et al., Queueing Networks and
Markov Chains, 2nd ed., Ex. 9.5 p. 337, via archlab.models.exact_mva, which reproduces its
published queue lengths); and the batch-means stop rule against the M/M/1 closed form (Jain,
The Art of Computer Systems Performance Analysis, Box 31.1), with a coverage check over seeds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from archlab import sim
from archlab.errors import SpecError
from archlab.models import Centre, ClosedNetwork, exact_mva, mm1
from sim_helpers import assert_within, run_checked


def ar1(n: int, phi: float, start: float, rng: np.random.Generator) -> np.ndarray:
    x, out = start, np.empty(n)
    for t, e in enumerate(rng.standard_normal(n)):
        x = phi * x + e
        out[t] = x
    return out


def test_mser_on_an_ar1_started_far_from_its_mean():
    # X_t = 0.95 X_{t-1} + e_t, X_0 = 50: observation t carries the bias 50 * 0.95^t. For each
    # seed, the cut leaves a truncated mean whose remaining bias is under a fifth of its
    # standard error (sigma / (1 - phi) / sqrt(n) = 20 / sqrt(n)), and lies in the first half.
    phi, start, n = 0.95, 50.0, 5000
    for seed in range(10):
        x = ar1(n, phi, start, np.random.default_rng(seed))
        t = sim.mser(x)
        assert t is not None and t.batch_size == 5 and t.batches == n // 5 and not t.at_limit
        cut, kept = t.observations_deleted, n - t.observations_deleted
        residual = start * phi ** (cut + 1) * (1 - phi**kept) / (1 - phi) / kept
        assert residual < 0.2 * 20 / np.sqrt(kept), f"seed {seed}: cut {cut} leaves bias {residual}"
        assert cut < n // 2


def test_mser_rejects_bad_input_by_name():
    assert sim.mser([1.0] * 9) is None  # fewer than two batches of 5
    with pytest.raises(SpecError, match="batch_size"):
        sim.mser([1.0] * 20, batch_size=0)
    with pytest.raises(SpecError, match=r"series\[2\]"):
        sim.mser([1.0, 2.0, float("nan")] + [1.0] * 20)
    with pytest.raises(SpecError, match="mser"):
        sim.Simulation(horizon=10, warmup="welch").run(_mm1(0.5, 1.0))


def _mm1(rate: float, mean_service: float) -> sim.Model:
    m = sim.Model()
    s = m.station("s")
    m.open("requests", rate=rate, route=[sim.serve(s, sim.Exponential(mean_service))])
    return m


def mm1_mean_in_system_from_empty(arrival: float, service_rate: float, horizon: int, states: int = 400) -> np.ndarray:
    """E[N(t)] at t = 0, 1, ..., horizon of an M/M/1 queue started empty: the birth-death
    generator truncated at ``states`` (the stationary tail beyond is rho^400, nil), stepped by
    its one-unit transition matrix."""
    q = np.diag(np.full(states - 1, arrival), 1) + np.diag(np.full(states - 1, service_rate), -1)
    q -= np.diag(q.sum(axis=1))
    step, p = expm(q), np.zeros(states)
    p[0] = 1.0
    out = []
    for _ in range(horizon + 1):
        out.append(p @ np.arange(states))
        p = p @ step
    return np.array(out)


def test_mser_removes_the_empty_start_of_a_heavily_loaded_mm1():
    # M/M/1 at rho = 0.9 (lambda = 1, S = 0.9) started empty: early requests find a short queue,
    # so estimates over [0, T] are biased low against R = S / (1 - rho) = 9 (Jain Box 31.1). The
    # exact transient E[N(t)] (birth-death chain) tells what a cut at time c leaves: the bias of
    # the mean number in system over [c, T]. The same seeds with warmup = "mser" cut every
    # replication at the chosen time; the runs are paired (same random streams), so the cut
    # alone moves the estimate.
    horizon, exact = 600, mm1(1.0, 1 / 0.9).mean_response
    model = _mm1(1.0, 0.9)
    base = dict(horizon=horizon, replications=100, seed=22)
    whole = run_checked(model, sim.Simulation(warmup=0.0, **base))
    cut = run_checked(model, sim.Simulation(warmup="mser", **base))
    t = cut.mser
    assert t is not None and t.batch_size == 5 and t.batches == 200 and not t.at_limit
    assert 0 < cut.warmup < horizon / 2
    for rep in cut.replications:
        assert rep.warmup == cut.warmup and rep.window == pytest.approx(horizon - cut.warmup)
    # The exact bias of the window average of N: at most half the uncut window's.
    grid = np.arange(horizon + 1.0)
    n_t = mm1_mean_in_system_from_empty(1.0, 1 / 0.9, horizon)
    kept = grid >= cut.warmup
    bias_whole, bias_cut = np.trapezoid(n_t, grid) / horizon - 9, np.trapezoid(n_t[kept], grid[kept]) / (horizon - grid[kept][0]) - 9
    assert abs(bias_cut) < abs(bias_whole) / 2, (bias_cut, bias_whole)
    # In the simulation: the uncut estimate misses R, the cut one holds it, much closer.
    assert whole.response.mean.mean < exact - whole.response.mean.half_width
    assert abs(cut.response.mean.mean - exact) < 0.5 * abs(whole.response.mean.mean - exact)
    assert_within(cut.response.mean, exact, what="R after MSER")


# Bolch et al. Ex. 9.5: two closed classes, N = (2, 1), no think time. Station 1: two FCFS
# servers, S = 0.2 for both classes (class-independent, as BCMP requires of FCFS); station 2:
# one server with class-dependent S = (0.4, 0.6), processor sharing (the product-form
# discipline MVA assumes); station 3: infinite servers, S = (1, 2). Visits (1, .6, .4) and
# (1, .3, .7): after station 1, class a goes to 2 with probability .6 and to 3 with .4.
SERVICE = {"a": (0.2, 0.4, 1.0), "b": (0.2, 0.6, 2.0)}
VISITS = {"a": (1.0, 0.6, 0.4), "b": (1.0, 0.3, 0.7)}
POPULATION = {"a": 2, "b": 1}


def bolch_9_5() -> sim.Model:
    m = sim.Model()
    one, two, three = m.station("1", servers=2), m.station("2", discipline="ps"), m.station("3", discipline="delay")
    for c in ("a", "b"):
        s, v = SERVICE[c], VISITS[c]
        m.closed(c, clients=POPULATION[c], route=[
            sim.serve(one, sim.Exponential(s[0])),
            sim.branch((v[1], [sim.serve(two, sim.Exponential(s[1]))]), (v[2], [sim.serve(three, sim.Exponential(s[2]))])),
        ])
    return m


def test_per_class_station_metrics_match_multiclass_exact_mva():
    demands = {c: np.array(SERVICE[c]) * np.array(VISITS[c]) for c in "ab"}
    net = ClosedNetwork([Centre.multiserver("1", [demands["a"][0], demands["b"][0]], 2),
                         Centre.queueing("2", [demands["a"][1], demands["b"][1]]),
                         Centre.delay("3", [demands["a"][2], demands["b"][2]])])
    exact = exact_mva(net, [2, 1])
    # archlab.models reproduces the book's queue lengths; the simulation is checked against it.
    assert exact.queue_length.T == pytest.approx(np.array([[0.428, 0.726, 0.845], [0.108, 0.158, 0.734]]), abs=1e-3)
    res = run_checked(bolch_9_5(), sim.Simulation(horizon=11_000, warmup=1_000, replications=12, seed=5))
    servers = (2, 1, None)
    for k, name in enumerate("123"):
        st = res.stations[name]
        for j, c in enumerate("ab"):
            x = exact.throughput[j] * VISITS[c][k]  # visits per time unit of class c at station k
            got = st.classes[c]
            assert_within(got.throughput, x, what=f"X {c}@{name}")
            assert_within(got.mean_jobs, exact.queue_length[k, j], what=f"Q {c}@{name}")
            assert_within(got.mean_residence, exact.residence_time[k, j] / VISITS[c][k], what=f"R/visit {c}@{name}")
            if servers[k] is None:
                assert got.utilisation is None
            else:
                assert_within(got.utilisation, x * SERVICE[c][k] / servers[k], what=f"U {c}@{name}")
        # Class values add up to the station's, replication by replication.
        for rep in res.replications:
            s = rep.stations[name]
            assert sum(c.mean_jobs for c in s.classes.values()) == pytest.approx(s.mean_jobs, rel=1e-9)
            assert sum(c.throughput for c in s.classes.values()) == pytest.approx(s.throughput, rel=1e-9)
            assert sum(c.throughput * c.mean_residence for c in s.classes.values()) == pytest.approx(
                s.throughput * s.mean_residence, rel=1e-9)
            if s.utilisation is not None:
                assert sum(c.utilisation for c in s.classes.values()) == pytest.approx(s.utilisation, rel=1e-9)


@pytest.mark.parametrize("metric, target", [("throughput", 0.01), ("mean_response", 0.03), ("p99", 0.05)])
def test_batch_means_stop_rule_stops_and_meets_its_target(metric, target):
    # M/M/1, lambda = 1, S = 0.5 (rho = 0.5): X = 1, R = 1, p99 = R ln 100 (Jain Box 31.1).
    rule = sim.StopRule(metric, target, method="batch_means", max_horizon=200_000)
    res = run_checked(_mm1(1.0, 0.5), sim.Simulation(horizon=500, warmup=50, replications=1, seed=2, stop=rule))
    stop, rep = res.stop, res.replications[0]
    assert stop.method == "batch_means" and stop.met and stop.achieved <= target
    assert stop.estimate.half_width <= target * stop.estimate.mean
    assert 500 < stop.horizon == rep.horizon <= 200_000
    assert 20 <= rep.batch_means.batches <= 40  # 20 by default, merged in pairs as the run grows
    exact = {"throughput": 1.0, "mean_response": 1.0, "p99": np.log(100)}[metric]
    assert abs(stop.estimate.mean - exact) < 4 * stop.estimate.half_width


def test_batch_means_interval_covers_the_mm1_closed_form_over_seeds():
    # 30 independent seeds, stop on the mean response at 5 %: the 95 % batch-means interval
    # should cover R = 1 about 95 % of the time. With true coverage 0.9 the chance of fewer than
    # 24 covers in 30 is 2.6 %; a broken interval (e.g. batches too short, so correlated) covers
    # far less. Seeds are fixed, so the outcome is reproducible.
    covered, horizons = 0, []
    for seed in range(30):
        rule = sim.StopRule("mean_response", 0.05, method="batch_means", max_horizon=100_000)
        res = sim.Simulation(horizon=400, warmup=40, replications=1, seed=seed, batches=10, stop=rule).run(_mm1(1.0, 0.5))
        assert res.stop.met
        covered += res.stop.estimate.contains(1.0)
        horizons.append(res.stop.horizon)
    assert covered >= 24, f"{covered}/30 intervals cover R = 1"
    assert max(horizons) <= 100_000


def test_stop_rule_settings_are_checked_by_name():
    with pytest.raises(SpecError, match="^simulation.replications"):
        sim.Simulation(horizon=100, replications=3, stop=sim.StopRule("p99", 0.1, method="batch_means", max_horizon=1e4)).run(_mm1(0.5, 1.0))
    with pytest.raises(SpecError, match="^simulation.stop.max_horizon"):
        sim.Simulation(horizon=100, replications=1, stop=sim.StopRule("p99", 0.1, method="batch_means")).run(_mm1(0.5, 1.0))
