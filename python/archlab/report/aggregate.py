"""From stored rows (one per cell and repetition) to one summary per cell.

A cell is one combination of every factor except the repetition. For each cell this module
computes the mean and Student-t confidence interval over its successful repetitions of the
metrics the report shows (:data:`METRICS`; per-request quantities pooled, their total over the
total requests, so that the row obeys the utilisation law), the utilisation of the measured
CPUs and what saturated (the bottleneck), counts failed repetitions and keeps their errors,
and ranks the cells that compete for the same load (same workload and load level: the closed
model's concurrency, the open model's arrival rate or the partly-open model's session rate),
saying which neighbours their repetitions separate (:mod:`archlab.separation`). Each cell
also says how much of its measured CPUs went to other work (:mod:`archlab.lab.interference`):
the repetitions that were disturbed stay in its statistics and are flagged, unless the run
repeated them (``[experiment] max_foreign``), which sets them aside. Every table and figure of
the report reads these summaries, so the numbers agree everywhere.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from archlab.littles_law import LittlesLaw
from archlab.separation import FAMILY_ALPHA, Ranking, rank
from archlab.spec.units import short_duration
from archlab.stats import Interval, mean_confidence_interval
from archlab.store.records import DEFAULT_MAX_FOREIGN, Measurement, ServerCost
from archlab.store.rows import ResultRow

__all__ = [
    "METRICS",
    "SATURATED",
    "UtilisationLaw",
    "measured_cpus_of",
    "pooled_interval",
    "utilisation_law",
    "utilisation_of",
    "Cell",
    "LoadLevel",
    "Failure",
    "LoadGroup",
    "Metric",
    "Win",
    "Winner",
    "aggregate",
    "group_by_load",
]

Row = ResultRow


def _measured(value: Callable[[Measurement], object]) -> Callable[[Row], float | None]:
    return lambda row: _number(value(row.measurement)) if row.measurement is not None else None


def _cost(value: Callable[[ServerCost], object]) -> Callable[[Row], float | None]:
    return lambda row: _number(value(row.cost)) if row.cost is not None else None


def _number(value: object) -> float | None:
    """A measurement as a float; None (a failed repetition's metric) or anything else is missing."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass(frozen=True)
class Metric:
    """One per-repetition quantity the report summarises over repetitions."""

    key: str
    title: str
    unit: str
    value: Callable[[Row], float | None] = field(repr=False, compare=False)
    #: True for latencies in microseconds, which the formatters print in µs, ms or s.
    is_latency: bool = False
    #: A per-request quantity: pooled over repetitions as their total over their requests
    #: (sum over sum), never a mean of per-repetition ratios, which weighs a repetition of 4
    #: requests/s like one of 110 and breaks the utilisation law (:func:`utilisation_law`).
    per_request: bool = False


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("throughput_rps", "throughput", "req/s", _measured(lambda m: m.throughput_rps)),
        Metric("p50_us", "p50", "µs", _measured(lambda m: m.p50_us), is_latency=True),
        Metric("p99_us", "p99", "µs", _measured(lambda m: m.p99_us), is_latency=True),
        Metric("p999_us", "p99.9", "µs", _measured(lambda m: m.p999_us), is_latency=True),
        Metric("cpu_us_per_request", "CPU", "µs/req", _cost(lambda c: c.cpu_us_per_request), per_request=True),
        Metric("cs_per_request", "context switches", "per req", _cost(lambda c: c.context_switches_per_request), per_request=True),
        Metric("syscalls_per_request", "read+write syscalls", "per req", _cost(lambda c: c.syscalls_per_request), per_request=True),
        Metric("handoffs_per_request", "hand-offs", "per req", _cost(lambda c: c.handoffs_per_request), per_request=True),
        # The open models only: the rate the generator offered, and the service time (from the
        # actual send) beside the response time (from the planned send) the p-columns show.
        Metric("offered_rps", "offered", "req/s", _measured(lambda m: m.offered_rps)),
        Metric("service_p99_us", "service p99", "µs", _measured(lambda m: m.service_p99_us), is_latency=True),
        # Little's law, X (R + Z) / N: 1 when the latency accounts for the users' whole cycle.
        Metric("littles_law_ratio", "X(R+Z)/N", "", lambda row: row.littles_law.ratio if row.littles_law else None),
    )
}

