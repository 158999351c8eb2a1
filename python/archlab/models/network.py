"""Closed queueing networks as data: a :class:`ClosedNetwork` is a list of :class:`Centre` (a
queueing centre with one server, a delay centre with infinitely many, or a load-dependent centre
whose service rate depends on how many jobs it holds, an m-server station being the common case)
plus each class's think time. Demands are per job and per class, D = visits x service time, in
seconds. :class:`NetworkSolution` is what every solver (exact MVA, convolution, Schweitzer)
returns, so that solvers can be compared entry by entry."""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError


class CentreKind(enum.Enum):
    QUEUEING = "queueing"
    DELAY = "delay"
    LOAD_DEPENDENT = "load-dependent"


@dataclass(frozen=True)
class Centre:
    """One service centre. Use the constructors :meth:`queueing`, :meth:`delay`,
    :meth:`multiserver` and :meth:`load_dependent` rather than the fields."""

    name: str
    kind: CentreKind
    demands: tuple[float, ...]
    # Load-dependent centres: alpha(j) for j = 1..len, the service rate with j jobs present
    # relative to one job; beyond the last entry the rate stays at the last value.
    rate_multipliers: tuple[float, ...] = ()
    servers: int | None = None  # set for multiserver centres (alpha(j) = min(j, servers))

    @classmethod
    def queueing(cls, name: str, demand: float | Sequence[float]) -> Centre:
        return cls(name, CentreKind.QUEUEING, _demands(name, demand))

    @classmethod
    def delay(cls, name: str, demand: float | Sequence[float]) -> Centre:
        return cls(name, CentreKind.DELAY, _demands(name, demand))

    @classmethod
    def multiserver(cls, name: str, demand: float | Sequence[float], servers: int) -> Centre:
        """m identical servers fed by one FCFS queue; ``demand`` is per job on one server."""
        m = _check.count(f"{name}.servers", servers)
        if m == 1:
            return cls.queueing(name, demand)
        return cls(name, CentreKind.LOAD_DEPENDENT, _demands(name, demand), tuple(float(j) for j in range(1, m + 1)), m)

    @classmethod
    def load_dependent(cls, name: str, demand: float | Sequence[float], rate_multipliers: Sequence[float]) -> Centre:
        rates = _check.vector(f"{name}.rate_multipliers", rate_multipliers)
        if np.any(rates <= 0):
            raise ModelError(f"{name}.rate_multipliers", "numbers > 0", list(rate_multipliers))
        return cls(name, CentreKind.LOAD_DEPENDENT, _demands(name, demand), tuple(float(r) for r in rates))

    def alpha(self, jobs: np.ndarray) -> np.ndarray:
        """Service-rate multiplier with ``jobs`` (>= 1) jobs at the centre."""
        rates = np.asarray(self.rate_multipliers if self.rate_multipliers else (1.0,))
        return rates[np.minimum(np.asarray(jobs) - 1, rates.size - 1)]

    @property
    def capacity_servers(self) -> float:
        """How many jobs the centre serves at full speed at once: 1, m, or inf for a delay."""
        if self.kind is CentreKind.DELAY:
            return math.inf
        return float(self.rate_multipliers[-1]) if self.rate_multipliers else 1.0


@dataclass(frozen=True)
class ClosedNetwork:
    """Centres plus one think time per class (seconds, 0 for a batch class)."""

    centres: tuple[Centre, ...]
    think_times: tuple[float, ...]

    def __init__(self, centres: Sequence[Centre], think_time: float | Sequence[float] = 0.0):
        if not centres:
            raise ModelError("centres", "at least one Centre", list(centres))
        classes = {len(c.demands) for c in centres}
        if len(classes) != 1:
            raise ModelError("centres", "the same number of class demands at every centre", sorted(classes))
        (n_classes,) = classes
        z = (cast(float, think_time),) * n_classes if np.isscalar(think_time) else tuple(cast(Sequence[float], think_time))
        if len(z) != n_classes:
            raise ModelError("think_time", f"one value per class ({n_classes})", think_time)
        object.__setattr__(self, "centres", tuple(centres))
        object.__setattr__(self, "think_times", tuple(_check.non_negative("think_time", t) for t in z))

    @property
    def n_classes(self) -> int:
        return len(self.think_times)

    @property
    def demands(self) -> np.ndarray:
        """Demand matrix, centres x classes."""
        return np.array([c.demands for c in self.centres])

    def without(self, index: int) -> ClosedNetwork:
        """The same network with centre ``index`` removed (used for complement solutions)."""
        rest = [c for k, c in enumerate(self.centres) if k != index]
        if not rest:
            rest = [Centre.delay("(none)", (0.0,) * self.n_classes)]
        return ClosedNetwork(rest, self.think_times)

    def populations(self, population: int | Sequence[int]) -> tuple[int, ...]:
        pop = (cast(int, population),) if np.isscalar(population) else tuple(cast(Sequence[int], population))
        if len(pop) != self.n_classes:
            raise ModelError("population", f"one count per class ({self.n_classes})", population)
        return tuple(_check.count("population", p, minimum=0) for p in pop)


@dataclass(frozen=True)
class NetworkSolution:
    """Mean-value results at one population vector. Per-class arrays are indexed by class,
    per-centre arrays by centre (in the network's order). ``response_time`` excludes think
    time; ``utilisation`` is the busy fraction of one server (NaN for delay centres)."""

    centre_names: tuple[str, ...]
    population: tuple[int, ...]
    throughput: np.ndarray  # (C,)
    response_time: np.ndarray  # (C,)
    residence_time: np.ndarray  # (M, C)
    queue_length: np.ndarray  # (M, C)
    utilisation: np.ndarray  # (M,)
    # Marginal distribution P(j jobs), j = 0..|N|, of each load-dependent centre, by name.
    marginals: dict[str, np.ndarray] = field(default_factory=dict)
    # Largest |sum_j P(j) - 1| over those centres: a numerical-health check, ~1e-15 when sound.
    probability_error: float = 0.0

    def centre(self, name: str) -> int:
        return self.centre_names.index(name)


def utilisation(network: ClosedNetwork, throughput: np.ndarray, idle: dict[int, float]) -> np.ndarray:
    """Busy fraction of one server per centre; ``idle`` holds P(0 jobs) of general
    load-dependent centres, whose busy fraction is not a simple demand product."""
    busy = network.demands @ throughput
    out = np.empty(len(network.centres))
    for i, c in enumerate(network.centres):
        if c.kind is CentreKind.DELAY:
            out[i] = math.nan
        elif c.servers is not None or c.kind is CentreKind.QUEUEING:
            out[i] = busy[i] / (c.servers or 1)
        else:
            out[i] = 1.0 - idle[i]
    return out


def _demands(name: str, demand: float | Sequence[float]) -> tuple[float, ...]:
    values = (cast(float, demand),) if np.isscalar(demand) else tuple(cast(Sequence[float], demand))
    return tuple(_check.non_negative(f"{name}.demand", d) for d in values)
