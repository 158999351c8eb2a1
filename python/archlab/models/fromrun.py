"""Models built from a stored archlab run (``Store(root).load_run(run_id)``: its manifest and rows):
the (N, X) points of each architecture and workload for a scalability fit, a 2^k r design from a
run whose factors have two levels each, the operational laws checked on every measured row, and
the USL fitted per group with its predictions set beside the measured throughput and mean
latency.

Rows are the store's :class:`~archlab.store.ResultRow` s (one per cell and repetition). Only
successful rows with a positive throughput are used; repetitions stay separate points, so the residual variance of a fit
includes the run-to-run spread."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from archlab.models.errors import ModelError, UnidentifiableError
from archlab.models.factorial import FactorialDesign, design_from_records
from archlab.models.oplaws import LawCheck, check_interactive_law, check_utilisation_law
from archlab.models.usl import USL, Amdahl, ScalabilityComparison

if TYPE_CHECKING:
    from archlab.store import Manifest, ResultRow

# Factors every group is labelled by, even when a run holds a single level of them.
BASE_FACTORS = ("architecture", "workload")
GroupKey = tuple[tuple[str, object], ...]


def ok_rows(rows: Iterable[ResultRow]) -> list[ResultRow]:
    """Rows of successful repetitions with a usable throughput and concurrency."""
    out = []
    for r in rows:
        x, n = _throughput(r), r.cell.concurrency
        if r.ok and _finite(x) and float(x) > 0 and _finite(n) and float(n) >= 1:  # type: ignore[arg-type]
            out.append(r)
    return out


def factor_levels(row: ResultRow) -> dict[str, object]:
    """The factor levels of one row: its factors, completed by its architecture and workload."""
    levels: dict[str, object] = {"architecture": row.cell.architecture, "workload": row.cell.workload}
    levels.update(row.cell.factors)
    return levels


def response_value(row: ResultRow, name: str) -> float | None:
    """A measured quantity of the row by its catalog name (``throughput_rps``,
    ``cpu_us_per_request``...), from its measurement or its server cost; None if it has none."""
    for part in (row.measurement, row.cost):
        value = getattr(part, name, None) if part is not None else None
        if value is not None:
            return float(value)
    return None


def _throughput(row: ResultRow) -> float | None:
    return row.measurement.throughput_rps if row.measurement is not None else None


def _n_x(row: ResultRow) -> tuple[float, float]:
    """(N, X) of a row :func:`ok_rows` kept."""
    assert row.measurement is not None and row.cell.concurrency is not None
    return float(row.cell.concurrency), float(row.measurement.throughput_rps)


def _mean_latency_s(row: ResultRow) -> float | None:
    m = row.measurement
    return m.mean_us * 1e-6 if m is not None and _finite(m.mean_us) else None


def group_key(row: ResultRow, exclude: Sequence[str] = ("concurrency",)) -> GroupKey:
    """Every factor level of the row except those in ``exclude``: architecture and workload
    first, then the others in the order the row lists them."""
    levels = factor_levels(row)
    return tuple((k, v) for k, v in levels.items() if k not in exclude)


def group_label(key: GroupKey) -> str:
    """``netty, /echo?size=1024, threads=4``: base factors by value, the others as name=value."""
    return ", ".join(str(v) if k in BASE_FACTORS else f"{k}={v}" for k, v in key)


def scalability_points(rows: Iterable[ResultRow]) -> dict[GroupKey, tuple[np.ndarray, np.ndarray]]:
    """(N = concurrency, X = throughput in requests/s) per group of the other factor levels,
    one point per repetition, in the rows' order."""
    groups: dict[GroupKey, list[tuple[float, float]]] = {}
    for r in ok_rows(rows):
        groups.setdefault(group_key(r), []).append(_n_x(r))
    return {k: (np.array([p[0] for p in v]), np.array([p[1] for p in v])) for k, v in groups.items()}


# --------------------------------------------------------------------------- factorial design
@dataclass(frozen=True)
class RunDesign:
    """A 2^k r design read from a run: factor names, their (low, high) levels and the
    responses of shape (2^k, r) in standard order (first factor alternating fastest)."""

    factors: tuple[str, ...]
    levels: dict[str, tuple[object, object]]
    response: str
    y: np.ndarray

    def fit(self, confidence: float = 0.90) -> FactorialDesign:
        return FactorialDesign(list(self.factors), confidence=confidence).fit(self.y)


