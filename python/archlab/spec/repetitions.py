"""``[experiment] repetitions``: a fixed number, or a rule that adds repetitions until the
contenders' comparisons are settled.

``repetitions = 3`` runs every cell three times. ``repetitions = {min = 3, max = 8, extra_time =
"90s"}`` runs every cell ``min`` times, then, round after round, one more repetition of each
cell whose comparison with a neighbour in its load group is not yet separated, until every
comparison is separated, the cell has ``max`` repetitions, or the added repetitions' windows
(warm-up plus measurement, each) would pass ``extra_time`` in all (left out: no cap but ``max``).
The rule itself lives in :mod:`archlab.lab.adaptive`; its statistics in
:mod:`archlab.separation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from archlab.errors import SpecError
from archlab.separation import sequential_level
from archlab.spec.units import parse_duration

__all__ = ["ADAPTIVE_KEYS", "AdaptiveRepetitions", "parse_repetitions"]

ADAPTIVE_KEYS = ("min", "max", "extra_time")
_FIELD = "experiment.repetitions"
_SHAPE = 'an integer >= 1, or a table {min = N, max = M, extra_time = "90s"} with 2 <= min <= max'


@dataclass(frozen=True)
class AdaptiveRepetitions:
    """Repetitions added to unresolved cells, from ``min`` up to ``max`` per cell, their
    windows within ``extra_time_s`` in all (None: no cap but ``max``)."""

    min: int
    max: int
    extra_time_s: float | None = None

    @property
    def looks(self) -> int:
        """How many times the rule compares a pair: after ``min`` repetitions and after each added one."""
        return self.max - self.min + 1

    @property
    def level(self) -> float:
        """The confidence level of each comparison (see :func:`archlab.separation.sequential_level`)."""
        return sequential_level(self.looks)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"min": self.min, "max": self.max}
        if self.extra_time_s is not None:
            d["extra_time_s"] = self.extra_time_s
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> "AdaptiveRepetitions":
        """The rule as :meth:`to_dict` recorded it (a run's manifest)."""
        extra = d.get("extra_time_s")
        return cls(int(str(d["min"])), int(str(d["max"])), None if extra is None else float(str(extra)))


def parse_repetitions(value: object) -> tuple[int, AdaptiveRepetitions | None]:
    """(repetitions every cell gets, the rule adding more or None) of the spec's value."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:  # a number was meant: the answer is about numbers
            raise SpecError(_FIELD, "an integer >= 1", value)
        return value, None
    if not isinstance(value, Mapping):
        raise SpecError(_FIELD, _SHAPE, value)
    for key in value:
        if key not in ADAPTIVE_KEYS:
            raise SpecError(f"{_FIELD}.{key}", "a key one of " + ", ".join(ADAPTIVE_KEYS), key)
    for key in ("min", "max"):
        if key not in value:
            raise SpecError(f"{_FIELD}.{key}", "an integer >= 2 (the rule needs both min and max)", "nothing")
    low, high = value["min"], value["max"]
    # Two repetitions are the fewest that give an interval, so the fewest a comparison can use.
    if isinstance(low, bool) or not isinstance(low, int) or low < 2:
        raise SpecError(f"{_FIELD}.min", "an integer >= 2 (fewer repetitions give no interval to compare)", low)
    if isinstance(high, bool) or not isinstance(high, int) or high < low:
        raise SpecError(f"{_FIELD}.max", f"an integer >= min ({low})", high)
    extra_time_s = None
    if "extra_time" in value:
        extra_time_s = parse_duration(value["extra_time"], f"{_FIELD}.extra_time")
        if extra_time_s <= 0:
            raise SpecError(f"{_FIELD}.extra_time", 'a duration > 0 such as "90s" (leave it out for no cap but max)', value["extra_time"])
    return low, AdaptiveRepetitions(low, high, extra_time_s)
