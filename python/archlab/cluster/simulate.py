"""Simulation on the cluster: the cells of a sweep are independent runs of the Rust core, each
fully determined by its model and run configuration (seeds included), so each becomes one task
on some worker and the results come back in the sweep's order, bit-identical to a local run
(the core's replications of one cell stay together: they already run in parallel inside it)."""

from __future__ import annotations

import functools
from typing import Generator, Sequence

from archlab.cluster.connect import Cluster
from archlab.cluster.fanout import map_in_order
from archlab.sim.results import SimulationResult
from archlab.sim.simulation import Simulation


def _run(simulation: Simulation, numbered: tuple[int, dict]) -> SimulationResult:
    return simulation.run(numbered[1])


def simulate_cells(cluster: Cluster, simulation: Simulation, models: Sequence[dict]) -> Generator[SimulationResult, None, None]:
    """``simulation.run(model)`` of every model on the workers, yielded in order as each is ready
    (all are submitted at once, so the workers share the sweep)."""
    numbered = list(enumerate(models, 1))
    return map_in_order(cluster, functools.partial(_run, simulation), numbered, lambda n: f"simulation cell {n[0]}/{len(numbered)}")
