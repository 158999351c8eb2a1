"""Tests of the report layer: aggregation over repetitions, the terminal table, the HTML page,
and the page as a real browser renders it (headless Chromium).

The rows are synthetic, written as the catalog's columns and read as the store reads them
(``ResultRow.from_columns``): 2 architectures x 2 workloads x 3 concurrencies x 2 repetitions,
plus one failed third repetition. Their values are chosen so
that the expected means and intervals can be computed by hand: for two observations a and b
the 95% Student-t interval is (a+b)/2 ± t_{0.975,1}·|a-b|/2 with t_{0.975,1} = 12.706 (NIST
e-Handbook 1.3.6.7.2).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pytest import approx
from conftest import missing_dependency

from archlab.report import terminal_table as _terminal_table
from archlab.report import write_html as _write_html
from archlab.report.aggregate import Win
from archlab.report.aggregate import aggregate as _aggregate
from archlab.report.aggregate import group_by_load, utilisation_law
from archlab.report.provenance import provenance
from archlab.store import Manifest, ResultRow

T_975_1 = 12.706  # NIST e-Handbook 1.3.6.7.2, 1 degree of freedom, upper tail 0.025

ARCHITECTURES = ("netty", "thread-per-connection")
WORKLOADS = ("/echo?size=1024", "/prime?n=27059")
CONCURRENCIES = (1, 16, 128)
#: Base throughput (req/s) per (architecture, workload); repetition r adds r·SPREAD[arch].
BASE = {
    ("netty", "/echo?size=1024"): 20_000.0,
    ("netty", "/prime?n=27059"): 6_000.0,
    ("thread-per-connection", "/echo?size=1024"): 12_000.0,
    ("thread-per-connection", "/prime?n=27059"): 5_500.0,
}
SPREAD = {"netty": 100.0, "thread-per-connection": 2_000.0}
FAILED_CELL = ("thread-per-connection", "/echo?size=1024", 128)
FAILED_ERROR = "server exited with status 134\n<stderr> thread 'main' panicked at src/lib.rs:1:1"
#: Shaped like the store's manifest (archlab/run-manifest version 1), trimmed to what matters.
MANIFEST = {
    "schema": "archlab/run-manifest",
    "schema_version": 1,
    "run_id": "20250101-120000-test",
    "experiment": "synthetic",
    "started_at": "2025-01-01T12:00:00Z",
    "git": {"revision": "0123456789ab", "dirty": True},
    "build_profile": "release",
    "engine_version": "0.1.0",
    "kernel": "6.1.0-test",
    "cpu_model": "Synthetic CPU @ 3.0GHz",
    "placement": {"server_cpus": [1], "client_cpus": [0]},
    "load_model": "closed",
    "spec": {
        "name": "synthetic",
        "description": "Two architectures, two workloads, three concurrencies",
        "repetitions": 2,
        "warmup_s": 1.0,
        "duration_s": 3.0,
        "factors": {"architecture": list(ARCHITECTURES)},
        "load": {"model": "closed", "think_time_s": 0.0, "timeout_s": 5.0},
    },
    "spec_hash": "feedc0ffee",
    "repetitions": 2,
    "status": "complete",
}
FIGURES_WITHOUT_TIMELINE = ("throughput", "latency", "cpu", "context-switches")


def typed(rows: list[dict]) -> list[ResultRow]:
    """Catalog-shaped rows as the store returns them."""
    return [ResultRow.from_columns(row) for row in rows]


def aggregate(rows: list[dict]):
    return _aggregate(typed(rows))


def terminal_table(rows: list[dict], color: bool | None = None) -> str:
    return _terminal_table(typed(rows), color=color)


def write_html(manifest: dict, rows: list[dict], path: Path, run_dir: Path | None = None) -> Path:
    return _write_html(Manifest.from_document(manifest), typed(rows), path, run_dir)


def _figure_svgs(page: str) -> int:
    """SVGs of the report's own figures: those before the scalability-model section, which
    archlab.models renders (tested with the models)."""
    return page.split('<section id="models"')[0].count("<svg")


def _ok_row(arch: str, workload: str, concurrency: int, repetition: int) -> dict:
    throughput = BASE.get((arch, workload), 1_000.0) * (1 + concurrency / 64) + repetition * SPREAD.get(arch, 10.0)
    p50 = concurrency / throughput * 1e6
    return {
        "run_id": MANIFEST["run_id"],
        "cell_id": f"{arch}|{workload}|{concurrency}",
        "repetition": repetition,
        "architecture": arch,
        "workload": workload,
        "concurrency": concurrency,
        "threads": None,
        "loops": None,
        "think_time_s": 0.0,
        "factors": {"architecture": arch, "workload": workload, "concurrency": concurrency},
        "status": "ok",
        "error": None,
        "duration_s": 3.0,
        "requests": int(throughput * 3),
        "throughput_rps": throughput,
        "p50_us": p50,
        "p90_us": 2 * p50,
        "p99_us": 5 * p50 + repetition * 10,
        "p999_us": 20 * p50,
        "max_us": 50 * p50,
        "mean_us": 1.2 * p50,
        "errors": repetition,  # 0 then 1: the cell's total is 1
        "errors_by_class": {"timeout": repetition} if repetition else {},
        "cpu_user_s": 1.0,
        "cpu_sys_s": 0.5,
        "cpu_us_per_request": 1e6 / throughput,
        "voluntary_cs_per_request": 1.0 + repetition * 0.5,
        "involuntary_cs_per_request": 0.25,
        "read_syscalls_per_request": 1.0,
        "write_syscalls_per_request": 1.0 + repetition,
        "peak_rss_kib": 4096,
        "server_threads": concurrency + 1,
        "summary_path": f"raw/{arch}-{workload[1:5]}-{concurrency}-{repetition}.json",
        "hdr_log_path": f"hdr/{arch}-{workload[1:5]}-{concurrency}-{repetition}.hlog",
    }


def _failed_row(arch: str, workload: str, concurrency: int, repetition: int, error: str) -> dict:
    row = _ok_row(arch, workload, concurrency, repetition)
    measured = set(row) - {
        "run_id", "cell_id", "repetition", "architecture", "workload", "concurrency",
        "threads", "loops", "think_time_s", "factors",
    }
    row.update(dict.fromkeys(measured))
    row.update(status="failed", error=error)
    return row


def synthetic_rows() -> list[dict]:
    rows = [
        _ok_row(arch, workload, concurrency, repetition)
        for arch in ARCHITECTURES
        for workload in WORKLOADS
        for concurrency in CONCURRENCIES
        for repetition in (0, 1)
    ]
    rows.append(_failed_row(*FAILED_CELL, repetition=2, error=FAILED_ERROR))
    return rows


def _write_summaries(run_dir: Path, rows: list[dict]) -> None:
    for row in rows:
        if row["status"] == "ok":
            path = run_dir / row["summary_path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            tp = row["throughput_rps"]
            latency = {"mean": row["mean_us"], "stdev": row["p50_us"], "p50": row["p50_us"], "p90": row["p90_us"],
                       "p99": row["p99_us"], "p99.9": row["p999_us"], "max": row["max_us"]}
            path.write_text(json.dumps({
                "schema": "archlab/load-summary",
                "schema_version": 1,
                "duration_s": row["duration_s"],
                "requests": row["requests"],
                "throughput_rps": tp,
                "latency_us": latency,
                "timeline": [
                    {"second": t, "length_s": 1.0, "requests": round(tp * (1 + 0.02 * (t % 2))),
                     "throughput_rps": tp * (1 + 0.02 * (t % 2)), "p99_us": 900.0, "errors": 0}
                    for t in (0, 1, 2)
                ],
            }))


def _cell(cells, arch, workload, concurrency):
    (match,) = [c for c in cells if (c.architecture, c.workload, c.concurrency) == (arch, workload, concurrency)]
    return match


# -- aggregation -----------------------------------------------------------------------------


def test_one_cell_per_factor_combination():
    cells = aggregate(synthetic_rows())
    assert len(cells) == len(ARCHITECTURES) * len(WORKLOADS) * len(CONCURRENCIES)
    assert all(c.label == c.architecture for c in cells)  # nothing else tells cells apart


def test_means_and_intervals_match_hand_computation():
    cell = _cell(aggregate(synthetic_rows()), "netty", "/prime?n=27059", 16)
    # throughput: 6000·(1+16/64) = 7500 and 7600 -> mean 7550, half-width 12.706·50.
    tp = cell.throughput
    assert tp.mean == pytest.approx(7550.0)
    assert tp.half_width == pytest.approx(T_975_1 * 50, abs=5e-4 * 50)
    assert tp.n == 2
    # Per-request columns are pooled: the repetitions' totals over their requests (22,500 and
    # 22,800 in the 3 s windows), with the half-width of the per-repetition values.
    # context switches: 1.25 and 1.75 per request -> (1.25·22500 + 1.75·22800) / 45300 ± 12.706·0.25.
    cs = cell.metric("cs_per_request")
    assert cs.mean == pytest.approx((1.25 * 22_500 + 1.75 * 22_800) / 45_300)
    assert cs.half_width == pytest.approx(T_975_1 * 0.25, abs=5e-4 * 0.25)
    # syscalls: read 1 + write (1, 2) -> 2 and 3 per request.
    assert cell.metric("syscalls_per_request").mean == pytest.approx((2 * 22_500 + 3 * 22_800) / 45_300)
    # p99: 5·p50 + (0, 10), p50 = 16e6/throughput; a latency is a mean over repetitions.
    p99 = [5 * 16e6 / 7500, 5 * 16e6 / 7600 + 10]
    assert cell.metric("p99_us").mean == pytest.approx(sum(p99) / 2)
    # CPU: 1e6/X µs per request, so 3e6 µs in each window: 6e6 over 45,300 requests.
    assert cell.metric("cpu_us_per_request").mean == pytest.approx(6e6 / 45_300)
    assert cell.errors == 1
    assert cell.failures == ()


def _utilisation_rows(throughputs: tuple[float, ...], cpu_s: float = 0.95, duration_s: float = 3.0) -> list[ResultRow]:
    """Repetitions of one cell on 1 CPU whose server used ``cpu_s`` of each window's CPU time,
    at the given throughputs (CPU per request follows)."""
    rows = []
    for rep, x in enumerate(throughputs):
        row = _ok_row("netty", WORKLOADS[1], 16, rep)
        requests = int(x * duration_s)
        row.update(throughput_rps=x, requests=requests, duration_s=duration_s, cpu_user_s=cpu_s, cpu_sys_s=0.0,
                   cpu_us_per_request=cpu_s * 1e6 / requests, foreign_share=0.0, steal_share=0.0,
                   load_avg_start=0.1, load_avg_end=0.1, measured_cpus=1)
        rows.append(row)
    return typed(rows)


def test_per_request_columns_are_pooled_so_the_row_obeys_the_utilisation_law():
    # Two repetitions at very different throughput, as in a disturbed run: 110 and 4.2 req/s,
    # the server using 0.95 s of CPU in each 3 s window. The mean of the per-repetition CPU per request times
    # the mean throughput claims several CPUs on one: the utilisation law (Denning and Buzen
    # 1978) catches that aggregation; the pooled column (total CPU over total requests) passes.
    rows = _utilisation_rows((110.0, 4.2))
    cpu = [r.cost.cpu_us_per_request for r in rows]
    mean_x = (110.0 + 4.2) / 2
    planted = utilisation_law(mean_x, sum(cpu) / 2, cpus=1)
    assert not planted.ok and planted.cpus_in_use > 2, planted
    (cell,) = _aggregate(rows)
    assert cell.metric("cpu_us_per_request").mean == pytest.approx(2 * 0.95e6 / (330 + 12))
    law = cell.utilisation_law
    assert law is not None and law.ok and law.cpus_in_use == pytest.approx(0.95 / 3, rel=0.01)
    assert cell.utilisation == pytest.approx(0.95 / 3) and cell.bottleneck == "none saturated"
    assert "utilisation law broken (the numbers" not in _terminal_table(rows, color=False)


def test_the_bottleneck_is_named():
    (saturated,) = _aggregate(_utilisation_rows((5000.0, 5100.0), cpu_s=2.85))
    assert saturated.utilisation == pytest.approx(0.95) and saturated.bottleneck == "server CPU"
    rows = _utilisation_rows((5000.0, 5100.0), cpu_s=1.5)
    (half,) = _aggregate(rows)
    assert half.bottleneck == "none saturated"
    text = _terminal_table(rows, color=False)
    assert "bottleneck" in text.splitlines()[0] and " 50%  none saturated" in text
    bound = [r for r in _utilisation_rows((5000.0, 5100.0), cpu_s=1.5)]
    bound[0] = dataclasses.replace(bound[0], measurement=dataclasses.replace(bound[0].measurement, generator_bound=True))
    assert _aggregate(bound)[0].bottleneck == "generator"
    # A row whose printed numbers break the law is marked and listed.
    broken = [dataclasses.replace(r, cost=dataclasses.replace(r.cost, cpu_us_per_request=1e6 / 2000)) for r in rows]
    text = _terminal_table(broken, color=False)
    assert "utilisation law broken (the numbers" in text and "2.52 CPUs in use (throughput x CPU per request) on 1" in text


def test_failed_repetitions_are_counted_and_excluded():
    cell = _cell(aggregate(synthetic_rows()), *FAILED_CELL)
    assert (cell.repetitions, cell.ok_repetitions) == (3, 2)
    (failure,) = cell.failures
    assert failure.repetition == 2 and failure.error == FAILED_ERROR
    assert cell.throughput.n == 2  # the failed repetition's None metrics are not averaged


def test_settings_that_distinguish_cells_enter_the_label():
    rows = [_ok_row("netty", "/echo?size=1024", 16, r) for r in (0, 1)]
    rows += [{**row, "threads": 8} for row in rows]
    labels = sorted(c.label for c in aggregate(rows))
    assert labels == ["netty (threads=8)", "netty (threads=None)"]


def test_groups_rank_by_throughput_and_call_a_clear_winner():
    groups = group_by_load(aggregate(synthetic_rows()))
    assert [(g.workload, g.concurrency) for g in groups] == [(w, c) for w in WORKLOADS for c in CONCURRENCIES]
    echo_1 = groups[0]
    assert [c.architecture for c in echo_1.cells] == ["netty", "thread-per-connection"]
    # netty 20,362 ± 635 vs thread-per-connection 13,188 ± 12,706: the intervals overlap.
    assert echo_1.winner.win is Win.TIED
    # Tight, well separated intervals: a clear winner.
    rows = [_ok_row("netty", "/echo?size=1024", 1, r) for r in (0, 1)]
    rows += [{**_ok_row("netty", "/echo?size=1024", 1, r), "architecture": "slow", "throughput_rps": 100.0 + r} for r in (0, 1)]
    (group,) = group_by_load(aggregate(rows))
    assert group.winner.cell.architecture == "netty" and group.winner.win is Win.CLEAR


# -- terminal table --------------------------------------------------------------------------


def test_table_has_every_column_and_one_line_per_cell():
    text = terminal_table(synthetic_rows(), color=False)
    header = text.splitlines()[0]
    for column in ("architecture", "workload", "conc", "throughput req/s", "p50", "p99", "p99.9",
                   "CPU µs/req", "ctx-sw/req", "syscalls/req", "errors", "failed"):
        assert column in header
    cell_lines = [line for line in text.splitlines() if re.search(r"(/echo|/prime)\S*\s+\d+\s", line)]
    assert len(cell_lines) == 12
    assert "\x1b[" not in text


def test_table_sorts_by_workload_concurrency_and_throughput():
    lines = [line for line in terminal_table(synthetic_rows(), color=False).splitlines() if "/" in line and "±" in line]
    keys = [(m.group(2), int(m.group(3))) for m in (re.search(r"(\S+)\s+(/\S+)\s+(\d+)", line) for line in lines)]
    assert keys == sorted(keys)
    assert "netty" in lines[0] and "thread-per-connection" in lines[1]  # best first in a group


def test_table_formats_interval_and_latency_units():
    text = terminal_table(synthetic_rows(), color=False)
    # netty, echo, concurrency 1: 20,312.5 and 20,412.5 -> "20,362 ± 635" (t = 12.706).
    line = next(line for line in text.splitlines() if "netty" in line and "/echo" in line and re.search(r"\s1\s", line))
    assert re.search(r"20,362 ±\s+635", line)
    assert "µs" in text and "ms" in text  # p50 at concurrency 1 is µs, p99.9 at 128 is ms
    assert "(*)" in line  # best mean, interval overlapping the runner-up's


def test_table_shows_failures():
    rows = synthetic_rows()
    rows += [_failed_row("netty", "/sort?n=1000", 1, r, "cannot connect: connection refused") for r in (0, 1)]
    text = terminal_table(rows, color=False)
    partial = next(line for line in text.splitlines() if "thread-per-connection" in line and "/echo" in line and " 128 " in line)
    assert partial.rstrip().endswith("1/3")
    dead = next(line for line in text.splitlines() if "/sort" in line and "conc=" not in line)
    assert "—" in dead and dead.rstrip().endswith("2/2")
    assert "failed repetitions:" in text
    assert "rep 2: server exited with status 134" in text
    assert "cannot connect: connection refused" in text


def test_generator_bound_repetitions_are_flagged():
    # The load generator's verdict travels per repetition; the table counts them per cell.
    rows = synthetic_rows()
    cell = [r for r in rows if (r["architecture"], r["workload"], r["concurrency"], r["status"]) == ("netty", "/echo?size=1024", 128, "ok")]
    assert len(cell) == 2
    cell[0]["generator_bound"] = True
    text = terminal_table(rows, color=False)
    (line,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 128 " in ln]
    assert " 1/2 " in line, line
    (other,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 16 " in ln]
    assert " 1/2 " not in other, other
    assert "gen-bound: repetitions whose load generator was saturated" in text


def _with_littles_law(rows: list[dict]) -> list[dict]:
    """Every ok row checked and holding (ratio 1 ± 0.01), except repetition 1 of netty, /echo,
    concurrency 16: 0.8, the law off by 20 % where 1 % is explained; from the planned send 1.0
    (the think-timer's lag: the generator's time, not the server's)."""
    for row in rows:
        if row["status"] == "ok":
            bad = (row["architecture"], row["workload"], row["concurrency"], row["repetition"]) == ("netty", WORKLOADS[0], 16, 1)
            ratio = 0.8 if bad else 1.0 + 0.001 * row["repetition"]
            row.update(littles_law_ratio=ratio, littles_law_tolerance=0.01, littles_law_planned_ratio=1.0,
                       littles_law_ok=abs(ratio - 1) <= 0.01)
    return rows


def test_littles_law_column_marks_the_violating_cell_and_explains_it():
    text = terminal_table(_with_littles_law(synthetic_rows()), color=False)
    assert "X(R+Z)/N" in text.splitlines()[0]
    (bad,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 16 " in ln and "±" in ln]
    assert re.search(r"\s0\.900 !\s+0$", bad), bad  # mean of 1.0 and 0.8, marked (then: failed 0)
    (good,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 128 " in ln and "±" in ln]
    assert re.search(r"\s1\.00\s+0$", good), good  # mean of 1.000 and 1.001
    notes = text.split("Little's law not confirmed (off beyond sampling error, or a window too short to tell):")[1].splitlines()
    assert notes[1].startswith("  netty /echo?size=1024 conc=16 rep 1: X(R+Z)/N = 0.800, tolerance ± 0.010;")
    assert "planned and actual send" in notes[1] and len([n for n in notes if n.startswith("  netty")]) == 1
    # Rows without a check (an open model, an old run): n/a, never a verdict.
    cell_lines = [ln for ln in terminal_table(synthetic_rows(), color=False).splitlines() if "±" in ln and " /" in ln]
    assert len(cell_lines) == 12 and all(re.search(r"\sn/a\s+\S+$", ln) for ln in cell_lines)


def _with_conditions(rows: list[dict]) -> list[dict]:
    """Every ok row quiet (1% foreign, load 0.2), but repetition 1 of netty, /echo, concurrency
    16: 30% of the server's CPU went to other work and 4% was stolen."""
    for row in rows:
        if row["status"] == "ok":
            bad = (row["architecture"], row["workload"], row["concurrency"], row["repetition"]) == ("netty", WORKLOADS[0], 16, 1)
            row.update(foreign_share=0.30 if bad else 0.01, steal_share=0.04 if bad else 0.0,
                       load_avg_start=0.2, load_avg_end=2.5 if bad else 0.2, measured_cpus=1)
    return rows


def test_disturbed_repetitions_are_flagged_and_leave_their_order_unestablished():
    text = terminal_table(_with_conditions(synthetic_rows()), color=False)
    assert "foreign" in text.splitlines()[0]
    (bad,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 16 " in ln and "±" in ln]
    assert " 34% !" in bad, bad  # foreign and steal, the cell's worst repetition
    (good,) = [ln for ln in text.splitlines() if "netty" in ln and "/echo" in ln and " 128 " in ln and "±" in ln]
    assert " 1% " in good and "!" not in good, good
    # At a glance: the /echo group at concurrency 16, and no other, is not established.
    glance = text.split("at a glance")[1].split("\n\n")[0].splitlines()
    flagged = [i for i, ln in enumerate(glance) if "not established on a quiet machine" in ln]
    assert len(flagged) == 1 and "netty rep 1 (34%)" in glance[flagged[0]], glance
    assert "c=16" in next(ln for ln in reversed(glance[: flagged[0]]) if "/echo" in ln)
    notes = text.split("disturbed repetitions (more than 5% of the measured CPUs went to other work):")[1].splitlines()
    assert notes[1] == "  netty /echo?size=1024 conc=16 rep 1: 30% foreign, 4% steal, load average 0.20 -> 2.50; in the statistics"
    # The disturbed repetition stays in the statistics: the mean is over both.
    cell = _cell(aggregate(_with_conditions(synthetic_rows())), "netty", WORKLOADS[0], 16)
    assert cell.ok_repetitions == 2 and [r.repetition for r in cell.disturbed] == [1]
    # Without measured conditions (simulations, older runs): n/a, never a verdict.
    assert all(" n/a " in ln for ln in terminal_table(synthetic_rows(), color=False).splitlines() if "±" in ln and " /" in ln)


def test_a_run_that_repeated_disturbed_repetitions_sets_them_aside():
    rows = typed(_with_conditions(synthetic_rows()))
    cell = _cell(_aggregate(rows, max_foreign=0.05), "netty", WORKLOADS[0], 16)
    assert [r.repetition for r in cell.set_aside] == [1] and not cell.disturbed
    assert cell.ok_repetitions == 1 and cell.throughput.mean == approx(20_000.0 * (1 + 16 / 64))
    text = _terminal_table(rows, color=False, max_foreign=0.05)
    assert "not established on a quiet machine" not in text.split("at a glance")[1].split("\n\n")[0]
    assert "rep 1: 30% foreign, 4% steal, load average 0.20 -> 2.50; repeated, left out of the statistics" in text
    # A threshold above the disturbance sets nothing aside and flags nothing.
    assert "disturbed repetitions" not in _terminal_table(rows, color=False, max_foreign=0.5)


def test_disturbed_repetitions_are_marked_in_html(tmp_path):
    page = write_html(MANIFEST, _with_conditions(synthetic_rows()), tmp_path / "report.html").read_text()
    assert "not established on a quiet machine" in page and "Disturbed repetitions" in page
    assert "netty · <code>/echo?size=1024</code> · c=16, repetition 1: 30% foreign" in page


def test_littles_law_cell_is_marked_with_a_footnote_in_html(tmp_path):
    rows = _with_littles_law(_one_workload())
    page = write_html(MANIFEST, rows, tmp_path / "report.html").read_text()
    results = page[page.index('<section id="results">'):page.index('<section id="models"')]
    marked = re.findall(r'<td class="num bad" title="Little[^"]*">([^<]*)<sup class="note-ref"><a href="#littles-law-(\d+)">', results)
    assert marked == [("0.900", "1")]
    # The row's name carries the mark too, so it shows before a wide table is scrolled.
    assert results.count('netty<sup class="note-ref"><a href="#littles-law-1">1</a></sup></th>') == 1
    note = re.search(r'<li id="littles-law-1">(.*?)</li>', results).group(1)
    assert "netty" in note and "c=16" in note and "repetition 1: X(R+Z)/N = 0.800 (tolerance ± 0.010" in note
    assert "1.000 with R from the planned send" in note
    assert results.count('class="num bad" title="Little') == 1 and "1.00</td>" in results


def test_table_colours_only_on_request():
    assert "\x1b[" in terminal_table(synthetic_rows(), color=True)


def test_table_of_nothing():
    assert terminal_table([], color=False) == "no results"


# -- HTML ------------------------------------------------------------------------------------

_EXTERNAL_REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//""", re.IGNORECASE)


@pytest.fixture(scope="module")
def report_with_timeline(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    rows = synthetic_rows()
    _write_summaries(run_dir, rows)
    return write_html(MANIFEST, rows, run_dir / "report.html")


@pytest.fixture(scope="module")
def report_without_summaries(tmp_path_factory) -> Path:
    return write_html(MANIFEST, synthetic_rows(), tmp_path_factory.mktemp("run") / "report.html")


def test_html_is_self_contained(report_with_timeline):
    page = report_with_timeline.read_text()
    assert not _EXTERNAL_REFERENCE.search(page), _EXTERNAL_REFERENCE.search(page)
    for forbidden in ("<script", "<link", "@import", "<img", "<iframe", "<object", "<embed"):
        assert forbidden not in page.lower(), forbidden
    # url() only to fragments of the page itself (the SVG clip paths).
    assert not re.search(r"""url\(\s*(?!["']?#)""", page)
    assert page.startswith("<!DOCTYPE html>")


def test_html_has_one_svg_per_figure(report_with_timeline, report_without_summaries):
    with_timeline = report_with_timeline.read_text()
    assert _figure_svgs(with_timeline) == len(FIGURES_WITHOUT_TIMELINE) + 1
    for key in (*FIGURES_WITHOUT_TIMELINE, "timeline"):
        assert f'id="figure-{key}"' in with_timeline
    # The scalability model follows the results, with its own figure.
    assert '<section id="models">' in with_timeline and 'id="figure-models-usl"' in with_timeline
    # Summaries missing: the timeline is skipped, the rest is intact.
    without = report_without_summaries.read_text()
    assert _figure_svgs(without) == len(FIGURES_WITHOUT_TIMELINE)
    assert 'id="figure-timeline"' not in without


def test_html_header_states_provenance_and_model(report_with_timeline):
    page = report_with_timeline.read_text()
    for fact in ("<h1>synthetic</h1>", "Two architectures, two workloads", "20250101-120000-test",
                 "0123456789ab (uncommitted changes)", "archlab-engine 0.1.0 · release build",
                 "6.1.0-test", "Synthetic CPU @ 3.0GHz", "feedc0ffee",
                 "server on CPU 1 · load generator on CPU 0", "2025-01-01 12:00:00 UTC",
                 "2 repetitions per cell · 1 s warm-up · 3 s measured",
                 "Closed model", "not corrected for coordinated omission"):
        assert fact in page, fact
    assert 'class="status-note"' not in page  # a complete run needs no warning


def test_provenance_reads_the_flat_manifest_layout_too():
    flat = {
        "run_id": "r1",
        "experiment": {"name": "flat", "repetitions": 3, "warmup_s": 0.5, "duration_s": 10,
                       "load": {"model": "closed"}},
        "git_revision": "abc123",
        "placement": {"server_cpus": "2-3", "client_cpus": "0,1"},
    }
    about = provenance(Manifest.from_document(flat))
    assert (about.name, about.git_revision, about.load_model) == ("flat", "abc123", "closed")
    assert about.protocol == "3 repetitions per cell · 0.5 s warm-up · 10 s measured"
    assert about.placement == "server on CPU 2-3 · load generator on CPU 0,1"
    assert about.kernel == "—" and about.build == "—"  # missing facts are shown as missing


def test_html_warns_about_an_unfinished_run(tmp_path):
    manifest = {**MANIFEST, "status": "interrupted"}
    page = write_html(manifest, synthetic_rows()[:4], tmp_path / "report.html").read_text()
    assert "This run is <strong>interrupted</strong>" in page


def test_html_tables_and_failures(report_with_timeline):
    page = report_with_timeline.read_text()
    for workload in WORKLOADS:
        assert f"<h3><code>{workload}</code></h3>" in page
    results = page[page.index('<section id="results">'):page.index('<section id="failures">')]
    assert results.count("<tr class=") == 12  # one row per cell (header rows carry no class)
    assert "20,362" in results and "± 635" in results
    assert "2/3" in results  # the partly failed cell: 2 of 3 repetitions ok
    failures = page[page.index('<section id="failures">'):]
    assert "1 of 25 repetitions failed" in failures
    # Errors are shown escaped, never interpreted as markup.
    assert "&lt;stderr&gt; thread &#x27;main&#x27; panicked" in failures
    assert "<stderr>" not in page


def _one_workload() -> list[dict]:
    # Half the panels, half the drawing time, same code paths.
    return [row for row in synthetic_rows() if row["workload"] == WORKLOADS[0]]


def test_html_is_a_pure_function_of_the_run(tmp_path):
    rows = _one_workload()
    pages = []
    for name in ("a", "b"):
        _write_summaries(tmp_path / name, rows)
        pages.append(write_html(MANIFEST, rows, tmp_path / name / "report.html").read_text())
    assert _figure_svgs(pages[0]) == len(FIGURES_WITHOUT_TIMELINE) + 1
    assert pages[0] == pages[1]


def test_unreadable_summary_costs_only_the_timeline(tmp_path):
    rows = _one_workload()
    _write_summaries(tmp_path, rows)
    for path in (tmp_path / "raw").iterdir():
        path.write_text("{not json")
    page = write_html(MANIFEST, rows, tmp_path / "report.html").read_text()
    assert _figure_svgs(page) == len(FIGURES_WITHOUT_TIMELINE)


def test_html_when_every_repetition_failed(tmp_path):
    rows = [_failed_row("netty", "/echo?size=1024", 1, r, "boom") for r in (0, 1)]
    page = write_html(MANIFEST, rows, tmp_path / "report.html").read_text()
    assert "<svg" not in page
    assert "No successful repetition to plot" in page
    assert "2 of 2 repetitions failed" in page


# -- in a real browser -----------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    missing_dependency("headless Chromium (to check the report as a browser renders it)", "no chromium is on PATH", "the Debian package `chromium`")


def _run_chromium(report: Path, profile: Path, *mode: str) -> subprocess.CompletedProcess:
    command = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", *mode, report.resolve().as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"chromium failed ({result.returncode}):\n{result.stderr[-2000:]}"
    return result


def test_chromium_renders_plots_and_tables(report_with_timeline, tmp_path):
    dom = _run_chromium(report_with_timeline, tmp_path / "profile", "--dump-dom").stdout
    assert _figure_svgs(dom) == len(FIGURES_WITHOUT_TIMELINE) + 1
    # Each figure's data series survive parsing as SVG paths with real geometry (several points).
    for gid in ("data-throughput-0-0", "data-latency-1-2-1", "data-cpu-1-0", "data-context-switches-0-1",
                "data-timeline-0-0-0"):
        match = re.search(rf'<g id="{gid}"[^>]*>\s*<path [^>]*d="(M[^"]+)"', dom)
        assert match, f"series {gid} missing from the rendered DOM"
        assert match.group(1).count("L") >= 1, f"series {gid} has no line"
    rows = re.findall(r"<tr class=\"[^\"]*\">\s*<td class=\"num\">", dom)
    assert len(rows) == 12
    assert "thread-per-connection" in dom and "server exited with status 134" in dom


def test_chromium_screenshot_is_not_blank(report_with_timeline, tmp_path):
    from PIL import Image  # Pillow is a dependency of matplotlib

    png = tmp_path / "report.png"
    _run_chromium(report_with_timeline, tmp_path / "profile", "--window-size=1280,2400", f"--screenshot={png}")
    with Image.open(png) as image:
        assert image.size == (1280, 2400)
        grey = image.convert("L")
        histogram = grey.histogram()
    inked = sum(histogram[:200]) / sum(histogram)
    assert inked > 0.01, f"only {inked:.2%} of the screenshot is drawn"


def _open_rows() -> list[dict]:
    """The synthetic rows as an open-model run: concurrency becomes a planned rate (req/s)."""
    rows = []
    for row in synthetic_rows():
        rate = 1000.0 * row["concurrency"]
        rows.append({
            **row, "concurrency": None, "rate_rps": rate, "load_model": "open",
            "factors": {**row["factors"], "rate": rate}, "offered_rps": rate + 1.0,
            "service_p99_us": row.get("p99_us") and row["p99_us"] / 2,
        })  # fmt: skip
    for row in rows:
        del row["factors"]["concurrency"]
    return rows


def test_open_model_rows_group_by_rate_and_show_the_offered_rate(tmp_path):
    rows = _open_rows()
    groups = group_by_load(aggregate(rows))
    assert [(g.workload, g.level.kind, g.level.value, g.concurrency) for g in groups] == [
        (w, "rate", 1000.0 * c, None) for w in WORKLOADS for c in CONCURRENCIES
    ]
    text = terminal_table(rows, color=False)
    header = text.splitlines()[0].split()
    assert header[:4] == ["architecture", "workload", "rate", "offered/s"] and "svc" in header and "conc" not in header
    # netty, echo at 16,000 req/s: offered 16,001 in both repetitions; service p99 = p99 / 2.
    line = next(line for line in text.splitlines() if "netty" in line and "/echo" in line and "16,000/s" in line)
    assert "16,001" in line
    assert "response times from the planned send time" in text
    html = write_html({**MANIFEST, "load_model": "open"}, rows, tmp_path / "report.html").read_text()
    assert "workload \\ offered rate (req/s)" in html and "offered<br><small>req/s" in html
    assert "Throughput vs offered rate" in html and "rate=128,000/s" in html
    # Little's law is not defined for the open model's rows: n/a, never a verdict.
    cell_lines = [ln for ln in text.splitlines() if "±" in ln and " /" in ln]
    assert len(cell_lines) == 12 and all(re.search(r"\sn/a\s+\S+$", ln) for ln in cell_lines)
