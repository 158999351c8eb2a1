"""Predicted versus measured: a model's numbers set beside what a run measured, metric by
metric, with absolute and relative error (the relative error is against the measurement). This
is the core the `archlab model` command and the HTML report will render; it takes plain
mappings so that it does not depend on the result store's types."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from archlab.models.errors import ModelError


@dataclass(frozen=True)
class Comparison:
    metric: str
    predicted: float
    measured: float
    error: float  # predicted - measured
    relative_error: float  # (predicted - measured) / measured; NaN when measured is 0


def compare(predicted: Mapping[str, float], measured: Mapping[str, float]) -> list[Comparison]:
    """One row per metric present in both mappings, in ``predicted``'s order."""
    common = [m for m in predicted if m in measured]
    if not common:
        raise ModelError("measured", f"at least one metric also predicted ({sorted(predicted)})", sorted(measured))
    rows = []
    for m in common:
        p, q = float(predicted[m]), float(measured[m])
        rows.append(Comparison(m, p, q, p - q, (p - q) / q if q != 0 else math.nan))
    return rows


def comparison_table(rows: list[Comparison], digits: int = 4) -> str:
    """Plain-text table: metric, predicted, measured, error, relative error in percent."""
    cells = [("metric", "predicted", "measured", "error", "rel. error")]
    cells += [(r.metric, f"{r.predicted:.{digits}g}", f"{r.measured:.{digits}g}", f"{r.error:+.{digits}g}",
               "n/a" if math.isnan(r.relative_error) else f"{100 * r.relative_error:+.1f}%") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells)
