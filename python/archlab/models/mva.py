"""Exact Mean Value Analysis of closed product-form networks, single or multiple classes, with
queueing, delay and load-dependent centres (Reiser-Lavenberg; Jain Box 36.1 for the
load-dependent form). The recursion visits every population vector n <= N once.

Why it does not diverge: textbook load-dependent MVA gets P_i(0 | n) as 1 - sum_j P_i(j | n),
which cancels catastrophically once a multi-server centre is busy (M/M/16 with 200 clients
already returns negative throughput in double precision; notes/modeling.md §2.5). Here P_i(0 | n)
comes from the exact ratio P_i(0 | n) = P_i(0 | n - e_c) * X_c(n) / X_c^{-i}(n), where X^{-i} is
the throughput of the network without centre i (G^{-i}(n)/G(n) written as MVA quantities); every
step multiplies positive numbers, so relative errors only add up. The complement networks are
solved by the same routine and shared through a cache, so k load-dependent centres cost at most
2^k lattice sweeps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError
from archlab.models.network import CentreKind, ClosedNetwork, NetworkSolution, utilisation


@dataclass(frozen=True)
class MVACurve:
    """Single-class results for every population 1..N (row k is population k + 1)."""

    centre_names: tuple[str, ...]
    populations: np.ndarray  # (N,)
    throughput: np.ndarray  # (N,)
    response_time: np.ndarray  # (N,), without think time
    queue_length: np.ndarray  # (N, M)
    utilisation: np.ndarray  # (N, M)


@dataclass
class _Lattice:
    """Per population vector (ravel order) throughputs, residence times, queue lengths and
    the marginal distributions of the load-dependent centres."""

    shape: tuple[int, ...]
    throughput: np.ndarray  # (S, C)
    residence: np.ndarray  # (S, M, C)
    queue: np.ndarray  # (S, M)
    marginals: dict[int, np.ndarray] = field(default_factory=dict)  # centre -> (S, |N|+1)


def exact_mva(network: ClosedNetwork, population: int | Sequence[int]) -> NetworkSolution:
    """Exact MVA at ``population`` (an int for one class, else one count per class)."""
    pops = network.populations(population)
    _require_cycle_time(network, pops)
    lattice = _solve(network, pops, {})
    return _solution(network, lattice, len(lattice.throughput) - 1, pops)


def exact_mva_curve(network: ClosedNetwork, max_population: int) -> MVACurve:
    """Single-class exact MVA for every population 1..``max_population``."""
    n_max = _check.count("max_population", max_population)
    pops = network.populations(n_max) if network.n_classes == 1 else network.populations([n_max])
    _require_cycle_time(network, pops)
    lattice = _solve(network, pops, {})
    rows = [_solution(network, lattice, s, (s,)) for s in range(1, n_max + 1)]
    return MVACurve(
        centre_names=tuple(c.name for c in network.centres),
        populations=np.arange(1, n_max + 1),
        throughput=np.array([r.throughput[0] for r in rows]),
        response_time=np.array([r.response_time[0] for r in rows]),
        queue_length=np.array([r.queue_length[:, 0] for r in rows]),
        utilisation=np.array([r.utilisation for r in rows]),
    )


def _require_cycle_time(network: ClosedNetwork, pops: tuple[int, ...]) -> None:
    cycle = network.demands.sum(axis=0) + np.array(network.think_times)
    for c, (p, t) in enumerate(zip(pops, cycle)):
        if p > 0 and t <= 0:
            raise ModelError(f"class {c} demands", "a positive demand somewhere or a positive think time", 0.0)


def _solution(network: ClosedNetwork, lat: _Lattice, state: int, pops: tuple[int, ...]) -> NetworkSolution:
    x = lat.throughput[state]
    idle = {i: float(p[state, 0]) for i, p in lat.marginals.items()}
    n_total = sum(pops)
    marginals = {network.centres[i].name: p[state, : n_total + 1].copy() for i, p in lat.marginals.items()}
    error = max((abs(m.sum() - 1.0) for m in marginals.values()), default=0.0)
    residence = lat.residence[state]
    return NetworkSolution(
        centre_names=tuple(c.name for c in network.centres),
        population=pops,
        throughput=x.copy(),
        response_time=residence.sum(axis=0),
        residence_time=residence.copy(),
        queue_length=residence * x,
        utilisation=utilisation(network, x, idle),
        marginals=marginals,
        probability_error=float(error),
    )


def _solve(network: ClosedNetwork, pops: tuple[int, ...], cache: dict) -> _Lattice:
    key = (network.centres, network.think_times, pops)
    if key in cache:
        return cache[key]
    shape = tuple(p + 1 for p in pops)
    size = int(np.prod(shape))
    n_vectors = np.array(np.unravel_index(np.arange(size), shape)).T  # (S, C)
    strides = np.array([int(np.prod(shape[c + 1 :])) for c in range(len(shape))])
    total = sum(pops)
    d = network.demands
    z = np.array(network.think_times)
    centres = network.centres
    m_count, c_count = d.shape
    ld = [i for i, c in enumerate(centres) if c.kind is CentreKind.LOAD_DEPENDENT]
    queueing = np.array([c.kind is CentreKind.QUEUEING for c in centres])
    delay = np.array([c.kind is CentreKind.DELAY for c in centres])
    # j / alpha(j) for j = 1..total: the mean time to serve j jobs ahead, relative to D.
    jobs = np.arange(1, total + 1)
    inv_alpha = {i: 1.0 / centres[i].alpha(jobs) for i in ld}
    complement = {i: _solve(network.without(i), pops, cache).throughput for i in ld}

    lat = _Lattice(shape, np.zeros((size, c_count)), np.zeros((size, m_count, c_count)), np.zeros((size, m_count)))
    for i in ld:
        lat.marginals[i] = np.zeros((size, total + 1))
        lat.marginals[i][0, 0] = 1.0
    for s in range(1, size):
        n = n_vectors[s]
        n_tot = int(n.sum())
        active = np.flatnonzero(n)
        for c in active:
            prev = s - strides[c]
            r = np.where(queueing, d[:, c] * (1.0 + lat.queue[prev]), 0.0)
            r = np.where(delay, d[:, c], r)
            for i in ld:
                p_prev = lat.marginals[i][prev, :n_tot]
                r[i] = d[i, c] * float(np.dot(jobs[:n_tot] * inv_alpha[i][:n_tot], p_prev))
            lat.residence[s, :, c] = r
            with np.errstate(divide="ignore"):
                # Only a complement network can have no demand and no think time left for a
                # class (exact_mva refuses such input): its jobs cycle infinitely fast.
                lat.throughput[s, c] = n[c] / (z[c] + r.sum())
        with np.errstate(invalid="ignore"):
            lat.queue[s] = np.nan_to_num(lat.residence[s] @ lat.throughput[s], nan=0.0)
        for i in ld:
            p = lat.marginals[i]
            acc = np.zeros(n_tot)
            for c in active:
                acc += d[i, c] * lat.throughput[s, c] * p[s - strides[c], :n_tot]
            p[s, 1 : n_tot + 1] = inv_alpha[i][:n_tot] * acc
            c = active[0]
            with np.errstate(divide="ignore"):
                # The complement's throughput is infinite when class c visits only centre i and
                # has no think time: then centre i is never empty, and the ratio is 0.
                p[s, 0] = p[s - strides[c], 0] * lat.throughput[s, c] / complement[i][s, c]
    cache[key] = lat
    return lat
