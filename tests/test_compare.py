"""``archlab compare``: the ratio-of-means interval it rests on (coverage checked by simulation,
against the normal model it assumes), and the whole verb on real runs of a foreign system: an
injected slowdown (the same ``/delay?ms=10`` cells, the system adding 10 ms to each) is found
and fails ``--fail-if-slower``; two runs of the same thing report no detectable change; runs
whose cells do not match are named; bad input gets one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import run_cli
from test_lab_systems import SHORT, run, system

from archlab.compare import compare_runs
from archlab.stats import HDR_RESOLUTION, ratio_of_means_interval, widen_to_quantum


def test_ratio_interval_covers_the_true_ratio_at_its_level():
    # Repetitions of a throughput: normal, 5 per run, coefficient of variation 5 %, true ratio 0.8.
    rng = np.random.default_rng(7)
    trials, hits = 4000, 0
    for _ in range(trials):
        a = rng.normal(1000, 50, 5)
        b = rng.normal(800, 40, 5)
        i = ratio_of_means_interval(a, b, 0.95)
        hits += i.low <= 0.8 <= i.high
    # Binomial sampling error of the coverage: sqrt(0.95 * 0.05 / 4000) = 0.0034; 4 of those
    # (0.014) plus 0.01 for the delta method's approximation at a 5 % coefficient of variation.
    assert abs(hits / trials - 0.95) < 0.024


def test_ratio_interval_by_hand():
    # a: mean 100, s^2 = 4; b: mean 120, s^2 = 9; n = 3 each.
    i = ratio_of_means_interval([98, 100, 102], [117, 120, 123], 0.95)
    va, vb = 4 / (3 * 100**2), 9 / (3 * 120**2)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    from scipy.stats import t

    half = t.ppf(0.975, df) * math.sqrt(va + vb)
    assert i.ratio == pytest.approx(1.2)
    assert (i.low, i.high) == (pytest.approx(1.2 * math.exp(-half)), pytest.approx(1.2 * math.exp(half)))
    assert i.resolution == pytest.approx(math.expm1(half))
    one = ratio_of_means_interval([100], [120])
    assert not one.has_interval and one.resolution is None


def test_quantiles_that_read_the_same_hdr_bucket_resolve_no_finer_than_the_bucket():
    # Four repetitions of a p50 that all land in one HDR bucket (10.1 ms of a /delay?ms=10): the
    # sample variance is 0, but each value is only known to 2^-10, so the ratio to 2 * 2^-10.
    same = [10_111.0] * 4
    bare = ratio_of_means_interval(same, same, 0.99)
    assert bare.resolution == 0.0 and bare.low == bare.high == 1.0
    floored = widen_to_quantum(bare, HDR_RESOLUTION)
    assert floored.resolution == pytest.approx(2 * HDR_RESOLUTION)
    assert floored.low == pytest.approx(1 / (1 + 2 * HDR_RESOLUTION)) and floored.high == pytest.approx(1 + 2 * HDR_RESOLUTION)
    # An interval already wider than the rounding is left as it was.
    wide = ratio_of_means_interval([98, 100, 102], [117, 120, 123], 0.95)
    assert widen_to_quantum(wide, HDR_RESOLUTION) == wide
    # Two adjacent buckets, each read consistently, are a change the rounding cannot explain
    # only when they are more than two buckets' rounding apart.
    near = widen_to_quantum(ratio_of_means_interval(same, [10_111.0 * (1 + HDR_RESOLUTION)] * 4, 0.99), HDR_RESOLUTION)
    assert near.low <= 1.0 <= near.high
    far = widen_to_quantum(ratio_of_means_interval(same, [10_111.0 * 1.01] * 4, 0.99), HDR_RESOLUTION)
    assert far.low > 1.0


EXPERIMENT = SHORT.replace("repetitions = 1", "repetitions = 4").replace('duration = "500ms"', 'duration = "600ms"')
FACTORS = 'architecture = ["system:svc"]\nworkload = ["/delay?ms=10"]\nconcurrency = [2]'
# The verdicts below must hold on a busy machine too. With two busy loops beside the suite the
# foreign server (a Python process) was seen stalled for up to 0.36 s: in a 0.6 s window that
# halves a repetition's throughput, as much as the injected slowdown, and 4 repetitions could
# not tell them apart. In 1.5 s windows such a stall costs under a quarter, and 5 repetitions
# put the 2x change far outside the interval.
POWERED = SHORT.replace("repetitions = 1", "repetitions = 5").replace('duration = "500ms"', 'duration = "1500ms"')


def test_compare_finds_an_injected_slowdown_and_no_change_between_equal_runs(engine_path, tmp_path, token):
    store, base = run(tmp_path / "a", system(), experiment=POWERED, factors=FACTORS)
    _, slow = run(tmp_path / "b", system("--extra-delay-ms", "10"), experiment=POWERED, factors=FACTORS)
    _, same = run(tmp_path / "c", system(), experiment=POWERED, factors=FACTORS)
    for view in (base, slow, same):
        assert all(r.ok for r in view.rows), [r.error for r in view.rows]

    slower = compare_runs(base, slow)
    (cell,) = slower.cells
    assert cell.cell_id == "system-svc__delay-ms-10__c2" and cell.verdict == "slower"
    by_metric = {c.metric.key: c for c in cell.changes}
    # 10 ms -> 20 ms of sleep per request: latency about doubles, throughput about halves.
    assert by_metric["p50"].verdict == "slower" and by_metric["p50"].interval.ratio > 1.5
    assert by_metric["throughput"].verdict == "slower" and by_metric["throughput"].interval.ratio < 0.7

    # The same system twice: no detectable change at the stated confidence. At level L a run
    # compared with an exchangeable one is called changed with probability 1 - L (Bonferroni
    # across the cell's metrics keeps it at that for the cell), so this test's own false
    # failure rate is 1 - L: 99.9 % makes it one in a thousand, where 99 % failed about one
    # run in a hundred, more when a busy machine drifts between the two runs.
    unchanged = compare_runs(base, same, level=0.999)
    (cell,) = unchanged.cells
    assert cell.verdict == "no detectable change", [(c.metric.key, c.interval) for c in cell.changes]
    assert all(c.interval.resolution is not None and c.interval.resolution > 0 for c in cell.changes)


def test_compare_cli_table_html_and_exit_status(engine_path, tmp_path, token):
    runs_a = tmp_path / "a"
    store_a, base = run(runs_a, system(), experiment=EXPERIMENT.replace("repetitions = 4", "repetitions = 3"), factors=FACTORS)
    # A second run in the same store, slower by construction, and one with another cell.
    path = runs_a / "spec.toml"
    from archlab.lab.session import run_spec

    path.write_text(path.read_text().replace('"--host", "{host}"', '"--host", "{host}", "--extra-delay-ms", "10"'))
    slow = store_a.load_run(run_spec(path, store_a).run_id)
    path.write_text(path.read_text().replace('["/delay?ms=10"]', '["/delay?ms=10", "/delay?ms=11"]'))
    other = store_a.load_run(run_spec(path, store_a).run_id)
    a, b, c = base.manifest.run_id, slow.manifest.run_id, other.manifest.run_id

    html = tmp_path / "cmp.html"
    done = run_cli("compare", a, b, "--store", str(store_a.root), "--fail-if-slower", "20", "--html", str(html))
    assert done.returncode == 3, done.stderr
    assert "system-svc__delay-ms-10__c2: slower" in done.stdout
    assert "p50 slower by" in done.stderr
    assert "slower" in html.read_text() and "<table>" in html.read_text()
    done = run_cli("compare", a, b, "--store", str(store_a.root))
    assert done.returncode == 0 and "slower" in done.stdout

    # Mismatched cells are named; with --fail-if-slower they fail the comparison.
    done = run_cli("compare", a, c, "--store", str(store_a.root))
    assert done.returncode == 0 and "cells only in run B (not compared): system-svc__delay-ms-11__c2" in done.stdout
    done = run_cli("compare", a, c, "--store", str(store_a.root), "--fail-if-slower", "90")
    assert done.returncode == 3 and "cells do not match" in done.stderr
    done = run_cli("compare", a, b, "--store", str(store_a.root), "--cells", "nope")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--cells" in done.stderr and "'nope'" in done.stderr
    done = run_cli("compare", a, "missing-run", "--store", str(store_a.root))
    assert done.returncode == 2 and "RUN_B" in done.stderr
    done = run_cli("compare", a, b, "--store", str(store_a.root), "--fail-if-slower", "-5")
    assert done.returncode == 2 and "--fail-if-slower" in done.stderr
