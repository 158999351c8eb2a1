"""The pool-size dataset a sweep produces and every tuner reads: one :class:`SweepRow` per
(program, pool size, repetition) with the measured latency and throughput, plus each program's
:class:`~archlab.tuning.features.Features`. From it come the labels (the measured best size of
each program, by an :class:`Objective`) and the figure a user cares about, :meth:`Dataset.regret`
(how much worse a program runs at a tuner's size than at its measured best)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from archlab.errors import InvalidValue
from archlab.tuning.features import Features


class Objective(enum.Enum):
    """What "best" means: lowest mean latency, lowest p99 latency, or highest throughput."""

    MEAN_LATENCY = "mean-latency"
    P99_LATENCY = "p99-latency"
    THROUGHPUT = "throughput"

    def value_of(self, row: SweepRow) -> float:
        """The row's figure, oriented so that lower is better."""
        if self is Objective.MEAN_LATENCY:
            return row.latency_mean_s
        if self is Objective.P99_LATENCY:
            return row.latency_p99_s
        return -row.throughput_rps


@dataclass(frozen=True)
class SweepRow:
    program: str
    pool_size: int
    repetition: int
    latency_mean_s: float
    latency_p99_s: float
    throughput_rps: float

    def __post_init__(self) -> None:
        if not isinstance(self.pool_size, int) or self.pool_size < 1:
            raise InvalidValue("SweepRow.pool_size", "an integer >= 1", self.pool_size)
        for name in ("latency_mean_s", "latency_p99_s", "throughput_rps"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise InvalidValue(f"SweepRow.{name}", "a finite number >= 0", v)


@dataclass(frozen=True)
class Dataset:
    rows: tuple[SweepRow, ...]
    features: dict[str, Features]

    def __init__(self, rows: Iterable[SweepRow], features: dict[str, Features]):
        rows = tuple(rows)
        missing = sorted({r.program for r in rows} - set(features))
        if missing:
            raise InvalidValue("Dataset.features", "the features of every program in the rows", f"none for {missing}")
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "features", dict(features))

    @property
    def programs(self) -> list[str]:
        return sorted({r.program for r in self.rows})

    def curve(self, program: str, objective: Objective = Objective.MEAN_LATENCY) -> dict[int, float]:
        """Pool size -> the objective's value averaged over repetitions (lower is better)."""
        by: dict[int, list[float]] = {}
        for r in self.rows:
            if r.program == program:
                by.setdefault(r.pool_size, []).append(objective.value_of(r))
        if not by:
            raise InvalidValue("program", f"one of {self.programs}", program)
        return {m: float(np.mean(v)) for m, v in sorted(by.items())}

    def best_size(self, program: str, objective: Objective = Objective.MEAN_LATENCY) -> int:
        """The measured best pool size (the smallest on a tie)."""
        curve = self.curve(program, objective)
        return min(curve, key=lambda m: (curve[m], m))

    def labels(self, objective: Objective = Objective.MEAN_LATENCY) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Training rows: one per (program, repetition), labelled with that repetition's best
        size, so a program contributes its measurement noise; returns (groups, X, y)."""
        by: dict[tuple[str, int], dict[int, float]] = {}
        for r in self.rows:
            by.setdefault((r.program, r.repetition), {})[r.pool_size] = objective.value_of(r)
        groups, xs, ys = [], [], []
        for (program, _), curve in sorted(by.items()):
            groups.append(program)
            xs.append(self.features[program].vector())
            ys.append(min(curve, key=lambda m: (curve[m], m)))
        return groups, np.array(xs), np.array(ys)

    def regret(self, program: str, pool_size: int, objective: Objective = Objective.MEAN_LATENCY) -> float:
        """How much worse ``program`` runs at ``pool_size`` than at its measured best:
        value(size) / value(best) - 1 (for throughput, best / value - 1). A size that was not
        swept is read at the nearest swept size (the larger on a tie)."""
        curve = self.curve(program, objective)
        sizes = sorted(curve)
        nearest = min(sizes, key=lambda m: (abs(m - pool_size), -m))
        best = curve[self.best_size(program, objective)]
        at = curve[nearest]
        if objective is Objective.THROUGHPUT:
            return (-best) / (-at) - 1 if at < 0 else math.inf
        return at / best - 1


def sizes_of(rows: Sequence[SweepRow]) -> list[int]:
    return sorted({r.pool_size for r in rows})
