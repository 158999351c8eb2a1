"""Closed networks: exact MVA against published worked examples (as encoded in the test blocks of
the Octave `queueing` package, mmarzolla/queueing commit f36e01c, inst/qncsmva.m, qncmmva.m and
qncsmvaap.m, each citing its textbook page), against the log-space convolution, against the
machine-repairman birth-death solution, against the bounds, and at N = 1000 on 64 servers."""

from __future__ import annotations

import numpy as np
import pytest

from archlab.models import (
    Centre,
    ClosedNetwork,
    ModelError,
    asymptotic_bounds,
    balanced_job_bounds,
    convolution,
    exact_mva,
    exact_mva_curve,
    machine_repairman,
    schweitzer_mva,
)


def test_jain_timesharing_example_single_class():
    # Jain p. 577 (qncsmva.m test): S = [.125 .3 .2], V = [16 10 5], N = 20, Z = 4
    # -> per-visit R = [.373 4.854 .300], Q = [1.991 16.177 .500].
    visits = np.array([16, 10, 5])
    net = ClosedNetwork([Centre.queueing(n, s * v) for n, s, v in zip("cab", [0.125, 0.3, 0.2], visits)], think_time=4)
    sol = exact_mva(net, 20)
    assert sol.residence_time[:, 0] / visits == pytest.approx([0.373, 4.854, 0.300], abs=1e-3)
    assert sol.queue_length[:, 0] == pytest.approx([1.991, 16.177, 0.500], abs=1e-3)
    assert sol.queue_length[:, 0].sum() + sol.throughput[0] * 4 == pytest.approx(20)  # N = X (R + Z)


def test_bolch_8_3_single_class():
    # Bolch et al. Ex. 8.3 p. 331 (qncsmva.m test): S = [.02 .2 .4 .6], V = [1 .4 .2 .1], K = 6.
    s, v = np.array([0.02, 0.2, 0.4, 0.6]), np.array([1, 0.4, 0.2, 0.1])
    sol = exact_mva(ClosedNetwork([Centre.queueing(str(i), si * vi) for i, (si, vi) in enumerate(zip(s, v))]), 6)
    assert sol.utilisation == pytest.approx([0.198, 0.794, 0.794, 0.595], abs=1e-3)
    assert sol.residence_time[:, 0] / v == pytest.approx([0.025, 0.570, 1.140, 1.244], abs=1e-3)
    assert sol.queue_length[:, 0] == pytest.approx([0.244, 2.261, 2.261, 1.234], abs=1e-3)
    assert sol.throughput[0] * v == pytest.approx([9.920, 3.968, 1.984, 0.992], abs=1e-3)


BOLCH_8_4 = ClosedNetwork(
    [Centre.multiserver("1", 0.5, 2), Centre.queueing("2", 0.3), Centre.queueing("3", 0.4), Centre.delay("4", 1.0)]
)


@pytest.mark.parametrize("solver", [exact_mva, convolution])
def test_bolch_8_4_load_dependent_two_server_centre(solver):
    # Bolch et al. Ex. 8.4 p. 333 (qncsmva.m test): S = [.5 .6 .8 1], V = [1 .5 .5 1], m = [2 1 1 IS], N = 3
    # -> Q = [.624 .473 .686 1.217], X = [1.218 .609 .609 1.218].
    sol = solver(BOLCH_8_4, 3)
    assert sol.queue_length[:, 0] == pytest.approx([0.624, 0.473, 0.686, 1.217], abs=1e-3)
    assert sol.throughput[0] * np.array([1, 0.5, 0.5, 1]) == pytest.approx([1.218, 0.609, 0.609, 1.218], abs=1e-3)


def test_lazowska_p142_two_classes_exact_fractions():
    # Lazowska et al., QSP p. 142 (qncmmva.m test): S = [1/10 1/3; 2/5 1], V = [10 9; 5 4], N = [1 1]
    # -> Q = [4/19 15/19; 5/19 14/19], R.V = [4/3 5; 5/2 7], X = [3/19 2/19].
    net = ClosedNetwork([Centre.queueing("cpu", [1.0, 2.0]), Centre.queueing("disk", [3.0, 4.0])])
    sol = exact_mva(net, [1, 1])
    assert sol.queue_length == pytest.approx(np.array([[4, 5], [15, 14]]) / 19, rel=1e-12)
    assert sol.residence_time == pytest.approx(np.array([[4 / 3, 5 / 2], [5, 7]]), rel=1e-12)
    assert sol.throughput == pytest.approx([3 / 19, 2 / 19], rel=1e-12)


