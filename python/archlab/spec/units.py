"""Parsers and formatters for the two value syntaxes a spec shares with ``archlab-engine``:
durations (``"3s"``, ``"500ms"``, ``"1m"``, ``"250us"`` or a bare number of seconds) and CPU lists
(``"1"``, ``"0-1"``, ``"0,2-3"``). Parsing turns them into plain numbers (seconds as ``float``,
CPUs as a sorted tuple of ``int``); formatting turns them back into the exact syntax the engine
accepts, so a value never changes meaning on its way to the data plane."""

from __future__ import annotations

import re

from archlab.errors import SpecError

_DURATION_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|m)?\s*$")
DURATION_SYNTAX = "a duration such as '3s', '500ms', '1m' or a number of seconds"

_CPU_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
CPU_LIST_SYNTAX = "a CPU list such as '1', '0-1' or '0,2-3'"
# Linux numbers at most 8192 CPUs (NR_CPUS with MAXSMP); a bound far above it keeps a typo such
# as "0-99999999" from building a set of 10^8 numbers before the check against this machine.
MAX_CPU = (1 << 16) - 1


def parse_duration(value: object, field: str, *, minimum_s: float = 0.0, strict: bool = False) -> float:
    """Seconds as a float. ``strict`` makes ``minimum_s`` exclusive (``duration`` must be > 0)."""
    if isinstance(value, bool):  # bool is an int in Python; `true` is never a duration
        raise SpecError(field, DURATION_SYNTAX, value)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        m = _DURATION_RE.match(value)
        if not m:
            raise SpecError(field, DURATION_SYNTAX, value)
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]
    else:
        raise SpecError(field, DURATION_SYNTAX, value)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise SpecError(field, DURATION_SYNTAX, value)
    too_small = seconds <= minimum_s if strict else seconds < minimum_s
    if too_small:
        bound = f"> {minimum_s:g}s" if strict else f">= {minimum_s:g}s"
        raise SpecError(field, f"a duration {bound}", value)
    return seconds


def engine_duration(seconds: float) -> str:
    """The engine's syntax for a duration, in whole microseconds (never scientific notation,
    which the engine's unit parser would misread)."""
    return f"{round(seconds * 1e6)}us"


def short_duration(seconds: float) -> str:
    """A compact, exact label for identifiers: ``0s``, ``10ms``, ``1500us``, ``2s``."""
    us = round(seconds * 1e6)
    if us % 1_000_000 == 0:
        return f"{us // 1_000_000}s"
    if us % 1000 == 0:
        return f"{us // 1000}ms"
    return f"{us}us"


def parse_cpu_list(value: object, field: str) -> tuple[int, ...]:
    """A sorted tuple of distinct CPU numbers; a bare integer is accepted as a one-CPU list."""
    if isinstance(value, bool):
        raise SpecError(field, CPU_LIST_SYNTAX, value)
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, CPU_LIST_SYNTAX, value)
    cpus: set[int] = set()
    for part in value.replace(" ", "").split(","):
        m = _CPU_RANGE_RE.match(part)
        if not m:
            raise SpecError(field, CPU_LIST_SYNTAX, value)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise SpecError(field, CPU_LIST_SYNTAX, value, hint=f"range {part} runs backwards")
        if hi > MAX_CPU:
            raise SpecError(field, f"CPU numbers up to {MAX_CPU}", value)
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


def format_cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """The shortest list syntax for a set of CPUs: ``(0, 1, 3)`` -> ``"0-1,3"``."""
    parts: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
