"""The `archlab simulate MODEL.toml` verb: read a model file, run every cell of its sweep, print
the estimates and, when the file carries published values, each beside ours with the 99 %
prediction interval of one run. Parsing and printing only; the lead wires it into the main
parser by calling :func:`add_arguments` with its subparsers and dispatching to :func:`run`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from archlab.sim.compare import compare_cell
from archlab.sim.spec import load_spec


def add_arguments(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="run a discrete-event simulation model (TOML)")
    p.add_argument("model", type=Path, help="model file: [simulation], [[stations]], [[sources]], optional [sweep]")
    p.add_argument("--replications", type=int, help="override simulation.replications")
    p.add_argument("--seed", type=int, help="override simulation.seed")
    p.add_argument("--horizon", type=float, help="override simulation.horizon (model time units)")
    p.add_argument("--threads", type=int, help="worker threads (default: all cores)")
    p.add_argument("--json", type=Path, help="also write every cell's result as JSON lines here")
    p.set_defaults(sim_verb="simulate")


def run(args: argparse.Namespace) -> int:
    """Execute the verb; SpecError propagates to the CLI's single error mapping."""
    spec = load_spec(args.model)
    overrides = {k: getattr(args, k) for k in ("replications", "seed", "horizon", "threads") if getattr(args, k) is not None}
    simulation = dataclasses.replace(spec.simulation, **overrides)
    print(f"{spec.name}: {spec.description}".rstrip(": "))
    print(f"horizon {simulation.horizon:g}, warm-up {simulation.warmup:g}, {simulation.replications} replications, "
          f"seed {simulation.seed}; times in model units, {simulation.confidence:.0%} confidence intervals")
    out = args.json.open("w") if args.json else None
    try:
        for cell in spec.cells():
            result = simulation.run(cell.model)
            levels = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in cell.levels.items()) or "(single cell)"
            r = result.response
            print(f"\n[{levels}]  X {r.throughput}  R {r.mean}  p99 {r.p99}")
            row = spec.reference.row(cell.levels) if spec.reference else None
            if row is not None:
                for c in compare_cell(result, spec.reference, row):
                    mark = "inside" if c.inside else "OUTSIDE"
                    print(f"    {c.metric:<14} published {c.published:<12.6g} ours {c.simulated.mean * c.scale:<12.6g}"
                          f" 99% one-run interval [{c.interval[0]:.6g}, {c.interval[1]:.6g}]  {mark}")
            if out:
                out.write(json.dumps({"levels": cell.levels, "result": dataclasses.asdict(result)}, default=str) + "\n")
    finally:
        if out:
            out.close()
    if spec.reference:
        print(f"\npublished values: {spec.reference.source}")
    return 0
