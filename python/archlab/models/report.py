"""The models section of a run's HTML report: :func:`report_section` returns a self-contained
fragment (``<section id="models">`` with a figure and tables, no external reference, no script)
that the report inlines. The figure is drawn with matplotlib's object API (no pyplot, so no GUI
backend is touched) and inlined as SVG."""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from archlab.models.errors import ModelError
from archlab.plotstyle import style
from archlab.models.fromrun import GroupFit, check_run_laws, fit_run, law_summary

if TYPE_CHECKING:
    from archlab.store import Manifest, ResultRow

_STYLE = style({"font.size": 9}, salt="archlab-models")


def report_section(
    manifest: Manifest, rows: Sequence[ResultRow], confidence: float = 0.95,
    weighting: Literal["none", "relative"] = "relative",
) -> str:
    """HTML fragment: per architecture and workload, the USL fitted to the measured
    (concurrency, throughput) points, its parameters with intervals, its predicted throughput
    and mean latency (R = N / X - Z) beside the measured ones with the error, one SVG figure of
    the points and the fitted curves with their confidence bands, and the operational-law checks.
    Never raises for data it cannot model: it says why in the fragment instead."""
    head = '<section id="models"><h2>Models: Universal Scalability Law vs measured</h2>'
    try:
        fits = fit_run(manifest, rows, confidence, weighting)
    except ModelError as exc:
        return head + f"<p>No scalability model for this run: {_e(str(exc))}.</p></section>"
    parts = [head, (
        "<p>For each architecture and workload the Universal Scalability Law "
        "X(N) = &lambda;N / (1 + &sigma;(N&minus;1) + &kappa;N(N&minus;1)) is fitted by bounded least squares "
        f"to every successful repetition (N = concurrency, the closed model's clients){_weighting(weighting)}. Where the "
        "levels cannot identify three parameters, Amdahl's law (&kappa; = 0) is fitted instead; "
        "p tests whether the coherency term &kappa; is needed at all (Amdahl vs USL, extra sum of squares). "
        "The model's mean latency follows from the interactive response-time law R = N/X &minus; Z. "
        f"Intervals are {100 * confidence:g}%; errors are (model &minus; measured) / measured. "
        "With few concurrency levels the fit describes the measured range, not beyond it.</p>")]
    fitted = [f for f in fits if f.model is not None]
    if fitted:
        parts.append('<figure id="figure-models-usl"><h3>Measured throughput and fitted USL</h3>'
                     f"{_figure(fitted)}<figcaption>Points: one per repetition. Lines: fitted model; "
                     f"shaded: {100 * confidence:g}% confidence band of the fitted curve.</figcaption></figure>")
    parts.append(_parameter_table(fits))
    notes = [f"<li>{_e(f.label)}: {_e(note)}</li>" for f in fits for note in f.notes]
    if notes:
        parts.append("<ul class=\"models-notes\">" + "".join(notes) + "</ul>")
    parts.append(_comparison_table(fits))
    parts.append(_laws(manifest, rows))
    parts.append("</section>")
    return "".join(parts)


def _parameter_table(fits: Sequence[GroupFit]) -> str:
    body = []
    for f in fits:
        m = f.model
        if m is None:
            body.append(f"<tr><th scope=\"row\">{_e(f.label)}</th><td colspan=\"7\">no fit: {_e(f.reason or '')}</td></tr>")
            continue
        ci = m.confint_
        star = "none" if math.isinf(m.n_star_) else f"{m.n_star_:.4g} [{m.n_star_confint_[0]:.3g}, {m.n_star_confint_[1]:.3g}]"
        body.append(
            f"<tr><th scope=\"row\">{_e(f.label)}</th><td>{m.name}</td>"
            f"<td>{m.sigma_:.4g} [{ci['sigma'][0]:.3g}, {ci['sigma'][1]:.3g}]</td>"
            f"<td>{m.kappa_:.4g} [{ci['kappa'][0]:.3g}, {ci['kappa'][1]:.3g}]</td>"
            f"<td>{m.lambda_:.5g} [{ci['lambda'][0]:.5g}, {ci['lambda'][1]:.5g}]</td>"
            f"<td>{_e(star)}</td><td>{_p(f)}</td><td>{m.n_.size} / {m.dof_}</td></tr>"
        )
    return ('<table class="models-fit"><thead><tr><th scope="col">architecture, workload</th><th scope="col">model</th>'
            '<th scope="col">&sigma; (contention)</th><th scope="col">&kappa; (coherency)</th>'
            '<th scope="col">&lambda; <small>req/s</small></th><th scope="col">N* (peak)</th>'
            '<th scope="col">p (&kappa; = 0)</th><th scope="col">points / dof</th></tr></thead><tbody>' + "".join(body) + "</tbody></table>")


