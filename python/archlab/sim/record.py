"""Simulated runs in the result store, in the shape of measured runs, so that ``archlab report``
and :mod:`archlab.latency` read them alike. A simulation becomes one run: one cell per sweep
cell, one repetition per replication. Each repetition's row carries the replication's numbers
as a :class:`~archlab.store.records.Measurement` (model time converted with ``time_unit_s``
seconds per model unit) and ``source = "simulated"``; its directory holds ``replication.json``
(the core's numbers for it) and ``hdr.log``, an HDR interval log of one interval holding the
replication's response times in nanoseconds, which :func:`archlab.latency.read_run_cell` merges
exactly like a measured run's. The manifest says ``kind = "simulation"`` and keeps the model,
the run configuration and the code state.

Histogram values are model time x 1e9; with ``time_unit_s`` = 1 they are nanoseconds already and
are stored as they are. Any other unit rescales each bucket's value (counts are exact; values
keep the histogram's 3 significant digits). The log is written by ``crates/metrics`` through
``archlab._native.interval_log``, the writer of the load generator's logs, so both read alike."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from archlab.errors import SpecError
from archlab.sim.results import Replication, SimulationResult
from archlab.sim.simulation import Simulation
from archlab.store import CellKey, CellRecord, Measurement, RunPlan, Store
from archlab.store.records import Source

SOURCE: Source = "simulated"


def cell_id(levels: dict[str, object]) -> str:
    """``clients-100__servers-4`` from sweep levels (last part of each path, or the whole path
    where two factors share a last part); ``model`` for a model without a sweep."""
    if not levels:
        return "model"
    lasts = [path.split(".")[-1] for path in levels]
    parts = []
    for path, last, value in zip(levels, lasts, levels.values()):
        name = last if lasts.count(last) == 1 else path.replace(".", "-")
        parts.append(f"{name}-{value}")
    return "__".join(parts)


class SimulatedRun:
    """A simulation being recorded: create it, :meth:`record` each cell's result, :meth:`finish`.
    Written through the store's one writer API, like a measured run (:meth:`Store.begin_run`,
    :meth:`RunWriter.record`), and holding the run's lock until it finishes."""

    def __init__(self, store: Store, name: str, model_spec: dict, simulation: Simulation, spec_text: str,
                 cells: list[dict[str, object]], time_unit_s: float = 1.0, description: str = ""):
        if not (time_unit_s > 0 and time_unit_s < float("inf")):
            raise SpecError("time_unit_s", "seconds per model time unit, a finite number > 0", time_unit_s)
        self.store, self.name, self.time_unit_s = store, name, float(time_unit_s)
        spec = {"name": name, "description": description, "simulation": simulation.to_spec(), "model": model_spec,
                "time_unit_s": self.time_unit_s}
        self.cell_ids = [cell_id(levels) for levels in cells]
        plan = RunPlan(
            name=name,
            kind="simulation",
            spec_hash=hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest(),
            spec_text=spec_text,
            cells=tuple(self.cell_ids),
            repetitions=simulation.replications,
            load_model=_load_model(model_spec),
            source=SOURCE,
            facts={"build_profile": None, "engine_version": _native_version(), "spec": spec,
                   "cell_levels": dict(zip(self.cell_ids, cells))},
        )
        self.handle = store.begin_run(plan)
        self.run_id = self.handle.run_id
        self.directory = self.handle.directory
        self._population = _closed_population(model_spec)

    def record(self, levels: dict[str, object], result: SimulationResult, model_spec: dict | None = None) -> None:
        """Store one cell's result: one row and one directory per replication."""
        population = _closed_population(model_spec) if model_spec is not None else self._population
        key = CellKey(cell_id(levels), f"sim:{self.name}", "simulation", concurrency=population,
                      factors={k.split(".")[-1]: v for k, v in levels.items()})
        for rep in result.replications:
            repetition = rep.index + 1
            d = self.handle.prepare_rep_dir(key, repetition)
            (d / "replication.json").write_text(json.dumps(dataclasses.asdict(rep), default=str, allow_nan=True),
                                                encoding="utf-8")
            (d / "hdr.log").write_bytes(self._hdr_log(rep))
            self.handle.record(key, repetition, CellRecord("ok", measurement=self.measurement(rep),
                                                           summary_path=d / "replication.json",
                                                           hdr_log_path=d / "hdr.log"))

    def finish(self, status: str = "complete") -> None:
        self.handle.set_status(status)
        self.handle.close()

    def measurement(self, rep: Replication):
        """A replication as the lab's stored summary of a measurement window."""
        unit, us = self.time_unit_s, self.time_unit_s * 1e6
        t = rep.total
        return Measurement(duration_s=rep.window * unit, requests=t.completed, throughput_rps=t.throughput / unit,
                           p50_us=t.p50 * us, p90_us=t.p90 * us, p99_us=t.p99 * us, p999_us=t.p999 * us,
                           max_us=t.max * us, mean_us=t.mean * us, errors=t.dropped)

    def _hdr_log(self, rep: Replication) -> bytes:
        from archlab import _native

        unit = self.time_unit_s
        return _native.interval_log(rep.histogram, rep.warmup * unit, rep.window * unit, value_scale=unit,
                                    comment=f"[simulated by archlab.sim: replication {rep.index}]")


def _closed_population(model_spec: dict) -> int:
    """Clients of the closed sources (the concurrency a measured closed run would have); 0 if none."""
    return sum(int(s.get("clients", 0)) for s in model_spec.get("sources", []) if s.get("kind") == "closed")


def _load_model(model_spec: dict) -> str:
    kinds = {s.get("kind") for s in model_spec.get("sources", [])}
    names = {"closed": "closed", "open": "open", "sessions": "partly-open"}
    return "+".join(names.get(k, str(k)) for k in sorted(kinds, key=str))


def _native_version() -> str | None:
    from archlab import _native

    return _native.version()


def record_simulation(store: Store | str | Path, name: str, cells: list[tuple[dict[str, object], dict, SimulationResult]],
                      simulation: Simulation, spec_text: str = "", time_unit_s: float = 1.0,
                      description: str = "") -> str:
    """Store already computed results (``(levels, model spec, result)`` per cell) as one run;
    returns its run id. ``archlab simulate --store`` records cell by cell with
    :class:`SimulatedRun` instead, so an interruption keeps what was done."""
    store = store if isinstance(store, Store) else Store(store)
    run = SimulatedRun(store, name, cells[0][1] if cells else {}, simulation, spec_text, [c[0] for c in cells],
                       time_unit_s, description)
    for levels, model_spec, result in cells:
        run.record(levels, result, model_spec)
    run.finish()
    return run.run_id
