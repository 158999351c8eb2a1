"""The shape of one catalog row, as typed values: what the load generator measured
(:class:`Measurement`), what the server spent (:class:`ServerCost`), and the outcome of one cell
and repetition (:class:`CellRecord`). The runner builds these, the store writes them; neither
passes loose dicts to the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CellStatus = Literal["ok", "failed"]


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
    errors_by_class: dict[str, int] = field(default_factory=dict)
    # The load generator's own verdict that it, not the server, limited the run (its threads
    # were saturated); None when the summary predates the verdict (schema version 1).
    generator_bound: bool | None = None
    # Which model drove the run; None for a summary of schema version 1 (closed only).
    load_model: str | None = None
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


@dataclass(frozen=True)
class CellRecord:
    status: CellStatus
    error: str | None = None
    measurement: Measurement | None = None
    cost: ServerCost | None = None
    summary_path: str | None = None  # relative to the run directory
    hdr_log_path: str | None = None

    @classmethod
    def failed(cls, error: str, measurement: Measurement | None = None) -> "CellRecord":
        return cls(status="failed", error=error, measurement=measurement)
