"""The HTML report of one run: a single self-contained file, readable offline and on paper.

Everything the page needs is inside it: CSS in a ``<style>`` element, figures as inline SVG, no
script, no web font, no external reference, so the file can be mailed, archived next to the run
or opened years later without a network. The page states what was run and on what (experiment,
revision, kernel, CPU, placement, spec hash) and under which load model, then answers the
run's questions in reading order: the best architecture for each load, the figures, the full
results with their confidence intervals, and the repetitions that failed and why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from pathlib import Path

import archlab
from archlab.report.aggregate import METRICS, Cell, LoadGroup, LoadLevel, Win, aggregate, group_by_load
from archlab.report.classes import classes_section
from archlab.report.figures import Figure, render_figures
from archlab.report.formatting import MISSING, foreign_text, format_interval, interval_text, littles_law_text, utilisation_text
from archlab.report.glance import comparison_confidence, confidence_text, disturbance_clause, disturbance_limit, group_verdict
from archlab.report.provenance import Provenance, provenance
from archlab.report.processes import processes_html
from archlab.report.sources import column_sources_html
from archlab.stats import Interval
from archlab.store import Manifest, ResultRow

__all__ = ["write_html"]

_CSS_PATH = Path(__file__).with_name("report.css")
_ERROR_TAIL_LINES = 20
_MARK_SYMBOL = {Win.CLEAR: "★", Win.TIED: "☆"}
_MARK_TITLE = {
    Win.CLEAR: "best mean throughput; the interval of its ratio to the runner-up's is clear of 1",
    Win.TIED: "best mean throughput, lead not established (the ratio's interval contains 1, or n=1)",
}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


# -- header --------------------------------------------------------------------------------


def _model_note(model: str) -> str:
    if model == "closed":
        return (
            "<strong>Closed model</strong>, latency not corrected for coordinated omission: each "
            "connection keeps one request in flight and sends the next only after the answer, so "
            "a slow server slows its own load. Throughput is what this load achieved, not the "
            "server's capacity, and latency quantiles understate what open arrivals would see."
        )
    if model == MISSING:
        return "<strong>Load model not recorded</strong> in the run's manifest."
    return f"<strong>{_e(model.capitalize())} model</strong>."


def _status_note(status: str | None) -> str:
    # Only a run that is not complete needs a word: its tables cover the cells done so far.
    if status in (None, "complete"):
        return ""
    return (
        f'<p class="status-note">This run is <strong>{_e(status)}</strong>: the report covers '
        "the cells recorded so far (<code>archlab run --resume</code> finishes it).</p>"
    )


def _header(p: Provenance) -> str:
    facts = [
        ("Run", f"<code>{_e(p.run_id)}</code>"),
        ("Started", _e(p.started)),
        ("Protocol", _e(p.protocol)),
        ("Git revision", f"<code>{_e(p.git_revision)}</code>"),
        ("Build", _e(p.build)),
        ("Kernel", _e(p.kernel)),
        ("CPU", _e(p.cpu_model)),
        ("Placement", _e(p.placement)),
        ("Network", _e(p.network)),
        ("Spec hash", f'<code class="hash">{_e(p.spec_hash)}</code>'),
    ]
    return (
        "<header>"
        '<p class="kicker">archlab report</p>'
        f"<h1>{_e(p.name)}</h1>"
        + (f'<p class="lede">{_e(p.description)}</p>' if p.description else "")
        + '<dl class="facts">'
        + "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
        + "</dl>"
        + _status_note(p.status)
        + f'<p class="model-note">{_model_note(p.load_model)}</p>'
        "</header>"
    )


# -- at a glance ---------------------------------------------------------------------------


def _glance_html(group: LoadGroup | None) -> str:
    """One load group's established order (best first; '>' separated, '=' tied), the best's
    throughput, and what each tie means (:mod:`archlab.report.glance`)."""
    if group is None:
        return f'<td class="none">{MISSING}</td>'
    winner = group.winner
    if winner is None:
        lone = next((c for c in group.cells if c.throughput is not None), None)
        return f'<td class="none">{_e(lone.label) if lone else "all failed"}</td>'
    cell, win = winner.cell, winner.win
    _, order, ties = group_verdict(group)
    throughput = format_interval(cell.throughput, METRICS["throughput_rps"])
    return (
        f'<td class="{win.value}" title="{_e(_MARK_TITLE[win])}">'
        f'<span class="mark">{_MARK_SYMBOL[win]}</span> {_e(order)}'
        f'<span class="sub">best: {_e(cell.label)} {_e(throughput)} req/s</span>'
        + "".join(f'<span class="sub">{_e(tie)}</span>' for tie in ties)
        + (f'<span class="sub bad">{_e(d)}</span>' if (d := disturbance_clause(group)) is not None else "")
        + "</td>"
    )


def _level_axis(levels: Sequence[LoadLevel]) -> str:
    """What the load levels are, for a heading: "concurrency", "offered rate (req/s)"..."""
    kinds = {level.kind for level in levels}
    if kinds == {"concurrency"}:
        return "concurrency"
    return levels[0].axis if len(kinds) == 1 else "load level"


def _glance(groups: Sequence[LoadGroup]) -> str:
    workloads = sorted({g.workload for g in groups})
    levels = sorted({g.level for g in groups})
    by_load = {(g.workload, g.level): g for g in groups}
    head = "".join(f'<th scope="col" class="num">{_e(level.text)}</th>' for level in levels)
    axis = _level_axis(levels)
    level = confidence_text(groups[0].confidence) if groups else "95%"
    body = "".join(
        f'<tr><th scope="row"><code>{_e(w)}</code></th>'
        + "".join(_glance_html(by_load.get((w, level))) for level in levels)
        + "</tr>"
        for w in workloads
    )
    return (
        '<section id="glance"><h2>At a glance</h2>'
        f"<p>The order of mean throughputs for each workload and {_e(axis)}, best first: "
        f"'&gt;' where the {_e(level)} interval of the two means' ratio is clear of 1, "
        "'=' a tie where it is not, with the smallest difference the run could have detected, "
        "',' listed by mean only where a side has fewer than two successful repetitions (no interval). "
        f"{_MARK_SYMBOL[Win.CLEAR]} the best's lead is established; "
        f"{_MARK_SYMBOL[Win.TIED]} it is not (a tie, or a single repetition and so no interval).</p>"
        f'<table class="glance"><thead><tr><th scope="col">workload \\ {_e(axis)}</th>{head}'
        f"</tr></thead><tbody>{body}</tbody></table></section>"
    )


# -- figures -------------------------------------------------------------------------------


def _figures(figures: Sequence[Figure]) -> str:
    if not figures:
        return (
            '<section id="figures"><h2>Figures</h2>'
            "<p>No successful repetition to plot.</p></section>"
        )
    return (
        '<section id="figures"><h2>Figures</h2>'
        + "".join(
            f'<figure id="figure-{f.key}"><h3>{_e(f.title)}</h3>{f.svg}'
            f"<figcaption>{_e(f.caption)}</figcaption></figure>"
            for f in figures
        )
        + "</section>"
    )


# -- results tables ------------------------------------------------------------------------

# (metric key, column heading); latencies carry their unit in each cell.
_RESULT_COLUMNS = (
    ("throughput_rps", "throughput<br><small>req/s</small>"),
    ("p50_us", "p50"),
    ("p99_us", "p99"),
    ("p999_us", "p99.9"),
    ("cpu_us_per_request", "CPU<br><small>µs/req</small>"),
    ("cs_per_request", "ctx switches<br><small>per req</small>"),
    ("syscalls_per_request", "read+write<br><small>per req</small>"),
    ("handoffs_per_request", "hand-offs<br><small>per req</small>"),
)
# Added after throughput when the cells were driven by an open model: the rate offered, and the
# service time (from the actual send) beside the response times of the p-columns.
_OPEN_COLUMNS = (
    ("offered_rps", "offered<br><small>req/s</small>"),
    ("service_p99_us", "service p99<br><small>from send</small>"),
)


def _columns_for(groups: Sequence[LoadGroup]) -> tuple[tuple[str, str], ...]:
    if all(g.level.kind == "concurrency" for g in groups):
        return _RESULT_COLUMNS
    return (_RESULT_COLUMNS[0], *_OPEN_COLUMNS, *_RESULT_COLUMNS[1:])


def _interval_td(interval: Interval | None, key: str) -> str:
    if interval is None:
        return f'<td class="num">{MISSING}</td>'
    text = interval_text(interval, METRICS[key])
    # The unit stays with the mean; the half-width goes on a line of its own below it, which
    # keeps the table narrow enough for a page.
    mean = f"{text.mean} {text.unit}" if text.unit else text.mean
    half = f'<span class="pm">± {_e(text.half)}</span>' if text.half else ""
    return f'<td class="num">{_e(mean)}{half}</td>'


def _note_ref(note: int | None) -> str:
    """The footnote mark of a cell whose rows break Little's law (beside its name too, so a
    reader sees it before scrolling a wide table to the column)."""
    return "" if note is None else f'<sup class="note-ref"><a href="#littles-law-{note}">{note}</a></sup>'


def _littles_law_td(cell: Cell, note: int | None) -> str:
    """The cell's X(R+Z)/N; marked, with its footnote, when a repetition breaks the law."""
    text = _e(littles_law_text(cell, flag=""))
    if note is None:
        return f'<td class="num">{text}</td>'
    return f'<td class="num bad" title="Little\'s law not confirmed: see the footnote">{text}{_note_ref(note)}</td>'


