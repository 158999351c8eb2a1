"""Service programs as Python sees them: typed, read-only trees of the steps the server executes
at ``/program?name=P``. The program format has one owner, the Rust parser of
``crates/workload/src/program``: :func:`load_programs` and :func:`parse_programs` hand the file to
``archlab._native``, which checks it exactly as ``archlab-engine serve --programs FILE`` does and
returns the checked tree as JSON; this module only turns that JSON into dataclasses, so a file
Python accepts is a file the server runs, and a refused file is refused with the same message
(an :class:`archlab.errors.InvalidValue` naming the file, the field, the allowed values and the
value received)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

from archlab.errors import InvalidValue


class StepKind(enum.Enum):
    """The steps of a program; the values are the names used in program files."""

    PRIME = "prime"  # CPU: trial division of n
    SORT = "sort"  # CPU and memory: merge sort of n integers
    DB = "db"  # blocking PostgreSQL lookup
    CALL = "call"  # blocking downstream HTTP call (seed 003's HTTP connector call)
    FANOUT = "fanout"  # downstream calls issued together, awaited together (seed 003's gRPC calls)
    SLEEP = "sleep"  # the thread sleeps
    REPEAT = "repeat"  # a bounded loop of steps


@dataclass(frozen=True)
class Step:
    """One step. ``n`` for prime/sort, ``row_id`` for db, ``ms`` for call/sleep (one value) and
    fanout (one value per call), ``times`` and ``steps`` for repeat."""

    kind: StepKind
    n: int = 0
    row_id: int = 0
    ms: tuple[int, ...] = ()
    times: int = 1
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Program:
    name: str
    steps: tuple[Step, ...]


def load_programs(path: str | Path) -> dict[str, Program]:
    """The programs of the program file at ``path``, by name."""
    from archlab import _native

    try:
        text = _native.load_programs(str(path))
    except ValueError as e:
        raise _refusal(e) from None
    return _programs(text)


def parse_programs(text: str, source: str = "(program text)") -> dict[str, Program]:
    """The programs of ``text`` (a program file's contents; ``source`` names it in errors)."""
    from archlab import _native

    try:
        data = _native.parse_programs(source, text)
    except ValueError as e:
        raise _refusal(e) from None
    return _programs(data)


def _refusal(e: ValueError) -> InvalidValue:
    source, field, allowed, received = e.args
    return InvalidValue(f"{source}: {field}", allowed, received)


def _programs(text: str) -> dict[str, Program]:
    tree = json.loads(text)
    return {p["name"]: Program(p["name"], _steps(p["steps"])) for p in tree["programs"]}


def _steps(raw: list[dict]) -> tuple[Step, ...]:
    out = []
    for s in raw:
        kind = StepKind(s["step"])
        if kind in (StepKind.PRIME, StepKind.SORT):
            out.append(Step(kind, n=s["n"]))
        elif kind is StepKind.DB:
            out.append(Step(kind, row_id=s["id"]))
        elif kind is StepKind.FANOUT:
            out.append(Step(kind, ms=tuple(s["ms"])))
        elif kind in (StepKind.CALL, StepKind.SLEEP):
            out.append(Step(kind, ms=(s["ms"],)))
        else:
            out.append(Step(kind, times=s["times"], steps=_steps(s["steps"])))
    return tuple(out)