def design_from_run(
    rows: Iterable[ResultRow],
    response: str = "throughput_rps",
    factors: Mapping[str, tuple[object, object]] | None = None,
) -> RunDesign:
    """The 2^k r design of a run. Without ``factors``, every factor with two levels in the run
    is a design factor (low = the smaller number, or the first level met for names) and a
    factor with more than two levels is refused; with ``factors`` (name -> (low, high)), the
    rows at other levels are left out. Factors with one level are constants of the design."""
    rows = [r for r in ok_rows(rows) if _finite(response_value(r, response))]
    if not rows:
        raise ModelError("rows", f"successful repetitions with a {response!r}", 0)
    seen: dict[str, list[object]] = {}
    for r in rows:
        for k, v in factor_levels(r).items():
            if v not in seen.setdefault(k, []):
                seen[k].append(v)
    if factors is None:
        wide = {k: v for k, v in seen.items() if len(v) > 2}
        if wide:
            raise ModelError("factors", "two levels per varied factor (or pass factors={name: (low, high)})",
                             {k: v for k, v in wide.items()})
        factors = {k: _low_high(v) for k, v in seen.items() if len(v) == 2}
    else:
        unknown = set(factors) - set(seen)
        if unknown:
            raise ModelError("factors", f"factors of the run ({sorted(seen)})", sorted(unknown))
        rows = [r for r in rows if all(factor_levels(r).get(k) in lv for k, lv in factors.items())]
        others = {k: sorted({str(factor_levels(r).get(k)) for r in rows}) for k in seen if k not in factors}
        varying = {k: v for k, v in others.items() if len(v) > 1}
        if varying:
            raise ModelError("factors", "every factor that varies in the selected rows", f"{sorted(varying)} not included")
    if not factors:
        raise ModelError("rows", "a run with at least one factor at two levels", {k: v for k, v in seen.items()})
    records = [factor_levels(r) | {response: response_value(r, response)} for r in rows]
    y = design_from_records(records, factors, response)
    return RunDesign(tuple(factors), dict(factors), response, y)


def _low_high(levels: list[object]) -> tuple[object, object]:
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in levels):
        low, high = sorted(cast(list[float], levels))
        return low, high
    return levels[0], levels[1]


# --------------------------------------------------------------------------- operational laws
@dataclass(frozen=True)
class RowLawCheck:
    """One operational law on one measured row (a cell and repetition)."""

    cell_id: str
    repetition: int
    group: GroupKey
    concurrency: int
    check: LawCheck


def server_cpu_count(manifest: Manifest) -> int | None:
    """Number of CPUs the server was pinned to (``placement.server_cpus``, e.g. ``"2-3,5"``)."""
    text = manifest.server_cpus
    if not isinstance(text, str) or not text.strip():
        return None
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            return None
        lo = int(m.group(1))
        cpus.update(range(lo, int(m.group(2) or lo) + 1))
    return len(cpus) or None


def check_run_laws(manifest: Manifest, rows: Iterable[ResultRow], rtol: float = 0.05) -> list[RowLawCheck]:
    """Little's law N = X (R + Z) on each row of a closed-model run (N = concurrency, X the
    throughput, R the mean latency, Z the think time) and the utilisation law on each row with
    CPU figures: the measured CPU utilisation of the server's m CPUs, (user + sys) / duration /
    m, against X D / m with D = cpu_us_per_request. Little's law is the row's own stored check
    (:mod:`archlab.littles_law`, within its sampling tolerance) where it has one, else checked
    within ``rtol``; the utilisation laws within ``rtol``. A law that fails flags a measurement
    taken over inconsistent windows, time the latency does not show, lost requests, or
    (utilisation > 1) CPU time counted outside the measured window."""
    closed = manifest.load_model in (None, "closed")
    servers = server_cpu_count(manifest) or 1
    out: list[RowLawCheck] = []
    for r in ok_rows(rows):
        n, x = _n_x(r)
        ident = (r.cell_id, r.repetition, group_key(r), int(n))
        stored, latency = r.littles_law, _mean_latency_s(r)
        if stored is not None:
            check = LawCheck("N = X (R + Z)", n, stored.ratio * n, abs(stored.ratio - 1.0), stored.ok)
            out.append(RowLawCheck(*ident, check))
        elif closed and latency is not None:
            out.append(RowLawCheck(*ident, check_interactive_law(n, x, latency, r.cell.think_time_s or 0.0, rtol=rtol)))
        m, cost = r.measurement, r.cost
        if m is not None and cost is not None and m.duration_s > 0:
            measured = (cost.cpu_user_s + cost.cpu_sys_s) / m.duration_s / servers
            out.append(RowLawCheck(*ident, check_utilisation_law(measured, x, cost.cpu_us_per_request * 1e-6,
                                                                 servers, rtol=rtol)))
            # A CPU cannot be busier than the window is long.
            out.append(RowLawCheck(*ident, LawCheck("U <= 1", measured, 1.0, max(measured - 1.0, 0.0), measured <= 1.0 + rtol)))
    return out


