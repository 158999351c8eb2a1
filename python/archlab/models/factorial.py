"""2^k and 2^k r full factorial designs (Jain ch. 17-18, as used in seed 002 §6): the sign table,
effects q from the cell means, allocation of variation (SST = sum of SS_f + SSE), the standard
deviation of effects and their confidence intervals with t[1 - a/2; 2^k (r - 1)], residuals for
the visual checks, and a helper that turns a set of runs into the design. Rows are in standard
order: the first factor alternates fastest (- + - + ...), as in seed 002 Table 7."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from scipy import stats

from archlab.models import _check
from archlab.models.errors import ModelError


@dataclass(frozen=True)
class Effect:
    """One column of the design: its effect q, the variation it explains and its interval."""

    name: str
    estimate: float
    sum_of_squares: float
    fraction_of_variation: float  # SS_f / SST
    stderr: float  # s_q = s_e / sqrt(2^k r), NaN without replications
    lower: float
    upper: float

    @property
    def significant(self) -> bool:
        """The interval excludes zero (equivalent to the F-test for 2^k r designs)."""
        return not (self.lower <= 0.0 <= self.upper)


# Above this y_max / y_min the effects are more likely multiplicative than additive (Jain §18.7
# suggests a log transform when the range covers orders of magnitude).
MULTIPLICATIVE_RATIO = 10.0


@dataclass(frozen=True)
class ResidualChecks:
    """Residual diagnostics of a 2^k r design (:meth:`FactorialDesign.residual_checks`)."""

    normal_plot_correlation: float  # of the normal Q-Q plot; near 1 when the residuals are normal
    normality_p: float  # Shapiro-Wilk p-value
    spread_correlation: float  # Spearman rho of |residual| with the predicted response
    spread_p: float
    ratio_max_min: float  # y_max / y_min
    normal: bool
    constant_spread: bool
    suggest_log: bool  # fit log(y) instead: the effects look multiplicative
    qq_theoretical: np.ndarray = field(repr=False, compare=False)
    qq_sample: np.ndarray = field(repr=False, compare=False)


class FactorialDesign:
    """2^k r design estimator: ``FactorialDesign(["A", "B", "C"]).fit(y)`` with y of shape
    (2^k, r) in standard order. Learned: ``sign_table_`` (2^k x 2^k, columns ``columns_``:
    I, A, B, C, AB, AC, BC, ABC), ``effects_`` (name -> :class:`Effect`, without I), ``mean_``
    (q_0), ``ssy_``, ``ss0_``, ``sst_``, ``sse_``, ``error_fraction_``, ``se_`` (s_e),
    ``dof_error_``, ``cell_means_``, ``residuals_``; :meth:`residual_checks` tests the residuals."""

    def __init__(self, factors: Sequence[str], confidence: float = 0.90):
        self.factors = factors
        self.confidence = confidence

    def fit(self, y: Sequence[Sequence[float]] | np.ndarray) -> FactorialDesign:
        factors = list(self.factors)
        if not factors or len(set(factors)) != len(factors):
            raise ModelError("factors", "one or more distinct factor names", factors)
        conf = _check.probability("confidence", self.confidence)
        k = len(factors)
        y_arr = np.asarray(y, dtype=float)
        if y_arr.ndim == 1:
            y_arr = y_arr[:, None]
        if y_arr.ndim != 2 or y_arr.shape[0] != 2**k or not np.all(np.isfinite(y_arr)):
            raise ModelError("y", f"finite responses of shape (2^{k} = {2**k}, r)", np.shape(y))
        cells, r = y_arr.shape
        table, columns = sign_table(factors)
        means = y_arr.mean(axis=1)
        q = table.T @ means / cells
        residuals = y_arr - means[:, None]
        ssy = float((y_arr**2).sum())
        ss0 = cells * r * q[0] ** 2
        sst = ssy - ss0
        ss = cells * r * q**2
        sse = float((residuals**2).sum())
        dof = cells * (r - 1)
        se = math.sqrt(sse / dof) if dof > 0 else math.nan
        s_q = se / math.sqrt(cells * r)
        half = float(stats.t.ppf(0.5 + conf / 2.0, dof)) * s_q if dof > 0 else math.nan

        self.sign_table_ = table
        self.columns_ = columns
        self.mean_ = float(q[0])
        self.effects_ = {
            name: Effect(name, float(q[j]), float(ss[j]), float(ss[j] / sst) if sst > 0 else math.nan, s_q,
                         float(q[j] - half), float(q[j] + half))
            for j, name in enumerate(columns) if j > 0
        }
        self.ssy_, self.ss0_, self.sst_, self.sse_ = ssy, float(ss0), float(sst), sse
        self.error_fraction_ = sse / sst if sst > 0 else math.nan
        self.se_ = se
        self.dof_error_ = dof
        self.cell_means_ = means
        self.residuals_ = residuals
        return self

    def predict(self, levels: Mapping[str, float]) -> float:
        """y-hat = q_0 + sum_f q_f x_f at coded levels (-1 / +1, or in between) of every factor."""
        if not hasattr(self, "effects_"):
            raise ModelError("design", "a fitted design (call fit first)", "unfitted")
        missing = set(self.factors) - set(levels)
        if missing:
            raise ModelError("levels", f"a coded level for every factor {list(self.factors)}", dict(levels))
        x = [levels[f] for f in self.factors]
        y = self.mean_
        for subset, name in zip(_subsets(len(x)), self.columns_[1:]):
            y += self.effects_[name].estimate * math.prod(x[i] for i in subset)
        return y

    def residual_checks(self, alpha: float = 0.05) -> ResidualChecks:
        """The checks Jain (ch. 18) makes by eye on the residuals of a 2^k r design, as numbers:
        are they normal (Shapiro-Wilk; the normal-plot correlation for the Q-Q plot), does their
        spread grow with the predicted response (Spearman correlation of |e| with y-hat), and is
        y_max / y_min so large that a multiplicative (log) model fits better. Needs r >= 2."""
        if not hasattr(self, "residuals_"):
            raise ModelError("design", "a fitted design (call fit first)", "unfitted")
        alpha = _check.probability("alpha", alpha)
        cells, r = self.residuals_.shape
        if r < 2:
            raise ModelError("y", "replications (r >= 2) for residual checks", f"r = {r}",
                             "without replications every residual is zero")
        e = self.residuals_.ravel()
        fitted = np.repeat(self.cell_means_, r)
        theoretical, ordered = stats.probplot(e, dist="norm", fit=False)
        normal_r = float(np.corrcoef(theoretical, ordered)[0, 1]) if np.ptp(e) > 0 else math.nan
        normal_p = float(stats.shapiro(e).pvalue) if e.size >= 3 and np.ptp(e) > 0 else math.nan
        trend = stats.spearmanr(fitted, np.abs(e)) if np.ptp(fitted) > 0 and np.ptp(e) > 0 else None
        y = self.cell_means_[:, None] + self.residuals_
        ratio = float(y.max() / y.min()) if y.min() > 0 else math.inf
        spread_grows = trend is not None and trend.statistic > 0 and trend.pvalue < alpha
        return ResidualChecks(
            normal_plot_correlation=normal_r,
            normality_p=normal_p,
            spread_correlation=float(trend.statistic) if trend is not None else math.nan,
            spread_p=float(trend.pvalue) if trend is not None else math.nan,
            ratio_max_min=ratio,
            normal=not (normal_p < alpha),
            constant_spread=not spread_grows,
            suggest_log=bool(y.min() > 0 and (ratio > MULTIPLICATIVE_RATIO or spread_grows)),
            qq_theoretical=np.asarray(theoretical),
            qq_sample=np.asarray(ordered),
        )

    def allocation_table(self) -> list[tuple[str, float, float]]:
        """(component, sum of squares, percent of variation) rows as in seed 002 Table 8."""
        rows = [("y", self.ssy_, math.nan), ("y-bar", self.ss0_, math.nan), ("y - y-bar", self.sst_, 100.0)]
        rows += [(e.name, e.sum_of_squares, 100.0 * e.fraction_of_variation) for e in self.effects_.values()]
        rows.append(("Errors", self.sse_, 100.0 * self.error_fraction_))
        return rows


def sign_table(factors: Sequence[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Sign table of a 2^k design in standard order and the names of its columns."""
    k = len(factors)
    rows = np.array([[1 if (i >> f) & 1 else -1 for f in range(k)] for i in range(2**k)])
    sep = "" if all(len(f) == 1 for f in factors) else ":"
    cols = [np.ones(2**k, dtype=int)]
    names = ["I"]
    for subset in _subsets(k):
        cols.append(np.prod(rows[:, list(subset)], axis=1))
        names.append(sep.join(factors[i] for i in subset))
    return np.column_stack(cols), tuple(names)


