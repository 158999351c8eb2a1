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
from typing import Literal, Union, cast

from archlab.spec.cluster import ClusterSettings
from archlab.spec.network import LinkSetting, NetworkSpec, factor_name, is_network_factor
from archlab.spec.repetitions import AdaptiveRepetitions
from archlab.spec.network import keys as network_keys
from archlab.spec.systems import SystemSpec
from archlab.spec.tune import TuneSettings
from archlab.spec.units import format_cpu_list, short_duration

Level = Union[str, int, float]

# Canonical factor order: it fixes the enumeration order of cells and the shape of cell ids,
# whatever order the TOML lists the factors in.
FACTOR_NAMES = (
    "architecture", "workload", "mix", "concurrency", "rate", "session_rate", "threads", "loops", "think_time", "rcvbuf",
)  # fmt: skip
# Required whatever the load model (the workload unless a request mix gives the paths); each
# model adds the factor that sets its load level.
REQUIRED_FACTORS = ("architecture", "workload")

LoadModel = Literal["closed", "open", "partly-open"]
LOAD_MODELS: tuple[LoadModel, ...] = ("closed", "open", "partly-open")
# The factor that sets the load of each model: the closed model's population, the open model's
# arrival rate (req/s), the partly-open model's session arrival rate (sessions/s).
LEVEL_FACTOR: dict[str, str] = {"closed": "concurrency", "open": "rate", "partly-open": "session_rate"}
Schedule = Literal["poisson", "constant"]
SessionConnection = Literal["new", "pooled"]
SessionLength = Literal["fixed", "geometric"]

# Keys of [load] (the spec's vocabulary; which model takes which parameter is the data plane's
# rule, see archlab.contract.check_load).
LOAD_KEYS = (
    "model", "timeout", "records", "think_time", "schedule", "connections", "max_connections", "seed",
    "requests_per_session", "session_connection", "mix", "rcvbuf", "backend",
)  # fmt: skip
# The factors that set the load of one model each (the inverse of LEVEL_FACTOR).
FACTOR_MODELS: dict[str, tuple[LoadModel, ...]] = {"concurrency": ("closed",), "rate": ("open",), "session_rate": ("partly-open",)}

# Server options the lab sets itself rather than [server]: the CPUs of [placement], the services
# that /call and /db use, and the pool and wait of [db].
LAB_SET_OPTIONS = ("cpus", "downstream", "db", "db_pool", "db_wait_ms")


def server_option_names() -> tuple[str, ...]:
    """Keys of [server]: every option of the data plane's servers (their one declaration, read
    through ``archlab._native``) but those the lab sets itself. ``threads`` and ``loops`` may
    also be factors; the others are fixed for every cell. Values are checked by the data plane."""
    from archlab import contract

    return tuple(o.name for o in contract.server_options() if o.name not in LAB_SET_OPTIONS)


# Keys of [db]: the /db workload's connection pool and table (see DbSettings).
DB_KEYS = ("pool", "wait", "rows", "cpus", "settings", "worker")
#: Settings the lab sets itself and ``[db] settings`` may not: where the server
#: listens and keeps its files, which the lab must know to reach and remove it, and the
#: connection limit, which it sizes from the pool.
LAB_OWNED_DB_SETTINGS = frozenset(
    {"listen_addresses", "port", "unix_socket_directories", "data_directory", "config_file", "hba_file", "ident_file", "external_pid_file",
     "max_connections"}
)  # fmt: skip
# The request path of the workload that queries the lab's PostgreSQL database.
DB_PATH = "/db"


def needs_database(workload: str) -> bool:
    """Whether a cell's workload (a request target such as ``/db?id=1``) queries the database."""
    return workload.split("?", 1)[0] == DB_PATH


ThinkDistribution = Literal["constant", "exp", "uniform"]


