"""The new tail methods inside ``analyze``, its outputs and the CLI: the discrete power law chosen
for integer data (and overridden), the GPD with its quantiles and figures, the stable fit, and
the multi-analysis HTML report."""

import argparse
import io
import json

import numpy as np
import pytest

from archlab.latency import ParameterError, Samples, analyze
from archlab.latency.cli import add_arguments, run
from archlab.latency.report import write_report


def integer_ms(seed: int = 0, n: int = 20000) -> Samples:
    # Integer-millisecond latencies with a Pareto(2.5) tail: a lognormal body plus a Pareto part.
    rng = np.random.default_rng(seed)
    return Samples.from_values(np.round(rng.lognormal(1, 0.5, n) + 3 * rng.pareto(2.5, n)).clip(1))


def test_integer_data_get_the_discrete_power_law_unless_overridden():
    samples = integer_ms()
    auto = analyze(samples, n_boot=50).to_dict()["tail"]["power_law_csn"]
    assert auto["model"] == "discrete (zeta)" and auto["exponent"] == pytest.approx(auto["alpha"] + 1)
    continuous = analyze(samples, n_boot=50, power_law="continuous").to_dict()["tail"]["power_law_csn"]
    assert continuous["model"] == "continuous (Pareto)"
    hdr = analyze(samples, n_boot=50, resolution="hdr").to_dict()["tail"]["power_law_csn"]
    assert hdr["model"] == "continuous (Pareto)"  # HDR buckets widen with the value: no integer grid
    with pytest.raises(ParameterError, match="power_law: expected 'continuous' or 'auto'"):
        analyze(Samples.from_values(np.random.default_rng(1).lognormal(0, 1, 500)), n_boot=20, power_law="discrete")
    with pytest.raises(ParameterError, match="power_law"):
        analyze(samples, power_law="zipf")


def test_gpd_quantiles_stable_fit_and_figures():
    result = analyze(integer_ms(2), n_boot=50)
    tail = result.to_dict()["tail"]
    gpd = tail["gpd_pot"]
    assert gpd["threshold_choice"] == "parameter stability" and gpd["n_exceed"] >= 50
    assert gpd["xi"] > 0 and gpd["tail_index"] == pytest.approx(1 / gpd["xi"])
    assert [q["percentile"] for q in gpd["quantiles"]] == pytest.approx([99.9, 99.99, 99.999])
    assert all(q["low"] < q["value"] < q["high"] for q in gpd["quantiles"])
    assert 0.5 <= tail["stable"]["alpha"] <= 2
    table = result.to_table()
    assert "tail: GPD above" in table and "GPD p99.99" in table and "stable fit (mcculloch)" in table
    figures = result.figures()
    assert {"gpd-qq", "threshold-stability", "mean-excess", "ccdf"} <= set(figures)
    fixed = analyze(integer_ms(2), n_boot=50, pot_threshold=20.0, stable=False).to_dict()["tail"]
    assert fixed["gpd_pot"]["threshold"] == 20.0 and fixed["gpd_pot"]["threshold_choice"] == "given"
    assert "stable" not in fixed
    assert "gpd_pot" not in analyze(integer_ms(2), n_boot=50, pot_threshold=None).to_dict()["tail"]


def test_report_gathers_many_analyses(tmp_path):
    analyses = {f"cell-{i}": analyze(integer_ms(i, 5000), n_boot=50) for i in range(2)}
    progress = io.StringIO()
    page = write_report(tmp_path / "r.html", analyses, title="run X", progress=progress).read_text()
    assert page.count("<details") == 2 and page.count("<tr><td><a href='#a-cell-") == 2
    assert "<th>GPD xi</th>" in page and page.count("data:image/png;base64") >= 2 * 10
    assert progress.getvalue().count("report: figures") == 2


def test_cli_flags(tmp_path, capsys):
    path = tmp_path / "lat.csv"
    path.write_text("ms\n" + "\n".join(str(int(v)) for v in integer_ms(3, 3000).expand()) + "\n")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert run(parser.parse_args([str(path), "--column", "ms", "--unit", "ms", "--boot", "50", "--json",
                                  "--power-law", "continuous", "--pot-threshold", "none", "--no-stable",
                                  "--jitter-max", "2000"])) == 0
    tail = json.loads(capsys.readouterr().out)["tail"]
    assert tail["power_law_csn"]["model"] == "continuous (Pareto)" and "gpd_pot" not in tail and "stable" not in tail
    from archlab.latency import LatencyError
    with pytest.raises(LatencyError, match="--pot-threshold: expected auto, none or a number"):
        run(parser.parse_args([str(path), "--column", "ms", "--unit", "ms", "--pot-threshold", "high"]))
