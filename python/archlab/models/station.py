"""The typed result of every single-station queueing model: :class:`StationMetrics` carries the
metrics of seed 002 Table 21 (Jain Box 31.1/31.2: utilisation, probabilities, mean and variance of
jobs in system and in queue, of response and waiting time, and their quantiles) plus the
distribution objects that answer P(n jobs), P(>= n jobs) and quantiles on demand.
:func:`metrics_table` lays several stations side by side the way the seed's Tables 22-30 do."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from archlab.models.waiting import WaitingTime


class JobsDistribution:
    """Distribution of the number of jobs in the station (in steady state, time averaged)."""

    def pmf(self, n: int) -> float:
        raise NotImplementedError

    def at_least(self, n: int) -> float:
        raise NotImplementedError


class FiniteJobs(JobsDistribution):
    """Jobs distribution over 0..K given as an array (finite buffer or population)."""

    def __init__(self, p: np.ndarray):
        self.p = np.asarray(p, dtype=float)
        # Tail sums from the right, so that P(N >= n) is exact even where it is tiny.
        self._tail = np.cumsum(self.p[::-1])[::-1]

    def pmf(self, n: int) -> float:
        return float(self.p[n]) if 0 <= n < self.p.size else 0.0

    def at_least(self, n: int) -> float:
        if n <= 0:
            return 1.0
        return float(self._tail[n]) if n < self.p.size else 0.0

    def moments(self, servers: int) -> tuple[float, float, float, float]:
        """Mean and variance of jobs in system, then of jobs in queue (beyond ``servers``)."""
        n = np.arange(self.p.size, dtype=float)
        nq = np.maximum(n - servers, 0.0)
        return (*_mean_var(n, self.p), *_mean_var(nq, self.p))


class GeometricTailJobs(JobsDistribution):
    """M/M/m with unlimited buffer: p_0..p_{m-1} explicit, p_n = p_m rho^(n-m) beyond."""

    def __init__(self, head: np.ndarray, p_m: float, rho: float):
        self.head = np.asarray(head, dtype=float)
        self.p_m = p_m
        self.rho = rho

    def pmf(self, n: int) -> float:
        if n < 0:
            return 0.0
        m = self.head.size
        return float(self.head[n]) if n < m else self.p_m * self.rho ** (n - m)

    def at_least(self, n: int) -> float:
        m = self.head.size
        if n >= m:
            return self.p_m * self.rho ** (n - m) / (1.0 - self.rho)
        return self.p_m / (1.0 - self.rho) + float(self.head[max(n, 0):].sum())


class PoissonJobs(JobsDistribution):
    """M/M/inf: the number of busy servers is Poisson with mean lambda/mu."""

    def __init__(self, mean: float):
        self.mean = mean

    def pmf(self, n: int) -> float:
        return float(stats.poisson.pmf(n, self.mean))

    def at_least(self, n: int) -> float:
        return 1.0 if n <= 0 else float(stats.poisson.sf(n - 1, self.mean))


@dataclass(frozen=True)
class StationMetrics:
    """Steady-state metrics of one station. Times are in the reciprocal unit of the rates
    (rates per second give seconds). ``servers`` is ``math.inf`` for M/M/inf."""

    model: str
    arrival_rate: float  # offered (open) or effective (closed) arrival rate
    service_rate: float  # of one server
    servers: float
    throughput: float  # accepted jobs per unit time
    traffic_intensity: float  # rho = lambda / (m mu), offered
    utilisation: float  # busy fraction of one server, carried: throughput / (m mu)
    p0: float
    prob_queueing: float  # P(an accepted job waits)
    loss_probability: float
    mean_jobs: float
    var_jobs: float
    mean_queue: float
    var_queue: float
    mean_response: float
    var_response: float
    mean_wait: float
    var_wait: float
    jobs: JobsDistribution = field(repr=False, compare=False)
    wait: WaitingTime = field(repr=False, compare=False)

    def prob_jobs(self, n: int) -> float:
        """P(exactly n jobs in the station)."""
        return self.jobs.pmf(n)

    def prob_at_least(self, n: int) -> float:
        """P(n or more jobs in the station)."""
        return self.jobs.at_least(n)

    def response_quantile(self, p: float) -> float:
        """The p-quantile (0 < p < 1) of the response time of an accepted job."""
        return self.wait.response_quantile(p)

    def wait_quantile(self, p: float) -> float:
        """The p-quantile (0 < p < 1) of the waiting time of an accepted job."""
        return self.wait.quantile(p)

    def rows(
        self,
        quantiles: Sequence[float] = (0.9, 0.99),
        at_least: Sequence[int] = (5, 10),
        time_scale: float = 1.0,
    ) -> list[tuple[str, float]]:
        """(label, value) pairs in the order of seed 002 Table 21; times multiplied by
        ``time_scale`` (1000 turns seconds into the seed's milliseconds)."""
        ts = time_scale
        out: list[tuple[str, float]] = [
            ("Arrival rate", self.arrival_rate),
            ("Service rate (per server)", self.service_rate),
            ("Servers m", self.servers),
            ("Throughput", self.throughput),
            ("Traffic intensity rho", self.traffic_intensity),
            ("Utilisation (per server)", self.utilisation),
            ("Prob. of 0 jobs in system", self.p0),
            ("Prob. of queueing", self.prob_queueing),
            ("Loss probability", self.loss_probability),
        ]
        out += [(f"Prob. of >= {n} jobs in system", self.prob_at_least(n)) for n in at_least]
        out += [
            ("Mean # of jobs in system", self.mean_jobs),
            ("Var. of # of jobs in system", self.var_jobs),
            ("Mean # of jobs in queue", self.mean_queue),
            ("Var. of # of jobs in queue", self.var_queue),
            ("Mean response time", self.mean_response * ts),
            ("Var. of response time", self.var_response * ts**2),
        ]
        out += [(f"{_pct(q)}-percentile of response time", self.response_quantile(q) * ts) for q in quantiles]
        out += [
            ("Mean waiting time", self.mean_wait * ts),
            ("Var. of waiting time", self.var_wait * ts**2),
        ]
        out += [(f"{_pct(q)}-percentile of waiting time", self.wait_quantile(q) * ts) for q in quantiles]
        return out


@dataclass(frozen=True)
class MetricsTable:
    """Metrics (rows) of several stations (columns), like the seed's Tables 22-30."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[float, ...]], ...]

    def value(self, metric: str, column: str) -> float:
        for label, values in self.rows:
            if label == metric:
                return values[self.columns.index(column)]
        raise KeyError(metric)

    def to_text(self, digits: int = 5) -> str:
        cells = [["Metric", *self.columns]]
        cells += [[label, *(_fmt(v, digits) for v in values)] for label, values in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
        lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
        return "\n".join(lines)


def metrics_table(
    stations: Mapping[str, StationMetrics],
    quantiles: Sequence[float] = (0.9, 0.99),
    at_least: Sequence[int] = (5, 10),
    time_scale: float = 1.0,
) -> MetricsTable:
    """Side-by-side table of stations keyed by column name (e.g. ``{"VC = 4": mm1(...)}``)."""
    per_column = [s.rows(quantiles, at_least, time_scale) for s in stations.values()]
    labels = [label for label, _ in per_column[0]] if per_column else []
    rows = tuple((label, tuple(col[i][1] for col in per_column)) for i, label in enumerate(labels))
    return MetricsTable(columns=tuple(stations), rows=rows)


def _mean_var(x: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    mean = float(np.dot(x, p))
    return mean, max(float(np.dot((x - mean) ** 2, p)), 0.0)


def _pct(q: float) -> str:
    return f"{q * 100:g}"


def _fmt(v: float, digits: int) -> str:
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return str(v)
    return f"{v:.{digits}g}" if abs(v) < 1e-3 and v != 0 else f"{round(v, digits):,}"
