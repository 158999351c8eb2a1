"""Single-station queueing models as pure functions returning :class:`StationMetrics`:
M/M/1, M/M/m (Erlang C), M/M/m/B (finite capacity B, arrivals beyond it are lost), M/M/inf and
the closed machine-repairman M/M/m//N (N clients thinking for Z between requests). Formulas
follow Jain, *The Art of Computer Systems Performance Analysis* (1991), Boxes 31.1-31.3, as
tabulated in seed 002 Tables 21 and 26. Probabilities are normalised in log space, so that a
64-server station or a population of thousands neither overflows the factorials nor loses the
small probabilities; the Erlang formulas use the stable Erlang-B recursion."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from archlab.models import _check
from archlab.models.errors import ModelError, UnstableError
from archlab.models.station import FiniteJobs, GeometricTailJobs, PoissonJobs, StationMetrics
from archlab.models.waiting import ErlangMixtureWait, ExponentialWait, WaitingTime


# The exact models below hold one probability per state (jobs present 0..servers, 0..capacity or
# 0..population), so their cost grows with it: a million states take about 15 s (M/M/m//N), a
# hundred million servers took 6 GB of memory, and no measured system is that big.
MAX_STATES = 1_000_000
_STATES_WHY = "the model holds one probability per state, and its cost grows with them"


def erlang_b(servers: int, offered_load: float) -> float:
    """Blocking probability of M/M/m/m with offered load a = lambda/mu (Erlang B).

    Recursion B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1}): every step is a ratio of positive
    numbers, so it neither overflows (a^m / m!) nor cancels.
    """
    m = _check.count("servers", servers)
    a = _check.non_negative("offered_load", offered_load)
    b = 1.0
    for k in range(1, m + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/m (Erlang C); requires a < m."""
    m = _check.count("servers", servers)
    a = _check.non_negative("offered_load", offered_load)
    rho = a / m
    _require_stable(rho, "offered_load / servers")
    b = erlang_b(m, a)
    return b / (1.0 - rho + rho * b)


def mm1(arrival_rate: float, service_rate: float) -> StationMetrics:
    """M/M/1 (Jain Box 31.1, seed 002 Table 21)."""
    return mmm(arrival_rate, service_rate, 1)


def mmm(arrival_rate: float, service_rate: float, servers: int) -> StationMetrics:
    """M/M/m with unlimited buffer, FCFS (Jain Box 31.2, seed 002 Table 26).

    ``service_rate`` is the rate of one server; raises :class:`UnstableError` when
    rho = arrival_rate / (servers * service_rate) >= 1.
    """
    lam = _check.positive("arrival_rate", arrival_rate)
    mu = _check.positive("service_rate", service_rate)
    m = _check.count("servers", servers, maximum=MAX_STATES, why=_STATES_WHY)
    a = lam / mu
    rho = a / m
    _require_stable(rho, f"arrival_rate / (servers * service_rate) = {lam:g} / ({m} * {mu:g})")
    # log of the unnormalised p_n for n < m, and of the whole geometric tail n >= m.
    n = np.arange(m)
    log_head = n * math.log(a) - special.gammaln(n + 1)
    log_pm = m * math.log(a) - special.gammaln(m + 1)
    log_tail = log_pm - math.log1p(-rho)
    log_norm = special.logsumexp(np.append(log_head, log_tail))
    head = np.exp(log_head - log_norm)
    delta = math.exp(log_tail - log_norm)  # Erlang C: P(n >= m)
    one_minus = 1.0 - rho
    mean_queue = rho * delta / one_minus
    var_queue = delta * rho * (1.0 + rho - delta * rho) / one_minus**2
    wait = ExponentialWait(delta, m * mu * one_minus, mu)
    return StationMetrics(
        model=f"M/M/{m}",
        arrival_rate=lam,
        service_rate=mu,
        servers=m,
        throughput=lam,
        traffic_intensity=rho,
        utilisation=rho,
        p0=float(head[0]),
        prob_queueing=delta,
        loss_probability=0.0,
        mean_jobs=m * rho + mean_queue,
        var_jobs=m * rho + rho * delta * ((1.0 + rho - rho * delta) / one_minus**2 + m),
        mean_queue=mean_queue,
        var_queue=var_queue,
        **_time_metrics(wait),
        jobs=GeometricTailJobs(head, math.exp(log_pm - log_norm), rho),
        wait=wait,
    )


def mmmb(arrival_rate: float, service_rate: float, servers: int, capacity: int) -> StationMetrics:
    """M/M/m/B: at most ``capacity`` jobs in the station (queue + service); arrivals finding it
    full are lost (Jain Box 31.3). Stable for any load; response and waiting times are those of
    accepted jobs, which by PASTA see the time-average distribution truncated below B."""
    lam = _check.positive("arrival_rate", arrival_rate)
    mu = _check.positive("service_rate", service_rate)
    m = _check.count("servers", servers, maximum=MAX_STATES, why=_STATES_WHY)
    b = _check.count("capacity", capacity, maximum=MAX_STATES, why=_STATES_WHY)
    if b < m:
        raise ModelError("capacity", f"an integer >= servers ({m})", capacity, "capacity counts the jobs in service too")
    n = np.arange(b + 1)
    log_w = n * math.log(lam / mu) - _log_rate_product(n, m)
    p = _normalise(log_w)
    accepted = 1.0 - p[-1]
    seen = p[:-1] / accepted  # what an accepted arrival finds
    return _finite_station(f"M/M/{m}/{b}", lam, lam * accepted, mu, m, p, seen, loss=float(p[-1]))


