"""Errors of the latency library and the small checks that raise them.

Every error archlab.latency raises on purpose is a :class:`LatencyError` (an
:class:`archlab.errors.ArchlabError`), and every message about a bad argument names the parameter,
what is allowed and the value received, so a user can fix the call without reading the source.
The ``check_*`` helpers below are the one place those messages are worded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from archlab.errors import ArchlabError, InvalidValue


class LatencyError(ArchlabError):
    """A latency analysis could not be done as asked (bad argument, unreadable file, too little data).

    The library analyses files and arguments a user gave and starts no process, so each of its
    refusals is input the user can fix: the CLI exits 2 on it, as on any InvalidValue."""

    exit_status = 2


class ParameterError(LatencyError, InvalidValue):
    """An argument is outside what the function accepts."""


class InsufficientData(LatencyError):
    """The data are too few (or too tied) for the statistic asked for."""


def check_choice(parameter: str, value: object, allowed: Iterable[object]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise ParameterError(parameter, "one of " + ", ".join(repr(a) for a in allowed), value)


def check_probability(parameter: str, value: float, *, open_interval: bool = True) -> float:
    """A level or fraction strictly between 0 and 1 (or in [0, 1] when ``open_interval`` is false)."""
    ok = isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (0.0 < value < 1.0 if open_interval else 0.0 <= value <= 1.0)
    if not ok:
        bounds = "a number strictly between 0 and 1" if open_interval else "a number in [0, 1]"
        raise ParameterError(parameter, bounds, value)
    return float(value)


def check_positive_int(parameter: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int,)) or value < minimum:
        raise ParameterError(parameter, f"an integer >= {minimum}", value)
    return int(value)


def check_nonnegative(parameter: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ParameterError(parameter, "a number >= 0", value)
    return float(value)
