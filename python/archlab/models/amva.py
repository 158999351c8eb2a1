"""Approximate MVA by the Bard-Schweitzer fixed point: instead of recursing over every smaller
population, the queue an arriving class-c job sees is estimated from the current population,
Q_i(N - e_c) ~ Q_i(N) - Q_ic(N)/N_c, and the MVA equations are iterated until the queue lengths
settle. Cost is independent of the population, which is the reason to use it for many classes or
large N; the error is typically a few percent (compare with :func:`exact_mva`). Multi-server
centres use Seidmann's decomposition (a queue with demand D/m plus a delay of D(m-1)/m), which
slightly underestimates throughput; general load-dependent centres are refused."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError
from archlab.models.network import CentreKind, ClosedNetwork, NetworkSolution, utilisation


def schweitzer_mva(
    network: ClosedNetwork, population: int | Sequence[int], tol: float = 1e-10, max_iterations: int = 100_000
) -> NetworkSolution:
    """Bard-Schweitzer approximate MVA; stops when no queue length moves by more than ``tol``."""
    pops = np.array(network.populations(population), dtype=float)
    tol = _check.positive("tol", tol)
    max_iterations = _check.count("max_iterations", max_iterations)
    d = network.demands
    z = np.array(network.think_times)
    queue_part, delay_part = _seidmann(network)
    m_count = d.shape[0]
    q = np.tile(pops / m_count, (m_count, 1))  # jobs spread evenly to start
    x = np.zeros_like(pops)
    for _ in range(max_iterations):
        seen = q.sum(axis=1, keepdims=True) - np.divide(q, pops, out=np.zeros_like(q), where=pops > 0)
        r = queue_part * d * (1.0 + seen) + delay_part * d
        x = pops / (z + r.sum(axis=0))
        q_new = r * x
        if np.max(np.abs(q_new - q)) < tol:
            q = q_new
            break
        q = q_new
    else:
        raise ModelError("max_iterations", f"enough iterations to converge to tol={tol}", max_iterations)
    return NetworkSolution(
        centre_names=tuple(c.name for c in network.centres),
        population=tuple(int(p) for p in pops),
        throughput=x,
        response_time=r.sum(axis=0),
        residence_time=r,
        queue_length=q,
        utilisation=utilisation(network, x, {}),
    )


def _seidmann(network: ClosedNetwork) -> tuple[np.ndarray, np.ndarray]:
    """Per centre, the fraction of the demand that queues and the fraction that is pure delay."""
    queue_part, delay_part = [], []
    for c in network.centres:
        if c.kind is CentreKind.DELAY:
            queue_part.append(0.0), delay_part.append(1.0)
        elif c.kind is CentreKind.QUEUEING:
            queue_part.append(1.0), delay_part.append(0.0)
        elif c.servers is not None:
            queue_part.append(1.0 / c.servers), delay_part.append((c.servers - 1.0) / c.servers)
        else:
            raise ModelError(
                f"{c.name}.kind", "queueing, delay or multiserver centres for Schweitzer MVA", c.kind.value,
                "use exact_mva or convolution for general load-dependent centres",
            )
    return np.array(queue_part)[:, None], np.array(delay_part)[:, None]
