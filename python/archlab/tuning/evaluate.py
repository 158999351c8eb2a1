"""The three tuners side by side on one sweep's dataset: each picks a level per program, and each
pick is scored by its regret against the measured best (and the default level's beside it).

- **learned**: :func:`archlab.tuning.learned.cross_validate`, leave one program out: the
  model kind (the seed's four) and its hyper-parameters are chosen by a grouped search over the
  other programs alone (:data:`INNER_SPLITS` folds, scored by their mean regret), so every
  program's pick comes from a model, and a model choice, that never saw it;
- **model-based**: :class:`~archlab.tuning.model_based.ModelBasedTuner` from demands measured at
  level 1 alone: with one thread and a closed loop of clients the thread never idles, so the time
  a request holds it is 1 / throughput, and the server's CPU seconds per request are its CPU
  part (:func:`~archlab.tuning.model_based.measured_demands`). Needs 1 among the levels;
- **controller**: :class:`~archlab.tuning.controller.HillClimber` replayed on the sweep: each
  control interval at size m reads one repetition's measured throughput at the swept level
  nearest m (repetitions in turn, so the climber sees the measured noise); its pick is where it
  stands after :data:`CONTROLLER_INTERVALS` intervals, starting at the default, moving on the
  ladder of swept levels (a step is one level up or down). The in-server
  controller (``pool_control``) does the same against live traffic.

A tuner that cannot run on a dataset (too few programs, no level 1) gets a note instead of picks.
The learned tuner's outer folds are independent and run through a
:data:`~archlab.tuning.fanout.Mapper`: a loop here, or tasks on a cluster's workers (``archlab
tune --cluster``), with the same picks; the controller's replay (about 0.2 ms per program, less than a
task's round trip) and the model-based tuner stay in this process."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from archlab.errors import InvalidValue
from archlab.tuning.controller import HillClimber
from archlab.tuning.dataset import Dataset, Objective
from archlab.tuning.fanout import Mapper, here
from archlab.tuning.learned import cross_validate
from archlab.tuning.model_based import ModelBasedTuner, measured_demands
from archlab.tuning.sweep import LevelChoice, SweepObjective, choose

TUNERS = ("learned", "model-based", "controller")
CONTROLLER_INTERVALS = 60
#: Folds of the learned tuner's inner search (over the programs of one outer training set).
INNER_SPLITS = 4


@dataclass(frozen=True)
class TunerResult:
    name: str
    picks: dict[str, int] = field(default_factory=dict)  # program -> level
    regret: dict[str, float] = field(default_factory=dict)  # program -> regret vs the measured best
    note: str = ""

    @property
    def median_regret(self) -> float:
        vals = [v for v in self.regret.values() if not math.isnan(v)]
        return float(np.median(vals)) if vals else math.nan


@dataclass(frozen=True)
class Evaluation:
    """One architecture's sweep: the measured choice per program and the tuners' picks."""

    architecture: str
    objective: SweepObjective
    default: int
    choices: dict[str, LevelChoice]
    default_regret: dict[str, float]
    tuners: tuple[TunerResult, ...]
    # The seed's scores of the learned model on held-out programs (MAPE %, MSE, accuracy, F1).
    learned_scores: dict[str, float] = field(default_factory=dict)

    @property
    def median_default_regret(self) -> float:
        vals = [v for v in self.default_regret.values() if not math.isnan(v)]
        return float(np.median(vals)) if vals else math.nan


@dataclass(frozen=True)
class Setting:
    """What the model-based tuner needs to know of the server and the load."""

    cores: int
    concurrency: int
    think_time_s: float = 0.0
    db_connections: int = 1


def evaluate(architecture: str, dataset: Dataset, objective: SweepObjective, default: int, setting: Setting,
             cpu_s_at_one: dict[str, float], seed: int = 0, mapper: Mapper = here) -> Evaluation:
    """``cpu_s_at_one``: program -> the server's CPU seconds per request at level 1 (the
    model-based tuner's CPU demand). ``mapper`` runs the learned tuner's outer folds (one per
    held-out program): a loop here, or tasks on a cluster's workers, with the same result."""
    programs = dataset.programs
    choices = {p: choose(dataset, p, objective) for p in programs}
    default_regret = {p: objective.regret(dataset, p, default) for p in programs}
    learned, scores = _learned(dataset, objective, default, mapper)
    tuners = (learned, _model_based(dataset, objective, setting, cpu_s_at_one), _controller(dataset, objective, default, seed))
    return Evaluation(architecture, objective, default, choices, default_regret, tuners, scores)


@dataclass(frozen=True)
class ModelScore:
    """One of the seed's models (Table 5.2) on held-out programs of a sweep."""

    model: str
    task: str
    mape: float
    mse: float
    accuracy: float
    f1_macro: float
    median_regret: float


def seed_models(dataset: Dataset, objective: SweepObjective, default: int, mapper: Mapper = here) -> list[ModelScore]:
    """The seed's four models, as regression and as classification, each scored by grouped
    cross-validation (:func:`~archlab.tuning.learned.cross_validate`, its outer folds run by
    ``mapper``): the seed's metrics and the median regret of their picks on held-out programs."""
    out = []
    n_splits = min(5, len(dataset.programs))
    for model in ("decision-tree", "random-forest", "svm", "xgboost"):
        for task in ("regression", "classification"):
            try:
                r = cross_validate(dataset, model, task, default_size=default, n_splits=n_splits, objective=objective.objective,
                                   mapper=mapper)
            except (InvalidValue, ValueError):
                continue  # e.g. classification of a sweep where one size is always best
            regrets = [objective.regret(dataset, p, m) for p, m in r.picks.items()]
            out.append(ModelScore(model, task, r.mape, r.mse, r.accuracy, r.f1_macro, float(np.nanmedian(regrets))))
    return out