def design_from_records(
    records: Iterable[Mapping[str, object]], factors: Mapping[str, tuple[object, object]], response: str
) -> np.ndarray:
    """Responses of runs arranged as a (2^k, r) design. ``factors`` maps each factor to its
    (low, high) levels as they appear in the records (e.g. ``{"servers": (2, 3)}``); every cell
    must hold the same number of runs."""
    names = list(factors)
    cells: dict[int, list[float]] = {i: [] for i in range(2 ** len(names))}
    for rec in records:
        index = 0
        for bit, name in enumerate(names):
            low, high = factors[name]
            value = rec.get(name)
            if value not in (low, high):
                raise ModelError(f"record[{name!r}]", f"{low!r} or {high!r}", value)
            index |= (value == high) << bit
        if response not in rec:
            raise ModelError("response", f"a key present in every record ({response!r})", sorted(rec))
        cells[index].append(float(cast(float, rec[response])))
    counts = {len(v) for v in cells.values()}
    if len(counts) != 1 or 0 in counts:
        raise ModelError("records", "the same number (>= 1) of runs in every cell", {i: len(v) for i, v in cells.items()})
    return np.array([cells[i] for i in range(len(cells))])


def _subsets(k: int) -> list[tuple[int, ...]]:
    """Non-empty subsets of range(k), by size then lexicographically: A, B, C, AB, AC, BC, ABC."""
    return [s for size in range(1, k + 1) for s in itertools.combinations(range(k), size)]