# Columns that name a cell; every other column is a measurement or bookkeeping.
_IDENTITY = ("architecture", "workload", "concurrency", "rate_rps", "session_rate", "threads", "loops", "think_time_s", "think_time")
# Factors already shown in their own column or axis, never repeated in a series label
# (think_time_s is shown as the readable think_time, see _settings).
_SHOWN_ELSEWHERE = {"architecture", "workload", "concurrency", "rate_rps", "session_rate", "rate", "think_time_s"}


@dataclass(frozen=True, order=True)
class LoadLevel:
    """The load a cell faced, as its model sets it: the closed model's users (``concurrency``),
    the open model's planned arrival rate (``rate``, req/s) or the partly-open model's planned
    session rate (``session_rate``, sessions/s). Cells compete when their levels are equal."""

    kind: str
    value: float

    @property
    def column(self) -> str:
        """Short heading of a table column of levels of this kind."""
        return _LEVEL_NAMES[self.kind][0]

    @property
    def axis(self) -> str:
        """Axis label of a figure whose x is levels of this kind."""
        return _LEVEL_NAMES[self.kind][1]

    @property
    def text(self) -> str:
        """``16``, ``1,000/s`` or ``2.5/s``."""
        if self.kind == "concurrency":
            return str(int(self.value))
        return f"{self.value:,.0f}/s" if float(self.value).is_integer() else f"{self.value:,g}/s"

    @property
    def short(self) -> str:
        """``c=16``, ``rate=1,000/s``, ``sessions=50/s``: a level in a panel title or a sentence."""
        return {"concurrency": "c=", "rate": "rate=", "session_rate": "sessions="}[self.kind] + self.text


_LEVEL_NAMES = {
    "concurrency": ("conc", "concurrency (connections)"),
    "rate": ("rate", "offered rate (req/s)"),
    "session_rate": ("sessions", "session rate (sessions/s)"),
}


def _level(settings: Mapping[str, object]) -> LoadLevel:
    for kind, key in (("rate", "rate_rps"), ("session_rate", "session_rate")):
        value = _number(settings.get(key))
        if value is not None:
            return LoadLevel(kind, value)
    return LoadLevel("concurrency", float(str(settings["concurrency"])))


@dataclass(frozen=True)
class Failure:
    repetition: int | None
    error: str