def test_schwetman_table5_two_classes_with_delay_centres():
    # Schwetman, CSD-TR-355 (1982) Table 5 (qncmmva.m test): IS centres with S = 1 and 15, a PS
    # centre with S = [.025 .5], N = [15 5] -> X = [14.323 .314], R_ps = [.047 .934], Q_ps = [.677 .293].
    net = ClosedNetwork([Centre.delay("apl", [1.0, 0.0]), Centre.delay("ims", [0.0, 15.0]), Centre.queueing("sys", [0.025, 0.5])])
    sol = exact_mva(net, [15, 5])
    assert sol.throughput == pytest.approx([14.323, 0.314], abs=1e-3)
    assert sol.residence_time[2] == pytest.approx([0.047, 0.934], abs=1e-3)
    assert sol.queue_length[2] == pytest.approx([0.677, 0.293], abs=1e-3)


def test_bolch_9_5_two_classes_with_a_two_server_centre():
    # Bolch et al. Ex. 9.5 p. 337 (qncmmva.m test): S = [.2 .4 1; .2 .6 2], V = [1 .6 .4; 1 .3 .7],
    # m = [2 1 IS], N = [2 1] -> Q = [.428 .726 .845; .108 .158 .734].
    d = np.array([[0.2, 0.4, 1], [0.2, 0.6, 2]]) * np.array([[1, 0.6, 0.4], [1, 0.3, 0.7]])
    net = ClosedNetwork([Centre.multiserver("1", d[:, 0], 2), Centre.queueing("2", d[:, 1]), Centre.delay("3", d[:, 2])])
    sol = exact_mva(net, [2, 1])
    assert sol.queue_length.T == pytest.approx(np.array([[0.428, 0.726, 0.845], [0.108, 0.158, 0.734]]), abs=1e-3)
    assert sol.probability_error < 1e-12


def test_lazowska_p117_schweitzer():
    # Lazowska et al., QSP p. 117 (qncsmvaap.m test): S = [.605 2.1 1.35], N = 3, Z = 15
    # -> Q = [.0973 .4021 .2359], X = .1510, R = 4.87.
    net = ClosedNetwork([Centre.queueing(str(i), s) for i, s in enumerate([0.605, 2.1, 1.35])], think_time=15)
    sol = schweitzer_mva(net, 3)
    assert sol.queue_length[:, 0] == pytest.approx([0.0973, 0.4021, 0.2359], abs=1e-3)
    assert sol.throughput[0] == pytest.approx(0.1510, abs=1e-3)
    assert sol.response_time[0] == pytest.approx(4.87, abs=1e-2)


def test_schweitzer_is_close_to_exact_and_exact_at_one_job():
    net = ClosedNetwork([Centre.queueing("a", 0.2), Centre.queueing("b", 0.1), Centre.delay("net", 0.05)], think_time=1.0)
    assert schweitzer_mva(net, 1).throughput == pytest.approx(exact_mva(net, 1).throughput, rel=1e-9)
    assert schweitzer_mva(net, 30).throughput == pytest.approx(exact_mva(net, 30).throughput, rel=0.05)


@pytest.mark.parametrize(("n", "z", "mu", "m"), [(5, 2.0, 2.0, 1), (20, 0.1, 100.0, 4), (200, 0.1, 100.0, 16), (60, 0.0, 3.0, 8)])
def test_machine_repairman_equals_mva_and_convolution(n, z, mu, m):
    rep = machine_repairman(n, z, mu, m)
    net = ClosedNetwork([Centre.multiserver("station", 1 / mu, m)], think_time=z)
    for sol in (exact_mva(net, n), convolution(net, n)):
        assert sol.throughput[0] == pytest.approx(rep.throughput, rel=1e-10)
        assert sol.response_time[0] == pytest.approx(rep.mean_response, rel=1e-10)
        assert sol.utilisation[0] == pytest.approx(rep.utilisation, rel=1e-10)
        if m > 1:
            assert sol.marginals["station"] == pytest.approx([rep.prob_jobs(k) for k in range(n + 1)], rel=1e-8, abs=1e-300)


