"""The typed, validated form of an experiment spec: frozen dataclasses that only
:mod:`archlab.spec.validate` constructs from TOML, so every instance is known to be valid. An
:class:`Experiment` is a full factorial design: its :meth:`Experiment.cells` are every combination
of the factor levels, in a stable order, each with a readable ``cell_id`` that names it in run
directories and in the catalog. Its :meth:`Experiment.spec_hash` identifies the validated design
(not the TOML's formatting), so two runs of the same design can be found and compared."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Literal, Union

from archlab.spec.units import format_cpu_list, short_duration

Level = Union[str, int, float]

# Canonical factor order: it fixes the enumeration order of cells and the shape of cell ids,
# whatever order the TOML lists the factors in.
FACTOR_NAMES = ("architecture", "workload", "concurrency", "rate", "session_rate", "threads", "loops", "think_time")
# Required whatever the load model; each model adds the factor that sets its load level.
REQUIRED_FACTORS = ("architecture", "workload")

LoadModel = Literal["closed", "open", "partly-open"]
LOAD_MODELS: tuple[LoadModel, ...] = ("closed", "open", "partly-open")
# The factor that sets the load of each model: the closed model's population, the open model's
# arrival rate (req/s), the partly-open model's session arrival rate (sessions/s).
LEVEL_FACTOR: dict[str, str] = {"closed": "concurrency", "open": "rate", "partly-open": "session_rate"}
Schedule = Literal["poisson", "constant"]
SCHEDULES: tuple[Schedule, ...] = ("poisson", "constant")
SessionConnection = Literal["new", "pooled"]
SESSION_CONNECTIONS: tuple[SessionConnection, ...] = ("new", "pooled")
SessionLength = Literal["fixed", "geometric"]

# Keys of [load], and the models each belongs to: a key given for another model is refused
# rather than silently ignored.
LOAD_KEY_MODELS: dict[str, tuple[LoadModel, ...]] = {
    "model": LOAD_MODELS,
    "timeout": LOAD_MODELS,
    "records": LOAD_MODELS,
    "think_time": ("closed", "partly-open"),
    "schedule": ("open", "partly-open"),
    "connections": ("open", "partly-open"),
    "max_connections": ("open", "partly-open"),
    "seed": ("open", "partly-open"),
    "requests_per_session": ("partly-open",),
    "session_connection": ("partly-open",),
}
LOAD_KEYS = tuple(LOAD_KEY_MODELS)
# Factors that belong to some models only (the others apply to every model).
FACTOR_MODELS: dict[str, tuple[LoadModel, ...]] = {
    "concurrency": ("closed",),
    "rate": ("open",),
    "session_rate": ("partly-open",),
    "think_time": ("closed", "partly-open"),
}

# Keys of [server]: threads and loops may also be factors; the others are fixed per experiment
# and passed to `archlab-engine serve` as flags. Allowed values are checked in validate.
SERVER_OPTION_NAMES = (
    "threads", "loops", "handlers", "ring_size", "wait", "dispatch", "mailbox", "dispatchers", "batch",
    "queue_capacity", "write_spin", "sndbuf", "rcvbuf", "copies",
)  # fmt: skip


@dataclass(frozen=True)
class Factor:
    name: str
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class ServerOptions:
    """Options fixed for every cell (a factor of the same name varies them instead)."""

    threads: int | None = None
    loops: int | None = None
    # The other options set, as (name, value) in SERVER_OPTION_NAMES order.
    extra: tuple[tuple[str, int | str], ...] = ()


@dataclass(frozen=True)
class SessionRequests:
    """Requests per partly-open session: exactly ``mean`` (fixed) or geometric with that mean."""

    distribution: SessionLength
    mean: float

    def engine_syntax(self) -> str:
        """``fixed:5`` or ``geometric:2.5``, as ``archlab-engine load --requests-per-session``."""
        return f"{self.distribution}:{self.mean:g}"


@dataclass(frozen=True)
class LoadSettings:
    """How the load generator drives every cell. The fields after ``timeout_s`` belong to the
    open models only and are None for the closed model (validation refuses them there)."""

    model: LoadModel
    think_time_s: float
    timeout_s: float
    # Open and partly-open: spacing of the planned arrivals.
    schedule: Schedule | None = None
    # Open and partly-open: connections opened before the start, and the most at once.
    connections: int | None = None
    max_connections: int | None = None
    # Seed of the arrival schedule (and random session lengths); None: the engine's default.
    seed: int | None = None
    # Partly-open only.
    requests_per_session: SessionRequests | None = None
    session_connection: SessionConnection | None = None
    # Keep the raw per-request records of every repetition (records.bin in its directory).
    records: bool = False

    @property
    def is_random(self) -> bool:
        """Whether anything is drawn at random (then ``seed`` matters; the engine refuses a seed
        otherwise): Poisson arrivals or geometric session lengths (think times are constant)."""
        geometric = self.requests_per_session is not None and self.requests_per_session.distribution == "geometric"
        return self.model != "closed" and (self.schedule == "poisson" or geometric)

    def to_dict(self) -> dict:
        """JSON-able form; the closed model's keeps exactly its historical keys, so the hashes
        of closed specs written before the open models existed do not change."""
        d: dict[str, object] = {"model": self.model, "think_time_s": self.think_time_s, "timeout_s": self.timeout_s}
        if self.model != "closed":
            d.update(schedule=self.schedule, connections=self.connections, max_connections=self.max_connections, seed=self.seed)
        if self.model == "partly-open":
            assert self.requests_per_session is not None
            d.update(requests_per_session=self.requests_per_session.engine_syntax(), session_connection=self.session_connection)
        if self.records:
            d["records"] = True
        return d


@dataclass(frozen=True)
class Placement:
    server_cpus: tuple[int, ...]
    client_cpus: tuple[int, ...]

    @property
    def server_cpu_list(self) -> str:
        return format_cpu_list(self.server_cpus)

    @property
    def client_cpu_list(self) -> str:
        return format_cpu_list(self.client_cpus)


@dataclass(frozen=True)
class Cell:
    """One combination of factor levels: what one server + load-generator pair runs."""

    index: int
    cell_id: str
    architecture: str
    workload: str
    # The load level: users for the closed model, else None (the open models set a rate).
    concurrency: int | None
    threads: int | None
    loops: int | None
    think_time_s: float
    # The levels of the factors the experiment varies, in canonical order (for the catalog).
    factors: tuple[tuple[str, Level], ...]
    # Fixed server options besides threads and loops (ServerOptions.extra).
    server_options: tuple[tuple[str, int | str], ...] = ()
    # Open model: planned arrivals per second; partly-open: planned sessions per second.
    rate_rps: float | None = None
    session_rate: float | None = None

    def factor_levels(self) -> dict[str, Level]:
        return dict(self.factors)


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    repetitions: int
    warmup_s: float
    duration_s: float
    factors: tuple[Factor, ...]
    server: ServerOptions
    load: LoadSettings
    placement: Placement

    def factor(self, name: str) -> Factor | None:
        return next((f for f in self.factors if f.name == name), None)

    def cells(self) -> tuple[Cell, ...]:
        """Every combination of levels: the first factor in canonical order varies slowest,
        levels keep the order the spec lists them in."""
        ordered = [f for name in FACTOR_NAMES if (f := self.factor(name)) is not None]
        cells = []
        for index, combo in enumerate(itertools.product(*(f.levels for f in ordered))):
            levels = dict(zip((f.name for f in ordered), combo))
            think = levels.get("think_time", self.load.think_time_s)
            cell = Cell(
                index=index,
                cell_id=cell_id(levels),
                architecture=str(levels["architecture"]),
                workload=str(levels["workload"]),
                concurrency=_opt_int(levels.get("concurrency")),
                threads=_opt_int(levels.get("threads", self.server.threads)),
                loops=_opt_int(levels.get("loops", self.server.loops)),
                think_time_s=float(think),
                factors=tuple((f.name, levels[f.name]) for f in ordered),
                server_options=self.server.extra,
                rate_rps=_opt_float(levels.get("rate")),
                session_rate=_opt_float(levels.get("session_rate")),
            )
            cells.append(cell)
        return tuple(cells)

    @property
    def cells_planned(self) -> int:
        """Cell x repetition pairs: the number of catalog rows a complete run has."""
        n = 1
        for f in self.factors:
            n *= len(f.levels)
        return n * self.repetitions

    def to_dict(self) -> dict:
        """Plain JSON-able form, the input of :meth:`spec_hash` and of the run manifest."""
        server: dict[str, object] = {"threads": self.server.threads, "loops": self.server.loops}
        server.update(self.server.extra)  # only the options set: older specs keep their hash
        return {
            "name": self.name,
            "description": self.description,
            "repetitions": self.repetitions,
            "warmup_s": self.warmup_s,
            "duration_s": self.duration_s,
            "factors": {f.name: list(f.levels) for f in self.factors},
            "server": server,
            "load": self.load.to_dict(),
            "placement": {"server_cpus": self.placement.server_cpu_list, "client_cpus": self.placement.client_cpu_list},
        }

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON (sorted keys, no whitespace) of :meth:`to_dict`."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[arg-type]


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


_SLUG_RE = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    """Lowercase, runs of anything but letters and digits become one '-': ``/echo?size=1024`` ->
    ``echo-size-1024``."""
    return _SLUG_RE.sub("-", text.lower()).strip("-")


# How each factor's level appears in a cell id; factors the experiment does not vary are left
# out, so adding a level to one factor never renames cells of another.
_ID_PARTS = {
    "architecture": lambda v: slug(str(v)),
    "workload": lambda v: slug(str(v)),
    "concurrency": lambda v: f"c{v}",
    "rate": lambda v: f"r{_plain_number(v)}",
    "session_rate": lambda v: f"s{_plain_number(v)}",
    "threads": lambda v: f"t{v}",
    "loops": lambda v: f"l{v}",
    "think_time": lambda v: f"think-{short_duration(float(v))}",
}


def _plain_number(value: object) -> str:
    """``1000`` for 1000.0, ``2.5`` for 2.5: never an exponent in a directory name."""
    x = float(value)  # type: ignore[arg-type]
    return str(int(x)) if x.is_integer() else format(x, "f").rstrip("0")


def cell_id(levels: dict[str, Level]) -> str:
    """``netty__echo-size-1024__c16``: one part per varied factor, in canonical order."""
    return "__".join(_ID_PARTS[name](levels[name]) for name in FACTOR_NAMES if name in levels)
