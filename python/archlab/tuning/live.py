"""The online controller measured live, scored like the other tuners: a run of a spec whose
``[tune]`` section names a ``controller`` (the server's adaptive pool, ``pool_control``) gives
one latency per program and repetition, at a sweep's concurrency and repetitions; its regret is
that latency (mean over repetitions) against the sweep's measured best level of the same
program, exactly as a static tuner's pick is scored (:meth:`SweepObjective.regret
<archlab.tuning.sweep.SweepObjective.regret>`), except that the controller's figure is measured
rather than read off the sweep's curve. The two runs are taken at different times, so a drift
of the machine between them enters the regret; :func:`controller_regret` reports both runs'
figures so that a reader can see it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from archlab.errors import InvalidValue
from archlab.tuning.dataset import Dataset, Objective
from archlab.tuning.sweep import SweepObjective


@dataclass(frozen=True)
class LiveScore:
    """One program under the controller: its measured figure (mean over repetitions, in the
    objective's unit: seconds or requests/s), the sweep's best figure and level, and the regret."""

    program: str
    value: float
    best_value: float
    best_level: int
    regret: float


def controller_regret(sweep: Dataset, live: Dataset, objective: SweepObjective) -> dict[str, LiveScore]:
    """Program -> :class:`LiveScore`, for every program of ``live`` that ``sweep`` measured.
    ``live`` holds the controller run's rows (their ``pool_size`` is the pool's ceiling)."""
    if not set(live.programs) & set(sweep.programs):
        raise InvalidValue("live.programs", f"some of the sweep's programs ({', '.join(sweep.programs)})", live.programs)
    out = {}
    for p in live.programs:
        if p not in sweep.programs:
            continue
        best = objective.best(sweep, p)
        value = float(np.mean([abs(objective.objective.value_of(r)) for r in live.rows if r.program == p]))
        if best is None:
            out[p] = LiveScore(p, value, math.nan, 0, math.nan)
            continue
        top = abs(sweep.curve(p, objective.objective)[best])
        if objective.objective is Objective.THROUGHPUT:
            regret = top / value - 1 if value > 0 else math.inf
        else:
            regret = value / top - 1
        out[p] = LiveScore(p, value, top, best, regret)
    return out

