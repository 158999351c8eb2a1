"""What ``archlab tune`` says about a stored sweep: :func:`analyse` turns a run of a spec with a
``[tune]`` section into one :class:`~archlab.tuning.evaluate.Evaluation` per architecture (the
measured best level of each program with its interval and ties, the three tuners' picks and
regrets); :func:`summary_text` prints them for the terminal and :func:`report_section` gives the
run report's section (a table and a figure: the objective vs the level per program, with each
tuner's pick marked). Both are pure functions of the stored run."""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from archlab.errors import ArchlabError
from archlab.plotstyle import style
from archlab.spec.tune import TuneSettings
from archlab.spec.units import parse_cpu_list
from archlab.store.manifest import Manifest
from archlab.store.rows import ResultRow
from archlab.tuning.dataset import Objective
from archlab.tuning.evaluate import Evaluation, Setting, evaluate
from archlab.tuning.fanout import Mapper, here
from archlab.tuning.sweep import SweepObjective, datasets, read_programs

_MARKERS = {"best": ("*", 13), "default": ("X", 8), "learned": ("^", 8), "model-based": ("s", 7), "controller": ("D", 7)}


def tune_settings(manifest: Manifest) -> TuneSettings | None:
    """The run's ``[tune]`` section, or None for a run of another spec."""
    d = manifest.spec.get("tune") if manifest.spec else None
    return TuneSettings.from_dict(d) if isinstance(d, dict) else None


def analyse(manifest: Manifest, rows: Sequence[ResultRow], run_dir: Path | None, mapper: Mapper = here) -> list[Evaluation]:
    return analyse_with_data(manifest, rows, run_dir, mapper)[0]


def live_summary_text(manifest: Manifest, rows: Sequence[ResultRow], run_dir: Path | None) -> str:
    """A run of the adaptive pool (``tune.controller``): per architecture and program, the
    objective's mean over repetitions with its 95% interval. Its regret needs a sweep's best
    (:func:`archlab.tuning.live.controller_regret`; ``bench/tuner_regret.py``)."""
    tune = tune_settings(manifest)
    if tune is None or tune.controller is None:
        raise ArchlabError(f"run {manifest.run_id} is not a live run of an adaptive pool (its [tune] names no controller)")
    objective = SweepObjective.of(tune)
    unit, scale = _unit(objective)
    lines = []
    for arch, dataset in sorted(datasets(list(rows), tune, read_programs(tune, run_dir)).items()):
        lines.append(f"{arch} with pool_control = {tune.controller} ({tune.parameter} <= {tune.levels[0]}): {objective.text}")
        for p in dataset.programs:
            iv = objective.intervals(dataset, p)[tune.levels[0]]
            ci = f" [{iv.low * scale:.3g}, {iv.high * scale:.3g}]" if iv.has_interval else ""
            lines.append(f"  {p:<20} {iv.mean * scale:.3g} {unit}{ci}")
    return "\n".join(lines)


def analyse_with_data(manifest: Manifest, rows: Sequence[ResultRow], run_dir: Path | None,
                      mapper: Mapper = here) -> tuple[list[Evaluation], dict]:
    """:func:`analyse`, with the datasets it read (architecture -> Dataset); ``mapper`` runs
    the learned tuner's outer folds (here, or on a cluster's workers: the same evaluations)."""
    tune = tune_settings(manifest)
    if tune is None:
        raise ArchlabError(f"run {manifest.run_id} is not a sweep (its spec has no [tune] section)")
    if tune.controller is not None:
        raise ArchlabError(f"run {manifest.run_id} measured the adaptive pool live, not a sweep (see live_summary_text)")
    programs = read_programs(tune, run_dir)
    objective = SweepObjective.of(tune)
    spec = manifest.spec
    cores = len(parse_cpu_list(manifest.server_cpus, "placement.server_cpus")) if manifest.server_cpus else 1
    db = spec.get("db") or {}
    setting = Setting(cores=cores, concurrency=tune.concurrency, think_time_s=float(spec.get("load", {}).get("think_time_s", 0.0)),
                      db_connections=int(db.get("pool", 10)))
    out = []
    data = datasets(list(rows), tune, programs)
    for arch, dataset in sorted(data.items()):
        cpu: dict[str, list[float]] = {}
        for r in rows:
            p = tune.program_of(r.cell.workload or "")
            if (r.ok and r.cost is not None and p is not None and r.cell.architecture == arch
                    and getattr(r.cell, tune.parameter) == 1 and r.cell.concurrency == tune.concurrency):
                cpu.setdefault(p, []).append(r.cost.cpu_us_per_request / 1e6)
        cpu_at_one = {p: float(np.mean(v)) for p, v in cpu.items()}
        out.append(evaluate(arch, dataset, objective, tune.default, setting, cpu_at_one, mapper=mapper))
    return out, data


