"""Tests of archlab.stats against closed forms and by simulated coverage.

Reference values: two-sided 95% (and 90%) critical values of Student's t from the table of the
NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2 "Critical Values of the
Student's t Distribution" (upper-tail probability 0.025, resp. 0.05), given there to 3 decimals.
"""

import math

import numpy as np
import pytest

from archlab.stats import Interval, mean_confidence_interval, median

# (degrees of freedom, confidence level, t critical value from NIST e-Handbook 1.3.6.7.2)
NIST_T = [
    (1, 0.95, 12.706),
    (2, 0.95, 4.303),
    (4, 0.95, 2.776),
    (9, 0.95, 2.262),
    (29, 0.95, 2.045),
    (4, 0.90, 2.132),
]


@pytest.mark.parametrize(("dof", "level", "t_table"), NIST_T)
def test_half_width_uses_student_t_critical_value(dof, level, t_table):
    values = [float(v) for v in range(dof + 1)]  # any sample with spread
    n = len(values)
    s = float(np.std(values, ddof=1))
    interval = mean_confidence_interval(values, level=level)
    # The table has 3 decimals, so t is known to ±0.0005 and the half-width to ±0.0005·s/√n.
    assert interval.half_width == pytest.approx(t_table * s / math.sqrt(n), abs=0.0005 * s / math.sqrt(n))
    assert interval.n == n and interval.level == level
    assert interval.mean == pytest.approx(sum(values) / n)


@pytest.mark.parametrize("dof", [1, 2, 5, 30, 200])
def test_critical_value_agrees_with_scipy_stats_t(dof):
    from scipy import stats

    values = np.arange(dof + 1, dtype=float)
    expected = stats.t.ppf(0.975, dof) * np.std(values, ddof=1) / math.sqrt(dof + 1)
    assert mean_confidence_interval(values).half_width == pytest.approx(expected, rel=1e-12)


def test_two_observations_closed_form():
    # {0, 2}: mean 1, s = √2, s/√n = 1, so the interval is 1 ± t_{0.975,1} = 1 ± 12.706.
    interval = mean_confidence_interval([0.0, 2.0])
    assert interval.mean == 1.0
    assert interval.low == pytest.approx(1 - 12.706, abs=5e-4)
    assert interval.high == pytest.approx(1 + 12.706, abs=5e-4)
    assert interval.has_interval


def test_five_observations_closed_form():
    # {1..5}: mean 3, s² = 2.5, s/√n = √0.5, half-width = 2.776·√0.5 = 1.9629.
    interval = mean_confidence_interval([1, 2, 3, 4, 5])
    assert interval.mean == 3.0
    assert interval.half_width == pytest.approx(2.776 * math.sqrt(0.5), abs=5e-4)
    assert interval.low == pytest.approx(3 - interval.half_width)


def test_single_observation_has_no_interval():
    interval = mean_confidence_interval([42.0])
    assert interval == Interval(mean=42.0, low=42.0, high=42.0, n=1, level=0.95)
    assert not interval.has_interval
    assert interval.half_width == 0.0


def test_zero_spread_gives_zero_width():
    interval = mean_confidence_interval([7.0, 7.0, 7.0])
    assert (interval.low, interval.mean, interval.high) == (7.0, 7.0, 7.0)
    assert interval.has_interval


@pytest.mark.parametrize(
    ("values", "level", "message"),
    [
        ([], 0.95, "at least one value"),
        ([1.0, float("nan")], 0.95, "finite"),
        ([1.0, float("inf")], 0.95, "finite"),
        ([1.0, 2.0], 1.0, "level"),
        ([1.0, 2.0], 0.0, "level"),
    ],
)
def test_invalid_input_is_rejected_with_a_message(values, level, message):
    with pytest.raises(ValueError, match=message):
        mean_confidence_interval(values, level=level)


def test_coverage_on_synthetic_normal_data():
    """About 95% of 95% intervals, each from 5 normal draws, contain the true mean.

    The count of covering intervals among k independent ones is Binomial(k, 0.95): mean 0.95·k,
    standard deviation √(k·0.95·0.05) ≈ 9.75 for k = 2000. Accept ±4 standard deviations
    (probability of a false failure about 6e-5), which still rejects a normal-quantile interval
    (z = 1.96 instead of t = 2.776 at n = 5), whose coverage is about 88%, i.e. ~1760 of 2000.
    """
    k, n, true_mean, level = 2000, 5, 10.0, 0.95
    rng = np.random.default_rng(20240501)
    samples = rng.normal(loc=true_mean, scale=3.0, size=(k, n))
    covered = 0
    for sample in samples:
        interval = mean_confidence_interval(sample, level=level)
        covered += interval.low <= true_mean <= interval.high
    sd = math.sqrt(k * level * (1 - level))
    assert abs(covered - k * level) <= 4 * sd, f"{covered} of {k} intervals covered the mean"


def test_median_odd_and_even():
    assert median([3, 1, 2]) == 2.0
    assert median([4, 1, 3, 2]) == 2.5
    assert median([5.5]) == 5.5
    with pytest.raises(ValueError):
        median([])


def test_overlap():
    a = Interval(mean=10, low=8, high=12, n=3, level=0.95)
    assert a.overlaps(Interval(mean=13, low=11, high=15, n=3, level=0.95))
    assert a.overlaps(Interval(mean=13, low=12, high=14, n=3, level=0.95))  # touching counts
    assert not a.overlaps(Interval(mean=14, low=12.5, high=15.5, n=3, level=0.95))


def test_counts_give_the_interval_of_the_expanded_sample():
    # Exact counts of distinct values are the same sample as the expanded values.
    values, counts = [1.0, 2.5, 7.0], [3, 1, 4]
    expanded = [v for v, c in zip(values, counts) for _ in range(c)]
    a = mean_confidence_interval(expanded, 0.9)
    b = mean_confidence_interval(values, 0.9, counts=counts)
    assert (b.n, b.mean) == (a.n, pytest.approx(a.mean))
    assert (b.low, b.high) == (pytest.approx(a.low), pytest.approx(a.high))
    with pytest.raises(ValueError, match="counts"):
        mean_confidence_interval(values, counts=[1, 2])
