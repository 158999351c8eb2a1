"""``archlab orders``: published orders counted in measured cells. The counting on a hand-made
table (a claim that holds, one that fails, a filter, clear vs means-only), on a stored run with
repetitions (Student-t intervals), bad claims files refused in one line, and the results page:
every claim line pasted in ``experiments/README.md`` is what the command prints for the table
beside it, so prose and tables cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from archlab.errors import SpecError
from archlab.report.orders import Cells, Claim, CoherencyClaim, Needs, Throughput, check, check_coherency, load_claims, report
from archlab.store import ResultRow

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "experiments" / "README.md"

TABLE = """
    architecture  workload        conc  throughput req/s   p50
(*) a             /echo?size=10     10  1,000 ±   50      1 ms
    b             /echo?size=10     10    900 ±   40      1 ms
    c             /echo?size=10     10    700 ±   10      1 ms
 *  b             /echo?size=10    300  2,000 ±   10      1 ms
    a             /echo?size=10    300  1,500 ±   10      1 ms
    c             /echo?size=10    300  1,400 ±   10      1 ms
    a             /prime?n=11       10    300             1 ms
    b             /prime?n=11       10    200             1 ms
"""


def test_a_claim_is_counted_cell_by_cell_with_the_rival_that_breaks_it():
    cells = Cells.from_table(TABLE, "t")
    best = check(Claim("a first", "best", "a", ("b", "c")), cells)
    # /echo c10: a 1000 > b 900 (intervals 950-1050 vs 860-940: clear); /echo c300: b wins;
    # /prime: c missing, so the cell does not count.
    assert [(v.cell, v.holds, v.clearly) for v in best.verdicts] == [
        (("/echo?size=10", 10), True, True), (("/echo?size=10", 300), False, False)]
    assert best.line() == "a first: holds in 1 of 2 cells (1 clearly); fails in 1 of 2: /echo?size=10 c300 (b 2,000 > a 1,500)"
    assert best.verdict == "mixed"
    worst = check(Claim("c last", "worst", "c", ("a", "b")), cells)
    assert worst.held == 2 and worst.line() == "c last: holds in 2 of 2 cells (2 clearly)"
    only = check(Claim("a over b at c10", "best", "a", ("b",), concurrencies=(10,)), cells)
    assert [v.cell for v in only.verdicts] == [("/echo?size=10", 10), ("/prime?n=11", 10)]
    # Without intervals (one repetition) the count says so rather than claiming clarity.
    assert only.line() == "a over b at c10: holds in 2 of 2 cells (1 clearly)"
    means = check(Claim("x", "best", "a", ("b",), workloads=("/prime?n=11",)), cells)
    assert means.line() == "x: holds in 1 of 1 cell (means only: one repetition)"


def test_a_cell_without_what_the_mechanism_needs_is_not_testable_never_a_failure():
    # From a stored run each contender carries its repetitions, the server's utilisation, its
    # CPUs and whether a repetition was disturbed. a trails b in both cells; at c10 neither
    # server is saturated, so "a beats b when servers saturate" cannot be tested there.
    def t(mean: float, u: float, cpus: int = 1, disturbed: bool = False) -> Throughput:
        samples = (mean * 0.99, mean, mean * 1.01)
        return Throughput(mean, mean * 0.02, samples, u, cpus, disturbed)

    cells = Cells()
    cells.by_cell[("/w", 10)] = {"a": t(900.0, 0.41), "b": t(1000.0, 0.45)}
    cells.by_cell[("/w", 300)] = {"a": t(900.0, 0.97), "b": t(1000.0, 0.99)}
    saturated = Claim("a beats b", "best", "a", ("b",), needs=Needs(saturated=True))
    out = check(saturated, cells)
    assert out.line() == ("a beats b: holds in 0 of 1 cell; fails in 1 of 1: /w c300 (b 1,000 > a 900); "
                          "not testable in 1 more: a server U = 0.41 < 0.9 in /w c10")
    assert out.verdict == "fails"
    # Nowhere testable: one verdict, naming what failed and the value measured.
    for needs, why in [
        (Needs(cpus=4), "1 CPU for a, needs >= 4"),
        (Needs(concurrency=(306, 1189)), "concurrency 300 outside 306-1189"),
        (Needs(effect=0.001), "smallest detectable difference"),
    ]:
        out = check(Claim("a beats b", "best", "a", ("b",), needs=needs), cells)
        assert out.verdict == "not testable here" and out.line().startswith("a beats b: not testable here: "), out.line()
        assert why in out.line(), out.line()
    quiet = check(Claim("q", "best", "a", ("b",), concurrencies=(10,), needs=Needs(quiet=True)),
                  Cells({("/w", 10): {"a": t(900.0, 0.9, disturbed=True), "b": t(1000.0, 0.9)}}))
    assert quiet.line() == "q: not testable here: a disturbed (more than 5% of its CPUs went to other work) in /w c10"
    # A pasted table does not say the utilisation: checked on a stored run instead.
    table = check(Claim("a first", "best", "a", ("b", "c"), needs=Needs(saturated=True)), Cells.from_table(TABLE, "t"))
    assert table.verdict == "not testable here" and "the source does not say the utilisation" in table.line()
    # A table's half-widths still tell the effect it could detect.
    effect = check(Claim("a first", "best", "a", ("b",), concurrencies=(10,), workloads=("/echo?size=10",),
                         needs=Needs(effect=0.05)), Cells.from_table(TABLE, "t"))
    assert effect.line() == "a first: not testable here: smallest detectable difference 9.4% > claimed effect 5% in /echo?size=10 c10"


def _usl_rows(kappas: dict[str, float], levels: list[int], foreign: float = 0.0) -> tuple[ResultRow, ...]:
    """Closed-model rows whose throughput follows the USL exactly (sigma 0.07, lambda 5000
    req/s, the given kappa per workload), three repetitions per level within 1% of it."""
    rows = []
    for workload, kappa in kappas.items():
        for n in levels:
            x = 5000 * n / (1 + 0.07 * (n - 1) + kappa * n * (n - 1))
            for rep, wobble in enumerate((0.99, 1.0, 1.01)):
                rows.append(ResultRow.from_columns({
                    "run_id": "r", "cell_id": f"{workload}-{n}", "repetition": rep + 1, "architecture": "system:p",
                    "workload": workload, "concurrency": n, "status": "ok", "duration_s": 2.0, "requests": int(2 * x * wobble),
                    "throughput_rps": x * wobble, "p50_us": 1.0, "p90_us": 1.0, "p99_us": 1.0, "p999_us": 1.0, "max_us": 1.0,
                    "mean_us": n / (x * wobble) * 1e6, "errors": 0, "think_time_s": 0.0, "foreign_share": foreign,
                    "steal_share": 0.0, "load_avg_start": 0.1, "load_avg_end": 0.1, "measured_cpus": 1,
                }))
    return tuple(rows)


def test_a_coherency_claim_is_judged_on_the_usl_fitted_to_each_workload():
    # Parameter recovery: kappa 6.6e-07 -> 9.9e-06 as seed 000's Table 7.2 (peak N* 1189 -> 306),
    # measured over 1-1,600 users, comes out growing, each step clear of the previous interval.
    sizes = {"/echo?size=500": 6.6e-07, "/echo?size=10240": 9.9e-06}
    wide = [1, 2, 4, 8, 16, 32, 64, 128, 256, 400, 800, 1200, 1600]
    claim = CoherencyClaim("coherency grows with the size", tuple(sizes), Needs(quiet=True, concurrency=(306, 1189)))
    out = check_coherency(claim, Cells(rows=_usl_rows(sizes, wide)))
    assert out.verdict == "holds", out.line()
    assert out.line().startswith("coherency grows with the size: holds: kappa 6.6e-07 at /echo?size=500 -> 9.9e-06 at")
    # The reverse order fails.
    backwards = CoherencyClaim("shrinks", tuple(reversed(sizes)), Needs(quiet=True))
    assert check_coherency(backwards, Cells(rows=_usl_rows(sizes, wide))).verdict == "fails"
    # Up to 256 users, below the peaks the claim is about: not testable, never "does not reproduce".
    narrow = check_coherency(claim, Cells(rows=_usl_rows(sizes, wide[:9])))
    assert narrow.line() == ("coherency grows with the size: not testable here: concurrency measured up to 256, "
                             "the peak it is about lies at 306-1189")
    disturbed = check_coherency(claim, Cells(rows=_usl_rows(sizes, wide, foreign=0.3)))
    assert disturbed.line().endswith("not testable here: 78 of 78 repetitions disturbed")
    assert check_coherency(claim, Cells.from_table(TABLE, "t")).verdict == "not testable here"


def test_overlapping_intervals_hold_only_in_the_means():
    cells = Cells()
    cells.by_cell[("/w", 1)] = {"a": Throughput(100.0, 10.0), "b": Throughput(95.0, 10.0)}
    (v,) = check(Claim("a", "best", "a", ("b",)), cells).verdicts
    assert v.holds and not v.clearly


def test_claims_files_are_checked_naming_the_key(tmp_path):
    good = tmp_path / "c.toml"
    good.write_text('[[claims]]\nbest = "a"\nof = ["b"]\nworkload = ["/w"]\n')
    (claim,) = load_claims(good)
    assert claim == Claim("a beats b", "best", "a", ("b",), ("/w",), ())
    good.write_text('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {cpus = 4, concurrency = [306, 1189], saturated = true, '
                    'quiet = true, effect = 0.2}\n')
    (claim,) = load_claims(good)
    assert claim.needs == Needs(cpus=4, concurrency=(306, 1189), saturated=True, quiet=True, effect=0.2)
    for body, key in [
        ('[[claims]]\nbest = "a"\nworst = "b"\nof = ["c"]\n', "claims[0]"),
        ('[[claims]]\nbest = "a"\nof = []\n', "claims[0].of"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nconcurrency = ["10"]\n', "claims[0].concurrency"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nwhere = 1\n', "claims[0].where"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = 4\n', "claims[0].needs"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {cores = 4}\n', "claims[0].needs.cores"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {cpus = 0}\n', "claims[0].needs.cpus"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {concurrency = [300]}\n', "claims[0].needs.concurrency"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {saturated = "yes"}\n', "claims[0].needs.saturated"),
        ('[[claims]]\nbest = "a"\nof = ["b"]\nneeds = {effect = -0.2}\n', "claims[0].needs.effect"),
        ('[[claims]]\ncoherency_grows = ["/a"]\n', "claims[0].coherency_grows"),
        ('[[claims]]\ncoherency_grows = ["/a", "/b"]\nbest = "x"\n', "claims[0].best"),
        ("claims = 3\n", "claims"),
        ("[[claims]\n", "--claims"),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(body)
        with pytest.raises(SpecError) as e:
            load_claims(path)
        assert key in str(e.value), (body, str(e.value))


def test_the_cli_refuses_bad_input_in_one_line(tmp_path):
    claims = tmp_path / "c.toml"
    claims.write_text('[[claims]]\nbest = "a"\nof = ["b"]\n')
    for argv, key in [
        (["orders", "--claims", str(claims)], "RUN"),
        (["orders", "--claims", str(claims), "--table", str(tmp_path)], "--table"),
        (["orders", "--claims", str(claims), "--table", str(claims)], "--table"),
        (["orders", "--claims", str(claims), "--table", str(README), "--section", "no such heading"], "--section"),
        (["orders", "--claims", str(tmp_path / "none.toml"), "--table", str(README)], "--claims"),
    ]:
        done = run_cli(*argv)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and key in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("section, claims", [
    ("seed000-architectures.toml, 2026", "seed000-architectures.toml"),
    ("seed000-db.toml, 2026", "seed000-db.toml"),
    ("seed004-lb-architectures.toml, 2026", "seed004-lb-architectures.toml"),
    ("seed001-writespin.toml, 2026", "seed001-writespin.toml"),
    ("seed001-hybrid.toml, 2026", "seed001-hybrid.toml"),
    ("seed001-latency.toml, 2026", "seed001-latency.toml"),
    ("seed001-ncopy-mix.toml, 2026", "seed001-ncopy-mix.toml"),
    ("seed000-lb.toml, reduced, 2026", "seed000-lb.toml"),
])
def test_every_claim_line_of_the_results_page_is_what_the_command_prints(section, claims):
    done = run_cli("orders", "--table", str(README), "--section", section, "--claims", str(ROOT / "experiments" / "claims" / claims))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(load_claims(ROOT / "experiments" / "claims" / claims))
    text = README.read_text()
    for line in lines:
        assert line in text, f"experiments/README.md lacks (or has edited) the generated line: {line}"


def test_a_stored_run_gives_intervals_over_its_repetitions(engine_path, tmp_path):
    from test_lab_systems import run, system

    experiment = 'name = "orders"\nrepetitions = 2\nwarmup = "100ms"\nduration = "300ms"'
    factors = 'architecture = ["system:svc"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]'
    store, view = run(tmp_path, system(), experiment=experiment, factors=factors)
    cells = Cells.from_run(view)
    (cell,) = cells.by_cell
    assert cell == ("/delay?ms=1", 2)
    t = cells.by_cell[cell]["system:svc"]
    # The 95% Student-t interval of the two repetitions' throughputs (t with 1 degree of
    # freedom: 12.706), computed here from the rows. It is 0 when both counted the same
    # requests, which a 1 ms delay at concurrency 2 makes likely.
    xs = [r.measurement.throughput_rps for r in view.rows]
    assert len(xs) == 2 and t.mean == pytest.approx(sum(xs) / 2)
    assert t.half_width is not None and t.half_width == pytest.approx(12.706 * abs(xs[0] - xs[1]) / 2, rel=1e-4, abs=1e-9)
    assert report([Claim("svc alone", "best", "system:svc", ("nope",))], cells) == [
        "svc alone: no cell measures system:svc with all of nope"]


def test_cells_that_differ_in_another_factor_are_never_pooled(engine_path, tmp_path):
    """A run that varies a factor besides workload and concurrency (here the generator's
    receive buffer; an added delay or a mix alike) keeps one cell per level: pooling them would
    average a fast and a slow condition into one interval and count one cell instead of two."""
    from test_lab_systems import run, system

    experiment = 'name = "orders"\nrepetitions = 1\nwarmup = "100ms"\nduration = "300ms"'
    factors = 'architecture = ["system:svc"]\nworkload = ["/delay?ms=1"]\nconcurrency = [2]\nrcvbuf = [4096, 65536]'
    store, view = run(tmp_path, system(), experiment=experiment, factors=factors)
    cells = Cells.from_run(view)
    assert sorted(cells.by_cell) == [("/delay?ms=1", 2, "rcvbuf=4096"), ("/delay?ms=1", 2, "rcvbuf=65536")]
    (line,) = report([Claim("svc trails itself", "worst", "system:svc", ("system:svc",))], cells)
    assert line.startswith("svc trails itself: holds in 0 of 2 cells; fails in 2 of 2: /delay?ms=1 c2 rcvbuf=4096 ("), line
    assert "; /delay?ms=1 c2 rcvbuf=65536 (" in line, line