def _unit(objective: SweepObjective) -> tuple[str, float]:
    return ("req/s", 1.0) if objective.objective is Objective.THROUGHPUT else ("ms", 1e3)


def _pct(v: float) -> str:
    return "n/a" if math.isnan(v) else ("inf" if math.isinf(v) else f"{100 * v:+.1f}%")


def summary_text(evals: Sequence[Evaluation], parameter: str) -> str:
    lines: list[str] = []
    for ev in evals:
        unit, scale = _unit(ev.objective)
        lines.append(f"{ev.architecture}: best {parameter} per program ({ev.objective.text}; ties: levels whose 95% interval overlaps the best's)")
        head = ["program", "best", f"{ev.objective.objective.value} ({unit})", "ties", f"default {ev.default}",
                *(t.name for t in ev.tuners)]
        table = []
        for p, c in ev.choices.items():
            if c.best is None or c.interval is None:
                cells = [p, "none", "no level meets the latency limit", "-", "-"]
            else:
                iv = c.interval
                value = f"{iv.mean * scale:.3g} [{iv.low * scale:.3g}, {iv.high * scale:.3g}]" if iv.has_interval else f"{iv.mean * scale:.3g} (n=1)"
                cells = [p, str(c.best), value, ",".join(map(str, c.ties)) or "-", _pct(ev.default_regret[p])]
            cells += [f"{t.picks[p]} ({_pct(t.regret[p])})" if p in t.picks else "-" for t in ev.tuners]
            table.append(cells)
        widths = [max(len(r[i]) for r in [head, *table]) for i in range(len(head))]
        for r in [head, *table]:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        lines.append(f"  median regret vs the measured best: default {_pct(ev.median_default_regret)}, "
                     + ", ".join(f"{t.name} {_pct(t.median_regret)}" for t in ev.tuners))
        for t in ev.tuners:
            if t.note:
                lines.append(f"  {t.name}: {t.note}")
        if ev.learned_scores:
            lines.append("  learned model on held-out programs: " + ", ".join(f"{k} {v:.3g}" for k, v in ev.learned_scores.items()))
    return "\n".join(lines)


