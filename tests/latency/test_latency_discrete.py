"""Rounded, tied data (integer ms, HDR buckets): resolution detection, jitter within the rounding
cell, tail estimation and bootstrap goodness of fit of known truth. Synthetic samples are drawn
from the stated distributions with fixed seeds and rounded to integers, as JMeter records them."""

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from archlab.latency import DistributionFit, Samples, analyze, goodness_of_fit
from archlab.latency.discrete import cell_widths, grid_step, hdr_bucket_widths, is_tied, jitter, round_to
from archlab.latency.tails import HillEstimator, PowerLawTail


def rounded_pareto(seed, n=20000, xmin=10.0, alpha=1.5):
    rng = np.random.default_rng(seed)
    return np.round(xmin * (1.0 - rng.random(n)) ** (-1.0 / alpha))


def test_grid_step_is_detected_from_the_values():
    assert grid_step(Samples.from_values([3, 5, 8, 8])) == 1.0
    assert grid_step(Samples.from_values([10, 20, 50, 50])) == 10.0
    assert grid_step(Samples.from_values([1.5, 2.25])) is None
    assert cell_widths(Samples.from_values([1.5, 2.25]), "auto") is None
    assert is_tied(Samples.from_values([1, 1, 2])) and not is_tied(Samples.from_values([1, 2]))


def test_hdr_bucket_widths_and_rounding_match_hdrhistogram():
    # Reference: the hdrhistogram package's lowest/highest equivalent values (3 significant digits).
    histogram = HdrHistogram(1, 3_600_000_000_000, 3)
    values = np.unique(np.random.default_rng(0).lognormal(11, 2, 5000).astype(np.int64) + 1)
    lowest = np.array([histogram.get_lowest_equivalent_value(int(v)) for v in values])
    widths = np.array([histogram.get_highest_equivalent_value(int(v)) + 1 for v in values]) - lowest
    assert np.array_equal(hdr_bucket_widths(values), widths)
    median = lowest + (widths >> 1)  # HdrHistogram's median equivalent value
    assert np.array_equal(round_to(values + 0.25, Samples.from_values([1.0]), "hdr"), median)


def test_jitter_stays_in_the_rounding_cell_and_is_seeded():
    tied = Samples.from_values(rounded_pareto(0, n=5000))
    moved = jitter(tied, seed=3)
    assert moved.n == tied.n and moved.distinct == tied.n  # every tie undone
    assert np.array_equal(np.sort(np.round(moved.expand())), tied.expand())  # each value stays in its cell
    assert np.array_equal(jitter(tied, seed=3).values, moved.values)
    assert not np.array_equal(jitter(tied, seed=4).values, moved.values)
    assert jitter(tied, None) is tied
    assert jitter(tied, max_values=1000).n == 1000


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_csn_recovers_the_tail_of_rounded_pareto_data_only_after_jitter(seed):
    # Truth: Pareto(xmin=10, alpha=1.5) rounded to integers; the tail is the whole sample.
    tied = Samples.from_values(rounded_pareto(seed))
    raw = PowerLawTail().fit(tied)
    fixed = PowerLawTail().fit(jitter(tied, seed=seed))
    # On the ties CSN's KS scan runs away to a high xmin and throws most of the tail away ...
    assert raw.xmin_ > 40 and raw.n_tail_ < 5000
    # ... jittered, it finds the true xmin (within the rounding and CSN's scan) and alpha.
    assert fixed.xmin_ < 13 and fixed.n_tail_ > 14000
    assert fixed.alpha_ == pytest.approx(1.5, abs=3 * 1.5 / np.sqrt(fixed.n_tail_))
    hill = HillEstimator(n_boot=50).fit(jitter(tied, seed=seed))
    assert hill.alpha_ == pytest.approx(1.5, abs=4 * hill.alpha_se_)


def test_hill_double_bootstrap_skips_k_where_the_top_values_tie():
    # Rounded data capped at 60 ms (a timeout): the top ~340 observations all equal 60, so for
    # k below that M1 = M2 = 0 and the AMSE proxy is 0 for lack of information.
    capped = Samples.from_values(np.minimum(rounded_pareto(7, n=5000), 60.0))
    tied_top = int(capped.counts[-1])
    assert tied_top > 200
    hill = HillEstimator(n_boot=20).fit(capped)
    assert hill.k_ >= tied_top and np.isfinite(hill.alpha_)
    with pytest.raises(Exception, match="tie at every k"):
        HillEstimator(n_boot=5, grid_points=5).fit(Samples.from_counts([5.0, 6.0], [1, 10_000]))


def test_rounded_bootstrap_keeps_ks_pvalues_valid_on_integer_data():
    # Null: lognormal(median 8 ms, sigma 0.5) rounded to integer ms, lognormal fitted.
    without, with_rounding = [], []
    for seed in range(30):
        data = Samples.from_values(np.round(np.random.default_rng(seed).lognormal(np.log(8), 0.5, 1000)))
        fit = DistributionFit("lognormal").fit(data)
        without.append(goodness_of_fit(fit, data, "ks", n_boot=39, seed=seed).pvalue)
        with_rounding.append(goodness_of_fit(fit, data, "ks", n_boot=39, seed=seed, resolution="auto").pvalue)
    # Continuous synthetic samples make the ties look like misfit: the true model is rejected.
    assert np.mean(np.array(without) <= 0.05) > 0.9
    # Rounded synthetic samples: size close to nominal (Binomial(30, 0.1) exceeds 8 with prob. < 1%).
    assert np.sum(np.array(with_rounding) <= 0.1) <= 8
    # And it still has power: an exponential fit to the same kind of data is rejected.
    data = Samples.from_values(np.round(np.random.default_rng(99).lognormal(np.log(8), 0.5, 1000)))
    wrong = DistributionFit("exponential").fit(data)
    assert goodness_of_fit(wrong, data, "ks", n_boot=39, seed=0, resolution="auto").pvalue <= 0.05


def test_analyze_jitters_tied_data_for_the_tail_and_says_so():
    tied = Samples.from_values(rounded_pareto(5, n=5000))
    result = analyze(tied, n_boot=20)
    assert result.resolution == "grid step 1 ms" and result.jittered == tied.n
    assert any("jittered" in note for note in result.notes)
    assert result.power_law.alpha_ == pytest.approx(1.5, abs=3 * 1.5 / np.sqrt(result.power_law.n_tail_))
    continuous = analyze(tied, n_boot=20, resolution=None)
    assert continuous.resolution is None and continuous.power_law.n_tail_ < result.power_law.n_tail_
