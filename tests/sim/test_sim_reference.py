"""The simulator against closed forms and exact MVA (archlab.models, itself tested against
published values): M/M/1, M/M/m, the machine-repairman model with think time (mean and response
quantiles), a closed chain with a delay and a multi-server station, and M/G/1 with gamma and
log-normal service (Pollaczek-Khinchine). Warm-up is removed; see conftest for tolerances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archlab import sim
from archlab.models import Centre, ClosedNetwork, exact_mva, machine_repairman, mm1, mmm
from sim_helpers import HDR_RELATIVE, assert_within, run_checked

RUN = sim.Simulation(horizon=22_000, warmup=2_000, replications=12, seed=11)


@pytest.fixture
def mm1_model():
    """M/M/1 with lambda = 0.8, mu = 1 (rho = 0.8)."""
    m = sim.Model()
    cpu = m.station("cpu")
    m.open("requests", rate=0.8, route=[sim.serve(cpu, sim.Exponential(1.0))])
    return m


def test_mm1_mean_quantiles_and_station(mm1_model):
    # Reference: archlab.models.mm1 (Jain Box 31.1): R = 1/(mu - lambda) = 5, r_q = R ln(1/(1-q)).
    exact = mm1(0.8, 1.0)
    res = run_checked(mm1_model, RUN)
    r = res.response
    assert_within(r.throughput, 0.8, what="X")
    assert_within(r.mean, exact.mean_response, what="R")
    for q, est in [(0.5, r.p50), (0.9, r.p90), (0.99, r.p99)]:
        ref = exact.response_quantile(q)
        assert_within(est, ref, bias=HDR_RELATIVE * ref, what=f"p{q}")
    cpu = res.stations["cpu"]
    assert_within(cpu.utilisation, 0.8, what="U")
    assert_within(cpu.mean_jobs, exact.mean_jobs, what="N")
    assert_within(cpu.mean_queue, exact.mean_queue, what="Nq")


def test_mmm_erlang_c():
    # Reference: archlab.models.mmm (Jain Box 31.2, Erlang C): m = 4, lambda = 3.2, mu = 1.
    exact = mmm(3.2, 1.0, 4)
    m = sim.Model()
    pool = m.station("pool", servers=4)
    m.open("requests", rate=3.2, route=[sim.serve(pool, sim.Exponential(1.0))])
    res = run_checked(m, RUN)
    assert_within(res.response.mean, exact.mean_response, what="R")
    ref = exact.response_quantile(0.99)
    assert_within(res.response.p99, ref, bias=HDR_RELATIVE * ref, what="p99")
    assert_within(res.stations["pool"].mean_queue, exact.mean_queue, what="Nq")
    assert_within(res.stations["pool"].utilisation, 0.8, what="U")


def test_machine_repairman_with_think_time():
    # Reference: archlab.models.machine_repairman (notes/modeling.md §4.3, birth-death
    # solution; quantiles by the arrival theorem): N = 30, Z = 4, S = 0.25, m = 2.
    exact = machine_repairman(30, 4.0, 1 / 0.25, servers=2)
    m = sim.Model()
    cpu = m.station("cpu", servers=2)
    m.closed("users", clients=30, think=sim.Exponential(4.0), route=[sim.serve(cpu, sim.Exponential(0.25))])
    res = run_checked(m, sim.Simulation(horizon=5_500, warmup=500, replications=12, seed=3))
    assert_within(res.response.throughput, exact.throughput, what="X")
    assert_within(res.response.mean, exact.mean_response, what="R")
    for q, est in [(0.5, res.response.p50), (0.9, res.response.p90), (0.99, res.response.p99)]:
        ref = exact.response_quantile(q)
        assert_within(est, ref, bias=HDR_RELATIVE * ref, what=f"p{q}")
    assert_within(res.stations["cpu"].utilisation, exact.utilisation, what="U")


def test_closed_chain_against_exact_mva():
    # Reference: archlab.models.exact_mva on the same product-form network: think Z = 2,
    # a 4-server CPU (S = 0.1), a disk (S = 0.08) and a network delay (0.05), N = 40.
    net = ClosedNetwork([Centre.multiserver("cpu", 0.1, 4), Centre.queueing("disk", 0.08), Centre.delay("net", 0.05)],
                        think_time=2.0)
    exact = exact_mva(net, 40)
    m = sim.Model()
    cpu, disk = m.station("cpu", servers=4), m.station("disk")
    net_st = m.station("net", discipline="delay")
    m.closed("users", clients=40, think=sim.Exponential(2.0),
             route=[sim.serve(cpu, sim.Exponential(0.1)), sim.serve(disk, sim.Exponential(0.08)),
                    sim.serve(net_st, sim.Exponential(0.05))])
    res = run_checked(m, sim.Simulation(horizon=2_200, warmup=200, replications=12, seed=5))
    assert_within(res.response.throughput, float(exact.throughput[0]), what="X")
    assert_within(res.response.mean, float(exact.response_time[0]), what="R")
    for i, name in enumerate(["cpu", "disk", "net"]):
        assert_within(res.stations[name].mean_jobs, float(exact.queue_length[i, 0]), what=f"Q {name}")
        assert_within(res.stations[name].mean_residence, float(exact.residence_time[i, 0]), what=f"R {name}")
    assert res.stations["net"].utilisation is None  # a delay station has no utilisation
    assert_within(res.stations["disk"].utilisation, float(exact.utilisation[1]), what="U disk")


def test_mg1_pollaczek_khinchine_gamma_lognormal_empirical():
    # Reference: Pollaczek-Khinchine mean-value formula (Kleinrock 1975, Queueing Systems I,
    # ch. 5): W = lambda E[S^2] / (2 (1 - rho)), E[S^2] = E[S]^2 (1 + cv^2); lambda = 0.7, E[S] = 1.
    lam = 0.7
    for service, cv2 in [(sim.Gamma(1.0, 0.5), 0.25), (sim.LogNormal(1.0, 1.5), 2.25),
                         (sim.Empirical([0.5, 1.5]), 0.25), (sim.Deterministic(1.0), 0.0)]:
        m = sim.Model()
        cpu = m.station("cpu")
        m.open("requests", rate=lam, route=[sim.serve(cpu, service)])
        res = run_checked(m, RUN)
        exact = 1.0 + lam * (1 + cv2) / (2 * (1 - lam))
        assert_within(res.response.mean, exact, what=f"{service}")


def test_processor_sharing_is_insensitive():
    # Reference: M/G/1-PS (Kleinrock 1976, Queueing Systems II, §4.4): E[R] = E[S]/(1 - rho)
    # whatever the service distribution; and M/M/m-PS with m = 2 servers shares the M/M/2 mean
    # number in system only for FCFS, so we check the 1-server law for two distributions.
    for service in [sim.Exponential(1.0), sim.Deterministic(1.0), sim.LogNormal(1.0, 2.0)]:
        m = sim.Model()
        cpu = m.station("cpu", discipline="ps")
        m.open("requests", rate=0.6, route=[sim.serve(cpu, service)])
        res = run_checked(m, RUN)
        assert_within(res.response.mean, 1.0 / (1 - 0.6), what=f"PS {service}")
        assert_within(res.stations["cpu"].utilisation, 0.6, what="U")


def test_response_time_distribution_of_the_saturated_closed_model():
    # Exact, from the model's structure (Fig. 8.2 with k = 1 core): with no think time the
    # station always holds N jobs, so a request waits for the N - 1 ahead of it plus its own
    # service: R ~ Gamma(N, S) (memoryless residual of the job in service).
    from scipy import stats

    m = sim.Model()
    core = m.station("core")
    m.closed("clients", clients=20, route=[sim.serve(core, sim.Exponential(0.025))])
    res = run_checked(m, sim.Simulation(horizon=1_050, warmup=50, replications=8, seed=2))
    gamma = stats.gamma(20, scale=0.025)
    assert_within(res.response.mean, gamma.mean(), what="R")
    for q, est in [(0.5, res.response.p50), (0.99, res.response.p99)]:
        ref = float(gamma.ppf(q))
        assert_within(est, ref, bias=HDR_RELATIVE * ref, what=f"p{q}")
    assert np.isclose(res.stations["core"].mean_jobs.mean, 20.0)
    assert math.isclose(res.stations["core"].utilisation.mean, 1.0)
