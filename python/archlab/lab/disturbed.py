"""Disturbed repetitions: a repetition whose measured CPUs went more than ``[experiment]
max_foreign`` of their time to work that is not the lab's (:mod:`archlab.lab.interference`) is
repeated, so that the run's statistics rest on quiet windows.

The rule: after a repetition is recorded, if it is disturbed, the runner runs the same cell
again under the next free repetition number (after the base repetitions and every one stored),
at most :data:`MAX_REPEATS` times in a row; every attempt is stored, the disturbed ones too, and
the report leaves those out of the statistics and lists them (nothing is dropped silently).
Without ``max_foreign`` nothing is repeated: the rows are flagged at the default threshold
(:data:`archlab.store.records.DEFAULT_MAX_FOREIGN`) and the orders they touch are reported as not
established. A run interrupted between a disturbed repetition and its repeat keeps the
disturbed row (flagged) and does not repeat it on resume. Nothing here starts a process."""

from __future__ import annotations

from archlab.spec.model import Cell, Experiment
from archlab.store.records import CellRecord
from archlab.store.runs import RunHandle

#: Repeats of one repetition at most: a machine busy for that long is reported, not waited out.
MAX_REPEATS = 2


def should_repeat(experiment: Experiment, record: CellRecord) -> bool:
    """Whether ``record`` is a successful repetition the spec's ``max_foreign`` calls disturbed."""
    limit = experiment.max_foreign
    return limit is not None and record.status == "ok" and record.conditions is not None and record.conditions.disturbed(limit)


def next_repetition(handle: RunHandle, cell: Cell) -> int:
    """The number of a repeat of ``cell``: after the base repetitions (still to run or not) and
    every repetition stored, so that it never takes a number the schedule will use."""
    stored = [r.repetition for r in handle.store.load_run(handle.run_id).rows if r.cell_id == cell.cell_id]
    return max([handle.experiment.repetitions, *stored]) + 1


def repeat_note(cell: Cell, repetition: int, record: CellRecord, again: int) -> str:
    """What the progress line says when a repetition is repeated."""
    c = record.conditions
    assert c is not None
    return (f"{cell.cell_id} rep {repetition} disturbed: {c.foreign_share + c.steal_share:.0%} of the measured CPUs went to "
            f"other work (load average {c.load_avg_end:.2f}); repeating it as rep {again}")
