"""The human table: durations in readable units. Reference values are unit arithmetic
(1 µs = 10^3 ns, 1 ms = 10^6 ns), rounded to 4 significant digits."""

import numpy as np
import pytest

from archlab.latency import Samples, analyze
from archlab.latency.analysis import format_duration


@pytest.mark.parametrize("value, unit, text", [
    (93439.0, "ns", "93.44 µs"), (4_372_000.0, "ns", "4.372 ms"), (1500.0, "ms", "1.5 s"),
    (0.5, "ns", "0.5 ns"), (0.25, "ms", "250 µs"), (12.0, "ms", "12 ms"), (0.0, "us", "0 µs"),
    (0.9999999, "ms", "1 ms"), (999_999.0, "ns", "1 ms"), (float("nan"), "ms", "n/a"), (None, "ms", "n/a"),
])
def test_format_duration_picks_the_largest_unit_keeping_the_value_at_least_one(value, unit, text):
    assert format_duration(value, unit) == text


def test_the_table_has_no_exponent_notation_for_durations():
    values = np.random.default_rng(0).lognormal(np.log(100_000), 0.3, 2000).round()  # ns, ~100 µs
    table = analyze(Samples.from_values(values, "ns"), n_boot=20).to_table()
    head = table.split("fits")[0]
    assert "e+0" not in head and " µs" in head and "recorded in ns" in head
