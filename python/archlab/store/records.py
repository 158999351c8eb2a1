"""The typed pieces of one catalog row: which cell it belongs to (:class:`CellKey`), what the
load generator measured (:class:`Measurement`), what the server spent (:class:`ServerCost`) and
the outcome of one cell and repetition (:class:`CellRecord`, which also carries the row's
Little's-law check, :class:`~archlab.littles_law.LittlesLaw`, and what else ran on the machine,
:class:`Conditions`). Writers (the runner, the
simulator) build these and hand them to :meth:`archlab.store.RunWriter.record`; readers get them
back inside :class:`~archlab.store.rows.ResultRow`. Nobody passes loose dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Mapping

from archlab.littles_law import LittlesLaw

if TYPE_CHECKING:
    from archlab.spec.model import Cell

CellStatus = Literal["ok", "failed"]
#: Where a row's numbers come from: a measurement of real processes, or ``archlab simulate``.
Source = Literal["measured", "simulated"]


@dataclass(frozen=True)
class CellKey:
    """What names a cell in the catalog: its id, the settings a report groups it by, and the
    levels of every factor its run varies (``factors``, the catalog's JSON column)."""

    cell_id: str
    architecture: str | None
    workload: str | None
    #: Users of the closed model; None for the open models (they set a rate).
    concurrency: int | None = None
    threads: int | None = None
    loops: int | None = None
    #: The mean think time Z (seconds).
    think_time_s: float | None = None
    #: The think time's distribution ('exp:5ms', 'uniform:2ms-8ms'); None for a constant.
    think_time: str | None = None
    #: Planned arrivals per second (open model) / sessions per second (partly-open).
    rate_rps: float | None = None
    session_rate: float | None = None
    factors: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, cell: "Cell") -> "CellKey":
        """The key of a cell of a validated experiment."""
        return cls(
            cell_id=cell.cell_id,
            architecture=cell.architecture,
            workload=cell.workload,
            concurrency=cell.concurrency,
            threads=cell.threads,
            loops=cell.loops,
            think_time_s=cell.think_time_s,
            think_time=cell.think_time.stored,
            rate_rps=cell.rate_rps,
            session_rate=cell.session_rate,
            factors=cell.factor_levels(),
        )


@dataclass(frozen=True)
class Measurement:
    """The load generator's summary of the measurement window. The latency quantiles
    (``p50_us`` ...) are the engine's reported latency: service time (from the actual send) for
    the closed model, response time from the planned send time for the open and partly-open
    models (coordinated omission corrected); ``service_*`` are always from the actual send."""

    duration_s: float
    requests: int
    throughput_rps: float
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float
    mean_us: float
    errors: int
    errors_by_class: Mapping[str, int] = field(default_factory=dict)
    # The load generator's own verdict that it, not the server, limited the run (its threads
    # were saturated); None when the summary predates the verdict (schema version 1).
    generator_bound: bool | None = None
    # Open models: arrivals planned per second of the window (requests for open, sessions for
    # partly-open), as the engine counted them; None for the closed model.
    offered_rps: float | None = None
    # Service time (from the actual send), kept beside the response time of the open models.
    service_p50_us: float | None = None
    service_p99_us: float | None = None
    service_p999_us: float | None = None
    # Open models: how late the generator sent (sent - planned), and what it failed to send in time.
    schedule_lag_p99_us: float | None = None
    sent_late: int | None = None
    never_started: int | None = None


@dataclass(frozen=True)
class ServerCost:
    """What the server process spent during the measurement window, total and per request."""

    cpu_user_s: float
    cpu_sys_s: float
    cpu_us_per_request: float
    voluntary_cs_per_request: float | None
    involuntary_cs_per_request: float | None
    read_syscalls_per_request: float | None  # None when /proc/<pid>/io is not readable
    write_syscalls_per_request: float | None
    peak_rss_kib: int | None
    server_threads: int | None
    # Hand-offs between threads per request, as counted by the server (None: not reported).
    handoffs_per_request: float | None = None

    @property
    def context_switches_per_request(self) -> float | None:
        """Voluntary plus involuntary; None when either is unknown (a partial sum would undercount)."""
        if self.voluntary_cs_per_request is None or self.involuntary_cs_per_request is None:
            return None
        return self.voluntary_cs_per_request + self.involuntary_cs_per_request

    @property
    def syscalls_per_request(self) -> float | None:
        """Socket reads plus writes; None when either is unknown."""
        if self.read_syscalls_per_request is None or self.write_syscalls_per_request is None:
            return None
        return self.read_syscalls_per_request + self.write_syscalls_per_request


#: A repetition is disturbed above this share of its measured CPUs going to other work, unless
#: the spec's ``[experiment] max_foreign`` says otherwise.
DEFAULT_MAX_FOREIGN = 0.05


@dataclass(frozen=True)
class Conditions:
    """What else ran on the machine during the window (:mod:`archlab.lab.interference`): the
    share of the measured CPUs' time that went to work not the lab's, the share the hypervisor
    stole, the 1-minute load average at the window's edges, and how many CPUs were measured."""

    foreign_share: float
    steal_share: float
    load_avg_start: float
    load_avg_end: float
    #: CPUs the measured processes may use: what their utilisation is a share of.
    measured_cpus: int

    def disturbed(self, max_foreign: float) -> bool:
        """Whether more than ``max_foreign`` of the measured CPUs went to something else (work
        that is not the lab's, or another guest of the hypervisor)."""
        return self.foreign_share + self.steal_share > max_foreign


@dataclass(frozen=True)
class CellRecord:
    """The outcome of one cell and repetition, as its writer hands it to the store. Paths are
    where the files are (absolute, or relative to the store's root); the catalog keeps them
    relative to the root, so a store can move."""

    status: CellStatus
    error: str | None = None
    measurement: Measurement | None = None
    cost: ServerCost | None = None
    summary_path: Path | str | None = None
    hdr_log_path: Path | str | None = None
    #: Little's law on the window; None where it is not defined (open models, simulations).
    littles_law: LittlesLaw | None = None
    #: What else ran meanwhile; None where it was not read (simulations, older runs).
    conditions: Conditions | None = None

    @classmethod
    def failed(cls, error: str, measurement: Measurement | None = None) -> "CellRecord":
        return cls(status="failed", error=error, measurement=measurement)
