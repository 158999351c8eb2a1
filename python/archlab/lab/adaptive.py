"""Adaptive repetitions: the rounds of repetitions a run adds, after every cell has its
``min``, to the cells whose comparisons are not yet settled (``[experiment] repetitions =
{min, max, extra_time}``, :mod:`archlab.spec.repetitions`).

Mechanism: the cells that faced the same load (same workload and load level) are contenders.
After each round the rule ranks each group's contenders on the throughputs stored so far and
compares neighbours (:func:`archlab.separation.rank`, at the level that accounts for looking
after every round); every cell in a pair whose interval still contains a ratio of 1 gets one
more repetition in the next round, unless it has ``max`` already or the round would take the
added windows past ``extra_time``. A group's repetitions of one round run back to back, its
contenders in an order rotated every round, so slow drift of a shared machine falls on every
contender alike. The rule reads only the run's stored rows, so a run interrupted mid-round
resumes where the rows say it is (the contenders the interruption left behind catch up first),
and each added repetition is stored like any other. Nothing
here blocks or starts processes: the runner runs what :func:`schedule` yields.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence

from archlab.separation import rank
from archlab.spec.model import Cell, Experiment
from archlab.spec.repetitions import AdaptiveRepetitions
from archlab.store.rows import ResultRow
from archlab.store.runs import RunHandle

__all__ = ["contenders_together", "contention_key", "most_added", "next_round", "schedule"]

Pair = tuple[Cell, int]


def contention_key(cell: Cell) -> tuple[object, ...]:
    """What contenders share: the workload and the load level of the model (the report groups
    its table and at-a-glance orders the same way, see :mod:`archlab.report.aggregate`)."""
    return (cell.workload, cell.concurrency, cell.rate_rps, cell.session_rate)


def next_round(experiment: Experiment, rows: Iterable[ResultRow], rule: AdaptiveRepetitions) -> list[Pair]:
    """The (cell, repetition) pairs of the next round given the rows stored so far; empty when
    every comparison is separated or nothing more may be added (``max``, ``extra_time``)."""
    by_cell: dict[str, list[ResultRow]] = defaultdict(list)
    for row in rows:
        by_cell[row.cell_id].append(row)
    cells = experiment.cells()
    if any(len(by_cell[c.cell_id]) < rule.min for c in cells):
        return []  # the base repetitions come first (the runner's pending pairs)
    window_s = experiment.warmup_s + experiment.duration_s
    spent_s = window_s * sum(1 for rs in by_cell.values() for r in rs if r.repetition > rule.min)
    groups: dict[tuple[object, ...], list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[contention_key(cell)].append(cell)
    pairs: list[Pair] = []
    for contenders in groups.values():
        wanted = _wanted(contenders, by_cell, rule, experiment.max_foreign)
        if not wanted:
            continue
        cost_s = window_s * len(wanted)
        if rule.extra_time_s is not None and spent_s + cost_s > rule.extra_time_s * (1 + 1e-9):
            continue  # a group runs whole rounds or none: a comparison needs both its sides
        spent_s += cost_s
        pairs += _rotated([(c, max(r.repetition for r in by_cell[c.cell_id]) + 1) for c in wanted])
    return pairs


def most_added(experiment: Experiment) -> int:
    """The most repetitions the rule can add to a run (every cell to ``max``, within
    ``extra_time``); 0 without a rule."""
    rule = experiment.adaptive
    if rule is None:
        return 0
    most = len(experiment.cells()) * (rule.max - rule.min)
    if rule.extra_time_s is not None:
        most = min(most, int(rule.extra_time_s * (1 + 1e-9) // (experiment.warmup_s + experiment.duration_s)))
    return most


def _wanted(contenders: Sequence[Cell], by_cell: dict[str, list[ResultRow]], rule: AdaptiveRepetitions,
            max_foreign: float | None = None) -> list[Cell]:
    """The contenders in an unseparated pair that may still get a repetition. Repetitions the
    run repeated as disturbed (over ``max_foreign``) are not evidence, as in the report."""
    def evidence(r: ResultRow) -> bool:
        disturbed = max_foreign is not None and r.conditions is not None and r.conditions.disturbed(max_foreign)
        return r.ok and r.measurement is not None and not disturbed

    samples = {
        c.cell_id: [r.measurement.throughput_rps for r in by_cell[c.cell_id] if evidence(r) and r.measurement is not None]
        for c in contenders
    }
    unresolved = set(rank(samples, rule.level).unresolved_contenders())
    wanted = [c for c in contenders if c.cell_id in unresolved and len(by_cell[c.cell_id]) < rule.max]
    # A round cut short (an interruption) left some contenders one repetition behind: they
    # catch up first, so a resumed run adds what the uninterrupted one would have.
    most = max((len(by_cell[c.cell_id]) for c in wanted), default=0)
    behind = [c for c in wanted if len(by_cell[c.cell_id]) < most]
    return behind or wanted


def _rotated(pairs: list[Pair]) -> list[Pair]:
    """The group's pairs starting with a different contender each round (by the repetition
    number), so none always runs first, right after another group's cells."""
    if not pairs:
        return pairs
    shift = pairs[0][1] % len(pairs)
    return pairs[shift:] + pairs[:shift]


def contenders_together(experiment: Experiment, pending: Sequence[Pair]) -> list[Pair]:
    """``pending`` with each repetition's contenders back to back (in the order of
    :func:`_rotated`), repetition-major still: the base of an adaptive run is ordered as its
    rounds are, so every comparison rests on contenders measured side by side."""
    group_of: dict[tuple[object, ...], int] = {}
    for cell in experiment.cells():
        group_of.setdefault(contention_key(cell), len(group_of))
    by_block: dict[tuple[int, int], list[Pair]] = defaultdict(list)
    for cell, rep in pending:
        by_block[(rep, group_of[contention_key(cell)])].append((cell, rep))
    return [pair for block in sorted(by_block) for pair in _rotated(by_block[block])]


def schedule(handle: RunHandle, pending: Sequence[Pair], on_added: Callable[[int], None] | None = None) -> Iterator[Pair]:
    """The pairs the runner runs, in order: ``pending`` (the base repetitions), then, with an
    adaptive rule, round after round from the stored rows. ``on_added(n)`` hears each round's size.
    The runner must record each pair before asking for the next: a round is computed from what
    is stored."""
    rule = handle.experiment.adaptive
    if rule is None:
        yield from pending
        return
    yield from contenders_together(handle.experiment, pending)
    while True:
        added = next_round(handle.experiment, handle.store.load_run(handle.run_id).rows, rule)
        if not added:
            return
        if on_added is not None:
            on_added(len(added))
        yield from added
