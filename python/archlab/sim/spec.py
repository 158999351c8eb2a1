"""Model files: a TOML document holding a model (``[[stations]]``, ``[[sources]]`` in the core's
model format), how to run it (``[simulation]``), an optional ``[sweep]`` of factors and an
optional ``[reference]`` of published values to set beside the results. A sweep factor is a
dotted path into the model (``"sources.0.clients" = [100, 200, 500]``); cells are the cartesian
product of the factors' levels, in the order written. Validation of the model and of the run
settings is the core's: this module checks the file's own structure, and :func:`load_spec` has
the core check every cell of the sweep before anything runs, so that a bad level is refused
before the first cell's results, naming its sweep key."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from archlab import documents
from archlab.errors import SpecError
from archlab.sim.simulation import Simulation, StopRule
from archlab.spec.raw import toml_error

_RUN_KEYS = {"horizon", "warmup", "replications", "seed", "threads", "batches", "confidence"}
_SIMULATION_KEYS = ("name", "description", "horizon", "warmup", "replications", "seed", "threads", "batches",
                    "confidence", "stop")


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
    text: str = ""  # the model file as written (a recorded run keeps it)

    def check(self, simulation: Simulation | None = None) -> None:
        """Have the core validate every cell under ``simulation`` (default: the file's own);
        an error in a swept field names its sweep key and level."""
        simulation = simulation or self.simulation
        for cell in self.cells():
            try:
                simulation.check(cell.model)
            except SpecError as e:
                raise _in_sweep(e, cell.levels) from None

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
    """Read a model file and have the core check every cell of it."""
    path = Path(path)
    try:
        data = documents.read_bytes(path)
    except OSError as e:
        raise SpecError("MODEL", "a readable TOML model file", str(path), e.strerror or str(e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "a UTF-8 TOML model file", f"byte {data[e.start]:#04x} at offset {e.start}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise toml_error(text, str(path), e) from None
    spec = dataclasses.replace(parse_spec(raw, default_name=path.stem), text=text)
    spec.check()
    return spec


_TABLES = ("simulation", "stations", "sources", "sweep", "reference")
_STOP_KEYS = tuple(f.name for f in dataclasses.fields(StopRule))
_STOP_REQUIRED = tuple(f.name for f in dataclasses.fields(StopRule) if f.default is dataclasses.MISSING)


def parse_spec(raw: dict, default_name: str = "simulation") -> SimulationSpec:
    """The file's structure; the values of the model and of [simulation] are the core's to check
    (:meth:`SimulationSpec.check`)."""
    unknown = set(raw) - set(_TABLES)
    if unknown:
        raise SpecError("model file", f"tables {', '.join(_TABLES)}", sorted(unknown))
    sim = raw.get("simulation", {})
    if not isinstance(sim, dict):
        raise SpecError("simulation", "a table [simulation] with horizon and the run's settings", sim)
    sim = dict(sim)
    name = str(sim.pop("name", default_name))
    description = str(sim.pop("description", ""))
    stop = _stop(sim.pop("stop", None))
    for key in sim:
        if key not in _RUN_KEYS:
            raise SpecError("simulation", f"only the keys {', '.join(_SIMULATION_KEYS)}", key)
    if "horizon" not in sim:
        raise SpecError("simulation.horizon", "a value (the field is required)", _Nothing())
    simulation = Simulation(**sim, stop=stop)
    sweep = raw.get("sweep", {})
    if not isinstance(sweep, dict):
        raise SpecError("sweep", 'a table of dotted model paths and their levels ("sources.0.clients" = [100, 200])', sweep)
    for key, levels in sweep.items():
        if not isinstance(levels, list) or not levels:
            raise SpecError(f"sweep.{key}", "a non-empty list of levels", levels)
    model = {"stations": raw.get("stations", []), "sources": raw.get("sources", [])}
    return SimulationSpec(name, description, model, simulation, sweep, _reference(raw.get("reference")))


def _stop(raw: object) -> StopRule | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("simulation.stop", f"a table of {', '.join(_STOP_KEYS)}", raw)
    for key in raw:
        if key not in _STOP_KEYS:
            raise SpecError("simulation.stop", f"only the keys {', '.join(_STOP_KEYS)}", key)
    for key in _STOP_REQUIRED:
        if key not in raw:
            raise SpecError(f"simulation.stop.{key}", "a value (the field is required)", _Nothing())
    return StopRule(**raw)


def _in_sweep(error: SpecError, levels: dict[str, object]) -> SpecError:
    """``error`` renamed to the sweep key whose level it is about, if it is about one."""
    for key, level in levels.items():
        path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", key)  # sources.0.clients -> sources[0].clients
        if error.parameter == path:
            return error.named(f'sweep."{key}" (level {level!r})')
        if error.parameter.startswith((path + ".", path + "[")):
            return error.named(f'sweep."{key}" (level {level!r}) at {error.parameter}')
    return error


def _number(value: object, field: str, positive: bool = False) -> float:
    allowed = "a finite number > 0" if positive else "a finite number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(field, allowed, value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise SpecError(field, allowed, value)
    return float(value)


class _Nothing:
    def __repr__(self) -> str:
        return "nothing"


_REFERENCE_KEYS = ("source", "time_scale", "throughput_scale", "rows")


def _reference(raw: object) -> Reference | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError("reference", f"a table of {', '.join(_REFERENCE_KEYS)}", raw)
    for key in raw:
        if key not in _REFERENCE_KEYS:
            raise SpecError("reference", f"only the keys {', '.join(_REFERENCE_KEYS)}", key)
    listed = raw.get("rows", [])
    if not isinstance(listed, list):
        raise SpecError("reference.rows", "a list of tables ([[reference.rows]])", listed)
    rows = []
    for i, row in enumerate(listed):
        if not isinstance(row, dict):
            raise SpecError(f"reference.rows[{i}]", "a table of levels and published values", row)
        row = dict(row)
        levels = row.pop("levels", None)
        if not isinstance(levels, dict):
            raise SpecError(f"reference.rows[{i}].levels", "a table of sweep levels", levels)
        rows.append(ReferenceRow(levels, {k: _number(v, f"reference.rows[{i}].{k}") for k, v in row.items()}))
    return Reference(str(raw.get("source", "")), _number(raw.get("time_scale", 1.0), "reference.time_scale", True),
                     _number(raw.get("throughput_scale", 1.0), "reference.throughput_scale", True), tuple(rows))
