"""Distributions of the waiting time W and the response time R = W + S of an accepted job at a
FCFS station with exponential service S ~ Exp(mu). Every single-station model of
:mod:`archlab.models.queueing` reduces to one of two shapes: an atom at zero plus one exponential
(M/M/1, M/M/m with an infinite buffer), or an atom at zero plus a finite mixture of Erlang
stages (a finite buffer or a finite population: an arrival that finds k jobs ahead of it in the
queue waits for k+1 departures at the full rate m*mu). Means, variances, survival functions and
quantiles come from these two classes only, so the formulas are written once."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from scipy import optimize, special, stats

from archlab.models import _check


class WaitingTime(ABC):
    """Queueing delay of an accepted job; ``service_rate`` is the rate of one server."""

    service_rate: float

    @property
    @abstractmethod
    def prob_wait(self) -> float:
        """P(W > 0): the probability that an accepted job queues."""

    @abstractmethod
    def mean(self) -> float: ...

    @abstractmethod
    def var(self) -> float: ...

    @abstractmethod
    def sf(self, t: float) -> float:
        """P(W > t)."""

    @abstractmethod
    def response_sf(self, t: float) -> float:
        """P(W + S > t) with S ~ Exp(service_rate) independent of W."""

    def response_mean(self) -> float:
        return self.mean() + 1.0 / self.service_rate

    def response_var(self) -> float:
        # W and the job's own service time are independent under FCFS.
        return self.var() + 1.0 / self.service_rate**2

    def quantile(self, p: float) -> float:
        """Smallest t with P(W <= t) >= p (0 when the atom at zero covers p)."""
        p = _check.probability("p", p)
        return _invert(self.sf, 1.0 - p, self.mean() + math.sqrt(self.var()))

    def response_quantile(self, p: float) -> float:
        p = _check.probability("p", p)
        return _invert(self.response_sf, 1.0 - p, self.response_mean() + math.sqrt(self.response_var()))


class ExponentialWait(WaitingTime):
    """W = 0 with probability 1 - delta, else Exp(rate): the M/M/m queue with unlimited buffer,
    where ``delta`` is the Erlang-C probability and ``rate`` = m*mu*(1 - rho)."""

    def __init__(self, delta: float, rate: float, service_rate: float):
        self.delta = delta
        self.rate = rate
        self.service_rate = service_rate

    @property
    def prob_wait(self) -> float:
        return self.delta

    def mean(self) -> float:
        return self.delta / self.rate

    def var(self) -> float:
        return self.delta * (2.0 - self.delta) / self.rate**2

    def sf(self, t: float) -> float:
        return self.delta * math.exp(-self.rate * t) if t >= 0 else 1.0

    def response_sf(self, t: float) -> float:
        if t < 0:
            return 1.0
        mu = self.service_rate
        return (1.0 - self.delta) * math.exp(-mu * t) + self.delta * _hypoexponential_sf(t, self.rate, mu)

    def quantile(self, p: float) -> float:
        # Closed form (Jain Box 31.1/31.2): max(0, ln(delta / (1 - p)) / rate).
        p = _check.probability("p", p)
        if self.delta <= 0.0:
            return 0.0
        return max(0.0, math.log(self.delta / (1.0 - p)) / self.rate)


class ErlangMixtureWait(WaitingTime):
    """W = 0 with probability 1 - sum(weights), else Erlang(k, rate) with probability
    ``weights[k-1]``: the queue of a finite buffer or a finite population, ``rate`` = m*mu."""

    def __init__(self, weights: np.ndarray, rate: float, service_rate: float):
        self.weights = np.asarray(weights, dtype=float)
        self.stages = np.arange(1, self.weights.size + 1, dtype=float)
        self.rate = rate
        self.service_rate = service_rate

    @property
    def prob_wait(self) -> float:
        return float(self.weights.sum())

    def mean(self) -> float:
        return float(np.dot(self.weights, self.stages)) / self.rate

    def var(self) -> float:
        second = float(np.dot(self.weights, self.stages * (self.stages + 1.0))) / self.rate**2
        return max(second - self.mean() ** 2, 0.0)

    def sf(self, t: float) -> float:
        if t < 0:
            return 1.0
        if self.weights.size == 0:
            return 0.0
        return float(np.dot(self.weights, special.gammaincc(self.stages, self.rate * t)))

    def response_sf(self, t: float) -> float:
        # P(E_k + S > t) = P(E_k > t) + E[exp(-mu (t - E_k)); E_k <= t] for E_k ~ Erlang(k, a).
        if t < 0:
            return 1.0
        mu, a = self.service_rate, self.rate
        no_wait = (1.0 - self.prob_wait) * math.exp(-mu * t)
        if self.weights.size == 0:
            return no_wait
        k = self.stages
        if math.isclose(a, mu, rel_tol=1e-12):
            # One server: the integral is the Poisson(mu t) probability of exactly k events.
            tail = stats.poisson.pmf(k, mu * t)
        else:
            # a = m*mu > mu: the integral is (a/(a-mu))^k P(Erlang(k, a-mu) <= t) e^{-mu t}; the
            # power overflows for long queues, so it is combined in log space.
            with np.errstate(divide="ignore"):
                log_cdf = np.log(special.gammainc(k, (a - mu) * t))
            tail = np.exp(k * math.log(a / (a - mu)) + log_cdf - mu * t)
        return no_wait + float(np.dot(self.weights, special.gammaincc(k, a * t) + tail))


def _hypoexponential_sf(t: float, a: float, b: float) -> float:
    """P(Exp(a) + Exp(b) > t), written so that a close to b does not cancel. The sum is
    symmetric in (a, b); taking b as the smaller rate keeps exp(-x) from overflowing."""
    a, b = max(a, b), min(a, b)
    x = (a - b) * t
    ratio = 1.0 if x == 0 else -math.expm1(-x) / x
    return math.exp(-b * t) * (1.0 + b * t * ratio)


def _invert(sf, target: float, scale: float) -> float:
    """Smallest t >= 0 with sf(t) <= target, for a non-increasing survival function."""
    if sf(0.0) <= target:
        return 0.0
    hi = max(scale, 1e-300)
    while sf(hi) > target:
        hi *= 2.0
    return float(optimize.brentq(lambda t: sf(t) - target, 0.0, hi, xtol=1e-14 * hi, rtol=1e-12))