def mminf(arrival_rate: float, service_rate: float) -> StationMetrics:
    """M/M/inf (a delay centre): nobody waits, the number in service is Poisson(lambda/mu)."""
    lam = _check.positive("arrival_rate", arrival_rate)
    mu = _check.positive("service_rate", service_rate)
    a = lam / mu
    wait = ExponentialWait(0.0, 1.0, mu)
    return StationMetrics(
        model="M/M/inf",
        arrival_rate=lam,
        service_rate=mu,
        servers=math.inf,
        throughput=lam,
        traffic_intensity=math.nan,  # undefined: the capacity is infinite
        utilisation=math.nan,
        p0=math.exp(-a),
        prob_queueing=0.0,
        loss_probability=0.0,
        mean_jobs=a,
        var_jobs=a,
        mean_queue=0.0,
        var_queue=0.0,
        **_time_metrics(wait),
        jobs=PoissonJobs(a),
        wait=wait,
    )


def machine_repairman(population: int, think_time: float, service_rate: float, servers: int = 1) -> StationMetrics:
    """Closed M/M/m//N: ``population`` clients alternate an exponential think time (mean
    ``think_time``, 0 allowed) and a request to an m-server FCFS station. ``arrival_rate`` and
    ``throughput`` of the result are the station's throughput X; the interactive response-time
    law R = N/X - Z holds. Arrivals see the distribution of the same system with N-1 clients
    (arrival theorem), which gives the waiting-time distribution."""
    big_n = _check.count("population", population, maximum=MAX_STATES, why=_STATES_WHY)
    z = _check.non_negative("think_time", think_time)
    mu = _check.positive("service_rate", service_rate)
    m = _check.count("servers", servers, maximum=MAX_STATES, why=_STATES_WHY)
    p = _repairman_distribution(big_n, z, mu, m)
    seen = _repairman_distribution(big_n - 1, z, mu, m)
    x = float(np.dot(np.minimum(np.arange(big_n + 1), m), p)) * mu
    return _finite_station(f"M/M/{m}//{big_n}", x, x, mu, m, p, seen, loss=0.0)


def _finite_station(
    model: str, offered: float, throughput: float, mu: float, m: int, p: np.ndarray, seen: np.ndarray, loss: float
) -> StationMetrics:
    """Metrics of a station whose jobs distribution ``p`` is finite; ``seen`` is the
    distribution an accepted arrival finds, from which its FCFS wait follows: finding n >= m jobs
    it waits for n - m + 1 departures at rate m*mu."""
    jobs = FiniteJobs(p)
    mean_jobs, var_jobs, mean_queue, var_queue = jobs.moments(m)
    wait = ErlangMixtureWait(seen[m:], m * mu, mu)
    return StationMetrics(
        model=model,
        arrival_rate=offered,
        service_rate=mu,
        servers=m,
        throughput=throughput,
        traffic_intensity=offered / (m * mu),
        utilisation=throughput / (m * mu),
        p0=float(p[0]),
        prob_queueing=wait.prob_wait,
        loss_probability=loss,
        mean_jobs=mean_jobs,
        var_jobs=var_jobs,
        mean_queue=mean_queue,
        var_queue=var_queue,
        **_time_metrics(wait),
        jobs=jobs,
        wait=wait,
    )


def _time_metrics(wait: WaitingTime) -> dict[str, float]:
    """Mean and variance of response and waiting time, all from the waiting-time distribution."""
    return {
        "mean_response": wait.response_mean(),
        "var_response": wait.response_var(),
        "mean_wait": wait.mean(),
        "var_wait": wait.var(),
    }


def _repairman_distribution(population: int, think_time: float, mu: float, m: int) -> np.ndarray:
    """p_n, n = 0..N, of the birth-death chain with birth (N-n)/Z and death min(n, m) mu."""
    n = np.arange(population + 1)
    if think_time == 0.0:
        # Nobody thinks: all N clients are always at the station.
        return (n == population).astype(float)
    log_w = (
        special.gammaln(population + 1)
        - special.gammaln(population - n + 1)
        - n * math.log(think_time * mu)
        - _log_rate_product(n, m)
    )
    return _normalise(log_w)


def _log_rate_product(n: np.ndarray, m: int) -> np.ndarray:
    """log prod_{j=1..n} min(j, m): n! up to m servers busy, then m!·m^(n-m)."""
    nm = np.minimum(n, m)
    return special.gammaln(nm + 1) + np.maximum(n - m, 0) * math.log(m)


def _normalise(log_w: np.ndarray) -> np.ndarray:
    return np.exp(log_w - special.logsumexp(log_w))


def _require_stable(rho: float, what: str) -> None:
    if rho >= 1.0:
        raise UnstableError(
            "utilisation",
            "rho < 1 for an open queue",
            round(rho, 6),
            f"rho = {what} >= 1: the queue is unstable, it grows without bound and has no steady state",
        )
