"""Exact counts and raw samples give identical results; analyze(), its outputs, plots and the CLI."""

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from archlab.errors import ArchlabError
from archlab.latency import (DistributionFit, HillEstimator, LatencyError, PowerLawTail, Samples, analyze, ks_statistic,
                             mass_count, summarize)
from archlab.latency import cli, plots

DATA = Path(__file__).resolve().parent / "data"


def integer_latencies(seed=0, n=20000):
    rng = np.random.default_rng(seed)
    return np.ceil(rng.lognormal(2.5, 0.9, n))  # integer milliseconds, as in JTL files


def test_analysis_is_identical_on_raw_samples_and_on_counts():
    raw = integer_latencies()
    rng = np.random.default_rng(1)
    shuffled = rng.permutation(raw)
    values, counts = np.unique(raw, return_counts=True)
    # Counts in a scrambled order, one value's count split over two entries, plus a zero count.
    order = rng.permutation(values.size)
    split_values, split_counts = values[order], counts[order].copy()
    first = int(np.flatnonzero(split_counts >= 2)[0])
    split_counts[first] -= 1
    split_values = np.concatenate([split_values, [split_values[first], 12345.0]])
    split_counts = np.concatenate([split_counts, [1, 0]])
    from_raw = analyze(Samples.from_values(shuffled), n_boot=100, gof_boot=5, seed=3).to_dict()
    from_counts = analyze(Samples.from_counts(split_values, split_counts), n_boot=100, gof_boot=5, seed=3).to_dict()
    assert from_raw == from_counts


def test_count_based_statistics_equal_direct_raw_computations():
    raw = integer_latencies(seed=2, n=5000)
    s = Samples.from_counts(*np.unique(raw, return_counts=True))
    summary = summarize(s, [50, 90, 99.9], ci="none")
    assert summary.mean.mean == pytest.approx(raw.mean()) and summary.std == pytest.approx(raw.std(ddof=1))
    assert [e.value for e in summary.percentiles] == pytest.approx(np.percentile(raw, [50, 90, 99.9]))
    fit = DistributionFit("lognormal").fit(s)
    assert fit.loglik_ == pytest.approx(np.sum(fit.dist_.logpdf(raw)))
    assert ks_statistic(s, fit.dist_.cdf) == pytest.approx(stats.kstest(raw, fit.dist_.cdf).statistic)
    ordered = np.sort(raw)[::-1]
    k = HillEstimator(k=200).fit(s).k_
    assert HillEstimator(k=200).fit(s).alpha_ == pytest.approx(1 / (np.mean(np.log(ordered[:k])) - np.log(ordered[k])))
    tail = PowerLawTail(xmin=40).fit(s)
    above = raw[raw >= 40]
    assert tail.alpha_ == pytest.approx(above.size / np.sum(np.log(above / 40)))
    lorenz_mass = np.cumsum(np.sort(raw)) / raw.sum()
    assert mass_count(s).w_half == pytest.approx(100 * lorenz_mass[raw.size // 2 - 1])


def test_outputs_json_table_figures_html(tmp_path):
    result = analyze(Samples.from_values(integer_latencies(seed=4, n=3000)), n_boot=50)
    document = json.loads(result.to_json())
    assert document["count"] == 3000 and document["percentiles"]["method"] == "linear"
    assert document["fits"][0]["delta_aic"] == 0 and "hill" in document["tail"] and "gini" in document["mass_count"]
    table = result.to_table()
    for word in ("p99.9", "Student t", "fits (by AIC)", "Hill", "mass-count"):
        assert word in table
    figures = result.figures()
    assert {"pdf", "pdf-log", "cdf", "ccdf", "qq", "hill", "mean-excess", "lorenz", "mass-count"} <= set(figures)
    assert all(figure.axes and figure.axes[0].has_data() for figure in figures.values())
    page = result.to_html(tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(figures)


def test_qq_points_pair_order_statistics_with_hazen_positions():
    s = Samples.from_values([3.0, 1.0, 2.0])
    fit = DistributionFit("normal").fit(s)
    theoretical, empirical = plots.qq_points(fit, s)
    # X_(i) <-> F^-1((i - 0.5)/n), i = 1..n: not shifted by one rank (the thesis script's defect).
    assert empirical.tolist() == [1.0, 2.0, 3.0]
    assert theoretical == pytest.approx(fit.dist_.ppf([1 / 6, 3 / 6, 5 / 6]))


def test_cli_table_json_and_report(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args([str(DATA / "jmeter213_default.jtl"), "--boot", "50"])) == 0
    assert "latency analysis: n = 200" in capsys.readouterr().out
    report = tmp_path / "out.html"
    args = parser.parse_args([str(DATA / "jmeter213_default.jtl"), str(DATA / "jmeter213_connect.jtl"), "--json",
                              "--boot", "20", "--quantile-method", "nearest_rank", "--report", str(report)])
    assert cli.run(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["count"] == 400 and document["percentiles"]["method"] == "inverted_cdf" and report.exists()


def test_library_errors_are_archlab_errors():
    assert issubclass(LatencyError, ArchlabError)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    with pytest.raises(ArchlabError, match="^FILE: expected a latency file, a run directory or a run id of the store"):
        cli.run(parser.parse_args(["/nonexistent.jtl", "--format", "jtl"]))