def models_text(evals: Sequence[Evaluation], datasets_by_arch: dict, default: int, mapper: Mapper = here) -> str:
    """The seed's Table 5.2 on this sweep: its four models as regression and classification,
    scored on held-out programs (grouped cross-validation), per architecture."""
    from archlab.tuning.evaluate import seed_models

    lines = []
    for ev in evals:
        lines.append(f"{ev.architecture}: the seed's models on held-out programs (grouped CV; seed 003 Table 5.2 beside)")
        head = ["model", "task", "MAPE %", "MSE", "accuracy", "F1 macro", "median regret"]
        rows = [[m.model, m.task, f"{m.mape:.1f}", f"{m.mse:.3g}", f"{m.accuracy:.2f}", f"{m.f1_macro:.2f}", _pct(m.median_regret)]
                for m in seed_models(datasets_by_arch[ev.architecture], ev.objective, default, mapper)]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for r in [head, *rows]:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def report_section(manifest: Manifest, rows: Sequence[ResultRow], run_dir: Path | None = None,
                   analysed: Callable[[], Sequence[Evaluation]] | None = None) -> str:
    """HTML fragment for the run report; never raises for data it cannot use (says why).
    ``analysed``: the run's analysis as the caller computes it (``archlab tune`` analyses a
    sweep once, for the report and the terminal, on its cluster if it has one), else
    :func:`analyse` here."""
    head = '<section id="tuning"><h2>Pool-size tuning</h2>'
    tune = tune_settings(manifest)
    if tune is None:
        return ""
    try:
        evals = list(analysed()) if analysed is not None else analyse(manifest, rows, run_dir)
    except (ArchlabError, OSError) as e:
        return head + f"<p>No tuning analysis for this run: {html.escape(str(e))}.</p></section>"
    if not evals:
        return head + "<p>No successful repetition to analyse.</p></section>"
    parts = [head, f"<p>Each program swept over {tune.parameter} = {', '.join(map(str, tune.levels))} at concurrency "
             f"{tune.concurrency}; objective {html.escape(evals[0].objective.text)}. Regret = value at a tuner's level / value at "
             "the measured best &minus; 1 (for throughput, best / value &minus; 1).</p>"]
    for ev in evals:
        parts.append(f"<h3>{html.escape(ev.architecture)}</h3><pre>{html.escape(summary_text([ev], tune.parameter))}</pre>")
        parts.append(f'<figure id="figure-tuning-{html.escape(ev.architecture)}">{_figure(ev, tune)}<figcaption>'
                     "Mean over repetitions with 95% intervals; markers: the measured best (star), the default (X), "
                     "the learned (triangle), model-based (square) and controller (diamond) picks.</figcaption></figure>")
    return "".join(parts) + "</section>"


def _figure(ev: Evaluation, tune: TuneSettings) -> str:
    import matplotlib
    from matplotlib.figure import Figure

    unit, scale = _unit(ev.objective)
    programs = list(ev.choices)
    cols = min(len(programs), 3)
    nrows = math.ceil(len(programs) / cols)
    with matplotlib.rc_context(cast(Any, style({"font.size": 8}, salt=f"tuning-{ev.architecture}"))):
        fig = Figure(figsize=(3.6 * cols, 2.8 * nrows), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrows, cols, squeeze=False)).ravel()
        for ax, p in zip(axes, programs):
            c = ev.choices[p]
            levels = sorted(c.intervals)
            mean = np.array([c.intervals[m].mean for m in levels]) * scale
            err = np.array([c.intervals[m].half_width for m in levels]) * scale
            ax.errorbar(levels, mean, yerr=err, color="#444444", linewidth=1.2, capsize=2)
            marks = {"best": c.best, "default": ev.default, **{t.name: t.picks.get(p) for t in ev.tuners}}
            for i, (name, level) in enumerate(marks.items()):
                if level is None:
                    continue
                nearest = min(levels, key=lambda m: (abs(m - level), -m))
                marker, size = _MARKERS[name]
                # Side by side around the level (a fifth of an octave apart), so that picks of
                # the same level stay visible.
                x = level * 2 ** (0.2 * (i - (len(marks) - 1) / 2))
                ax.plot([x], [c.intervals[nearest].mean * scale], marker, markersize=size, color=f"C{i}", label=name, alpha=0.9)
            ax.set_xscale("log", base=2)
            ax.set_xticks(levels, [str(m) for m in levels])
            ax.set_ylim(bottom=0)
            ax.set_title(p)
            ax.set_xlabel(tune.parameter)
            ax.set_ylabel(f"{ev.objective.objective.value} ({unit})")
        for ax in axes[len(programs):]:
            ax.set_visible(False)
        axes[0].legend(fontsize=7)
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
    return buf.getvalue()