@dataclass(frozen=True)
class Cell:
    """Summary of one cell over its repetitions."""

    architecture: str
    workload: str
    #: Users of the closed model; None for the open models (see ``level``).
    concurrency: int | None
    #: The load the cell faced, whatever the model.
    level: LoadLevel
    #: The architecture plus whichever settings tell it apart from other cells of the same
    #: architecture under the same load (e.g. ``blocking (threads=8)``); legend and table name.
    label: str
    settings: Mapping[str, object]
    repetitions: int
    failures: tuple[Failure, ...]
    #: Request errors summed over the successful repetitions.
    errors: int
    stats: Mapping[str, Interval]
    ok_rows: tuple[Row, ...] = field(repr=False)
    #: Successful repetitions left out of the statistics because the run repeated them as
    #: disturbed (``[experiment] max_foreign``, :mod:`archlab.lab.disturbed`).
    set_aside: tuple[Row, ...] = field(default=(), repr=False)
    #: The share of the measured CPUs going to other work above which a repetition is flagged.
    max_foreign: float = DEFAULT_MAX_FOREIGN

    @property
    def ok_repetitions(self) -> int:
        return self.repetitions - len(self.failures)

    def metric(self, key: str) -> Interval | None:
        return self.stats.get(key)

    @property
    def throughput(self) -> Interval | None:
        return self.stats.get("throughput_rps")

    @property
    def generator_bound_repetitions(self) -> int:
        """Successful repetitions in which the load generator said it was the bottleneck: their
        throughput is the generator's limit, a lower bound of what the server can do."""
        return sum(1 for row in self.ok_rows if row.measurement is not None and row.measurement.generator_bound)

    @property
    def foreign_share(self) -> float | None:
        """The most of its measured CPUs that any repetition saw go to other work (work not the
        lab's, or another guest), set-aside ones included; None where it was not measured."""
        shares = [r.conditions.foreign_share + r.conditions.steal_share
                  for r in (*self.ok_rows, *self.set_aside) if r.conditions is not None]
        return max(shares) if shares else None

    @property
    def measured_cpus(self) -> int | None:
        """The CPUs its measured processes could use (None where not recorded)."""
        return measured_cpus_of(self.ok_rows)

    @property
    def utilisation(self) -> float | None:
        """The measured processes' CPU time over the windows' CPU time (their length times the
        measured CPUs), pooled over repetitions: U of the utilisation law, 1 = saturated."""
        return utilisation_of(self.ok_rows)

    @property
    def utilisation_law(self) -> "UtilisationLaw | None":
        """The utilisation law on the row as printed: mean throughput times CPU per request."""
        cpus, x, cpu = self.measured_cpus, self.throughput, self.metric("cpu_us_per_request")
        if cpus is None or x is None or cpu is None:
            return None
        return utilisation_law(x.mean, cpu.mean, cpus)

    @property
    def bottleneck(self) -> str:
        """What set the throughput: the server's CPUs (U >= :data:`SATURATED`), the load
        generator (its own verdict), or nothing measured: then throughput was set outside the
        measured processes (waits, the scheduler's share, the machine's other work)."""
        found = []
        u = self.utilisation
        if u is not None and u >= SATURATED:
            found.append("server CPU")
        if self.generator_bound_repetitions:
            found.append("generator")
        if found:
            return ", ".join(found)
        return "none saturated" if u is not None else "n/a"

    @property
    def disturbed(self) -> tuple[Row, ...]:
        """Repetitions in the statistics that were disturbed (over :attr:`max_foreign`)."""
        return tuple(r for r in self.ok_rows if r.conditions is not None and r.conditions.disturbed(self.max_foreign))

    @property
    def littles_law_checked(self) -> int:
        """Successful repetitions that carry a Little's-law check (0: the law is n/a here)."""
        return sum(1 for row in self.ok_rows if row.littles_law is not None)

    @property
    def littles_law_violations(self) -> tuple[tuple[int, LittlesLaw], ...]:
        """(repetition, check) of every successful repetition whose numbers break Little's law
        beyond their sampling tolerance."""
        return tuple(
            (row.repetition, row.littles_law)
            for row in self.ok_rows
            if row.littles_law is not None and not row.littles_law.ok
        )


#: A resource at or above this utilisation is saturated: the bottleneck.
SATURATED = 0.9
#: The utilisation law's slack: the generator's window and the server's probes are a few ms apart.
UTILISATION_SLACK = 0.05


class UtilisationLaw(NamedTuple):
    """U = X x S over the CPUs: throughput (req/s) times CPU per request (s) is the CPUs in use,
    which cannot exceed the CPUs the process may use (Denning and Buzen 1978, the utilisation
    law; Lazowska et al. 1984 ch. 3)."""

    cpus_in_use: float
    cpus: int

    @property
    def ok(self) -> bool:
        return self.cpus_in_use <= self.cpus * (1 + UTILISATION_SLACK)


def measured_cpus_of(rows: Iterable[Row]) -> int | None:
    """The CPUs the measured processes of ``rows`` could use, when they all say the same."""
    counts = {r.conditions.measured_cpus for r in rows if r.ok and r.conditions is not None and r.conditions.measured_cpus > 0}
    return counts.pop() if len(counts) == 1 else None


def utilisation_of(rows: Iterable[Row]) -> float | None:
    """The measured processes' CPU time over the windows' CPU time (their length times the
    measured CPUs), pooled over the successful ``rows``; None where not measured."""
    rows = [r for r in rows if r.ok]
    cpus = measured_cpus_of(rows)
    pairs = [(r.cost.cpu_user_s + r.cost.cpu_sys_s, r.measurement.duration_s) for r in rows if r.cost is not None and r.measurement is not None]
    if cpus is None or not pairs or sum(d for _, d in pairs) <= 0:
        return None
    return sum(c for c, _ in pairs) / (sum(d for _, d in pairs) * cpus)