def _result_row(
    cell: Cell, mark: Win | None, first_of_group: bool, columns: Sequence[tuple[str, str]], note: int | None = None
) -> str:
    classes = " ".join(
        name
        for name, applies in (("group-start", first_of_group), ("failed", not cell.stats))
        if applies
    )
    mark_html = (
        f'<span class="mark" title="{_e(_MARK_TITLE[mark])}">{_MARK_SYMBOL[mark]}</span>'
        if mark
        else ""
    )
    failed = len(cell.failures)
    bound = cell.generator_bound_repetitions
    return (
        f'<tr class="{classes}">'
        f'<td class="num">{_e(cell.level.text) if first_of_group else ""}</td>'
        f'<th scope="row">{mark_html}{_e(cell.label)}{_note_ref(note)}</th>'
        + "".join(_interval_td(cell.metric(key), key) for key, _ in columns)
        + f'<td class="num">{cell.errors}</td>'
        f'<td class="num{" bad" if failed else ""}">{cell.ok_repetitions}/{cell.repetitions}</td>'
        f'<td class="num{" bad" if bound else ""}">{bound}/{cell.ok_repetitions}</td>'
        f'<td class="num{" bad" if cell.disturbed or cell.set_aside else ""}">{_e(foreign_text(cell, flag=""))}</td>'
        f'<td class="num{" bad" if (law := cell.utilisation_law) is not None and not law.ok else ""}">'
        f"{_e(utilisation_text(cell, flag=''))}</td>"
        f"<td>{_e(cell.bottleneck)}</td>"
        + _littles_law_td(cell, note)
        + "</tr>"
    )