@dataclass(frozen=True)
class ThinkTime:
    """Think time between a response and the next request of a user (closed) or session
    (partly-open): constant, exponential with mean ``low_s``, or uniform on [``low_s``,
    ``high_s``]; written ``5ms``, ``exp:5ms`` and ``uniform:2ms-8ms`` (the data plane's syntax,
    read by it: :meth:`parse`)."""

    distribution: ThinkDistribution = "constant"
    low_s: float = 0.0  # the constant, the exponential's mean, or the uniform's minimum
    high_s: float | None = None  # the uniform's maximum

    @property
    def mean_s(self) -> float:
        """The mean think time Z, as the interactive response time law uses it."""
        return (self.low_s + self.high_s) / 2 if self.high_s is not None else self.low_s

    @property
    def is_random(self) -> bool:
        return self.distribution != "constant"

    @property
    def text(self) -> str:
        """Readable and canonical: ``5ms``, ``exp:5ms``, ``uniform:2ms-8ms``."""
        if self.distribution == "uniform":
            assert self.high_s is not None
            return f"uniform:{short_duration(self.low_s)}-{short_duration(self.high_s)}"
        return ("exp:" if self.distribution == "exp" else "") + short_duration(self.low_s)

    @property
    def level(self) -> Level:
        """A factor level: seconds (a float) when constant, as specs always stored it, else
        :attr:`text`."""
        return self.low_s if not self.is_random else self.text

    @property
    def stored(self) -> str | None:
        """The catalog's ``think_time`` column: None for a constant (``think_time_s`` says it
        all, as in catalogs written before random think times), else :attr:`text`."""
        return self.text if self.is_random else None

    @classmethod
    def parse(cls, value: object) -> "ThinkTime":
        """A think time as the spec writes it (a duration or a number of seconds, ``exp:MEAN``,
        ``uniform:MIN-MAX``), read by the data plane; raises
        :class:`archlab.contract.OptionRefused`."""
        from archlab import contract

        kind, low, high = contract.think_time(value)
        return cls({"exponential": "exp"}.get(kind, kind), low, high)  # type: ignore[arg-type]

    @classmethod
    def from_level(cls, level: Level) -> "ThinkTime":
        """The inverse of :attr:`level` (the text of a random level is canonical, so exact)."""
        if not isinstance(level, str):
            return cls("constant", float(level))
        return cls.parse(level)


# Rows of the lab database's table emp when [db] does not say (the lab's choice, not the
# server's), and the most it can have (first names pad ids to 8 digits).
DB_ROWS_DEFAULT = 10_000
DB_ROWS_MAX = 10_000_000


@dataclass(frozen=True)
class DbSettings:
    """The ``/db`` workload's settings: the server's connection pool (its option ``db_pool``), how
    long a request waits for a free connection before a 503 (``db_wait_ms``), and the rows of the
    lab database's table ``emp``. :meth:`defaults` takes the pool and wait from the server."""

    pool: int
    wait_ms: int
    rows: int = DB_ROWS_DEFAULT
    cpus: tuple[int, ...] | None = None  # PostgreSQL's CPU set; None: not pinned
    settings: tuple[tuple[str, str], ...] = ()  # postgresql.conf parameters, in the spec's order
    worker: str | None = None  # the Dask worker (``dask worker --name NAME``) that runs it; None: this host

    @classmethod
    def defaults(cls) -> "DbSettings":
        """The server's own defaults (its option declaration) and the lab's table size."""
        from archlab import contract

        return cls(pool=contract.server_option("db_pool").default, wait_ms=contract.server_option("db_wait_ms").default)

    def to_dict(self) -> dict:
        d: dict[str, object] = {"pool": self.pool, "wait_ms": self.wait_ms, "rows": self.rows}
        # Only when given: specs written before these keys keep their hash.
        if self.cpus is not None:
            d["cpus"] = list(self.cpus)
        if self.settings:
            d["settings"] = dict(self.settings)
        if self.worker is not None:
            d["worker"] = self.worker
        return d


@dataclass(frozen=True)
class Factor:
    name: str
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class ServerOptions:
    """Options fixed for every cell (a factor of the same name varies them instead)."""

    threads: int | None = None
    loops: int | None = None
    # The other options set, as (name, value) in the data plane's order of its options.
    extra: tuple[tuple[str, int | str], ...] = ()