def law_summary(checks: Sequence[RowLawCheck]) -> list[str]:
    """One sentence per law: on how many rows it holds and the worst disagreement."""
    lines = []
    for law in sorted({c.check.law for c in checks}):
        these = [c for c in checks if c.check.law == law]
        held = sum(c.check.holds for c in these)
        worst = max(these, key=lambda c: c.check.relative_error)
        lines.append(f"{law}: holds on {held} of {len(these)} rows; largest disagreement "
                     f"{100 * worst.check.relative_error:.1f}% ({worst.cell_id} rep {worst.repetition}: "
                     f"{worst.check.lhs:.4g} vs {worst.check.rhs:.4g})")
    return lines


# --------------------------------------------------------------------------- predicted vs measured
@dataclass(frozen=True)
class LevelComparison:
    """One concurrency level of a group: the measured means over its repetitions beside the
    fitted model. Response times in seconds; relative errors are (model - measured) / measured."""

    concurrency: float
    repetitions: int
    measured_throughput: float
    predicted_throughput: float
    lower: float  # confidence band of the fitted curve
    upper: float
    throughput_error: float
    measured_response: float  # mean of the rows' mean_us
    predicted_response: float  # N / X_model - Z
    response_error: float


@dataclass(frozen=True)
class GroupFit:
    """The scalability fit of one group (architecture, workload, other levels) of a run:
    ``model`` is a fitted :class:`USL` or, when the USL cannot be identified, :class:`Amdahl`;
    ``None`` with the ``reason`` when neither can."""

    key: GroupKey
    n: np.ndarray
    x: np.ndarray
    think_time: float
    model: USL | None
    reason: str | None
    levels: tuple[LevelComparison, ...]
    notes: tuple[str, ...] = ()
    # Amdahl vs USL on the same points, when both could be fitted.
    comparison: ScalabilityComparison | None = None

    @property
    def label(self) -> str:
        return group_label(self.key)


def fit_group(
    key: GroupKey, rows: Sequence[ResultRow], confidence: float = 0.95, weighting: Literal["none", "relative"] = "relative"
) -> GroupFit:
    """Fit the USL (Amdahl when the USL is unidentifiable) to one group's rows and compare.
    Relative weighting by default: run-to-run spread is a percentage of the throughput, and
    throughputs of one sweep span orders of magnitude."""
    rows = ok_rows(rows)
    n = np.array([_n_x(r)[0] for r in rows])
    x = np.array([_n_x(r)[1] for r in rows])
    thinks = [float(r.cell.think_time_s or 0.0) for r in rows]
    z = float(np.mean(thinks)) if thinks else 0.0
    model: USL | None = None
    comparison = None
    reasons = []
    for estimator in (USL, Amdahl):
        try:
            model = estimator(confidence=confidence, weighting=weighting).fit(n, x)
            break
        except ModelError as exc:
            reasons.append(f"{estimator.name}: {exc}")
    if model is not None and not isinstance(model, Amdahl):
        try:
            comparison = ScalabilityComparison.from_fits(model, Amdahl(confidence=confidence, weighting=weighting).fit(n, x))
        except ModelError:
            comparison = None
    levels = []
    for level in sorted(set(n.tolist())):
        at = [r for r in rows if _n_x(r)[0] == level]
        xm = float(np.mean([_n_x(r)[1] for r in at]))
        lat = [v for v in map(_mean_latency_s, at) if v is not None]
        rm = float(np.mean(lat)) if lat else math.nan
        if model is not None:
            band = model.predict([level], interval="confidence")
            xp, lo, hi = float(band.throughput[0]), float(band.lower[0]), float(band.upper[0])
            rp = level / xp - z
        else:
            xp = lo = hi = rp = math.nan
        levels.append(LevelComparison(level, len(at), xm, xp, lo, hi, _rel(xp, xm), rm, rp, _rel(rp, rm)))
    return GroupFit(key, n, x, z, model, None if model is not None else "; ".join(reasons), tuple(levels),
                    _superlinear(levels), comparison)


