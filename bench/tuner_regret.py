"""Seed 003's figure that matters, per tuner: the regret of the pool size it picks on held-out
programs (latency at its size / latency at the measured best - 1), median over programs with a
seeded percentile bootstrap 95% interval (programs resampled with replacement, the harness's
10,000 resamples and seed).

Reads stored runs, it does not sweep (a sweep takes minutes; run it first, under the measurement
lock): one or more sweeps (``--sweep RUN_ID``, runs of seed003-pool-sweep*.toml: each program's
curve and best level come from its own run) and optionally a live run of the adaptive pool
(``--controller RUN_ID``, seed003-controller.toml). Tuners:

- **default**: the spec's ``tune.default`` level;
- **learned**: leave one program out; inside each outer fold the model kind (the seed's four)
  and its hyper-parameters are chosen by 4-fold grouped CV over the training programs alone,
  scored by their mean regret (:func:`archlab.tuning.learned.cross_validate` with
  ``model="auto"``), on archlab's features; also the seed's own setting beside it (decision
  tree, the seed's six features, the same nesting) so the effect of the features is visible;
- **model-based**: MVA from the level-1 measurement of each program (no sweep);
- **controller (replay)**: the hill climber replayed on the sweep's measured throughputs;
- **controller (live)**: the server's ``pool_control = "hill-climb"`` measured at the sweep's
  concurrency and repetitions, against the sweep's best (a later run: the machine's drift
  between the runs is in this figure).

Targets (issue 16): learned and model-based within 10% of the best (the interval's upper end <=
10%), both beating the default (the per-program ratio (1 + default regret) / (1 + tuner regret)
has a median above 1 with its whole interval). Prints markdown tables (the ones in
experiments/seed003-tuning.md) and writes ``bench/results/tuner_regret.json``.

``--mix-change A,B`` instead runs the program change live (a measurement: hold the measurement
lock): one server with the adaptive pool serves program A, then B, against static pools at each
phase's best level (from the sweeps), alternating, ``--mix-reps`` times; it writes
``bench/results/tuner_mix_change.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import ROOT, machine_facts, median_ratio_interval, package_version, write_results  # noqa: E402

sys.path.insert(0, str(ROOT / "python"))

TARGET = 0.10
INNER_SPLITS = 4
SWEEP_WARMUP_S = 0.5  # experiments/seed003-pool-sweep*.toml


def regret_interval(regrets: list[float]) -> tuple[float, float, float]:
    """Median regret with its bootstrap 95% interval over programs (via the ratios 1 + r)."""
    vals = [r for r in regrets if not math.isnan(r)]
    iv = median_ratio_interval([1 + r for r in vals], [1.0] * len(vals))
    return iv.median - 1, iv.low - 1, iv.high - 1


def load_sweeps(store, run_ids: list[str]):
    """Merged dataset of the sweeps, their objective and default, and the per-run evaluations."""
    from archlab.tuning.dataset import Dataset
    from archlab.tuning.tune_report import analyse_with_data, tune_settings

    rows, features, evals, settings = [], {}, [], None
    for run_id in run_ids:
        view = store.load_run(run_id)
        tune = tune_settings(view.manifest)
        if tune is None or tune.controller is not None:
            raise SystemExit(f"--sweep {run_id}: expected a sweep (a run of a spec with a [tune] section and no controller)")
        key = (tune.objective, tune.default, tune.concurrency, tune.levels)
        if settings is not None and key != settings:
            raise SystemExit(f"--sweep {run_id}: expected the settings of the first sweep {settings}, got {key}")
        settings = key
        ev, data = analyse_with_data(view.manifest, view.rows, store.run_dir(run_id))
        if len(data) != 1:
            raise SystemExit(f"--sweep {run_id}: expected one architecture, got {sorted(data)}")
        (dataset,) = data.values()
        clash = set(dataset.programs) & set(features)
        if clash:
            raise SystemExit(f"--sweep {run_id}: programs already swept in an earlier run: {sorted(clash)}")
        rows.extend(dataset.rows)
        features.update(dataset.features)
        evals.extend(ev)
    return Dataset(rows, features), evals, settings


def tuner_regrets(merged, evals, objective, default: int, controller=None) -> dict[str, dict[str, dict]]:
    """Tuner -> program -> {pick, regret}."""
    from archlab.tuning.learned import cross_validate

    out: dict[str, dict[str, dict]] = {"default": {p: {"pick": default, "regret": objective.regret(merged, p, default)}
                                                   for p in merged.programs}}
    n = len(merged.programs)
    for name, model, seed_only in (("learned", "auto", False), ("learned (seed: tree, 6 features)", "decision-tree", True)):
        report = cross_validate(merged, model, "regression", default_size=default, n_splits=n, objective=objective.objective,
                                seed_features_only=seed_only, inner_splits=INNER_SPLITS)
        out[name] = {p: {"pick": m, "regret": objective.regret(merged, p, m)} for p, m in report.picks.items()}
        out[name + " scores"] = {"MAPE %": report.mape, "MSE": report.mse, "accuracy": report.accuracy, "F1 macro": report.f1_macro}
    for ev in evals:
        for t in ev.tuners:
            if t.name in ("model-based", "controller"):
                key = "controller (replay)" if t.name == "controller" else t.name
                out.setdefault(key, {}).update({p: {"pick": m, "regret": t.regret[p]} for p, m in t.picks.items()})
    if controller is not None:
        from archlab.tuning.live import controller_regret

        live = controller_regret(merged, controller, objective)
        out["controller (live)"] = {p: {"pick": None, "regret": s.regret, "value": s.value, "best_value": s.best_value}
                                    for p, s in live.items()}
    return out


def load_controller(store, run_id: str):
    from archlab.tuning.sweep import datasets, read_programs
    from archlab.tuning.tune_report import tune_settings

    view = store.load_run(run_id)
    tune = tune_settings(view.manifest)
    if tune is None or tune.controller is None:
        raise SystemExit(f"--controller {run_id}: expected a run of a spec whose [tune] names a controller")
    data = datasets(list(view.rows), tune, read_programs(tune, store.run_dir(run_id)))
    if len(data) != 1:
        raise SystemExit(f"--controller {run_id}: expected one architecture, got {sorted(data)}")
    return next(iter(data.values()))


# --- the mix change, live -------------------------------------------------------------------------

def mix_change(spec: Path, phases: tuple[str, str], static: tuple[int, int], phase_s: float, reps: int, work: Path) -> dict:
    """One server with the adaptive pool serves program A for ``phase_s``, then B for
    ``phase_s`` (the same server: its pool carries over), against a static pool at A's best
    level serving A and one at B's best serving B, in rotated order per repetition. Each phase
    is one load run with the sweep's warm-up and a window of ``phase_s``: the controller's window
    of B includes its adaptation to B. Returns per phase the mean latencies (s) of every
    repetition, and the controller's pool sizes over time."""
    from archlab.contract import check_load  # noqa: F401 - the data plane must be importable
    from archlab.lab.engine import Engine, load_params, serve_options
    from archlab.lab.processes import ProcessGroup
    from archlab.lab.services.downstream import start_for_cell
    from archlab.spec import SpecEnvironment, load_spec
    from archlab.spec.registry import DataPlaneRegistry
    from archlab.store.summary import read_summary

    exp, _ = load_spec(str(spec), SpecEnvironment.local(DataPlaneRegistry()))
    tune = exp.tune
    assert tune is not None and tune.controller is not None
    for p in phases:
        if p in tune.db_programs:
            raise SystemExit(f"--mix-change: expected programs without a db step (no database is started here), got {p}")
    cells = {c.workload: c for c in exp.cells()}
    cell = {p: cells[tune.workload(p)] for p in phases}
    # The sweep's warm-up (not the controller spec's longer one): B's window must see the adaptation.
    exp = dataclasses.replace(exp, warmup_s=SWEEP_WARMUP_S, duration_s=phase_s)
    engine = Engine.locate()
    out: dict = {"controller": {p: [] for p in phases}, "static": {p: [] for p in phases}, "pool_sizes": []}

    def static_cell(c, level):
        return dataclasses.replace(c, threads=level, server_options=tuple(o for o in c.server_options if o[0] != "pool_control"))

    def serve(group, c, downstream, tag):
        opts = work / f"{tag}.options.json"
        opts.write_text(json.dumps(serve_options(c, exp.placement, downstream=downstream)))
        server = group.start("server", engine.serve_argv(c.architecture, opts), work / f"{tag}.server.stderr")
        line = server.expect("listening ", 10.0)
        return server, line.split(" ", 1)[1].strip()

    def drive(c, target, tag, rep) -> float:
        params = work / f"{tag}.params.json"
        params.write_text(json.dumps(load_params(c, exp, target, repetition=rep)))
        summary, hdr = work / f"{tag}.summary.json", work / f"{tag}.hdr"
        import subprocess

        limit = exp.warmup_s + exp.duration_s + exp.load.timeout_s + 10
        subprocess.run(engine.load_argv(params, summary, hdr), check=True, timeout=limit, stdout=subprocess.DEVNULL,
                       stderr=open(work / f"{tag}.load.stderr", "w"))
        m = read_summary(summary).measurement
        if m.requests == 0:
            raise SystemExit(f"mix change {tag}: no request completed in the window")
        return m.mean_us / 1e6

    def pool_sizes(server) -> list:
        os.kill(server.pid, signal.SIGUSR1)
        line = server.expect("rusage ", 5.0)
        return json.loads(line.split(" ", 1)[1]).get("pool_sizes", [])

    a, b = phases
    with ProcessGroup() as group:
        for rep in range(1, reps + 1):
            order = ["controller", "static"] if rep % 2 else ["static", "controller"]
            for who in order:
                down = start_for_cell(group, engine.path, cell[a], exp.placement, work, 10.0)
                try:
                    if who == "controller":
                        server, target = serve(group, cell[a], down.address, f"ctl{rep}")
                        try:
                            for p in phases:  # the same server: the program changes, the pool carries over
                                out["controller"][p].append(drive(cell[p], target, f"ctl{rep}-{p}", rep))
                            out["pool_sizes"].append(pool_sizes(server))
                        finally:
                            group.stop(server)
                    else:
                        for p, level in zip(phases, static):
                            server, target = serve(group, static_cell(cell[p], level), down.address, f"static{rep}-{p}")
                            try:
                                out["static"][p].append(drive(cell[p], target, f"static{rep}-{p}", rep))
                            finally:
                                group.stop(server)
                finally:
                    down.stop(group)
            print(f"  mix rep {rep}/{reps}: controller {[round(v[-1] * 1e3, 2) for v in out['controller'].values()]} ms, "
                  f"static {[round(v[-1] * 1e3, 2) for v in out['static'].values()]} ms", file=sys.stderr, flush=True)
    return out