def utilisation_law(throughput_rps: float, cpu_us_per_request: float, cpus: int) -> UtilisationLaw:
    """The utilisation law on a row's printed numbers."""
    return UtilisationLaw(throughput_rps * cpu_us_per_request * 1e-6, cpus)


def _settings(row: Row) -> dict[str, object]:
    """Every factor of the row but the repetition: the identity of its cell."""
    settings: dict[str, object] = {name: getattr(row.cell, name) for name in _IDENTITY}
    # The think time as a label reads it: its distribution ('exp:5ms') when random, else its
    # constant value ('10ms'); a think_time factor's raw level (seconds) would read worse.
    think_s = _number(row.cell.think_time_s)
    if settings["think_time"] is None and think_s is not None:
        settings["think_time"] = short_duration(think_s)
    for name, value in row.cell.factors.items():
        settings.setdefault(name, value)
    return settings


def _cell_key(settings: Mapping[str, object]) -> str:
    # JSON with sorted keys gives a hashable, order-independent key for nested factor values.
    return json.dumps(settings, sort_keys=True, default=str)


def _requests(row: Row) -> float | None:
    return float(row.measurement.requests) if row.measurement is not None and row.measurement.requests > 0 else None


def pooled_interval(values: list[float], weights: list[float]) -> Interval:
    """A per-request quantity over repetitions: its total over their requests, sum(v w) / sum(w)
    with ``w`` each repetition's requests (``v w`` its total), and around it the half-width of
    the per-repetition values' interval (their spread, which the pooled value does not show)."""
    spread = mean_confidence_interval(values)
    pooled = sum(v * w for v, w in zip(values, weights)) / sum(weights)
    half = spread.half_width
    return Interval(mean=pooled, low=pooled - half, high=pooled + half, n=spread.n, level=spread.level)


def _summarise(rows: list[Row]) -> tuple[dict[str, Interval], tuple[Row, ...]]:
    ok_rows = tuple(r for r in rows if r.ok)
    stats: dict[str, Interval] = {}
    for metric in METRICS.values():
        pairs = [(v, _requests(r)) for r in ok_rows if (v := metric.value(r)) is not None]
        if not pairs:
            continue
        values = [v for v, _ in pairs]
        weights = [w for _, w in pairs]
        if metric.per_request and all(w is not None for w in weights):
            stats[metric.key] = pooled_interval(values, [w for w in weights if w is not None])
        else:
            stats[metric.key] = mean_confidence_interval(values)
    return stats, ok_rows


def _failures(rows: list[Row]) -> tuple[Failure, ...]:
    failed = sorted((r for r in rows if not r.ok), key=lambda r: r.repetition)
    return tuple(Failure(r.repetition, r.error or "no error recorded") for r in failed)


def _distinguishing_settings(groups: Mapping[str, list[Row]]) -> list[str]:
    """Setting names whose value differs between cells of the same architecture and load.

    Those, and only those, must appear in a series label; settings that are constant per
    architecture (a fixed pool size, say) would only add noise to every legend.
    """
    by_load: dict[tuple, list[dict[str, object]]] = defaultdict(list)
    for rows in groups.values():
        s = _settings(rows[0])
        by_load[(s["architecture"], s["workload"], _level(s))].append(s)
    names: set[str] = set()
    for cells in by_load.values():
        every_name = set().union(*(c.keys() for c in cells)) - _SHOWN_ELSEWHERE
        for name in every_name:
            if len({_cell_key({"v": c.get(name)}) for c in cells}) > 1:
                names.add(name)
    return sorted(names)


def _label(settings: Mapping[str, object], names: list[str]) -> str:
    extras = ", ".join(f"{n}={settings.get(n)}" for n in names)
    return f"{settings['architecture']} ({extras})" if extras else str(settings["architecture"])


def _disturbed(row: Row, max_foreign: float) -> bool:
    return row.ok and row.conditions is not None and row.conditions.disturbed(max_foreign)


