"""The two value syntaxes a spec shares with ``archlab-engine``, read by the data plane itself
(:mod:`archlab.contract`): durations (``"3s"``, ``"500ms"``, ``"1m"``, ``"250us"`` or a bare
number of seconds) and CPU lists (``"1"``, ``"0-1"``, ``"0,2-3"``). Parsing turns them into plain
numbers (seconds as ``float``, the exact product of number and unit, so that a spec's hash never
changes; CPUs as a sorted tuple of ``int``); formatting writes the spec's canonical labels."""

from __future__ import annotations

from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import SpecError


def parse_duration(value: object, field: str) -> float:
    """Seconds as a float; bounds (> 0, at most a day) are the data plane's, checked with the
    parameter that uses the duration."""
    try:
        return contract.parse_duration(value)
    except OptionRefused as e:
        raise SpecError(field, e.allowed, value, hint=e.hint) from None


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
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        value = repr(value)
    try:
        return contract.cpu_list(value)
    except OptionRefused as e:
        raise SpecError(field, e.allowed, value, hint=e.hint) from None


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
