"""Single-station formulas against closed forms (Jain Box 31.1-31.3), against each other (a
finite buffer large enough is the infinite one; the Erlang-B recursion is the log-space p0) and
against the refusals the issue asks for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archlab.models import (
    ModelError,
    UnstableError,
    erlang_b,
    erlang_c,
    machine_repairman,
    metrics_table,
    mm1,
    mminf,
    mmm,
    mmmb,
)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.999])
def test_mm1_box_31_1(rho):
    mu = 250.0
    s = mm1(rho * mu, mu)
    assert s.p0 == pytest.approx(1 - rho)
    assert s.mean_jobs == pytest.approx(rho / (1 - rho))
    assert s.var_jobs == pytest.approx(rho / (1 - rho) ** 2)
    assert s.mean_queue == pytest.approx(rho**2 / (1 - rho))
    assert s.mean_response == pytest.approx(1 / mu / (1 - rho))
    assert s.var_response == pytest.approx(1 / mu**2 / (1 - rho) ** 2)
    assert s.var_wait == pytest.approx((2 - rho) * rho / (mu**2 * (1 - rho) ** 2))
    for n in (1, 3, 7):
        assert s.prob_at_least(n) == pytest.approx(rho**n)
        assert s.prob_jobs(n) == pytest.approx((1 - rho) * rho**n)
    # Response time is Exp(mu (1 - rho)): q-quantile E[r] ln(1/(1-q)) (90 % -> 2.3 E[r]).
    for q in (0.5, 0.9, 0.99):
        assert s.response_quantile(q) == pytest.approx(s.mean_response * math.log(1 / (1 - q)), rel=1e-9)


@pytest.mark.parametrize("factory", [lambda: mmm(70.0, 10.0, 8), lambda: mmmb(70.0, 10.0, 8, 30), lambda: mminf(70.0, 10.0),
                                     lambda: machine_repairman(40, 0.5, 10.0, 8)])
def test_littles_law_holds_for_jobs_queue_and_time(factory):
    s = factory()
    assert s.mean_jobs == pytest.approx(s.throughput * s.mean_response, rel=1e-10)
    assert s.mean_queue == pytest.approx(s.throughput * s.mean_wait, rel=1e-10, abs=1e-15)


def test_erlang_c_recursion_equals_log_space_distribution_and_a_hand_value():
    # C(m=3, a=2): B = (8/6)/(1 + 2 + 2 + 8/6) = 4/19; C = B/(1 - rho + rho B) = 4/9 (Jain Box 31.2 by hand).
    assert erlang_b(3, 2.0) == pytest.approx(4 / 19, rel=1e-14)
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9, rel=1e-14)
    for m, a in [(1, 0.5), (8, 7.8), (64, 60.3), (300, 290.0)]:
        assert mmm(a, 1.0, m).prob_queueing == pytest.approx(erlang_c(m, a), rel=1e-10)


def test_mm1_is_mmm_with_one_server_and_erlang_c_is_rho():
    assert erlang_c(1, 0.7) == pytest.approx(0.7)
    assert mmm(7.0, 10.0, 1).mean_response == mm1(7.0, 10.0).mean_response


def test_huge_buffer_reproduces_the_infinite_queue_including_erlang_mixture_quantiles():
    # Two independent routes: closed forms + hypoexponential response time for M/M/m, an
    # explicit distribution + Erlang-mixture waiting time for M/M/m/B.
    inf, fin = mmm(75.0, 10.0, 8), mmmb(75.0, 10.0, 8, 2000)
    for name in ("p0", "prob_queueing", "mean_jobs", "var_jobs", "mean_queue", "var_queue", "mean_response",
                 "var_response", "mean_wait", "var_wait"):
        assert getattr(fin, name) == pytest.approx(getattr(inf, name), rel=1e-9), name
    for q in (0.5, 0.9, 0.99):
        assert fin.wait_quantile(q) == pytest.approx(inf.wait_quantile(q), rel=1e-7)
        assert fin.response_quantile(q) == pytest.approx(inf.response_quantile(q), rel=1e-7)
    for n in (0, 5, 8, 20):
        assert fin.prob_at_least(n) == pytest.approx(inf.prob_at_least(n), rel=1e-9)


def test_mm1b_box_31_3_distribution_and_loss():
    lam, mu, b = 9.0, 10.0, 6
    rho = lam / mu
    s = mmmb(lam, mu, 1, b)
    p = [(1 - rho) * rho**n / (1 - rho ** (b + 1)) for n in range(b + 1)]
    assert [s.prob_jobs(n) for n in range(b + 1)] == pytest.approx(p, rel=1e-12)
    assert s.loss_probability == pytest.approx(p[-1])
    assert s.throughput == pytest.approx(lam * (1 - p[-1]))
    # Stable at any load: a finite buffer driven at twice its capacity still has a steady state.
    assert mmmb(20.0, 10.0, 1, b).utilisation < 1


def test_mminf_is_poisson_and_nobody_waits():
    s = mminf(30.0, 10.0)
    assert s.mean_jobs == s.var_jobs == pytest.approx(3.0)
    assert s.p0 == pytest.approx(math.exp(-3.0))
    assert s.prob_at_least(2) == pytest.approx(1 - math.exp(-3) * 4)
    assert s.mean_wait == 0 and s.wait_quantile(0.99) == 0
    assert s.response_quantile(0.9) == pytest.approx(math.log(10) / 10)


def test_machine_repairman_one_server_closed_form():
    # m = 1 (notes/modeling.md §4.3): p0 = [sum_n N!/(N-n)! (S/Z)^n]^-1, U = 1 - p0, X = U/S.
    n_clients, z, s_time = 5, 2.0, 0.5
    p0 = 1 / sum(math.factorial(n_clients) / math.factorial(n_clients - n) * (s_time / z) ** n for n in range(n_clients + 1))
    s = machine_repairman(n_clients, z, 1 / s_time, 1)
    assert s.p0 == pytest.approx(p0, rel=1e-12)
    assert s.throughput == pytest.approx((1 - p0) / s_time, rel=1e-12)
    # Interactive response-time law R = N/X - Z.
    assert s.mean_response == pytest.approx(n_clients / s.throughput - z, rel=1e-12)


def test_machine_repairman_arrival_theorem_wait_matches_little():
    # E[W] from the Erlang mixture seen by arrivals (N-1 system) equals E[n_q]/X (time averages).
    s = machine_repairman(300, 0.1, 100.0, 16)
    assert s.mean_wait == pytest.approx(s.mean_queue / s.throughput, rel=1e-10)


def test_machine_repairman_without_think_time_keeps_everyone_at_the_station():
    s = machine_repairman(10, 0.0, 5.0, 4)
    assert s.throughput == pytest.approx(20.0)
    assert s.mean_jobs == 10 and s.mean_response == pytest.approx(0.5)


def test_machine_repairman_stays_finite_at_1000_clients_on_64_servers():
    s = machine_repairman(1000, 0.1, 100.0, 64)
    assert np.isfinite([s.throughput, s.mean_response, s.var_response, s.response_quantile(0.99)]).all()
    assert s.throughput == pytest.approx(6400.0, rel=1e-9)  # saturated: m / S
    assert s.mean_response == pytest.approx(1000 / 6400.0 - 0.1, rel=1e-9)


def test_unstable_queue_is_refused_with_the_reason():
    with pytest.raises(UnstableError, match=r"utilisation.*rho = .*unstable"):
        mm1(10.0, 10.0)
    with pytest.raises(UnstableError, match="unstable"):
        mmm(81.0, 10.0, 8)


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: mmm(1.0, 2.0, 0), "servers"),
        (lambda: mmm(1.0, -2.0, 1), "service_rate"),
        (lambda: mmm(float("nan"), 2.0, 1), "arrival_rate"),
        (lambda: mmmb(1.0, 2.0, 4, 3), "capacity"),
        (lambda: machine_repairman(0, 1.0, 1.0), "population"),
        (lambda: machine_repairman(3, -1.0, 1.0), "think_time"),
        (lambda: mm1(1.0, 2.0).response_quantile(1.0), "p"),
        (lambda: mmm(1.0, 2.0, True), "servers"),
    ],
)
def test_bad_parameters_are_named(call, parameter):
    with pytest.raises(ModelError, match=rf"^{parameter}: expected .*, got "):
        call()


def test_metrics_table_lays_stations_side_by_side():
    table = metrics_table({"VC = 1": mm1(1798.0, 7021.4), "VC = 4": mm1(6854.0, 7021.4)}, time_scale=1e3)
    assert table.columns == ("VC = 1", "VC = 4")
    assert table.value("Mean # of jobs in system", "VC = 4") == pytest.approx(6854 / (7021.4 - 6854))
    text = table.to_text()
    assert "99-percentile of waiting time" in text and "VC = 4" in text