def test_exact_mva_equals_convolution_on_a_mixed_network():
    net = ClosedNetwork(
        [Centre.queueing("net", 0.004), Centre.multiserver("workers", 0.03, 8), Centre.delay("server", 0.02),
         Centre.load_dependent("disk", 0.01, [1.0, 1.6, 2.0])],
        think_time=0.05,
    )
    a, b = exact_mva(net, 40), convolution(net, 40)
    assert a.throughput == pytest.approx(b.throughput, rel=1e-10)
    assert a.queue_length == pytest.approx(b.queue_length, rel=1e-9)
    assert a.utilisation[[0, 1, 3]] == pytest.approx(b.utilisation[[0, 1, 3]], rel=1e-9)


def test_stable_at_1000_clients_on_a_64_server_centre():
    # The textbook recursion (P(0) = 1 - sum) already fails at M/M/16 with 200 clients
    # (notes/modeling.md §2.5); here the curve must stay finite, monotone, inside the bounds
    # and equal to the birth-death solution at every N checked.
    net = ClosedNetwork([Centre.multiserver("pool", 0.01, 64)], think_time=0.1)
    curve = exact_mva_curve(net, 1000)
    x = curve.throughput
    assert np.isfinite(x).all() and np.isfinite(curve.response_time).all()
    assert (np.diff(x) >= -1e-9 * x[1:]).all()
    assert (np.diff(curve.response_time) >= -1e-12).all()
    for n in (1, 64, 110, 300, 1000):
        b = asymptotic_bounds(net, n)
        assert b.throughput_lower * (1 - 1e-12) <= x[n - 1] <= b.throughput_upper * (1 + 1e-12)
        assert x[n - 1] == pytest.approx(machine_repairman(n, 0.1, 100.0, 64).throughput, rel=1e-9)
    assert x[-1] == pytest.approx(64 / 0.01, rel=1e-12)  # saturated at m / D
    assert exact_mva(net, 1000).probability_error < 1e-9


def test_exact_mva_lies_within_asymptotic_and_balanced_job_bounds():
    rng = np.random.default_rng(20240601)
    for _ in range(25):
        demands = rng.uniform(0.01, 0.5, size=rng.integers(2, 6))
        z = float(rng.choice([0.0, rng.uniform(0.1, 5.0)]))
        net = ClosedNetwork([Centre.queueing(f"d{i}", d) for i, d in enumerate(demands)], think_time=z)
        curve = exact_mva_curve(net, 60)
        for n in (1, 2, 5, 17, 60):
            x, r = curve.throughput[n - 1], curve.response_time[n - 1]
            for b in (asymptotic_bounds(net, n), balanced_job_bounds(net, n)):
                assert b.throughput_lower * (1 - 1e-12) <= x <= b.throughput_upper * (1 + 1e-12)
                assert b.response_lower * (1 - 1e-12) <= r <= b.response_upper * (1 + 1e-12)


def test_bounds_name_the_bottleneck_and_knee():
    net = ClosedNetwork([Centre.queueing("cpu", 0.2), Centre.queueing("disk", 0.5), Centre.delay("lan", 0.3)], think_time=2.0)
    b = asymptotic_bounds(net, 10)
    assert b.bottleneck == "disk"
    assert b.knee == pytest.approx((0.7 + 2.3) / 0.5)
    assert b.throughput_upper == pytest.approx(min(10 / 3.0, 2.0))


def test_network_refusals_name_the_parameter():
    with pytest.raises(ModelError, match="^population: expected one count per class"):
        exact_mva(ClosedNetwork([Centre.queueing("a", [1.0, 2.0])]), 3)
    with pytest.raises(ModelError, match="^centres: expected the same number of class demands"):
        ClosedNetwork([Centre.queueing("a", [1.0, 2.0]), Centre.queueing("b", 1.0)])
    with pytest.raises(ModelError, match="^disk.kind: expected queueing or delay centres for balanced job bounds"):
        balanced_job_bounds(ClosedNetwork([Centre.load_dependent("disk", 1.0, [1, 2])]), 3)
    with pytest.raises(ModelError, match="^a.demand: expected a finite number >= 0"):
        Centre.queueing("a", -1.0)
