"""Which of several contenders is faster, as far as their repetitions establish it.

Contenders are the cells that faced the same load (same workload and load level, different
architectures); each has one throughput per successful repetition. They are ranked by mean
throughput and each adjacent pair is compared with the Welch interval of the ratio of their
means on the log scale (:func:`archlab.stats.ratio_of_means_interval`): the pair is *separated*
when the interval excludes 1, and otherwise *tied*, with the interval's half-width (its
``resolution``) as the smallest difference the repetitions could have detected. An order is the
chain of these verdicts (``a > b = c > d``); a tie is not transitive evidence, so only adjacent
pairs are claimed. The runner's adaptive repetitions (:mod:`archlab.lab.adaptive`) stop when
every adjacent pair of a group is separated, and the report prints the same verdicts, so what
stopped a run and what its table says are one computation.

Looking again after every added repetition and stopping at the first separation would make a
95% interval claim too much: each look is another chance for noise to separate a true tie. A
rule that may look ``k`` times therefore compares at level ``1 - alpha / k`` (Bonferroni over
the looks), which keeps the chance of separating a true tie at any look below ``alpha``; see
:func:`sequential_level`. It is conservative (consecutive looks share most of their data), which
costs repetitions, not correctness.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from archlab.stats import RatioInterval, ratio_of_means_interval

__all__ = ["FAMILY_ALPHA", "Comparison", "Ranking", "rank", "sequential_level"]

#: The chance, per adjacent pair, that a run separates two contenders whose means are equal.
FAMILY_ALPHA = 0.05


def sequential_level(looks: int, alpha: float = FAMILY_ALPHA) -> float:
    """The confidence level of each comparison when a rule may compare ``looks`` times.

    Bonferroni over the looks: the union of ``looks`` events of probability ``alpha / looks``
    each has probability at most ``alpha``. One look gives the plain ``1 - alpha``."""
    if looks < 1:
        raise ValueError(f"looks: expected an integer >= 1, got {looks!r}")
    return 1.0 - alpha / looks


@dataclass(frozen=True)
class Comparison:
    """The verdict on two contenders adjacent in the ranking, ``faster`` by mean first."""

    faster: str
    slower: str
    #: mean(faster) / mean(slower) with its interval; None when a side has fewer than two
    #: successful repetitions (then nothing can be said).
    ratio: RatioInterval | None

    @property
    def separated(self) -> bool:
        """The interval of the ratio lies wholly above 1: ``faster`` is faster."""
        return self.ratio is not None and self.ratio.has_interval and self.ratio.low > 1.0

    @property
    def detectable(self) -> float | None:
        """For a tie: the smallest relative difference the repetitions could have told apart
        from none (the ratio interval's half-width on the log scale, as a fraction); None when
        there is no interval."""
        if self.ratio is None or self.ratio.resolution is None:
            return None
        return self.ratio.resolution


@dataclass(frozen=True)
class Ranking:
    """Contenders best first, and the verdict on each adjacent pair."""

    order: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    #: Contenders without a successful repetition: unranked.
    unmeasured: tuple[str, ...] = ()

    @property
    def resolved(self) -> bool:
        """Every adjacent pair is separated (a total order is established)."""
        return all(c.separated for c in self.comparisons)

    def unresolved_contenders(self) -> tuple[str, ...]:
        """The contenders in a tied pair, best first: those more repetitions could separate."""
        names = {n for c in self.comparisons if not c.separated for n in (c.faster, c.slower)}
        return tuple(n for n in self.order if n in names)

    def text(self) -> str:
        """``netty > single-thread = blocking > thread-per-connection``."""
        if not self.order:
            return "nothing measured"
        parts = [self.order[0]]
        for c in self.comparisons:
            # Without an interval the pair is listed by mean only: neither a lead nor a tie.
            parts += [">" if c.separated else ("=" if c.detectable is not None else ","), c.slower]
        return " ".join(parts).replace(" , ", ", ")

    def tie_clauses(self) -> list[str]:
        """What each tie of the ranking means: ``tie of blocking and thread-per-connection
        (difference < 7%, the smallest the run could detect)``."""
        clauses = []
        uncompared = 0
        for c in self.comparisons:
            if c.separated:
                continue
            if c.detectable is None:
                uncompared += 1
            else:
                clauses.append(
                    f"tie of {c.faster} and {c.slower} (difference < {_percent(c.detectable)}, "
                    "the smallest the run could detect)"
                )
        if uncompared:  # one clause, not one per pair: a single-repetition run has no interval anywhere
            pairs = "every pair" if uncompared == len(self.comparisons) else f"{uncompared} pair(s) listed with ','"
            clauses.append(f"{pairs} by mean only, not compared (fewer than 2 successful repetitions)")
        return clauses

    def ties_text(self) -> str:
        """:meth:`tie_clauses` in one sentence."""
        return "; ".join(self.tie_clauses())


def _percent(fraction: float) -> str:
    """``7%``, ``0.8%``: two significant figures at most, never ``0%`` for a nonzero fraction."""
    value = 100.0 * fraction
    if value >= 10 or value == 0:
        return f"{value:.0f}%"
    return f"{value:.{max(0, 1 - math.floor(math.log10(value)))}f}%".replace(".0%", "%")


def rank(samples: Mapping[str, Sequence[float]], level: float = 1.0 - FAMILY_ALPHA) -> Ranking:
    """Rank contenders by mean throughput (``samples``: name -> one throughput per successful
    repetition) and compare each adjacent pair at ``level``. Ties of the mean are broken by
    name so the ranking does not depend on the mapping's order."""
    measured = {name: list(values) for name, values in samples.items() if len(values) > 0}
    order = tuple(sorted(measured, key=lambda n: (-sum(measured[n]) / len(measured[n]), n)))
    comparisons = []
    for faster, slower in zip(order, order[1:]):
        a, b = measured[slower], measured[faster]
        ratio = ratio_of_means_interval(a, b, level) if len(a) >= 2 and len(b) >= 2 and min(a + b) > 0 else None
        comparisons.append(Comparison(faster, slower, ratio))
    unmeasured = tuple(sorted(n for n in samples if n not in measured))
    return Ranking(order, tuple(comparisons), unmeasured)