@dataclass(frozen=True)
class SessionRequests:
    """Requests per partly-open session: exactly ``mean`` (fixed) or geometric with that mean."""

    distribution: SessionLength
    mean: float

    @property
    def text(self) -> str:
        """``fixed:5`` or ``geometric:2.5``: canonical, as the catalog and spec hashes keep it."""
        return f"{self.distribution}:{self.mean:g}"

    @classmethod
    def of(cls, normalised: str) -> "SessionRequests":
        """From the data plane's canonical form of a session length (``geometric:5``)."""
        distribution, _, mean = normalised.partition(":")
        return cls(distribution, float(mean))  # type: ignore[arg-type]


@dataclass(frozen=True)
class LoadSettings:
    """How the load generator drives every cell. The fields after ``timeout_s`` belong to the
    open models only and are None for the closed model (the data plane refuses them there); after
    validation they hold what the data plane resolved (its defaults filled in)."""

    model: LoadModel
    think_time: ThinkTime
    timeout_s: float
    # Open and partly-open: spacing of the planned arrivals.
    schedule: Schedule | None = None
    # Open and partly-open: connections opened before the start, and the most at once.
    connections: int | None = None
    max_connections: int | None = None
    # Seed of every random draw as the spec gives it; None: the data plane's default seed.
    seed: int | None = None
    # Partly-open only.
    requests_per_session: SessionRequests | None = None
    session_connection: SessionConnection | None = None
    # Keep the raw per-request records of every repetition (records.bin in its directory).
    records: bool = False
    # A request mix for every cell (its canonical text, PATH:WEIGHT,...), unless factors.mix.
    mix: str | None = None
    # SO_RCVBUF of the generator's connections in bytes, unless factors.rcvbuf.
    rcvbuf: int | None = None
    # The generator's I/O backend (auto, epoll, io-uring); None: the data plane's default.
    backend: str | None = None

    @property
    def think_time_s(self) -> float:
        """The mean think time of ``[load] think_time``."""
        return self.think_time.mean_s

    def to_dict(self) -> dict:
        """JSON-able form; the closed model's keeps exactly its historical keys unless a random
        think time or a seed is set, so the hashes of older specs do not change. ``think_time_s``
        is the mean; ``think_time`` names the distribution when it is random."""
        d: dict[str, object] = {"model": self.model, "think_time_s": self.think_time_s, "timeout_s": self.timeout_s}
        if self.think_time.is_random:
            d["think_time"] = self.think_time.text
        if self.model != "closed":
            d.update(schedule=self.schedule, connections=self.connections, max_connections=self.max_connections, seed=self.seed)
        elif self.seed is not None:
            d["seed"] = self.seed
        if self.model == "partly-open":
            assert self.requests_per_session is not None
            d.update(requests_per_session=self.requests_per_session.text, session_connection=self.session_connection)
        if self.records:
            d["records"] = True
        # Only when given: specs without them keep their hash.
        if self.mix is not None:
            d["mix"] = self.mix
        if self.rcvbuf is not None:
            d["rcvbuf"] = self.rcvbuf
        if self.backend is not None:
            d["backend"] = self.backend
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
    think_time: ThinkTime
    # The levels of the factors the experiment varies, in canonical order (for the catalog).
    factors: tuple[tuple[str, Level], ...]
    # Fixed server options besides threads and loops (ServerOptions.extra).
    server_options: tuple[tuple[str, int | str], ...] = ()
    # Open model: planned arrivals per second; partly-open: planned sessions per second.
    rate_rps: float | None = None
    session_rate: float | None = None
    # A request mix (canonical PATH:WEIGHT,... text; then ``workload`` is the same text), and
    # the generator's SO_RCVBUF in bytes.
    mix: str | None = None
    rcvbuf: int | None = None
    # The emulated link the cell runs over ([network]); None: loopback.
    network: LinkSetting | None = None

    @property
    def probe_path(self) -> str:
        """A request target the server must answer before the load starts: the workload, or the
        first path of the mix."""
        if self.mix is None:
            return self.workload
        from archlab import contract

        return contract.mix(self.mix)[1][0][0]

    @property
    def think_time_s(self) -> float:
        """The mean think time of the cell."""
        return self.think_time.mean_s

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
    # The [db] section; None when the spec has none (then the defaults of DbSettings apply).
    db: DbSettings | None = None
    # The [[systems]] entries: systems under test the lab starts (or loads remotely) by name.
    systems: tuple[SystemSpec, ...] = ()
    # The [network] section: cells run over an emulated link; None: over loopback.
    network: NetworkSpec | None = None
    # The [tune] section: a pool-size sweep over service programs (archlab.spec.tune).
    tune: TuneSettings | None = None
    # The [cluster] section: the Dask cluster the load runs on as shards (archlab.spec.cluster).
    cluster: ClusterSettings | None = None
    # repetitions = {min, max, extra_time}: repetitions added to unresolved cells
    # (archlab.spec.repetitions); ``repetitions`` is then its min. None: a fixed number.
    adaptive: AdaptiveRepetitions | None = None
    # max_foreign: a repetition whose measured CPUs went more than this share to work not the
    # lab's is repeated (archlab.lab.interference, archlab.lab.disturbed); None: flagged only.
    max_foreign: float | None = None

    @property
    def db_settings(self) -> DbSettings:
        return self.db if self.db is not None else DbSettings.defaults()

    def placed_workers(self) -> tuple[tuple[str, str, str], ...]:
        """Every part of the spec placed on a named Dask worker, as (spec field, name in the
        manifest's ``system_workers``, worker name): ``[[systems]]`` entries, a topology's
        backends (``NAME.backends``) and fronts (``NAME.front``), the lab database (``db``)."""
        placed = []
        if self.db is not None and self.db.worker is not None:
            placed.append(("db.worker", "db", self.db.worker))
        for i, s in enumerate(self.systems):
            if s.worker is not None:
                placed.append((f"systems[{i}].worker", s.name, s.worker))
            t = s.topology
            if t is not None and t.backends.worker is not None:
                placed.append((f"systems[{i}].backends.worker", f"{s.name}.backends", t.backends.worker))
            if t is not None and t.front is not None and t.front.worker is not None:
                placed.append((f"systems[{i}].front.worker", f"{s.name}.front", t.front.worker))
        return tuple(placed)

    def factor(self, name: str) -> Factor | None:
        return next((f for f in self.factors if f.name == name), None)

    def cells(self) -> tuple[Cell, ...]:
        """Every combination of levels: the first factor in canonical order varies slowest,
        levels keep the order the spec lists them in."""
        ordered = [f for name in FACTOR_NAMES if (f := self.factor(name)) is not None]
        ordered += [f for f in self.factors if is_network_factor(f.name)]  # vary fastest
        cells = []
        for index, combo in enumerate(itertools.product(*(f.levels for f in ordered))):
            levels = dict(zip((f.name for f in ordered), combo))
            think = ThinkTime.from_level(levels["think_time"]) if "think_time" in levels else self.load.think_time
            mix = cast("str | None", levels.get("mix", self.load.mix))
            cell = Cell(
                index=index,
                cell_id=cell_id(levels),
                architecture=str(levels["architecture"]),
                workload=str(levels.get("workload", mix)),
                concurrency=_opt_int(levels.get("concurrency")),
                threads=_opt_int(levels.get("threads", self.server.threads)),
                loops=_opt_int(levels.get("loops", self.server.loops)),
                think_time=think,
                factors=tuple((f.name, levels[f.name]) for f in ordered),
                server_options=self.server.extra,
                rate_rps=_opt_float(levels.get("rate")),
                session_rate=_opt_float(levels.get("session_rate")),
                mix=mix,
                rcvbuf=_opt_int(levels.get("rcvbuf", self.load.rcvbuf)),
                network=self.network.setting(levels) if self.network is not None else None,
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

    def load_params(self, cell: Cell) -> dict[str, object]:
        """The load generator's parameters of ``cell``, keyed as the data plane's contract
        (``archlab-engine load --params``) names them, before the data plane checks and
        completes them (:func:`archlab.contract.check_load`): what the spec says, with no default
        of the data plane's filled in here, and no seed (the runner adds it per repetition)."""
        load = self.load
        params: dict[str, object] = {
            "model": load.model,
            **({"mix": cell.mix} if cell.mix is not None else {"path": cell.workload}),
            "think_time": cell.think_time.level,
            "warmup": self.warmup_s,
            "duration": self.duration_s,
            "timeout": load.timeout_s,
            "cpus": self.placement.client_cpu_list,
        }
        if load.model == "closed":
            params["connections"] = cell.concurrency
        else:
            given = {"connections": load.connections, "max_connections": load.max_connections, "arrivals": load.schedule}
            params.update({k: v for k, v in given.items() if v is not None})
        if cell.rcvbuf is not None:
            params["rcvbuf"] = cell.rcvbuf
        if load.backend is not None:
            params["backend"] = load.backend
        if load.model == "open":
            params["rate"] = cell.rate_rps
        if load.model == "partly-open":
            params["session_rate"] = cell.session_rate
            if load.requests_per_session is not None:
                params["requests_per_session"] = load.requests_per_session.text
            if load.session_connection is not None:
                params["session_connection"] = load.session_connection
        return params

    def to_dict(self) -> dict:
        """Plain JSON-able form, the input of :meth:`spec_hash` and of the run manifest."""
        server: dict[str, object] = {"threads": self.server.threads, "loops": self.server.loops}
        server.update(self.server.extra)  # only the options set: older specs keep their hash
        d: dict[str, object] = {
            "name": self.name,
            "description": self.description,
            # a table only for the adaptive rule: specs with a number keep their hash
            "repetitions": self.adaptive.to_dict() if self.adaptive is not None else self.repetitions,
            "warmup_s": self.warmup_s,
            "duration_s": self.duration_s,
            "factors": {f.name: list(f.levels) for f in self.factors},
            "server": server,
            "load": self.load.to_dict(),
            "placement": {"server_cpus": self.placement.server_cpu_list, "client_cpus": self.placement.client_cpu_list},
        }
        if self.max_foreign is not None:  # only when given: specs without it keep their hash
            d["max_foreign"] = self.max_foreign
        if self.db is not None:  # only when given: specs without [db] keep their hash
            d["db"] = self.db.to_dict()
        if self.systems:  # only when given: specs without [[systems]] keep their hash
            d["systems"] = [s.to_dict() for s in self.systems]
        if self.network is not None:  # only when given: specs without [network] keep their hash
            d["network"] = self.network.to_dict()
        if self.tune is not None:  # only when given: specs without [tune] keep their hash
            d["tune"] = self.tune.to_dict()
        if self.cluster is not None:  # only when given: specs without [cluster] keep their hash
            d["cluster"] = self.cluster.to_dict()
        return d

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON (sorted keys, no whitespace) of :meth:`to_dict`."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


def _opt_int(value: object) -> int | None:
    return None if value is None else int(cast(int, value))


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
    "think_time": lambda v: "think-" + (slug(v) if isinstance(v, str) else short_duration(float(v))),
    "mix": lambda v: "mix-" + slug(str(v)),
    "rcvbuf": lambda v: f"rcvbuf{v}",
}


def _plain_number(value: object) -> str:
    """``1000`` for 1000.0, ``2.5`` for 2.5: never an exponent in a directory name."""
    x = float(value)  # type: ignore[arg-type]
    return str(int(x)) if x.is_integer() else format(x, "f").rstrip("0")


def cell_id(levels: dict[str, Level]) -> str:
    """``netty__echo-size-1024__c16``: one part per varied factor, in canonical order, then the
    varied link parameters (``delay-5ms``) in the data plane's order of them."""
    parts = [_ID_PARTS[name](levels[name]) for name in FACTOR_NAMES if name in levels]
    if any(is_network_factor(name) for name in levels):
        parts += [f"{slug(key)}-{slug(str(levels[factor_name(key)]))}" for key in network_keys() if factor_name(key) in levels]
    return "__".join(parts)
