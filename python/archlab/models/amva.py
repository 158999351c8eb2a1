"""Approximate MVA for closed product-form networks: the Bard-Schweitzer fixed point and
Chandy & Neuse's Linearizer. Both replace the recursion over every smaller population by an
estimate of the queue an arriving class-j job sees, Q_k(N - e_j), so their cost does not grow
with the population (the reason to use them for many classes or large N).

* Bard-Schweitzer: Q_kc(N - e_j) ~ (N - e_j)_c Q_kc(N) / N_c, i.e. the fraction of class-c jobs
  at each centre does not change when one job leaves. Error: typically a few percent.
* Linearizer (Chandy & Neuse, "Linearizer: a heuristic algorithm for queueing network models of
  computing systems", CACM 25(2):126-134, 1982): the same estimate plus a correction
  D_kcj = F_kc(N - e_j) - F_kc(N), F = Q/N, taken from solving the network approximately at
  N - e_j as well; D is assumed the same at N and N - e_j. Three rounds (solve at N and at every
  N - e_j, update D) then a last solve at N; more rounds moved queue lengths by under 1e-3 on
  the tests' examples. Errors are typically an order of magnitude below Schweitzer's.

Multi-server centres use Seidmann's decomposition (a queue with demand D/m plus a delay of
D(m-1)/m; arrivals see only the queue part), which underestimates throughput, most near
saturation; general load-dependent centres are
refused (use :func:`~archlab.models.mva.exact_mva`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError
from archlab.models.network import CentreKind, ClosedNetwork, NetworkSolution, utilisation

# Rounds of (solve at N and every N - e_j, re-estimate D) before the final solve at N; the
# correction settles after a few (Chandy and Neuse), and more rounds only cost time.
LINEARIZER_ROUNDS = 3


def schweitzer_mva(
    network: ClosedNetwork, population: int | Sequence[int], tol: float = 1e-10, max_iterations: int = 100_000
) -> NetworkSolution:
    """Bard-Schweitzer approximate MVA; stops when no queue length moves by more than ``tol``."""
    pops = np.array(network.populations(population), dtype=float)
    solver = _CoreSolver(network, tol, max_iterations)
    corrections = np.zeros((len(network.centres), len(pops), len(pops)))
    _, r, x = solver.solve(pops, solver.initial_queue(pops), corrections)
    return _result(network, pops, r, x)


def linearizer_mva(
    network: ClosedNetwork, population: int | Sequence[int], tol: float = 1e-10, max_iterations: int = 100_000
) -> NetworkSolution:
    """Chandy-Neuse Linearizer; each inner fixed point stops when no queue length moves by more
    than ``tol``. Exact at a total population of one."""
    pops = np.array(network.populations(population), dtype=float)
    solver = _CoreSolver(network, tol, max_iterations)
    n_classes = len(pops)
    # Populations N and N - e_j (classes with no job have no N - e_j; their row stays unused).
    reduced = [pops] + [pops - np.eye(n_classes)[j] for j in range(n_classes)]
    usable = [True] + [pops[j] > 0 for j in range(n_classes)]
    queues = [solver.initial_queue(p) if ok else None for p, ok in zip(reduced, usable)]
    corrections = np.zeros((len(network.centres), n_classes, n_classes))  # D[k, c, j]
    for _ in range(LINEARIZER_ROUNDS):
        for s, (p, ok) in enumerate(zip(reduced, usable)):
            q = queues[s]
            if ok and q is not None:
                queues[s] = solver.solve(p, q, corrections)[0]
        full = queues[0]
        assert full is not None  # the full population is always usable
        fraction = _fraction(full, pops)
        for j in range(n_classes):
            q = queues[1 + j]
            if usable[1 + j] and q is not None:
                corrections[:, :, j] = _fraction(q, reduced[1 + j]) - fraction
    final = queues[0]
    assert final is not None
    _, r, x = solver.solve(pops, final, corrections)
    return _result(network, pops, r, x)


class _CoreSolver:
    """The fixed point both methods share: given populations and the corrections D, iterate
    Q(N - e_j) ~ (N - e_j) (F(N) + D_j), the MVA residence times, throughputs and queues."""

    def __init__(self, network: ClosedNetwork, tol: float, max_iterations: int):
        self.tol = _check.positive("tol", tol)
        self.max_iterations = _check.count("max_iterations", max_iterations)
        self.demands = network.demands
        self.think = np.array(network.think_times)
        self.queue_part, self.delay_part = _seidmann(network)

    def initial_queue(self, pops: np.ndarray) -> np.ndarray:
        """Jobs spread evenly over the centres, the usual starting point."""
        return np.tile(pops / self.demands.shape[0], (self.demands.shape[0], 1))

    def solve(self, pops: np.ndarray, q: np.ndarray, corrections: np.ndarray):
        """Returns (queue of the queueing parts, residence times, throughputs); ``q`` starts
        the iteration and the caller turns the result into full queue lengths R X."""
        n_classes = len(pops)
        less_one = pops[None, :] - np.eye(n_classes)  # row j: N - e_j
        for _ in range(self.max_iterations):
            fraction = _fraction(q, pops)
            # seen[k, j] = sum_c (N - e_j)_c (F_kc + D_kcj): the queue a class-j arrival meets.
            seen = np.einsum("jc,kcj->kj", np.clip(less_one, 0, None), fraction[:, :, None] + corrections)
            wait = self.queue_part * self.demands * (1.0 + seen)
            r = wait + self.delay_part * self.demands
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.where(pops > 0, pops / (self.think + r.sum(axis=0)), 0.0)
            # Only the queueing part of a centre forms the queue later arrivals meet (for an
            # m-server centre, the jobs in its D(m-1)/m delay part do not).
            q_new = wait * x
            if np.max(np.abs(q_new - q)) < self.tol:
                return q_new, r, x
            q = q_new
        raise ModelError("max_iterations", f"enough iterations to converge to tol={self.tol}", self.max_iterations)


def _fraction(q: np.ndarray, pops: np.ndarray) -> np.ndarray:
    return np.divide(q, pops, out=np.zeros_like(q), where=pops > 0)


def _result(network: ClosedNetwork, pops: np.ndarray, r: np.ndarray, x: np.ndarray) -> NetworkSolution:
    return NetworkSolution(
        centre_names=tuple(c.name for c in network.centres),
        population=tuple(int(p) for p in pops),
        throughput=x,
        response_time=r.sum(axis=0),
        residence_time=r,
        queue_length=r * x,
        utilisation=utilisation(network, x, {}),
    )


def _seidmann(network: ClosedNetwork) -> tuple[np.ndarray, np.ndarray]:
    """Per centre, the fraction of the demand that queues and the fraction that is pure delay."""
    queue_part, delay_part = [], []
    for c in network.centres:
        if c.kind is CentreKind.DELAY:
            queue_part.append(0.0)
            delay_part.append(1.0)
        elif c.kind is CentreKind.QUEUEING:
            queue_part.append(1.0)
            delay_part.append(0.0)
        elif c.servers is not None:
            queue_part.append(1.0 / c.servers)
            delay_part.append((c.servers - 1.0) / c.servers)
        else:
            raise ModelError(
                f"{c.name}.kind", "queueing, delay or multiserver centres for approximate MVA", c.kind.value,
                "use exact_mva or convolution for general load-dependent centres",
            )
    return np.array(queue_part)[:, None], np.array(delay_part)[:, None]
