"""The lab's entry points, as the CLI and notebooks call them: run a spec file into a store, or
resume a stored run. They put the pieces together in the one safe order (validate the spec, find
the engine, create the run, execute), so a bad spec or a missing build never leaves an empty run
behind."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from archlab.lab import network
from archlab.lab.engine import DataPlaneRegistry, Engine
from archlab.errors import SpecError
from archlab.lab.runner import LoadExecutor, RunnerConfig, execute
from archlab.spec import SpecEnvironment, load_spec, parse_spec
from archlab.spec.model import Experiment
from archlab.store import EngineFacts, RunHandle, Store


def run_spec(
    spec_path: str | Path,
    store: Store,
    config: RunnerConfig = RunnerConfig(),
    stream: TextIO | None = None,
    on_created=None,
    load_executor: LoadExecutor | None = None,
) -> RunHandle:
    """Validate ``spec_path``, create a run in ``store`` and execute it (the load through
    ``load_executor`` when given). ``on_created(handle)`` is called once the run exists (the
    CLI uses it to say where the run goes and how to resume)."""
    experiment, text = load_spec(spec_path, SpecEnvironment.local(DataPlaneRegistry()))
    engine = Engine.locate()
    network.prepare(engine, experiment, load_executor is not None)  # refused before the run exists
    check_system_workers(experiment, load_executor)
    with store.create_run(experiment, text, EngineFacts(engine.version, engine.build_profile)) as handle:
        if on_created is not None:
            on_created(handle)
        execute(handle, engine, config, stream, load_executor)
    return handle


def resume_run(run_id: str, store: Store, config: RunnerConfig = RunnerConfig(), stream: TextIO | None = None, on_created=None,
               load_executor: LoadExecutor | None = None) -> RunHandle:
    """Re-validate the run's stored spec and execute the (cell, repetition) pairs it lacks."""
    manifest = store.read_manifest(run_id)
    engine = Engine.locate()
    experiment = parse_spec(manifest.spec_text or "", f"{run_id}/spec.toml", SpecEnvironment.local(DataPlaneRegistry()))
    network.prepare(engine, experiment, load_executor is not None)
    check_system_workers(experiment, load_executor)
    with store.open_run(run_id, experiment) as handle:
        if on_created is not None:
            on_created(handle)
        execute(handle, engine, config, stream, load_executor)
    return handle


def check_system_workers(experiment: Experiment, load_executor: LoadExecutor | None) -> None:
    """Refuse, before a run exists, a part of the spec placed on a worker (``worker = "NAME"``:
    a ``[[systems]]`` entry, a topology's backends or front) when the run has no cluster, or
    when its cluster has no worker of that name."""
    placed = {field: worker for field, _, worker in experiment.placed_workers()}
    if not placed:
        return
    if load_executor is None:
        field, name = next(iter(placed.items()))
        raise SpecError(field, "a worker name only in a run on a cluster (--cluster, or a [cluster] section)", name)
    load_executor.check_workers(placed)
