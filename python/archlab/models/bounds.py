"""Bounds on a single-class closed network that need only the demands (Jain ch. 33-34):
asymptotic bounds (ABA) and balanced job bounds (BJB, with think time, Zahorjan et al.). They
bracket what exact MVA computes and show at a glance where the knee N* = (D + Z)/D_max lies and
which centre saturates first. Delay centres count as think time. A multi-server centre
saturates at m/D, so ABA uses D/m for it; BJB assumes load-independent centres and refuses others."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError
from archlab.models.network import CentreKind, ClosedNetwork


@dataclass(frozen=True)
class Bounds:
    """Lower and upper bounds on system throughput and response time (without think time)."""

    population: int
    throughput_lower: float
    throughput_upper: float
    response_lower: float
    response_upper: float
    knee: float  # N* = (D + Z) / D_max: below it think time dominates, above it the bottleneck
    bottleneck: str  # the centre with the largest demand per server


def asymptotic_bounds(network: ClosedNetwork, population: int) -> Bounds:
    """X <= min(N/(D+Z), 1/D_max), X >= N/(N D + Z); R >= max(D, N D_max - Z), R <= N D."""
    n, d_total, z, per_server, names = _totals(network, population)
    for c in network.centres:
        if c.kind is CentreKind.LOAD_DEPENDENT and c.servers is None and min(c.rate_multipliers) < 1.0:
            raise ModelError(f"{c.name}.rate_multipliers", "values >= 1 for asymptotic bounds", c.rate_multipliers)
    d_max = float(per_server.max())
    return Bounds(
        population=n,
        throughput_lower=n / (n * d_total + z),
        throughput_upper=min(n / (d_total + z), 1.0 / d_max),
        response_lower=max(d_total, n * d_max - z),
        response_upper=n * d_total,
        knee=(d_total + z) / d_max,
        bottleneck=names[int(per_server.argmax())],
    )


def balanced_job_bounds(network: ClosedNetwork, population: int) -> Bounds:
    """Balanced job bounds with think time (Zahorjan, Sevcik, Eager, Galler 1982; Jain ch. 34); load-independent
    queueing centres only."""
    for c in network.centres:
        if c.kind is CentreKind.LOAD_DEPENDENT:
            raise ModelError(f"{c.name}.kind", "queueing or delay centres for balanced job bounds", c.kind.value)
    n, d_total, z, per_server, names = _totals(network, population)
    d_max = float(per_server.max())
    d_avg = d_total / per_server.size
    slow = d_total + (n - 1) * d_max / (1.0 + z / (n * d_total))
    fast = d_total + (n - 1) * d_avg / (1.0 + z / d_total)
    return Bounds(
        population=n,
        throughput_lower=n / (slow + z),
        throughput_upper=min(1.0 / d_max, n / (fast + z)),
        response_lower=max(n * d_max - z, fast),
        response_upper=slow,
        knee=(d_total + z) / d_max,
        bottleneck=names[int(per_server.argmax())],
    )


def _totals(network: ClosedNetwork, population: int):
    if network.n_classes != 1:
        raise ModelError("network", "a single-class network for bounds", network.n_classes)
    n = _check.count("population", population)
    queues = [c for c in network.centres if c.kind is not CentreKind.DELAY]
    if not queues or sum(c.demands[0] for c in queues) == 0:
        raise ModelError("centres", "at least one queueing centre with a demand > 0", [c.name for c in network.centres])
    z = network.think_times[0] + sum(c.demands[0] for c in network.centres if c.kind is CentreKind.DELAY)
    d_total = sum(c.demands[0] for c in queues)
    per_server = np.array([c.demands[0] / c.capacity_servers for c in queues])
    return n, d_total, z, per_server, [c.name for c in queues]
