"""Operational laws (Denning and Buzen; Jain ch. 33): identities between quantities measured
over the same window, true of any system whatever its distributions. They turn a few
measurements into others (utilisation from throughput and demand, population from throughput and
response time) and, checked on a measured run, expose an inconsistent measurement: a run whose
clients, throughput and latency break N = X (R + Z) measured them over different windows or lost
requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archlab.models import _check


def utilisation_law(throughput: float, demand: float, servers: int = 1) -> float:
    """U = X D / m (busy fraction of one of m servers)."""
    return _check.non_negative("throughput", throughput) * _check.non_negative("demand", demand) / _check.count("servers", servers)


def forced_flow_law(system_throughput: float, visits: float) -> float:
    """X_i = V_i X: throughput of a device visited V_i times per job."""
    return _check.non_negative("system_throughput", system_throughput) * _check.non_negative("visits", visits)


def littles_law(throughput: float, response_time: float) -> float:
    """N = X R: mean number of jobs in any black box."""
    return _check.non_negative("throughput", throughput) * _check.non_negative("response_time", response_time)


def interactive_response_time(population: float, throughput: float, think_time: float = 0.0) -> float:
    """R = N / X - Z for N clients that think Z between requests."""
    return _check.non_negative("population", population) / _check.positive("throughput", throughput) - _check.non_negative(
        "think_time", think_time
    )


def general_response_time(visits: Sequence[float], response_per_visit: Sequence[float]) -> float:
    """R = sum_i V_i R_i."""
    return float(np.dot(_check.vector("visits", visits), _check.vector("response_per_visit", response_per_visit)))


@dataclass(frozen=True)
class LawCheck:
    """One law evaluated on measurements: both sides and their relative disagreement."""

    law: str
    lhs: float
    rhs: float
    relative_error: float
    holds: bool


def check_interactive_law(
    population: float, throughput: float, response_time: float, think_time: float = 0.0, rtol: float = 0.02
) -> LawCheck:
    """Does N = X (R + Z) hold within ``rtol``? (A closed-loop load generator's clients.)"""
    rhs = littles_law(throughput, response_time + _check.non_negative("think_time", think_time))
    return _law("N = X (R + Z)", _check.non_negative("population", population), rhs, rtol)


def check_utilisation_law(utilisation: float, throughput: float, demand: float, servers: int = 1, rtol: float = 0.05) -> LawCheck:
    """Does a measured utilisation equal X D / m within ``rtol``?"""
    return _law("U = X D / m", _check.non_negative("utilisation", utilisation), utilisation_law(throughput, demand, servers), rtol)


def _law(name: str, lhs: float, rhs: float, rtol: float) -> LawCheck:
    rtol = _check.positive("rtol", rtol)
    scale = max(abs(lhs), abs(rhs))
    err = abs(lhs - rhs) / scale if scale > 0 else 0.0
    return LawCheck(name, lhs, rhs, err, err <= rtol)