# --- tables ---------------------------------------------------------------------------------------

def pct(v: float) -> str:
    return "n/a" if v is None or math.isnan(v) else ("inf" if math.isinf(v) else f"{100 * v:+.1f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default="runs", help="the result store (default: runs)")
    ap.add_argument("--sweep", action="append", required=True, help="a sweep's RUN_ID (repeatable)")
    ap.add_argument("--controller", help="RUN_ID of a live run of the adaptive pool (seed003-controller.toml)")
    ap.add_argument("--mix-change", help="A,B: run program A then B on one adaptive server, against static pools")
    ap.add_argument("--mix-spec", default="experiments/seed003-controller.toml")
    ap.add_argument("--mix-reps", type=harness.count(), default=3)
    ap.add_argument("--phase-s", type=harness.number(), default=6.0, help="window of each phase, seconds (default 6)")
    args = ap.parse_args()

    from archlab.cli.stores import open_store
    from archlab.tuning.sweep import SweepObjective
    from archlab.tuning.tune_report import tune_settings

    store = open_store(args.store)
    if args.mix_change:
        return mix_main(args, store)
    merged, evals, (objective_name, default, concurrency, levels) = load_sweeps(store, args.sweep)
    objective = SweepObjective.of(tune_settings(store.load_run(args.sweep[0]).manifest))
    controller = load_controller(store, args.controller) if args.controller else None
    per = tuner_regrets(merged, evals, objective, default, controller)

    programs = merged.programs
    tuners = [t for t in per if not t.endswith(" scores")]
    table = []
    print(f"## Median regret over {len(programs)} held-out programs ({objective.text}, concurrency {concurrency}, "
          f"levels {list(levels)}, default {default})\n")
    print("| tuner | programs | median regret [bootstrap 95% CI] | beats the default: median of (1 + default) / (1 + tuner) [95% CI] | target |")
    print("|---|---|---|---|---|")
    for t in tuners:
        regrets = [per[t][p]["regret"] for p in programs if p in per[t]]
        med, lo, hi = regret_interval(regrets)
        row = {"tuner": t, "programs": len(regrets), "median_regret": med, "low": lo, "high": hi}
        beats = ""
        if t != "default":
            ps = [p for p in programs if p in per[t] and not math.isnan(per[t][p]["regret"])]
            iv = median_ratio_interval([1 + per["default"][p]["regret"] for p in ps], [1 + per[t][p]["regret"] for p in ps])
            row.update(beats_default=iv.median, beats_low=iv.low, beats_high=iv.high)
            beats = f"{iv}" + (" (beats)" if iv.low > 1 else " (not established)")
        target = ""
        if t in ("learned", "model-based"):
            target = ("met" if hi <= TARGET else "not met") + f" (<= {100 * TARGET:.0f}%)"
            row["target_met"] = hi <= TARGET
        print(f"| {t} | {len(regrets)} | {pct(med)} [{pct(lo)}, {pct(hi)}] | {beats} | {target} |")
        table.append(row)

    print("\n## Per program: the measured best level and each tuner's pick (regret)\n")
    print("| program | best | mean latency at best (ms) | tied levels | " + " | ".join(tuners) + " |")
    print("|---|---|---|---|" + "---|" * len(tuners))
    from archlab.tuning.sweep import choose

    for p in programs:
        ch = choose(merged, p, objective)
        cells = []
        for t in tuners:
            e = per[t].get(p)
            cells.append("" if e is None else (f"{e['pick']} ({pct(e['regret'])})" if e["pick"] is not None else pct(e["regret"])))
        ties = ", ".join(map(str, ch.ties)) or "none"
        print(f"| {p} | {ch.best} | {ch.interval.mean * 1e3:.3g} [{ch.interval.low * 1e3:.3g}, {ch.interval.high * 1e3:.3g}] | {ties} | "
              + " | ".join(cells) + " |")
    for t in per:
        if t.endswith(" scores"):
            print(f"\n{t[:-7]}: " + ", ".join(f"{k} {v:.3g}" for k, v in per[t].items()))

    from archlab.tuning.evaluate import seed_models

    print("\n## The seed's four models (Table 5.2's metrics) on held-out programs: 5-fold grouped CV, inner search grouped too\n")
    print("| model | task | MAPE % | MSE (threads^2) | accuracy | F1 macro | median regret |")
    print("|---|---|---|---|---|---|---|")
    scores = seed_models(merged, objective, default)
    for sc in scores:
        print(f"| {sc.model} | {sc.task} | {sc.mape:.1f} | {sc.mse:.0f} | {sc.accuracy:.2f} | {sc.f1_macro:.2f} | {pct(sc.median_regret)} |")

    facts = machine_facts({"scikit-learn": package_version("scikit-learn"), "xgboost": package_version("xgboost")})
    settings = {"sweeps": args.sweep, "controller": args.controller, "objective": objective.text, "default": default,
                "concurrency": concurrency, "levels": list(levels), "learned_cv": f"leave one program out; {INNER_SPLITS}-fold grouped inner search",
}
    path = write_results("tuner_regret", table, facts, settings, {"per_program": per, "seed_models": scores})
    print(f"\nwrote {path}", file=sys.stderr)
    return 0


def mix_main(args, store) -> int:
    """``--mix-change A,B``: the live run alone (a measurement: hold the measurement lock), its
    static levels read from the sweeps; writes ``bench/results/tuner_mix_change.json``."""
    import statistics

    from archlab.tuning.sweep import SweepObjective
    from archlab.tuning.tune_report import tune_settings

    merged, _, _ = load_sweeps_light(store, args.sweep)
    objective = SweepObjective.of(tune_settings(store.load_run(args.sweep[0]).manifest))
    a, b = args.mix_change.split(",")
    for p in (a, b):
        if p not in merged.programs:
            raise SystemExit(f"--mix-change: expected programs of the sweeps ({', '.join(merged.programs)}), got {p}")
    static = (objective.best(merged, a), objective.best(merged, b))
    with tempfile.TemporaryDirectory(prefix="tuner-mix-") as work:
        mix = mix_change(Path(args.mix_spec), (a, b), static, args.phase_s, args.mix_reps, Path(work))
    print(f"## Program change mid-run: {a} then {b} on one server with the adaptive pool, vs static pools at "
          f"each phase's best ({a}: {static[0]}, {b}: {static[1]}), {args.mix_reps} repetitions, {args.phase_s:g} s windows\n")
    print("| phase | adaptive pool mean latency (ms), median | static best (ms), median | adaptive / static, median of per-repetition ratios [95% CI] |")
    print("|---|---|---|---|")
    table = []
    for p in (a, b):
        c, st = mix["controller"][p], mix["static"][p]
        iv = median_ratio_interval(c, st)
        print(f"| {p} | {statistics.median(c) * 1e3:.3g} | {statistics.median(st) * 1e3:.3g} | {iv} |")
        table.append({"phase": p, "adaptive_ms": statistics.median(c) * 1e3, "static_ms": statistics.median(st) * 1e3,
                      "ratio": iv.median, "low": iv.low, "high": iv.high})
    print(f"\npool sizes of the adaptive server ([ms since start, size] per change), per repetition: {mix['pool_sizes']}")
    settings = {"sweeps": args.sweep, "phases": [a, b], "static_levels": list(static), "phase_s": args.phase_s, "reps": args.mix_reps,
                "spec": args.mix_spec}
    path = write_results("tuner_mix_change", table, machine_facts(), settings, mix)
    print(f"\nwrote {path}", file=sys.stderr)
    return 0


def load_sweeps_light(store, run_ids: list[str]):
    """The merged dataset alone (no tuner evaluation): what the mix change needs."""
    from archlab.tuning.dataset import Dataset
    from archlab.tuning.sweep import datasets, read_programs
    from archlab.tuning.tune_report import tune_settings

    rows, features = [], {}
    for run_id in run_ids:
        view = store.load_run(run_id)
        tune = tune_settings(view.manifest)
        if tune is None or tune.controller is not None:
            raise SystemExit(f"--sweep {run_id}: expected a sweep (a run of a spec with a [tune] section and no controller)")
        for ds in datasets(list(view.rows), tune, read_programs(tune, store.run_dir(run_id))).values():
            rows.extend(ds.rows)
            features.update(ds.features)
    return Dataset(rows, features), None, None


if __name__ == "__main__":
    harness.run_main(main)