def _results_table(workload: str, groups: Sequence[LoadGroup], notes: Mapping[int, int]) -> str:
    columns = _columns_for(groups)
    head = "".join(f'<th scope="col" class="num">{h}</th>' for _, h in columns)
    level_head = {"concurrency": "conc", "rate": "rate<br><small>req/s</small>", "session_rate": "sessions<br><small>per s</small>"}
    kinds = {g.level.kind for g in groups}
    level_th = level_head[next(iter(kinds))] if len(kinds) == 1 else "load"
    rows = []
    for group in groups:
        winner = group.winner
        for index, cell in enumerate(group.cells):
            mark = winner.win if winner and winner.cell is cell else None
            rows.append(_result_row(cell, mark, index == 0, columns, notes.get(id(cell))))
    return (
        f"<h3><code>{_e(workload)}</code></h3>"
        '<div class="table-wrap"><table class="results"><thead><tr>'
        f'<th scope="col" class="num">{level_th}</th><th scope="col">architecture</th>'
        f'{head}<th scope="col" class="num">errors</th><th scope="col" class="num">reps ok</th>'
        '<th scope="col" class="num">generator-<br>bound</th>'
        '<th scope="col" class="num">foreign<br><small>CPU share</small></th>'
        '<th scope="col" class="num">U<br><small>server CPUs</small></th>'
        '<th scope="col">bottleneck</th>'
        '<th scope="col" class="num">X(R+Z)/N<br><small>Little</small></th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _littles_law_notes(flagged: Sequence[Cell]) -> str:
    """The footnotes of the cells whose repetitions break Little's law, numbered as marked."""
    if not flagged:
        return ""
    items = "".join(
        f'<li id="littles-law-{number}">{_e(cell.label)} · <code>{_e(cell.workload)}</code> · '
        f"{_e(cell.level.short)}: "
        + "; ".join(
            f"repetition {repetition}: X(R+Z)/N = {law.ratio:.3f} (tolerance ± {law.tolerance:.3f}"
            + (f", {law.planned_ratio:.3f} with R from the planned send" if law.planned_ratio is not None else "")
            + f"): {_e(law.explanation())}"
            for repetition, law in cell.littles_law_violations
        )
        + "</li>"
        for number, cell in enumerate(flagged, 1)
    )
    return (
        '<p class="littles-law-notes">Little\'s law not confirmed (off by more than sampling explains, or a '
        f'window too short to tell):</p><ol class="littles-law-notes">{items}</ol>'
    )


def _disturbed_notes(cells: Sequence[Cell]) -> str:
    """The repetitions whose measured CPUs went to other work beyond the run's threshold."""
    items = [
        f"<li>{_e(cell.label)} · <code>{_e(cell.workload)}</code> · {_e(cell.level.short)}, repetition {row.repetition}: "
        f"{row.conditions.foreign_share:.0%} foreign, {row.conditions.steal_share:.0%} steal, load average "
        f"{row.conditions.load_avg_start:.2f} → {row.conditions.load_avg_end:.2f}; {what}</li>"
        for cell in cells
        for rows, what in ((cell.disturbed, "in the statistics"), (cell.set_aside, "repeated, left out of the statistics"))
        for row in rows
        if row.conditions is not None
    ]
    if not items:
        return ""
    limit = cells[0].max_foreign
    return (f'<p class="bad">Disturbed repetitions (more than {limit:.0%} of the measured CPUs went to other work; '
            f"the orders they touch are not established on a quiet machine):</p><ul>{''.join(items)}</ul>")


def _results(groups: Sequence[LoadGroup]) -> str:
    workloads = sorted({g.workload for g in groups})
    # Footnotes are numbered in reading order: workload by workload, as the tables list cells.
    flagged = [c for w in workloads for g in groups if g.workload == w for c in g.cells if c.littles_law_violations]
    notes = {id(cell): number for number, cell in enumerate(flagged, 1)}
    tables = "".join(_results_table(w, [g for g in groups if g.workload == w], notes) for w in workloads)
    return (
        '<section id="results"><h2>Results</h2>'
        "<p>Mean over successful repetitions ± half-width of the 95% Student-t confidence "
        "interval (no interval with a single repetition). Latency quantiles come from each "
        "repetition's HDR histogram; CPU time, context switches and syscalls are those of the "
        "server process, divided by the requests it served. <em>Generator-bound</em> counts the "
        "repetitions in which the load generator's threads were saturated: their throughput is "
        "the generator's limit, a lower bound of the server's. For the open and partly-open "
        "models the latency quantiles are response times measured from each request's planned "
        "send time (coordinated omission corrected), <em>offered</em> is the arrivals (sessions "
        "for partly-open) the generator planned per second, and <em>service p99</em> is measured "
        "from the actual send.</p>"
        "<p><em>X(R+Z)/N</em> is Little's law for the closed model's N users (Little 1961; the "
        "interactive response time law, Lazowska et al. 1984 ch. 3): throughput times mean latency "
        "plus think time over the users, 1 when the latency accounts for the users' whole time. "
        "A marked cell has a repetition whose ratio is off by more than its sampling error explains "
        "(the window's edges, the think times drawn, HDR resolution), or whose window is too short "
        "for its slowest requests to tell (see the footnote); n/a where "
        "the law is not defined (the open models do not measure their population; simulations).</p>"
        "<p>Per-request columns (CPU, context switches, system calls, hand-offs) are the repetitions' totals over "
        "their requests, so that throughput times CPU per request is the CPUs in use (the utilisation law; a red "
        "<em>U</em> marks a row whose numbers break it). <em>U</em> is the server's CPU time over its CPUs' time "
        "in the windows; the <em>bottleneck</em> is what saturated: the server's CPUs (U at least 90%) or the load "
        "generator, else none, and then the throughput was set outside the measured processes and says nothing "
        "about the architecture's capacity.</p>"
        "<p><em>Foreign</em> is the most of the server's CPUs any repetition saw go to other work: processes "
        "that are not the lab's, and time the hypervisor stole (from <code>/proc/stat</code> at the window's "
        "edges, less the lab's own CPU time). A marked cell had a repetition over the run's threshold.</p>"
        f"{tables}{_disturbed_notes([c for g in groups for c in g.cells])}{_littles_law_notes(flagged)}</section>"
    )


# -- failures ------------------------------------------------------------------------------


def _error_tail(error: str) -> str:
    lines = error.rstrip().splitlines()
    if len(lines) > _ERROR_TAIL_LINES:
        lines = ["…", *lines[-_ERROR_TAIL_LINES:]]
    return "\n".join(lines)


def _failures(cells: Sequence[Cell]) -> str:
    failed = [(c, f) for c in cells for f in c.failures]
    total = sum(c.repetitions for c in cells)
    if not failed:
        body = f"<p>None: all {total} repetitions succeeded.</p>"
    else:
        items = "".join(
            f'<li><p class="where">{_e(c.label)} · <code>{_e(c.workload)}</code> · '
            f"{_e(c.level.short)} · repetition {_e(f.repetition)}</p>"
            f"<pre>{_e(_error_tail(f.error))}</pre></li>"
            for c, f in failed
        )
        body = (
            f"<p>{len(failed)} of {total} repetitions failed; the results above exclude them.</p>"
            f'<ul class="failures">{items}</ul>'
        )
    return f'<section id="failures"><h2>Failed repetitions</h2>{body}</section>'


def _models(manifest: Manifest, rows: Sequence[ResultRow]) -> str:
    """The scalability model beside the measurements (USL per architecture and workload).

    Imported here: the models pull in SciPy, which `archlab report`'s table alone does not
    need. The fragment never raises; data it cannot model get a sentence saying why."""
    from archlab.models import report_section

    return report_section(manifest, rows)


def _tuning(manifest: Manifest, rows: Sequence[ResultRow], run_dir: Path | None, analysed: Callable[[], Sequence] | None) -> str:
    """A pool-size sweep's section (a spec with [tune]): empty for other runs. Imported here:
    the tuners pull in scikit-learn. ``analysed``: the sweep's analysis as the caller computes it."""
    if not manifest.spec.get("tune"):
        return ""
    from archlab.tuning.tune_report import report_section

    return report_section(manifest, rows, run_dir, analysed)


# -- page ----------------------------------------------------------------------------------


def _nav(figures: Sequence[Figure], mixed: bool = False) -> str:
    links = [("glance", "At a glance")] + [(f"figure-{f.key}", f.title) for f in figures]
    links += [("results", "Results")] + ([("classes", "Request classes")] if mixed else [])
    links += [("models", "Scalability model"), ("failures", "Failed repetitions")]
    items = "".join(f'<li><a href="#{key}">{_e(title)}</a></li>' for key, title in links)
    return f"<nav><ol>{items}</ol></nav>"


def render_html(
    manifest: Manifest,
    rows: Iterable[ResultRow],
    run_dir: Path | None = None,
    tuning: Callable[[], Sequence] | None = None,
) -> str:
    """The report page as a string (see :func:`write_html`)."""
    rows = list(rows)
    cells = aggregate(rows, disturbance_limit(manifest))
    groups = group_by_load(cells, comparison_confidence(manifest))
    figures = render_figures(cells, run_dir)
    about = provenance(manifest)
    classes = classes_section(cells)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(about.name)} · {_e(about.run_id)} · archlab</title>"
        f"<style>{_CSS_PATH.read_text()}</style></head><body>"
        + _header(about)
        + _nav(figures, mixed=bool(classes))
        + "<main>"
        + _glance(groups)
        + _figures(figures)
        + _results(groups)
        + classes
        + column_sources_html(manifest)
        + processes_html(rows)
        + _models(manifest, rows)
        + _tuning(manifest, rows, run_dir, tuning)
        + _failures(cells)
        + "</main>"
        f"<footer>Generated by archlab {_e(archlab.__version__)} from the stored run alone; "
        "regenerate with <code>archlab report "
        f"{_e(about.run_id)}</code>.</footer>"
        "</body></html>\n"
    )


def write_html(
    manifest: Manifest,
    rows: Iterable[ResultRow],
    path: str | os.PathLike[str],
    run_dir: str | os.PathLike[str] | None = None,
    tuning: Callable[[], Sequence] | None = None,
) -> Path:
    """Write the report of one run to ``path`` and return it.

    ``manifest`` and ``rows`` are what :meth:`archlab.store.Store.load_run` returns for the
    run (one row per cell and repetition). ``run_dir`` is the directory a relative
    ``summary_path`` is relative to (a stored run's are absolute); it defaults to ``path``'s
    directory, which is the run directory when the report is written as
    ``runs/<run-id>/report.html``. ``tuning``: how the caller analyses a
    sweep (its tuner evaluations, :func:`archlab.tuning.tune_report.analyse`), so that they
    are computed once and where it computes them; else the report computes them here.
    """
    target = Path(path)
    base = Path(run_dir) if run_dir is not None else target.parent
    page = render_html(manifest, rows, base, tuning)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a reader (or a crash) never sees half a report. A plain open (not
    # tempfile) so the file gets the usual permissions from the umask.
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target
