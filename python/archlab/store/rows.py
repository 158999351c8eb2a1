"""One catalog row as a typed value, and the one translation between it and the catalog's
columns (:data:`archlab.store.catalog.RESULT_COLUMNS`). A :class:`ResultRow` is what every
reader of a run gets (the report, :mod:`archlab.latency`, :mod:`archlab.models`, the CLI): the
cell's key, the outcome, and the measurement and server cost as the writer recorded them.
Column names appear here and in the catalog's schema, nowhere else."""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping

from archlab.littles_law import LittlesLaw
from archlab.store.records import CellKey, CellRecord, CellStatus, Conditions, Measurement, ServerCost, Source

_KEY_FIELDS = tuple(f.name for f in fields(CellKey))
_MEASUREMENT_FIELDS = tuple(f.name for f in fields(Measurement))
_COST_FIELDS = tuple(f.name for f in fields(ServerCost))
_CONDITION_FIELDS = tuple(f.name for f in fields(Conditions))
# Fields without a default: a row has a measurement (a cost) only if all of them are stored.
_MEASUREMENT_REQUIRED = tuple(f.name for f in fields(Measurement) if f.default is MISSING and f.default_factory is MISSING)
_COST_REQUIRED = ("cpu_user_s", "cpu_sys_s", "cpu_us_per_request")


@dataclass(frozen=True)
class ResultRow:
    """One cell and repetition of a stored run. ``summary_path`` and ``hdr_log_path`` are
    absolute once read from a store. ``littles_law`` is None where the law is not checked (open
    models, simulations, failed repetitions, rows of old runs without their summary)."""

    run_id: str
    cell: CellKey
    repetition: int
    status: CellStatus
    error: str | None = None
    #: measured | simulated (rows written before the column existed are measured).
    source: Source = "measured"
    #: closed | open | partly-open (simulations: the kinds of their sources, e.g. "closed+open").
    load_model: str | None = None
    measurement: Measurement | None = None
    cost: ServerCost | None = None
    littles_law: LittlesLaw | None = None
    summary_path: Path | None = None
    hdr_log_path: Path | None = None
    recorded_at: datetime | None = None  # naive UTC
    #: What else ran on the machine during the window; None where it was not read.
    conditions: Conditions | None = None

    # -- the cell's key, for the many readers that group by it --------------------------------

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def of(cls, run_id: str, cell: CellKey, repetition: int, record: CellRecord, *, source: Source = "measured",
           load_model: str | None = None, recorded_at: datetime | None = None) -> "ResultRow":
        """The row of ``record``; ``load_model`` is the run's (its spec's, so that a failed
        repetition, which has no summary, names it too)."""
        return cls(
            run_id=run_id, cell=cell, repetition=repetition, status=record.status, error=record.error, source=source,
            load_model=load_model, measurement=record.measurement, cost=record.cost, littles_law=record.littles_law,
            conditions=record.conditions,
            summary_path=Path(record.summary_path) if record.summary_path else None,
            hdr_log_path=Path(record.hdr_log_path) if record.hdr_log_path else None,
            recorded_at=recorded_at,
        )  # fmt: skip

    # -- catalog columns ----------------------------------------------------------------------

    def to_columns(self, root: Path) -> dict[str, Any]:
        """The row as catalog columns: paths relative to the store's ``root``, the factors and
        error counts as Python values (the catalog encodes its JSON columns)."""
        columns: dict[str, Any] = {name: getattr(self.cell, name) for name in _KEY_FIELDS}
        columns["factors"] = dict(self.cell.factors)
        if self.measurement is not None:
            columns.update({name: getattr(self.measurement, name) for name in _MEASUREMENT_FIELDS})
            columns["errors_by_class"] = dict(self.measurement.errors_by_class)
        if self.cost is not None:
            columns.update({name: getattr(self.cost, name) for name in _COST_FIELDS})
        if self.conditions is not None:
            columns.update({name: getattr(self.conditions, name) for name in _CONDITION_FIELDS})
        if self.littles_law is not None:
            law = self.littles_law
            columns.update(littles_law_ratio=law.ratio, littles_law_tolerance=law.tolerance,
                           littles_law_planned_ratio=law.planned_ratio, littles_law_ok=law.ok,
                           littles_law_boundary_share=law.boundary_share)
        columns.update(
            run_id=self.run_id, repetition=self.repetition, status=self.status, error=self.error, source=self.source,
            load_model=self.load_model, recorded_at=self.recorded_at,
            summary_path=_relative(self.summary_path, root), hdr_log_path=_relative(self.hdr_log_path, root),
        )  # fmt: skip
        return columns

    @classmethod
    def from_columns(cls, columns: Mapping[str, Any], root: Path | None = None) -> "ResultRow":
        """A row from catalog columns (as the catalog returns them, or as a test writes them:
        JSON columns may be text or values, absent columns are NULL). Relative paths are made
        absolute against ``root``."""
        def get(name: str) -> Any:
            return columns.get(name)

        factors = _json(get("factors")) or {}
        key = CellKey(**{name: get(name) for name in _KEY_FIELDS if name != "factors"}, factors=factors)
        measurement = None
        if all(get(name) is not None for name in _MEASUREMENT_REQUIRED):
            values = {name: get(name) for name in _MEASUREMENT_FIELDS}
            values["errors_by_class"] = _json(get("errors_by_class")) or {}
            measurement = Measurement(**values)
        cost = ServerCost(**{name: get(name) for name in _COST_FIELDS}) if all(get(n) is not None for n in _COST_REQUIRED) else None
        conditions = None
        if all(get(name) is not None for name in _CONDITION_FIELDS):
            values = {name: float(get(name)) for name in _CONDITION_FIELDS}
            conditions = Conditions(**{**values, "measured_cpus": int(values["measured_cpus"])})
        law = None
        if get("littles_law_ratio") is not None and get("littles_law_tolerance") is not None:
            law = LittlesLaw(float(get("littles_law_ratio")), float(get("littles_law_tolerance")),
                             _float(get("littles_law_planned_ratio")), _float(get("littles_law_boundary_share")))
        return cls(
            run_id=str(get("run_id")), cell=key, repetition=int(get("repetition")), status=get("status"),
            error=get("error"), source=get("source") or "measured", load_model=get("load_model"),
            measurement=measurement, cost=cost, littles_law=law, conditions=conditions,
            summary_path=_absolute(get("summary_path"), root), hdr_log_path=_absolute(get("hdr_log_path"), root),
            recorded_at=get("recorded_at"),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """The row's columns as plain JSON values (absolute paths, ISO 8601 time), for export."""
        columns = self.to_columns(Path("/"))
        columns["summary_path"] = str(self.summary_path) if self.summary_path else None
        columns["hdr_log_path"] = str(self.hdr_log_path) if self.hdr_log_path else None
        columns["recorded_at"] = self.recorded_at.isoformat() + "Z" if self.recorded_at else None
        return columns


def _json(value: object) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _float(value: object) -> float | None:
    return float(value) if value is not None else None  # type: ignore[arg-type]


def _relative(path: Path | None, root: Path) -> str | None:
    # A path relative to the working directory (a store opened as `runs`) is made relative to
    # the root too: kept as given it would be read back as root/runs/... .
    if path is None:
        return None
    return os.path.relpath(path.absolute(), root.absolute())


def _absolute(path: object, root: Path | None) -> Path | None:
    if not path:
        return None
    p = Path(str(path))
    return p if p.is_absolute() or root is None else (root / p).resolve()


__all__ = ["ResultRow"]
