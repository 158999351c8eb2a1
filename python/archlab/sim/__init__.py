"""archlab.sim: a fast, deterministic discrete-event simulator of server systems.

The Python face of the Rust core ``archlab-sim``: build a :class:`Model` (stations; closed,
open or partly-open sources; routes of serve, call, branch, repeat, fork and balance steps), run
it with a :class:`Simulation`, read a :class:`SimulationResult` of estimates with confidence
intervals::

    from archlab import sim
    m = sim.Model()
    cpu = m.station("cpu", servers=4)
    m.closed("clients", clients=100, route=[sim.serve(cpu, sim.Exponential(0.025))])
    result = sim.Simulation(horizon=1000, warmup=100, replications=10, seed=1).run(m)
    result.throughput, result.response.p99, result.stations["cpu"].utilisation

Model files (TOML) and sweeps are read by :mod:`archlab.sim.spec`; ``archlab simulate
MODEL.toml`` is :mod:`archlab.sim.cli`. Times are in model units throughout.
"""

from archlab.sim.dists import Deterministic, Distribution, Empirical, Exponential, Gamma, LogNormal, Uniform
from archlab.sim.model import Model, Station, balance, branch, call, fork, repeat, serve
from archlab.sim.results import (
    Estimate,
    Replication,
    ResponseEstimates,
    SimulationResult,
    StationClassEstimates,
    StationEstimates,
    Truncation,
)
from archlab.sim.simulation import Simulation, StopRule, mser, simulate

__all__ = [
    "Deterministic",
    "Distribution",
    "Empirical",
    "Estimate",
    "Exponential",
    "Gamma",
    "LogNormal",
    "Model",
    "Replication",
    "ResponseEstimates",
    "Simulation",
    "SimulationResult",
    "Station",
    "StationClassEstimates",
    "StationEstimates",
    "StopRule",
    "Truncation",
    "Uniform",
    "balance",
    "branch",
    "call",
    "fork",
    "mser",
    "repeat",
    "serve",
    "simulate",
]
