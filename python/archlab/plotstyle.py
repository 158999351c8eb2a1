"""The look shared by every figure archlab draws (the run report's, the models', the latency
library's): matplotlib rc settings applied with ``matplotlib.rc_context``. Kept in a module of
its own so that any layer can use it without importing another layer.

Glyphs are rendered as paths so an SVG looks the same on every machine with no font to ship;
``svg.hashsalt`` makes the SVG's internal ids deterministic, so a report is a pure function of
its data (each user passes its own salt to keep ids distinct on one page)."""

from __future__ import annotations

from typing import Any

BASE_STYLE: dict[str, object] = {
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "svg.fonttype": "path",
}


def style(overrides: dict[str, Any], salt: str | None = None) -> dict[str, Any]:
    """The base style plus ``overrides`` (matplotlib rc names), with SVG ids salted by ``salt``
    when given (a caller that salts each figure itself passes none)."""
    salted = {"svg.hashsalt": salt} if salt is not None else {}
    return {**BASE_STYLE, **overrides, **salted}