def aggregate(rows: Iterable[Row], max_foreign: float | None = None) -> list[Cell]:
    """One :class:`Cell` per distinct cell of ``rows``, in a stable order (workload, concurrency,
    label). ``max_foreign``: the run's ``[experiment] max_foreign``, whose disturbed repetitions
    the runner repeated: they are set aside from the statistics (and listed); without it,
    disturbed repetitions stay in and are flagged at the default threshold."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[_cell_key(_settings(row))].append(row)
    names = _distinguishing_settings(groups)
    cells = []
    for all_rows in groups.values():
        settings = _settings(all_rows[0])
        set_aside = tuple(r for r in all_rows if max_foreign is not None and _disturbed(r, max_foreign))
        group = [r for r in all_rows if r not in set_aside]
        stats, ok_rows = _summarise(group)
        cells.append(
            Cell(
                architecture=str(settings["architecture"]),
                workload=str(settings["workload"]),
                concurrency=int(str(settings["concurrency"])) if settings.get("concurrency") is not None else None,
                level=_level(settings),
                label=_label(settings, names),
                settings=settings,
                repetitions=len(group),
                failures=_failures(group),
                errors=sum(r.measurement.errors for r in ok_rows if r.measurement is not None),
                stats=stats,
                ok_rows=ok_rows,
                set_aside=set_aside,
                max_foreign=max_foreign if max_foreign is not None else DEFAULT_MAX_FOREIGN,
            )
        )
    cells.sort(key=lambda c: (c.workload, c.level, c.label))
    return cells


class Win(Enum):
    """How the best cell of a load group stands against the runner-up."""

    #: Highest mean throughput, and the interval of its ratio to the runner-up's is clear of 1
    #: (:mod:`archlab.separation`).
    CLEAR = "clear"
    #: Highest mean throughput, but the ratio's interval contains 1 (or a side has a single
    #: repetition): not distinguishable at this n.
    TIED = "tied"


class Winner(NamedTuple):
    cell: Cell
    win: Win


@dataclass(frozen=True)
class LoadGroup:
    """The cells that faced the same load, best mean throughput first, cells without data last.
    ``level``: the confidence of each comparison of neighbours (95%, or the level of the run's
    adaptive repetitions, which looked several times: :func:`archlab.separation.sequential_level`)."""

    workload: str
    level: LoadLevel
    cells: tuple[Cell, ...]
    confidence: float = 1.0 - FAMILY_ALPHA

    @property
    def concurrency(self) -> int | None:
        """The closed model's users; None for the open models' groups."""
        return int(self.level.value) if self.level.kind == "concurrency" else None

    def ranking(self) -> Ranking:
        """The order of the cells' throughputs that the repetitions establish, ties included."""
        return rank({c.label: [v for r in c.ok_rows if (v := METRICS["throughput_rps"].value(r)) is not None]
                     for c in self.cells}, self.confidence)

    @property
    def winner(self) -> Winner | None:
        measured = [c for c in self.cells if c.throughput is not None]
        if len(measured) < 2:
            # A lone measured cell has beaten nobody; marking it would mislead.
            return None
        ranking = self.ranking()
        # A side with a single repetition has no interval: never a clear lead without evidence.
        return Winner(measured[0], Win.CLEAR if ranking.comparisons[0].separated else Win.TIED)


def _throughput_desc(cell: Cell) -> tuple[int, float, str]:
    tp = cell.throughput
    return (0, -tp.mean, cell.label) if tp is not None else (1, 0.0, cell.label)


def group_by_load(cells: Iterable[Cell], confidence: float = 1.0 - FAMILY_ALPHA) -> list[LoadGroup]:
    """Cells grouped by (workload, load level), groups in that order, cells best first, their
    neighbours compared at ``confidence``."""
    groups: dict[tuple[str, LoadLevel], list[Cell]] = defaultdict(list)
    for cell in cells:
        groups[(cell.workload, cell.level)].append(cell)
    return [
        LoadGroup(workload, level, tuple(sorted(members, key=_throughput_desc)), confidence)
        for (workload, level), members in sorted(groups.items())
    ]