def _superlinear(levels: Sequence[LevelComparison], tolerance: float = 0.05) -> tuple[str, ...]:
    """A note when throughput grows faster than N (efficiency X(N) N_0 / (N X(N_0)) above 1):
    the USL with sigma >= 0 cannot follow that; it usually means the lowest level left the
    server idle between requests (wake-up latency), not a real speed-up per client."""
    if len(levels) < 2:
        return ()
    base = levels[0]
    eff = [(lv.measured_throughput * base.concurrency) / (lv.concurrency * base.measured_throughput) for lv in levels[1:]]
    worst = max(range(len(eff)), key=eff.__getitem__)
    if eff[worst] <= 1.0 + tolerance:
        return ()
    lv = levels[1 + worst]
    return (f"superlinear: X({lv.concurrency:g}) = {lv.measured_throughput:.4g} is {eff[worst]:.2f} x "
            f"{lv.concurrency / base.concurrency:g} x X({base.concurrency:g}); the USL (sigma >= 0) cannot follow "
            "throughput that grows faster than N, so expect large errors at the low levels",)


def fit_run(
    manifest: Manifest, rows: Iterable[ResultRow], confidence: float = 0.95, weighting: Literal["none", "relative"] = "relative",
) -> list[GroupFit]:
    """One :class:`GroupFit` per group of a closed-model run, in the rows' order. An open or
    partly-open run is refused: there the concurrency does not set the population N."""
    model = manifest.load_model or "closed"
    if model != "closed":
        raise ModelError("load_model", "'closed' (N = concurrency clients)", model,
                         "the USL relates throughput to a population; an open load sets the arrival rate instead")
    groups: dict[GroupKey, list[ResultRow]] = {}
    for r in ok_rows(rows):
        groups.setdefault(group_key(r), []).append(r)
    if not groups:
        raise UnidentifiableError("rows", "at least one successful repetition", 0)
    return [fit_group(k, v, confidence, weighting) for k, v in groups.items()]


def fit_text(fit: GroupFit) -> str:
    """Plain-text block for the terminal: the fit line and the per-level comparison."""
    lines = [fit.label]
    m = fit.model
    if m is None:
        lines.append(f"  no fit: {fit.reason}")
    else:
        ci = m.confint_
        star = "none (kappa = 0)" if math.isinf(m.n_star_) else f"{m.n_star_:.4g} [{m.n_star_confint_[0]:.4g}, {m.n_star_confint_[1]:.4g}]"
        lines.append(f"  {m.name}: sigma {m.sigma_:.4g} [{ci['sigma'][0]:.3g}, {ci['sigma'][1]:.3g}]  "
                     f"kappa {m.kappa_:.4g} [{ci['kappa'][0]:.3g}, {ci['kappa'][1]:.3g}]  "
                     f"lambda {m.lambda_:.6g} [{ci['lambda'][0]:.6g}, {ci['lambda'][1]:.6g}] req/s  "
                     f"N* {star}  ({m.n_.size} points, {m.dof_} dof, {100 * m.confidence:g}% CIs)")
    if fit.comparison is not None:
        lines.append("  " + fit.comparison.summary())
    lines += [f"  note: {note}" for note in fit.notes]
    head = ("N", "reps", "X measured", "X model", "X err", "R measured ms", "R model ms", "R err")
    cells = [head] + [
        (f"{lv.concurrency:g}", str(lv.repetitions), f"{lv.measured_throughput:.6g}", _num(lv.predicted_throughput, ".6g"),
         _pct(lv.throughput_error), _num(lv.measured_response * 1e3, ".4g"), _num(lv.predicted_response * 1e3, ".4g"),
         _pct(lv.response_error))
        for lv in fit.levels
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _rel(model: float, measured: float) -> float:
    if not (math.isfinite(model) and math.isfinite(measured)) or measured == 0:
        return math.nan
    return (model - measured) / measured


def _num(v: float, fmt: str) -> str:
    return "n/a" if not math.isfinite(v) else format(v, fmt)


def _pct(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{100 * v:+.1f}%"


def _finite(v: object) -> bool:
    if v is None or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
