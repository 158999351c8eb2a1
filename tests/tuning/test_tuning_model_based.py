"""The model-based tuner on a synthetic server whose best pool size is known in closed form.

The server: a pool of m threads in front of one CPU (c = 1) with a downstream wait of mean Z per
request; a request's CPU time is S(m) = S (1 + k (m - 1)) (per-thread contention); N >= m
closed-loop clients with no think time, so the pool is always full and every one of its m
threads is always inside a request. The m threads are then the customers of a machine-repairman
system (m sources with mean "up" time Z, one exponential server of mean S(m)), whose throughput
is the closed form (Kleinrock, Queueing Systems vol. 1, 1975, §3.9; Jain 1991, Box 31.x):

    X(m) = (1 - p0(m)) / S(m),   p0(m) = 1 / sum_{j=0..m} m! / (m - j)! (S(m) / Z)^j.

The clients' latency is R(m) = N / X(m) (Little's law, all N always in the system), so the best
size is argmax_m X(m). Without contention (k = 0) the asymptotic bounds X <= min(m / (S + Z), 1 / S)
meet at m* = c (1 + Z / S) (Lazowska et al. 1984, ch. 5), which bounds from below the smallest size
within 1% of the saturation throughput. The tuner computes the same figures by MVA of a
two-level network, so agreement with this independent formula checks the decomposition, the
demands and the choice of the best size."""

import math

import numpy as np
import pytest

from archlab.errors import InvalidValue
from archlab.tuning import Demands, ModelBasedTuner
from archlab.tuning.model_based import measured_demands


def repairman_throughput(m: int, s: float, z: float) -> float:
    total = sum(math.factorial(m) / math.factorial(m - j) * (s / z) ** j for j in range(m + 1))
    return (1 - 1 / total) / s


@pytest.mark.parametrize(("s", "z", "k"), [(1.0, 9.0, 0.02), (2e-3, 30e-3, 0.01), (1.0, 29.0, 0.005)])
def test_best_size_is_the_closed_form_argmax(s, z, k):
    n, max_pool = 80, 60
    tuner = ModelBasedTuner(cores=1, concurrency=n, thread_cost=k, max_pool=max_pool, tolerance=0.0)
    tuner.fit(Demands(cpu_s=s, db_s=0.0, wait_s=z, sleep_s=0.0))
    x = np.array([repairman_throughput(m, s * (1 + k * (m - 1)), z) for m in range(1, max_pool + 1)])
    # MVA and the closed form are exact for this network: agreement to rounding error.
    np.testing.assert_allclose(tuner.throughput_rps_, x, rtol=1e-9)
    np.testing.assert_allclose(tuner.latency_s_, n / x, rtol=1e-9)
    assert tuner.best_size_ == int(np.argmax(x)) + 1
    assert 1 < tuner.best_size_ < max_pool  # an interior optimum: the contention term matters


def test_without_contention_the_knee_follows_the_asymptotic_bounds():
    s, z = 1.0, 9.0
    tuner = ModelBasedTuner(cores=1, concurrency=64, max_pool=40, tolerance=0.01).fit(Demands(s, 0.0, z, 0.0))
    x = [repairman_throughput(m, s, z) for m in range(1, 41)]
    expected = next(m for m in range(1, 41) if 64 / x[m - 1] <= min(64 / v for v in x) * 1.01)
    assert tuner.best_size_ == expected
    # Within 1% of saturation needs m / (S + Z) >= 0.99 / S, so m >= 0.99 c (1 + Z / S) = 9.9.
    assert tuner.best_size_ >= math.ceil(0.99 * (1 + z / s))
    assert np.all(np.diff(tuner.latency_s_) <= 1e-12)  # never worse with more threads when they are free


def test_cores_and_database_connections_raise_the_best_size():
    d = Demands(cpu_s=1e-3, db_s=2e-3, wait_s=10e-3, sleep_s=0.0)
    one = ModelBasedTuner(cores=1, concurrency=64, thread_cost=0.01, db_connections=1).fit(d).best_size_
    more = ModelBasedTuner(cores=4, concurrency=64, thread_cost=0.01, db_connections=8).fit(d).best_size_
    assert more > one


def test_bad_parameters_are_named():
    with pytest.raises(InvalidValue, match="cores: expected an integer in 1..=4096, got 0"):
        ModelBasedTuner(cores=0, concurrency=8)
    with pytest.raises(InvalidValue, match="demands.cpu_s"):
        ModelBasedTuner(cores=1, concurrency=8).fit(Demands(0.0, 0.0, 1.0, 0.0))


def test_demands_measured_at_pool_size_one_split_the_io_time_as_the_features_expect():
    expected = Demands(cpu_s=1e-3, db_s=1e-3, wait_s=3e-3, sleep_s=2e-3)
    # Measured: 12 ms per request of which 2 ms CPU; 12 - 2 - 2 (sleep) = 8 ms of I/O, split 1:3.
    d = measured_demands(expected, latency_s=12e-3, cpu_s=2e-3)
    assert (d.cpu_s, d.sleep_s) == (2e-3, 2e-3)
    assert d.db_s == pytest.approx(2e-3) and d.wait_s == pytest.approx(6e-3)
    with pytest.raises(InvalidValue, match="cpu_s: expected at most the latency"):
        measured_demands(expected, latency_s=1e-3, cpu_s=2e-3)
