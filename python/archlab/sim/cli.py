"""The `archlab simulate MODEL.toml` verb: read a model file, run every cell of its sweep, print
the estimates and, when the file carries published values, each beside ours with the 99 %
prediction interval of one run. With ``--store`` the results are also recorded as a run of the
result store (one cell per sweep cell, one repetition per replication), which ``archlab
report`` and ``archlab analyze`` then read like a measured run. Parsing and printing only; the lead wires it into the main
parser by calling :func:`add_arguments` with its subparsers and dispatching to :func:`run`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Generator, Iterator

from archlab.errors import SpecError
from archlab.sim.compare import compare_cell
from archlab.sim.results import SimulationResult
from archlab.sim.spec import load_spec


def add_arguments(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="run a discrete-event simulation model (TOML)")
    p.add_argument("model", type=Path, help="model file: [simulation], [[stations]], [[sources]], optional [sweep]")
    p.add_argument("--replications", type=int, help="override simulation.replications")
    p.add_argument("--seed", type=int, help="override simulation.seed")
    p.add_argument("--horizon", type=float, help="override simulation.horizon (model time units)")
    p.add_argument("--threads", type=int, help="worker threads (default: all cores)")
    p.add_argument("--warmup", type=_warmup, help='override simulation.warmup: a time, or "mser" (MSER-5 chooses it)')
    p.add_argument("--store", metavar="DIR", type=Path,
                   help="also record the results as a run in this result store (e.g. runs), for archlab report")
    p.add_argument("--time-unit-s", type=float, default=1.0,
                   help="seconds per model time unit when recording (default: 1, model times are seconds)")
    p.add_argument("--json", type=Path, help="also write every cell's result as JSON lines here")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run the sweep's cells on a Dask cluster (tcp://HOST:PORT, or local:N); results identical to a local run")
    p.set_defaults(sim_verb="simulate")


# Flags that override a field of the file's [simulation] table.
_OVERRIDES = ("replications", "seed", "horizon", "threads", "warmup")


def run(args: argparse.Namespace) -> int:
    """Execute the verb; SpecError propagates to the CLI's single error mapping. Everything is
    checked (every sweep cell, the flags, the output paths) before the first line of output."""
    spec = load_spec(args.model)
    overrides = {k: getattr(args, k) for k in _OVERRIDES if getattr(args, k, None) is not None}
    simulation = dataclasses.replace(spec.simulation, **overrides)
    try:
        spec.check(simulation)
    except SpecError as e:
        flag = e.parameter.removeprefix("simulation.")
        raise (e.named(f"--{flag}") if flag in overrides else e) from None
    if not (math.isfinite(args.time_unit_s) and args.time_unit_s > 0):
        raise SpecError("--time-unit-s", "seconds per model time unit, a finite number > 0", args.time_unit_s)
    if args.json and (args.json.is_dir() or not args.json.parent.is_dir()):
        raise SpecError("--json", "a file path in an existing directory", str(args.json))
    cells = spec.cells()
    # The cluster before anything is written: an unreachable scheduler leaves no run behind.
    cluster = None
    results: Iterator[SimulationResult]
    if getattr(args, "cluster", None) is not None:
        from archlab.cluster import ClusterAddress, open_cluster, simulate_cells  # lazy: Dask only when asked for

        cluster = open_cluster(ClusterAddress.parse(args.cluster))
        results = simulate_cells(cluster, simulation, [cell.model for cell in cells])
    else:
        results = (simulation.run(cell.model) for cell in cells)
    recorder = None
    if getattr(args, "store", None) is not None:
        from archlab.cli.stores import open_store
        from archlab.sim.record import SimulatedRun

        recorder = SimulatedRun(open_store(args.store), spec.name, spec.model, simulation, spec.text,
                                [c.levels for c in cells], args.time_unit_s, spec.description)
    try:
        out = args.json.open("w") if args.json else None
    except OSError as e:
        raise SpecError("--json", "a writable file", str(args.json), e.strerror or str(e)) from None
    print(f"{spec.name}: {spec.description}".rstrip(": "))
    warmup = "MSER-5" if simulation.warmup == "mser" else f"{simulation.warmup:g}"
    print(f"horizon {simulation.horizon:g}, warm-up {warmup}, {simulation.replications} replications, "
          f"seed {simulation.seed}; times in model units, {simulation.confidence:.0%} confidence intervals", flush=True)
    status = "interrupted"
    try:
        for cell, result in zip(cells, results):
            if recorder is not None:
                recorder.record(cell.levels, result, cell.model)
            levels = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in cell.levels.items()) or "(single cell)"
            r = result.response
            print(f"\n[{levels}]  X {r.throughput}  R {r.mean}  p99 {r.p99}")
            row = spec.reference.row(cell.levels) if spec.reference else None
            if spec.reference is not None and row is not None:
                for c in compare_cell(result, spec.reference, row):
                    mark = "inside" if c.inside else "OUTSIDE"
                    print(f"    {c.metric:<14} published {c.published:<12.6g} ours {c.simulated.mean * c.scale:<12.6g}"
                          f" 99% one-run interval [{c.interval[0]:.6g}, {c.interval[1]:.6g}]  {mark}")
            if result.mser is not None:
                print(f"    MSER-5 warm-up {result.warmup:g}" + ("  (at the search limit: lengthen the horizon)" if result.mser.at_limit else ""))
            if result.stop is not None:
                s = result.stop
                print(f"    stop ({s.method}): {s.metric} {s.estimate}, relative half-width {s.achieved:.3g} "
                      f"{'<=' if s.met else '> target'} {s.target:g}" + (f", horizon {s.horizon:g}" if s.horizon else ""))
            if out:
                out.write(json.dumps({"levels": cell.levels, "result": dataclasses.asdict(result)}, default=str) + "\n")
        status = "complete"
    finally:
        if cluster is not None:
            if isinstance(results, Generator):
                results.close()  # cancels the cells not yet collected
            cluster.close()
        if out:
            out.close()
        if recorder is not None:
            recorder.finish(status)
            print(f"\nrecorded as run {recorder.run_id}; `archlab report {recorder.run_id} --store {args.store}` shows it")
    if spec.reference:
        print(f"\npublished values: {spec.reference.source}")
    return 0


def _warmup(text: str) -> float | str:
    if text == "mser":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a time or "mser", got {text!r}') from None
