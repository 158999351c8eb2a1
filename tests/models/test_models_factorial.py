"""2^k r factorial designs: the effects and the allocation of variation of seed 002 Tables 7-20
recomputed from their y values, plus closed-form properties (orthogonality, SST decomposition,
interval width from s_e) and the run-to-design helper."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from archlab.models import FactorialDesign, ModelError, design_from_records, sign_table
from models_seed002_factorial import FACTORIAL


def printed(text: str) -> tuple[float, float]:
    """(value, half-width of its rounding) of a number as seed 002 §6 prints it."""
    sci = re.fullmatch(r"([\d.]+)×10\^\{?(\d+)\}?", text)
    if sci:
        mantissa = sci.group(1)
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return float(mantissa) * 10 ** int(sci.group(2)), 0.5 * 10 ** (int(sci.group(2)) - decimals)
    plain = text.replace(",", "")
    if "." in plain:
        return float(plain), 0.5 * 10 ** -len(plain.split(".")[1])
    trailing = len(plain) - len(plain.rstrip("0")) if plain.strip("-0") else 0
    return float(plain), 0.5 * 10**trailing


def seed_y(number):
    """The printed y values and the half-width of their rounding (integers or 2 decimals)."""
    cells = [[printed(v) for v in row] for row in FACTORIAL[number]["y"]]
    return np.array([[v for v, _ in row] for row in cells]), max(t for row in cells for _, t in row)


def follows(number, quantity, published_text):
    """The quantity computed from the printed y values equals the published one within the
    rounding of both: the printed y values carry error up to h each, whose first-order effect is
    bounded by sum_ij |Q(y + h e_ij) - Q(y)| (the seed computed from unrounded y)."""
    y, h = seed_y(number)
    base = quantity(FactorialDesign(["A", "B", "C"]).fit(y))
    spread = 0.0
    for idx in np.ndindex(y.shape):
        bumped = y.copy()
        bumped[idx] += h
        spread += abs(quantity(FactorialDesign(["A", "B", "C"]).fit(bumped)) - base)
    value, tol = printed(published_text)
    assert abs(base - value) <= 1.01 * spread + tol + 1e-9 * abs(value), (base, value, spread, tol)


def effect(name):
    return lambda d: d.mean_ if name == "I" else d.effects_[name].estimate


@pytest.mark.parametrize("number", sorted(FACTORIAL))
@pytest.mark.parametrize("column", range(8))
def test_seed002_effects_follow_from_the_y_values(number, column):
    names = ("I", "A", "B", "C", "AB", "AC", "BC", "ABC")
    assert FactorialDesign(["A", "B", "C"]).fit(seed_y(number)[0]).columns_ == names
    follows(number, effect(names[column]), FACTORIAL[number]["q"][column])


VARIATION_ROWS = {"y": "ssy_", "\\bar{y}": "ss0_", "$y - \\bar{y}$": "sst_", "Errors": "sse_"}


def variation_cases():
    for number in sorted(FACTORIAL):
        for label, (ss_text, pct_text) in FACTORIAL[number]["variation"].items():
            yield pytest.param(number, label, ss_text, pct_text, id=f"T{number + 1}-{label}")


@pytest.mark.parametrize(("number", "label", "ss_text", "pct_text"), list(variation_cases()))
def test_seed002_allocation_of_variation_follows_from_the_y_values(number, label, ss_text, pct_text):
    if label in VARIATION_ROWS:
        follows(number, lambda d: getattr(d, VARIATION_ROWS[label]), ss_text)
        if label == "Errors":
            follows(number, lambda d: 100 * d.error_fraction_, pct_text)
    else:
        follows(number, lambda d: d.effects_[label].sum_of_squares, ss_text)
        follows(number, lambda d: 100 * d.effects_[label].fraction_of_variation, pct_text)


def test_sign_table_is_orthogonal_in_standard_order():
    table, names = sign_table(["A", "B", "C"])
    assert names == ("I", "A", "B", "C", "AB", "AC", "BC", "ABC")
    assert (table.T @ table == 8 * np.eye(8)).all()
    # seed 002 Table 7, first two rows: (-,-,-) then (+,-,-)
    assert table[0].tolist() == [1, -1, -1, -1, 1, 1, 1, -1]
    assert table[1].tolist() == [1, 1, -1, -1, -1, -1, 1, 1]


def test_variation_decomposes_and_intervals_use_the_error_degrees_of_freedom():
    rng = np.random.default_rng(3)
    y = 50 + rng.normal(size=(4, 5)) + np.array([[-4], [4], [-1], [1]])  # A matters, B hardly
    d = FactorialDesign(["memory", "cache"], confidence=0.90).fit(y)
    assert d.sst_ == pytest.approx(sum(e.sum_of_squares for e in d.effects_.values()) + d.sse_)
    assert d.sst_ == pytest.approx(((y - y.mean()) ** 2).sum())
    assert list(d.effects_) == ["memory", "cache", "memory:cache"]
    e = d.effects_["memory"]
    s_e = math.sqrt(d.sse_ / (4 * 4))
    assert e.stderr == pytest.approx(s_e / math.sqrt(20))
    assert e.upper - e.estimate == pytest.approx(stats.t.ppf(0.95, 16) * e.stderr)  # two-sided 90 %
    assert e.significant
    assert d.predict({"memory": 1, "cache": -1}) == pytest.approx(y[1].mean())


def test_design_from_records_builds_the_cells_in_standard_order():
    runs = [{"servers": s, "threads": t, "tput": 100 * s + t + rep} for rep in (0, 1) for t in (8, 32) for s in (2, 3)]
    y = design_from_records(runs, {"servers": (2, 3), "threads": (8, 32)}, "tput")
    assert y.tolist() == [[208, 209], [308, 309], [232, 233], [332, 333]]
    with pytest.raises(ModelError, match=r"^record\['servers'\]: expected 2 or 3, got 4"):
        design_from_records([{"servers": 4, "threads": 8, "tput": 1}], {"servers": (2, 3), "threads": (8, 32)}, "tput")
    with pytest.raises(ModelError, match="^records: expected the same number"):
        design_from_records(runs[:3], {"servers": (2, 3), "threads": (8, 32)}, "tput")


def test_wrong_shape_is_refused():
    with pytest.raises(ModelError, match=r"^y: expected finite responses of shape \(2\^3 = 8, r\)"):
        FactorialDesign(["A", "B", "C"]).fit(np.ones((4, 3)))


def test_residual_checks_on_additive_and_multiplicative_synthetic_data():
    # Known truth: y = q0 + q_A x_A + q_B x_B + normal noise (additive, constant spread) passes
    # every check; y = exp(additive) with multiplicative noise and a range of ~50x is flagged
    # for a log model (Jain §18.7), and its residual spread grows with the response.
    rng = np.random.default_rng(18)
    x_a, x_b = np.array([-1, 1, -1, 1]), np.array([-1, -1, 1, 1])
    additive = (40 + 5 * x_a + 3 * x_b)[:, None] + rng.normal(0, 1.0, (4, 10))
    checks = FactorialDesign(["A", "B"]).fit(additive).residual_checks()
    assert checks.normal and checks.constant_spread and not checks.suggest_log
    assert checks.normal_plot_correlation > 0.95 and checks.qq_sample.size == 40
    multiplicative = np.exp((2 + 1.0 * x_a + 1.0 * x_b)[:, None] + rng.normal(0, 0.3, (4, 10)))
    checks = FactorialDesign(["A", "B"]).fit(multiplicative).residual_checks()
    assert checks.suggest_log and checks.ratio_max_min > 10
    assert not checks.constant_spread and checks.spread_correlation > 0
    with pytest.raises(ModelError, match="^y: expected replications"):
        FactorialDesign(["A"]).fit([[1.0], [2.0]]).residual_checks()