def _learned(dataset: Dataset, objective: SweepObjective, default: int, mapper: Mapper) -> tuple[TunerResult, dict[str, float]]:
    programs = dataset.programs
    if len(programs) < 3:
        return TunerResult("learned", note=f"needs at least 3 programs to hold some out and still tune ({len(programs)} swept)"), {}
    try:
        report = cross_validate(dataset, "auto", "regression", default_size=default, n_splits=len(programs),
                                objective=objective.objective, inner_splits=INNER_SPLITS, mapper=mapper)
    except (InvalidValue, ValueError) as e:
        return TunerResult("learned", note=f"could not cross-validate: {e}"), {}
    # cross_validate scores against the unconstrained best; re-score the same picks with the
    # spec's objective (its latency limit included).
    picks = dict(report.picks)
    regret = {p: objective.regret(dataset, p, m) for p, m in picks.items()}
    scores = {"MAPE %": report.mape, "MSE": report.mse, "accuracy": report.accuracy, "F1 (macro)": report.f1_macro}
    return TunerResult("learned", picks, regret,
                       note=f"model and hyper-parameters by {INNER_SPLITS}-fold grouped CV inside each leave-one-program-out fold"), scores


def _model_based(dataset: Dataset, objective: SweepObjective, setting: Setting, cpu_s_at_one: dict[str, float]) -> TunerResult:
    levels = sorted({r.pool_size for r in dataset.rows})
    if 1 not in levels:
        return TunerResult("model-based", note="needs level 1 among tune.levels (its demands are measured there)")
    picks, regret, skipped = {}, {}, []
    for p in dataset.programs:
        throughput = dataset.curve(p, Objective.THROUGHPUT)
        if 1 not in throughput or p not in cpu_s_at_one or throughput[1] == 0:
            skipped.append(p)
            continue
        hold_s = 1.0 / -throughput[1]
        demands = measured_demands(dataset.features[p].demands, hold_s, min(cpu_s_at_one[p], hold_s))
        if demands.cpu_s <= 0:
            skipped.append(p)
            continue
        tuner = ModelBasedTuner(cores=setting.cores, concurrency=setting.concurrency, think_time_s=setting.think_time_s,
                                db_connections=setting.db_connections, max_pool=max(levels)).fit(demands)
        # Chosen among the swept levels, so that its regret is measured, not interpolated: the
        # smallest level within the tuner's tolerance of the best predicted figure. The model
        # predicts means; the p99 objective is read off the mean curve.
        idx = np.array(levels) - 1
        if objective.objective is Objective.THROUGHPUT:
            x = tuner.throughput_rps_[idx]
            pick = levels[int(np.argmax(x >= x.max() * (1 - tuner.tolerance)))]
        else:
            r = tuner.latency_s_[idx]
            pick = levels[int(np.argmax(r <= r.min() * (1 + tuner.tolerance)))]
        picks[p] = pick
        regret[p] = objective.regret(dataset, p, pick)
    note = "MVA from the demands at level 1" + (f"; no measurement at level 1 for {', '.join(skipped)}" if skipped else "")
    return TunerResult("model-based", picks, regret, note=note)


def _controller(dataset: Dataset, objective: SweepObjective, default: int, seed: int) -> TunerResult:
    picks, regret = {}, {}
    for p in dataset.programs:
        by_level: dict[int, list[float]] = {}
        for r in sorted(dataset.rows, key=lambda r: (r.pool_size, r.repetition)):
            if r.program == p:
                by_level.setdefault(r.pool_size, []).append(r.throughput_rps)
        picks[p] = replay_controller(by_level, default, seed)
        regret[p] = objective.regret(dataset, p, picks[p])
    return TunerResult("controller", picks, regret, note=f"hill climbing on throughput, replayed on the sweep ({CONTROLLER_INTERVALS} intervals)")


def replay_controller(throughput_by_level: dict[int, list[float]], start: int, seed: int = 0,
                      intervals: int = CONTROLLER_INTERVALS) -> int:
    """Where a :class:`HillClimber` started at the level nearest ``start`` stands after
    ``intervals`` control intervals, each reading the next measured throughput (repetitions in
    turn, offset by ``seed``) of the level it runs at. The climber moves on the ladder of swept
    levels (position i is the i-th smallest level), so every interval reads a measurement,
    never an interpolation."""
    swept = sorted(throughput_by_level)
    served = dict.fromkeys(swept, 0)
    first = min(range(len(swept)), key=lambda i: (abs(swept[i] - start), -swept[i]))
    ctl = HillClimber(initial=first + 1, minimum=1, maximum=len(swept), step=1, max_step=2, threshold=0.05)
    for _ in range(intervals):  # bounded: a fixed number of control intervals
        level = swept[ctl.size - 1]
        values = throughput_by_level[level]
        served[level] += 1
        ctl.observe(values[(served[level] + seed) % len(values)])
    return swept[ctl.current - 1]
