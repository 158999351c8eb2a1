"""Running a model: :class:`Simulation` stores the run configuration (horizon, warm-up,
replications, seed, batches, stop rule) and :meth:`Simulation.run` hands model and configuration
to the Rust core, which validates both, runs the replications in parallel and returns the result.
The same seed gives bit-identical results on any machine and any number of threads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from archlab import _native
from archlab.errors import SpecError
from archlab.sim.model import Model
from archlab.sim.results import SimulationResult

StopMetric = Literal["throughput", "mean_response", "p99"]


@dataclass(frozen=True)
class StopRule:
    """Add replications until the ``metric``'s confidence interval has half-width / mean <=
    ``relative_half_width``, or ``max_replications`` have run."""

    metric: StopMetric
    relative_half_width: float
    max_replications: int

    def to_spec(self) -> dict:
        return {"metric": self.metric, "relative_half_width": self.relative_half_width,
                "max_replications": self.max_replications}


@dataclass(frozen=True)
class Simulation:
    """How to run a model. Times are in model units; statistics cover [warmup, horizon].
    ``threads=0`` uses every core; ``batches`` > 0 adds batch means within each replication."""

    horizon: float
    warmup: float = 0.0
    replications: int = 10
    seed: int = 0
    threads: int = 0
    batches: int = 0
    confidence: float = 0.95
    stop: StopRule | None = None

    def to_spec(self) -> dict:
        spec = {"horizon": self.horizon, "warmup": self.warmup, "replications": self.replications,
                "seed": self.seed, "threads": self.threads, "batches": self.batches, "confidence": self.confidence}
        if self.stop is not None:
            spec["stop"] = self.stop.to_spec()
        return spec

    def run(self, model: Model | dict) -> SimulationResult:
        """Simulate ``model`` (a :class:`Model` or a model-format dict, e.g. read from TOML)."""
        return simulate(model.to_spec() if isinstance(model, Model) else model, self.to_spec())


def simulate(model_spec: dict, run_spec: dict) -> SimulationResult:
    """Run model-format dicts through the core; invalid input raises :class:`SpecError`."""
    try:
        out = _native.simulate(json.dumps(model_spec, allow_nan=False), json.dumps(run_spec, allow_nan=False))
    except ValueError as e:
        if len(e.args) == 3:  # the bindings' mapping of SimError: (field, allowed, received)
            field, allowed, received = e.args
            raise SpecError(field, allowed, _Verbatim(received)) from None
        raise SpecError("model", "numbers that are finite (JSON has no NaN or infinity)", str(e)) from None
    return SimulationResult.from_json(json.loads(out))


class _Verbatim(str):
    """A value the core already rendered (strings quoted, numbers bare): shown as is."""

    def __repr__(self) -> str:
        return str(self)
