"""Model files: a TOML document holding a model (``[[stations]]``, ``[[sources]]`` in the core's
model format), how to run it (``[simulation]``), an optional ``[sweep]`` of factors and an
optional ``[reference]`` of published values to set beside the results. A sweep factor is a
dotted path into the model (``"sources.0.clients" = [100, 200, 500]``); cells are the cartesian
product of the factors' levels, in the order written. Validation of the model itself is the
core's: this module only checks the file's own structure."""

from __future__ import annotations

import copy
import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from archlab.errors import SpecError
from archlab.sim.simulation import Simulation, StopRule

_RUN_KEYS = {"horizon", "warmup", "replications", "seed", "threads", "batches", "confidence"}


@dataclass(frozen=True)
class ReferenceRow:
    """Published values of one cell, in the publication's units."""

    levels: dict[str, object]
    values: dict[str, float]


@dataclass(frozen=True)
class Reference:
    """Published values with their source. A published time is ``time_scale`` x model time and
    a published throughput ``throughput_scale`` x model throughput."""

    source: str
    time_scale: float
    throughput_scale: float
    rows: tuple[ReferenceRow, ...]

    def row(self, levels: dict[str, object]) -> ReferenceRow | None:
        return next((r for r in self.rows if r.levels == levels), None)


@dataclass(frozen=True)
class Cell:
    """One combination of sweep levels and the model it gives."""

    levels: dict[str, object]
    model: dict


@dataclass(frozen=True)
class SimulationSpec:
    name: str
    description: str
    model: dict
    simulation: Simulation
    sweep: dict[str, list] = field(default_factory=dict)
    reference: Reference | None = None

    def cells(self) -> list[Cell]:
        if not self.sweep:
            return [Cell({}, self.model)]
        paths = list(self.sweep)
        cells = []
        for combo in itertools.product(*(self.sweep[p] for p in paths)):
            model = copy.deepcopy(self.model)
            for path, value in zip(paths, combo):
                set_path(model, path, value)
            cells.append(Cell(dict(zip(paths, combo)), model))
        return cells


def set_path(model: dict, path: str, value: object) -> None:
    """Set ``model[a][0][b] = value`` for the path "a.0.b"; the path must exist."""
    keys = path.split(".")
    node: object = model
    for i, key in enumerate(keys):
        index: object = int(key) if key.isdigit() else key
        try:
            if i == len(keys) - 1:
                node[index]  # type: ignore[index]  # the field must exist: a typo is an error
                node[index] = value  # type: ignore[index]
            else:
                node = node[index]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            raise SpecError(f"sweep.{path}", "a dotted path to a field present in the model", path) from None


def load_spec(path: str | Path) -> SimulationSpec:
    """Read a model file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SpecError(str(path), "a readable TOML model file", str(e)) from None
    return parse_spec(raw, default_name=path.stem)


def parse_spec(raw: dict, default_name: str = "simulation") -> SimulationSpec:
    unknown = set(raw) - {"simulation", "stations", "sources", "sweep", "reference"}
    if unknown:
        raise SpecError("model file", "tables simulation, stations, sources, sweep, reference", sorted(unknown))
    sim = dict(raw.get("simulation", {}))
    name = str(sim.pop("name", default_name))
    description = str(sim.pop("description", ""))
    stop = sim.pop("stop", None)
    bad = set(sim) - _RUN_KEYS
    if bad or "horizon" not in sim:
        raise SpecError("simulation", f"horizon and optionally {sorted(_RUN_KEYS - {'horizon'})}, name, description, stop",
                        sorted(sim))
    simulation = Simulation(**sim, stop=StopRule(**stop) if stop else None)
    sweep = raw.get("sweep", {})
    for key, levels in sweep.items():
        if not isinstance(levels, list) or not levels:
            raise SpecError(f"sweep.{key}", "a non-empty list of levels", levels)
    model = {"stations": raw.get("stations", []), "sources": raw.get("sources", [])}
    return SimulationSpec(name, description, model, simulation, sweep, _reference(raw.get("reference")))


def _reference(raw: dict | None) -> Reference | None:
    if raw is None:
        return None
    rows = []
    for i, row in enumerate(raw.get("rows", [])):
        row = dict(row)
        levels = row.pop("levels", None)
        if not isinstance(levels, dict):
            raise SpecError(f"reference.rows[{i}].levels", "a table of sweep levels", levels)
        rows.append(ReferenceRow(levels, {k: float(v) for k, v in row.items()}))
    return Reference(str(raw.get("source", "")), float(raw.get("time_scale", 1.0)),
                     float(raw.get("throughput_scale", 1.0)), tuple(rows))
