"""A stored pool-size sweep (a run of a spec with a ``[tune]`` section) read back as
:class:`~archlab.tuning.dataset.Dataset`\\ s, one per architecture, and the measured best level of
each program with its uncertainty.

"Best" is the spec's objective (:class:`SweepObjective`): the lowest mean or p99 latency at the
tuned concurrency, or the highest throughput among the levels whose mean p99 latency stays under
a limit. A level's figure is the mean over repetitions with its Student-t 95 % interval
(:func:`archlab.stats.mean_confidence_interval`); the levels whose intervals overlap the best's
are reported as ties, since the sweep cannot tell them apart (with one repetition there is no
interval, and no tie is claimed)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from archlab.errors import InvalidValue
from archlab.spec.tune import TuneSettings
from archlab.stats import Interval, mean_confidence_interval
from archlab.store.rows import ResultRow
from archlab.tuning.dataset import Dataset, Objective, SweepRow
from archlab.tuning.features import Features, StepCosts, extract
from archlab.tuning.programs import Program, load_programs

_OBJECTIVES = {"mean-latency": Objective.MEAN_LATENCY, "p99-latency": Objective.P99_LATENCY, "throughput": Objective.THROUGHPUT}


@dataclass(frozen=True)
class SweepObjective:
    """The spec's objective: a metric, and for throughput an optional p99 latency limit."""

    objective: Objective
    p99_limit_s: float | None = None

    @classmethod
    def of(cls, tune: TuneSettings) -> SweepObjective:
        return cls(_OBJECTIVES[tune.objective], tune.p99_limit_s)

    @property
    def text(self) -> str:
        limit = f" with p99 <= {self.p99_limit_s * 1e3:g} ms" if self.p99_limit_s is not None else ""
        return self.objective.value + limit

    def intervals(self, dataset: Dataset, program: str) -> dict[int, Interval]:
        """Level -> the objective's mean over repetitions with its interval (in the metric's own
        orientation: seconds of latency, or requests/s)."""
        by: dict[int, list[float]] = {}
        for r in dataset.rows:
            if r.program == program:
                by.setdefault(r.pool_size, []).append(abs(self.objective.value_of(r)))
        if not by:
            raise InvalidValue("program", f"one of {dataset.programs}", program)
        return {m: mean_confidence_interval(v) for m, v in sorted(by.items())}

    def eligible(self, dataset: Dataset, program: str) -> list[int]:
        """The levels the objective may choose: all, or those within the p99 limit."""
        levels = sorted({r.pool_size for r in dataset.rows if r.program == program})
        if self.p99_limit_s is None:
            return levels
        p99 = dataset.curve(program, Objective.P99_LATENCY)
        return [m for m in levels if p99[m] <= self.p99_limit_s]

    def best(self, dataset: Dataset, program: str) -> int | None:
        """The measured best level (the smallest on an exact tie); None when no level meets
        the latency limit."""
        curve = dataset.curve(program, self.objective)
        eligible = self.eligible(dataset, program)
        return min(eligible, key=lambda m: (curve[m], m)) if eligible else None

    def regret(self, dataset: Dataset, program: str, level: int) -> float:
        """How much worse ``program`` runs at ``level`` (read at the nearest swept level) than
        at its best: latency / best latency - 1, or best throughput / throughput - 1."""
        best = self.best(dataset, program)
        if best is None:
            return math.nan
        curve = dataset.curve(program, self.objective)
        nearest = min(curve, key=lambda m: (abs(m - level), -m))
        at, top = abs(curve[nearest]), abs(curve[best])
        if self.objective is Objective.THROUGHPUT:
            return top / at - 1 if at > 0 else math.inf
        return at / top - 1


@dataclass(frozen=True)
class LevelChoice:
    """The measured best level of one program, its interval, and the levels tied with it."""

    program: str
    best: int | None
    interval: Interval | None
    ties: tuple[int, ...]
    intervals: dict[int, Interval]


def choose(dataset: Dataset, program: str, objective: SweepObjective) -> LevelChoice:
    intervals = objective.intervals(dataset, program)
    best = objective.best(dataset, program)
    if best is None:
        return LevelChoice(program, None, None, (), intervals)
    top = intervals[best]
    eligible = set(objective.eligible(dataset, program))
    ties = tuple(m for m, iv in intervals.items() if m != best and m in eligible and top.has_interval and iv.overlaps(top))
    return LevelChoice(program, best, top, ties, intervals)


def read_programs(tune: TuneSettings, run_dir: Path | None) -> dict[str, Program]:
    """The run's programs: the copy kept in the run directory (``programs.toml``), else the
    file the spec names."""
    kept = run_dir / "programs.toml" if run_dir is not None else None
    return load_programs(kept if kept is not None and kept.is_file() else tune.programs_file)


def datasets(rows: list[ResultRow], tune: TuneSettings, programs: dict[str, Program],
             costs: StepCosts | None = None) -> dict[str, Dataset]:
    """Architecture -> the sweep's dataset: one :class:`SweepRow` per successful repetition of
    a program at the tuned concurrency (failed repetitions are left out)."""
    by_arch: dict[str, list[SweepRow]] = {}
    for row in rows:
        if not row.ok or row.measurement is None:
            continue
        key = row.cell
        program = tune.program_of(key.workload or "")
        level = getattr(key, tune.parameter)
        if program is None or level is None or key.concurrency != tune.concurrency:
            continue
        m = row.measurement
        by_arch.setdefault(str(key.architecture), []).append(SweepRow(
            program=program, pool_size=int(level), repetition=row.repetition, latency_mean_s=m.mean_us / 1e6,
            latency_p99_s=m.p99_us / 1e6, throughput_rps=m.throughput_rps,
        ))  # fmt: skip
    missing = sorted(set(tune.programs) - set(programs))
    if missing:
        raise InvalidValue("tune.programs", f"a program file defining {', '.join(tune.programs)}", f"none for {missing}")
    features: dict[str, Features] = {p: extract(programs[p], costs) for p in tune.programs}
    return {arch: Dataset(rs, {p: features[p] for p in {r.program for r in rs}}) for arch, rs in by_arch.items()}
