"""The model-based pool-size tuner: a program's per-resource demands (measured once, at pool size
1, or read from its features) feed a queueing network of :mod:`archlab.models`, which predicts
latency and throughput at every pool size, and hence the best size, without a sweep.

The network is a hierarchical (flow-equivalent server) decomposition, the textbook treatment of
a pool that holds a thread across several resources (Lazowska et al., *Quantitative System
Performance*, 1984, ch. 8 "flow-equivalent service centers"). Inside, the m threads of the pool
circulate through the CPU (a multi-server centre of ``cores`` servers), PostgreSQL (a multi-server
centre of ``db_connections``) and the waits for the downstream and sleeps (a delay centre); exact
MVA of that inner network at populations 1..m gives the pool's throughput X(j) with j requests
in service. Outside, the ``concurrency`` clients (with ``think_time_s``) queue for the pool, a
load-dependent centre whose rate with j requests present is X(min(j, m)); exact MVA of that outer
network gives the latency a client sees, queueing for a thread included.

Threads are not free: ``thread_cost`` inflates the CPU demand of a request by that fraction per
thread beyond the first (context switches, cache and lock contention grow with the pool), which
is what makes a too-large pool slower and gives an interior optimum; with ``thread_cost=0`` latency
only flattens as m grows, and :attr:`ModelBasedTuner.best_size_` is the smallest size within
``tolerance`` of the lowest predicted latency."""

from __future__ import annotations

import math

import numpy as np

from archlab.errors import InvalidValue
from archlab.models import Centre, ClosedNetwork, exact_mva, exact_mva_curve
from archlab.tuning.features import Demands

POOL_MAX = 1024


class ModelBasedTuner:
    """Predict latency vs pool size from demands; construct, :meth:`fit`, read the ``_`` attributes."""

    def __init__(self, *, cores: int, concurrency: int, think_time_s: float = 0.0, db_connections: int = 1,
                 thread_cost: float = 0.0, max_pool: int = 64, tolerance: float = 0.01):
        self.cores = _int("cores", cores, 1, 4096)
        self.concurrency = _int("concurrency", concurrency, 1, 100_000)
        self.think_time_s = _float("think_time_s", think_time_s)
        self.db_connections = _int("db_connections", db_connections, 1, 4096)
        self.thread_cost = _float("thread_cost", thread_cost)
        self.max_pool = _int("max_pool", max_pool, 1, POOL_MAX)
        self.tolerance = _float("tolerance", tolerance)

    def pool_throughput(self, demands: Demands, pool_size: int) -> np.ndarray:
        """X(j), j = 1..pool_size: requests per second the pool completes with j in service."""
        cpu = demands.cpu_s * (1 + self.thread_cost * (pool_size - 1))
        centres = [Centre.multiserver("cpu", cpu, self.cores)]
        if demands.db_s > 0:
            centres.append(Centre.multiserver("db", demands.db_s, self.db_connections))
        if demands.wait_s + demands.sleep_s > 0:
            centres.append(Centre.delay("wait", demands.wait_s + demands.sleep_s))
        return exact_mva_curve(ClosedNetwork(centres), pool_size).throughput

    def predict_at(self, demands: Demands, pool_size: int) -> tuple[float, float]:
        """(latency seen by a client in seconds, throughput in requests/s) at ``pool_size``."""
        m = _int("pool_size", pool_size, 1, POOL_MAX)
        x = self.pool_throughput(demands, m)
        pool = Centre.load_dependent("pool", 1.0 / x[0], x / x[0])
        sol = exact_mva(ClosedNetwork([pool], self.think_time_s), self.concurrency)
        return float(sol.response_time[0]), float(sol.throughput[0])

    def fit(self, demands: Demands) -> ModelBasedTuner:
        if demands.total_s <= 0 or demands.cpu_s <= 0:
            raise InvalidValue("demands.cpu_s", "CPU demand > 0 seconds per request", demands.cpu_s)
        self.sizes_ = np.arange(1, self.max_pool + 1)
        pairs = [self.predict_at(demands, int(m)) for m in self.sizes_]
        self.latency_s_ = np.array([p[0] for p in pairs])
        self.throughput_rps_ = np.array([p[1] for p in pairs])
        limit = self.latency_s_.min() * (1 + self.tolerance)
        self.best_size_ = int(self.sizes_[np.argmax(self.latency_s_ <= limit)])
        return self

    def predict(self, pool_sizes) -> np.ndarray:
        """Predicted latency (seconds) at each of ``pool_sizes`` (from the fitted curve)."""
        sizes = np.atleast_1d(np.asarray(pool_sizes, dtype=int))
        if np.any(sizes < 1) or np.any(sizes > self.max_pool):
            raise InvalidValue("pool_sizes", f"sizes in 1..={self.max_pool}", sizes.tolist())
        return self.latency_s_[sizes - 1]


def measured_demands(features: Demands, latency_s: float, cpu_s: float) -> Demands:
    """Demands from one measurement at pool size 1 and one client, where nothing queues: a
    request's mean latency ``latency_s`` is the time it holds its thread, and ``cpu_s`` (the
    server's CPU seconds over the requests it completed) its CPU part. The rest is split between
    PostgreSQL, downstream waits and sleeps in the proportions ``features`` expects
    (:attr:`archlab.tuning.features.Features.demands`); sleeps are taken as written."""
    latency = _float("latency_s", latency_s)
    cpu = _float("cpu_s", cpu_s)
    if cpu > latency:
        raise InvalidValue("cpu_s", f"at most the latency ({latency} s)", cpu)
    rest = max(0.0, latency - cpu - features.sleep_s)
    io = features.db_s + features.wait_s
    db_share = features.db_s / io if io > 0 else 0.0
    return Demands(cpu_s=cpu, db_s=rest * db_share, wait_s=rest * (1 - db_share), sleep_s=features.sleep_s)


def _int(name: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise InvalidValue(name, f"an integer in {lo}..={hi}", v)
    return int(v)


def _float(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InvalidValue(name, "a finite number >= 0", v)
    return float(v)
