"""At a glance: per workload and load level, the order of the architectures' throughputs that
the run establishes, and plainly where two of them tie.

Each line is one load group's :class:`~archlab.separation.Ranking` (neighbours compared by the
interval of their throughput ratio): ``a > b`` where the interval clears 1, ``a = b`` where it
does not, and for each tie the smallest difference the run could have detected, so "tie" reads
as "equal within X%", not as "not measured well". The comparisons' confidence is the run's: 95%,
or, for a run whose repetitions were added until comparisons separated, the level that accounts
for its repeated looks (read from the manifest, :func:`comparison_confidence`). A group some of
whose repetitions were disturbed (their measured CPUs went to other work) says that its order
is not established on a quiet machine, and which repetitions (:func:`disturbance_clause`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from archlab.report.aggregate import LoadGroup
from archlab.separation import FAMILY_ALPHA, Ranking
from archlab.spec.repetitions import AdaptiveRepetitions
from archlab.store import Manifest

__all__ = [
    "comparison_confidence",
    "confidence_text",
    "disturbance_clause",
    "disturbance_limit",
    "glance_legend",
    "glance_lines",
    "group_verdict",
]


def comparison_confidence(manifest: Manifest) -> float:
    """The level the run's comparisons are made at: its adaptive rule's, else 95%."""
    rule = manifest.spec.get("repetitions") if isinstance(manifest.spec, Mapping) else None
    if isinstance(rule, Mapping) and "min" in rule and "max" in rule:
        return AdaptiveRepetitions.from_dict(rule).level
    return 1.0 - FAMILY_ALPHA


def disturbance_limit(manifest: Manifest) -> float | None:
    """The run's ``[experiment] max_foreign``, whose disturbed repetitions were repeated and
    are set aside (:func:`archlab.report.aggregate.aggregate`); None when it had none."""
    limit = manifest.spec.get("max_foreign") if isinstance(manifest.spec, Mapping) else None
    return float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None


def disturbance_clause(group: LoadGroup) -> str | None:
    """Why a group's order is not established on a quiet machine: the repetitions in its
    statistics whose measured CPUs went to other work (None when there are none)."""
    hits = [
        (row.conditions.foreign_share + row.conditions.steal_share, cell.label, row.repetition)
        for cell in group.cells
        for row in cell.disturbed
        if row.conditions is not None
    ]
    if not hits:
        return None
    limit = group.cells[0].max_foreign
    total = sum(len(cell.ok_rows) for cell in group.cells)
    share, label, rep = max(hits)
    where = f"{label} rep {rep} ({share:.0%})" if len(hits) == 1 else f"{len(hits)} of {total} repetitions, at most {share:.0%} ({label} rep {rep})"
    return f"not established on a quiet machine: more than {limit:.0%} of the measured CPUs went to other work in {where}"


def group_verdict(group: LoadGroup) -> tuple[Ranking, str, list[str]]:
    """(ranking, its order, what each of its ties means) of one load group."""
    ranking = group.ranking()
    order = ranking.text()
    # A cell whose every repetition the run repeated as disturbed has nothing left to rank.
    set_aside = {c.label for c in group.cells if c.set_aside and not c.ok_rows}
    failed = [label for label in ranking.unmeasured if label not in set_aside]
    if failed:
        order += "; no successful repetition: " + ", ".join(failed)
    if quiet_none := [label for label in ranking.unmeasured if label in set_aside]:
        order += "; every repetition disturbed (set aside): " + ", ".join(quiet_none)
    return ranking, order, ranking.tie_clauses()


def glance_legend(confidence: float) -> str:
    return (
        f"at a glance: throughput order per workload and load level; '>' the {confidence_text(confidence)} interval of the "
        "two means' ratio is clear of 1, '=' a tie (the interval contains 1), ',' listed by mean only (no interval: fewer "
        "than 2 successful repetitions)"
    )


def confidence_text(confidence: float) -> str:
    """A level as a percentage: ``95%``, ``99.17%``."""
    text = f"{100 * confidence:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def glance_lines(groups: Sequence[LoadGroup]) -> list[str]:
    """The terminal's at-a-glance block: one line per load group, then one per tie."""
    if not groups:
        return []
    heads = [f"{g.workload}  {g.level.short}" for g in groups]
    width = max(len(h) for h in heads)
    lines = [glance_legend(groups[0].confidence) + ":"]
    for head, group in zip(heads, groups):
        _, order, ties = group_verdict(group)
        lines.append(f"  {head.ljust(width)}  {order}")
        lines += [f"  {'':{width}}    {tie}" for tie in ties]
        if (disturbed := disturbance_clause(group)) is not None:
            lines.append(f"  {'':{width}}    ! {disturbed}")
    return lines
