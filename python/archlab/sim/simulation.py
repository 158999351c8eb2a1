"""Running a model: :class:`Simulation` stores the run configuration (horizon, warm-up,
replications, seed, batches, stop rule) and :meth:`Simulation.run` hands model and configuration
to the Rust core, which validates both, runs the replications in parallel and returns the result.
The same seed gives bit-identical results on any machine and any number of threads."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal

from archlab import _native
from archlab.errors import SpecError
from archlab.sim.model import Model
from archlab.sim.results import SimulationResult, Truncation

StopMetric = Literal["throughput", "mean_response", "p99"]
StopMethod = Literal["replications", "batch_means"]


@dataclass(frozen=True)
class StopRule:
    """Run until the ``metric``'s confidence interval has half-width / mean <=
    ``relative_half_width``. ``method="replications"``: add replications, at most
    ``max_replications``. ``method="batch_means"``: extend one run (``replications=1``) batch by
    batch, the interval taken over batch means, never past ``max_horizon``; the run keeps between
    ``batches`` (20 when 0) and twice as many batches, merging pairs as it grows."""

    metric: StopMetric
    relative_half_width: float
    max_replications: int | None = None
    method: StopMethod = "replications"
    max_horizon: float | None = None

    def to_spec(self) -> dict:
        spec: dict = {"metric": self.metric, "relative_half_width": self.relative_half_width, "method": self.method}
        if self.max_replications is not None:
            spec["max_replications"] = self.max_replications
        if self.max_horizon is not None:
            spec["max_horizon"] = self.max_horizon
        return spec


@dataclass(frozen=True)
class Simulation:
    """How to run a model. Times are in model units; statistics cover [warmup, horizon].
    ``warmup`` is a time, or ``"mser"`` to let MSER-5 choose it from the runs themselves: every
    replication first runs as a pilot recording requests in system in 1000 time bins, MSER-5
    reads their bin-by-bin average, and the replications run again with the window starting at
    the chosen time (``SimulationResult.mser`` reports the choice; runs cost twice as much). ``threads=0`` uses every core;
    ``batches`` > 0 adds batch means within each replication."""

    horizon: float
    warmup: float | Literal["mser"] = 0.0
    replications: int = 10
    seed: int = 0
    threads: int = 0
    batches: int = 0
    confidence: float = 0.95
    stop: StopRule | None = None

    def to_spec(self) -> dict:
        spec: dict[str, object] = {"horizon": self.horizon, "warmup": self.warmup, "replications": self.replications,
                "seed": self.seed, "threads": self.threads, "batches": self.batches, "confidence": self.confidence}
        if self.stop is not None:
            spec["stop"] = self.stop.to_spec()
        return spec

    def run(self, model: Model | dict) -> SimulationResult:
        """Simulate ``model`` (a :class:`Model` or a model-format dict, e.g. read from TOML).
        Ctrl-C stops the run and raises KeyboardInterrupt."""
        return simulate(model.to_spec() if isinstance(model, Model) else model, self.to_spec())

    def check(self, model: Model | dict) -> None:
        """Validate ``model`` and this configuration as :meth:`run` would, without running:
        invalid input raises :class:`SpecError` naming the field."""
        _call(_native.check_simulation, model.to_spec() if isinstance(model, Model) else model, self.to_spec())


def mser(series, batch_size: int = 5) -> Truncation | None:
    """Where MSER (MSER-5 by default) truncates ``series`` (any sequence of numbers, e.g. the
    batch series of a measured run); None when it holds fewer than two batches. The same
    routine the simulator applies to its replications."""
    try:
        out = _native.mser([float(x) for x in series], batch_size)
    except ValueError as e:
        if len(e.args) == 3:
            raise SpecError(e.args[0], e.args[1], _Verbatim(e.args[2])) from None
        raise
    except OverflowError:
        raise SpecError("batch_size", "an integer >= 1", batch_size) from None
    return None if out is None else Truncation(**out)


def simulate(model_spec: dict, run_spec: dict) -> SimulationResult:
    """Run model-format dicts through the core; invalid input raises :class:`SpecError`."""
    return SimulationResult.from_json(json.loads(_call(_native.simulate, model_spec, run_spec)))


# The run configuration's fields are those of a model file's [simulation] table.
_RUN_TABLE = "simulation"


def _call(function, model_spec: dict, run_spec: dict):
    """``function(model_json, run_json)`` of the bindings, with the core's refusals (and numbers
    JSON cannot carry) as :class:`SpecError` naming the field."""
    try:
        model_json, run_json = json.dumps(model_spec, allow_nan=False), json.dumps(run_spec, allow_nan=False)
    except ValueError as e:
        # A NaN or infinity, found by a walk only now (the walk cost every call about 0.1 ms,
        # a fifth of a short run's native time), or a table that contains itself, which the
        # walk cannot follow to its end.
        try:
            where = next((w for spec, root in ((model_spec, ""), (run_spec, _RUN_TABLE))
                          if (w := _non_finite(spec, root)) is not None), None)
        except RecursionError:
            where = None
        if where is not None:
            raise SpecError(where[0], "a finite number", where[1]) from None
        raise SpecError("model", "a model the simulator reads", str(e)) from None
    except (TypeError, OverflowError) as e:  # a value JSON cannot carry (an object, a huge int)
        raise SpecError("model", "numbers, strings, lists and tables", str(e)) from None
    try:
        return function(model_json, run_json)
    except ValueError as e:
        if len(e.args) == 3:  # the bindings' mapping of SimError: (field, allowed, received)
            field, allowed, received = e.args
            raise SpecError(field, allowed, _Verbatim(received)) from None
        raise SpecError("model", "a model the simulator reads", str(e)) from None
    except (TypeError, OverflowError) as e:  # a value JSON cannot carry (an object, a huge int)
        raise SpecError("model", "numbers, strings, lists and tables", str(e)) from None


def _non_finite(value: object, path: str) -> tuple[str, float] | None:
    """The path (in the model file's spelling) and value of the first NaN or infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((found for p, v in items if (found := _non_finite(v, p)) is not None), None)


class _Verbatim(str):
    """A value the core already rendered (strings quoted, numbers bare): shown as is."""

    def __repr__(self) -> str:
        return str(self)