def _comparison_table(fits: Sequence[GroupFit]) -> str:
    body = []
    for f in fits:
        for i, lv in enumerate(f.levels):
            label = f'<th scope="row" rowspan="{len(f.levels)}">{_e(f.label)}</th>' if i == 0 else ""
            body.append(
                f"<tr>{label}<td>{lv.concurrency:g}</td><td>{lv.repetitions}</td>"
                f"<td>{_n(lv.measured_throughput, '.5g')}</td><td>{_n(lv.predicted_throughput, '.5g')}</td>"
                f"<td>{_pct(lv.throughput_error)}</td><td>{_n(lv.measured_response * 1e3, '.4g')}</td>"
                f"<td>{_n(lv.predicted_response * 1e3, '.4g')}</td><td>{_pct(lv.response_error)}</td></tr>"
            )
    return ('<table class="models-compare"><thead><tr><th scope="col">architecture, workload</th><th scope="col">N</th>'
            '<th scope="col">reps</th><th scope="col">X measured <small>req/s</small></th>'
            '<th scope="col">X model</th><th scope="col">X error</th><th scope="col">R measured <small>ms</small></th>'
            '<th scope="col">R model</th><th scope="col">R error</th></tr></thead><tbody>' + "".join(body) + "</tbody></table>")


def _laws(manifest: Manifest, rows: Sequence[ResultRow]) -> str:
    checks = check_run_laws(manifest, rows)
    if not checks:
        return "<p>Operational laws: no row carries the figures to check them.</p>"
    items = "".join(f"<li>{_e(line)}</li>" for line in law_summary(checks))
    return ("<p>Operational laws checked on each measured row (a disagreement means the quantities were not "
            "measured over the same window, time the latency does not show, or lost requests; Little's law within "
            "each row's sampling tolerance, the utilisation laws within 5%):</p><ul>" + items + "</ul>")


def _figure(fits: Sequence[GroupFit]) -> str:
    import matplotlib
    import matplotlib.ticker
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    workloads = list(dict.fromkeys(_workload(f) for f in fits))
    cols = min(len(workloads), 3)
    nrows = math.ceil(len(workloads) / cols)
    with matplotlib.rc_context(cast(Any, _STYLE)):
        fig = Figure(figsize=(4.2 * cols, 3.2 * nrows), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrows, cols, squeeze=False)).ravel()
        colours = cast(Sequence[Any], cast(ListedColormap, matplotlib.colormaps["tab10"]).colors)
        for ax, workload in zip(axes, workloads):
            group = [f for f in fits if _workload(f) == workload]
            n_max = max(float(f.n.max()) for f in group)
            log = n_max / max(min(float(f.n.min()) for f in group), 1.0) > 30
            grid = np.geomspace(1.0, n_max * 1.25, 200) if log else np.linspace(1.0, n_max * 1.25, 200)
            for i, f in enumerate(group):
                c = colours[i % len(colours)]
                band = f.model.predict(grid, interval="confidence")  # type: ignore[union-attr]
                ax.fill_between(grid, band.lower, band.upper, color=c, alpha=0.18, linewidth=0)
                ax.plot(grid, band.throughput, color=c, linewidth=1.4, label=_architecture(f))
                ax.plot(f.n, f.x, "o", color=c, markersize=3.5)
            if log:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_title(workload)
            ax.set_xlabel("concurrency N")
            ax.set_ylabel("throughput (req/s)")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=7)
        for ax in axes[len(workloads):]:
            ax.set_visible(False)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)


def _workload(f: GroupFit) -> str:
    """The panel a group is drawn in: every level but the architecture."""
    return ", ".join(str(v) if k == "workload" else f"{k}={v}" for k, v in f.key if k != "architecture") or "all"


def _architecture(f: GroupFit) -> str:
    return str(dict(f.key).get("architecture"))


def _weighting(weighting: str) -> str:
    return ", weighting relative errors (the spread of repeated runs is a percentage)" if weighting == "relative" else ""


def _p(f: GroupFit) -> str:
    return "n/a" if f.comparison is None else f"{f.comparison.p_value:.2g}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _n(v: float, fmt: str) -> str:
    return "n/a" if not math.isfinite(v) else format(v, fmt)


def _pct(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{100 * v:+.1f}%"


__all__ = ["report_section"]
