"""Topologies: a ``[[systems]]`` entry whose system under test is several processes, written as
``backends`` (N copies of one server) and an optional ``front`` (the process the load targets),
validated here into a frozen :class:`Topology` before anything starts. A backend is an archlab
architecture (``architecture = "netty"``), a preset peer (``preset = "memcached"``/``"nginx"``) or
another ``[[systems]]`` command entry (``system = "NAME"``); a front is archlab's HTTP proxy with
a policy (``proxy = "round-robin"``), archlab's memcached middleware (``middleware = "seed"``,
``workers``, ``sharded``) or a balancer peer the lab configures (``preset = "haproxy"``,
``"nginx"`` or ``"nutcracker"``); ``copies = M`` puts M such fronts side by side (seed 002's
two middlewares), each given every backend, with the load spread over them. Without a front
the load is spread over the backends' copies (seed 002 §2.2). The backends, and the fronts, may
each be placed on a named Dask worker (``worker = "NAME"``, a run on a cluster). Every process has its CPU set and an optional ``cpu_quota`` (a
fraction of one CPU, applied with cgroup v2 ``cpu.max`` where writable). A memcached topology can
ask for ``preload`` (keys written into every memcached backend before the measurement) and says
what its load speaks (``load = {protocol = "memcached", ...}``, the load generator's parameters).
How the processes are started, in dependency order, and stopped is :mod:`archlab.lab.topology`'s
business; this module only says what the spec asked for.

    [[systems]]
    name = "lb-3"
    backends = { architecture = "netty", copies = 3, cpus = "1" }
    front = { proxy = "round-robin", cpus = "0" }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

from archlab.errors import InvalidValue, SpecError
from archlab.spec.units import format_cpu_list, parse_cpu_list

BackendKind = Literal["architecture", "preset", "system"]
FrontKind = Literal["proxy", "middleware", "preset"]
#: Peers a topology may use as backends, and what they speak.
BACKEND_PRESETS = {"memcached": "memcached", "nginx": "http"}
#: Peers a topology may put in front, and what they speak.
FRONT_PRESETS = {"haproxy": "http", "nginx": "http", "nutcracker": "memcached"}
#: The middleware's designs (``archlab-engine middleware --arch``).
MIDDLEWARE_ARCHS = ("seed", "ring", "actor", "event-loop")
#: archlab's proxy runs in this architecture unless the front names one: on a loaded machine
#: the one-thread loop costs least per request (docs/proxy.md, "Against HAProxy and nginx").
DEFAULT_PROXY_ARCHITECTURE = "single-thread"
BACKEND_KEYS = ("architecture", "preset", "system", "copies", "cpus", "cpu_quota", "options", "worker")
FRONT_KEYS = ("proxy", "middleware", "preset", "architecture", "workers", "sharded", "copies", "cpus", "cpu_quota", "options", "worker")
# Load parameters a topology's load table and workload may not set: the lab and the spec do.
_LAB_SET_LOAD = ("target", "path", "connections", "duration", "warmup", "cpus")
MAX_COPIES = 64  # the middleware's limit of servers, and more processes than any study here needs
#: Fronts side by side: each gets its own load generator process, which needs a core's share.
MAX_FRONT_COPIES = 16
TOPOLOGY_KEYS = ("backends", "front", "preload", "load")


@dataclass(frozen=True)
class Backends:
    """``copies`` processes of one server; ``cpus[i]`` is copy i's CPU set (None: the spec's
    server CPUs)."""

    kind: BackendKind
    name: str  # the architecture, preset or system it runs
    copies: int
    cpus: tuple[tuple[int, ...] | None, ...]
    cpu_quota: float | None = None
    options: tuple[tuple[str, object], ...] = ()  # serve options of an archlab architecture
    #: The Dask worker (``dask worker --name NAME``) that runs every copy; None: this host.
    worker: str | None = None

    @property
    def protocol(self) -> str:
        return BACKEND_PRESETS[self.name] if self.kind == "preset" else "http"

    def to_dict(self) -> dict:
        return {
            self.kind: self.name,
            "copies": self.copies,
            "cpus": [format_cpu_list(c) if c else None for c in self.cpus],
            "cpu_quota": self.cpu_quota,
            "options": dict(self.options),
            **({"worker": self.worker} if self.worker is not None else {}),  # only when given: the hash stays
        }


@dataclass(frozen=True)
class Front:
    """The process in front of the backends, which the load targets; ``copies`` of them side
    by side, all on ``cpus``, each given every backend (the load is spread over them)."""

    kind: FrontKind
    name: str  # the proxy's policy, the middleware's design, or the preset
    architecture: str | None = None  # archlab's proxy: the architecture running it
    workers: int | None = None  # the middleware's workers
    sharded: bool = False
    cpus: tuple[int, ...] | None = None
    cpu_quota: float | None = None
    options: tuple[tuple[str, object], ...] = ()
    copies: int = 1
    #: The Dask worker (``dask worker --name NAME``) that runs every front; None: this host.
    worker: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The fronts' process names: ``front`` alone, ``front-0`` .. ``front-(M-1)`` side by side."""
        return ("front",) if self.copies == 1 else tuple(f"front-{k}" for k in range(self.copies))

    @property
    def protocol(self) -> str:
        if self.kind == "preset":
            return FRONT_PRESETS[self.name]
        return "memcached" if self.kind == "middleware" else "http"

    def to_dict(self) -> dict:
        d: dict[str, object] = {self.kind: self.name, "cpus": format_cpu_list(self.cpus) if self.cpus else None, "cpu_quota": self.cpu_quota}
        if self.copies != 1:  # only when given: specs with one front keep their hash
            d["copies"] = self.copies
        if self.kind == "proxy":
            d.update(architecture=self.architecture, options=dict(self.options))
        if self.kind == "middleware":
            d.update(workers=self.workers, sharded=self.sharded)
        if self.worker is not None:  # only when given: the hash stays
            d["worker"] = self.worker
        return d


@dataclass(frozen=True)
class Topology:
    backends: Backends
    front: Front | None
    preload: int = 0  # keys written into every memcached backend before the load (0: none)
    load: tuple[tuple[str, object], ...] = field(default=())  # the load generator's parameters for this system

    @property
    def protocol(self) -> str:
        return self.front.protocol if self.front is not None else self.backends.protocol

    @property
    def load_targets(self) -> int:
        """How many processes the load is spread over (one load generator each): the fronts,
        or without a front every backend (seed 002 §2.2: clients straight at two servers)."""
        return self.front.copies if self.front is not None else self.backends.copies

    @property
    def process_names(self) -> tuple[str, ...]:
        """The name of every process, in start order (the accounting has a row for each)."""
        names = tuple(f"backend-{i}" for i in range(self.backends.copies))
        return names + (self.front.names if self.front is not None else ())

    def to_dict(self) -> dict:
        return {
            "backends": self.backends.to_dict(),
            "front": self.front.to_dict() if self.front is not None else None,
            "preload": self.preload,
            "load": dict(self.load),
        }


def is_topology(entry: Mapping[str, object]) -> bool:
    return "backends" in entry or "front" in entry


def parse_topology(t: Mapping[str, object], field_: str, cpus_here: frozenset[int], architectures: tuple[str, ...]) -> Topology:
    """The ``backends``/``front``/``preload``/``load`` keys of entry ``field_``; refused naming
    the key. ``architectures`` are the data plane's (backends and proxies are checked there)."""
    if "backends" not in t:
        raise SpecError(f"{field_}.backends", "a table saying which server runs behind the front, e.g. { architecture = \"netty\", copies = 2 }", "nothing")
    backends = _backends(t["backends"], f"{field_}.backends", cpus_here, architectures)
    front = _front(t["front"], f"{field_}.front", cpus_here, backends) if "front" in t else None
    if front is None and backends.copies > MAX_FRONT_COPIES:
        raise SpecError(
            f"{field_}.backends.copies",
            f"at most {MAX_FRONT_COPIES} when there is no front (the load is spread over the copies, one load generator each)",
            backends.copies,
            hint="add a front, e.g. front = { proxy = \"round-robin\" }",
        )
    protocol = front.protocol if front is not None else backends.protocol
    preload = t.get("preload", 0)
    if isinstance(preload, bool) or not isinstance(preload, int) or preload < 0:
        raise SpecError(f"{field_}.preload", "a number of keys >= 0 (memtier-0 ... memtier-N-1, written into every memcached backend)", preload)
    if preload and not (backends.kind == "preset" and backends.name == "memcached"):
        raise SpecError(f"{field_}.preload", "0 unless the backends are memcached (preset = \"memcached\")", preload)
    load = t.get("load", {})
    if not isinstance(load, Mapping):
        raise SpecError(f"{field_}.load", "a table of the load generator's parameters, e.g. { protocol = \"memcached\", ratio = \"0:1\" }", load)
    said = load.get("protocol", "http")
    if said != protocol:
        raise SpecError(
            f"{field_}.load.protocol",
            f"'{protocol}', what the process the load targets speaks",
            said,
            hint=f'write load = {{ protocol = "{protocol}" }}' if protocol != "http" else "",
        )
    _check_load(load, f"{field_}.load")
    return Topology(backends=backends, front=front, preload=preload, load=tuple(sorted(load.items())))


def _check_load(load: Mapping[str, object], field_: str) -> None:
    """The load generator's parameters of the topology, checked by the data plane now."""
    from archlab import contract

    for k in _LAB_SET_LOAD:
        if k in load:
            raise SpecError(f"{field_}.{k}", "a parameter the spec does not set elsewhere (the lab sets target; path, connections, warm-up, duration and CPUs come from the spec's factors, [experiment] and [placement])", k)
    try:
        contract.check_load(dict(load))
    except InvalidValue as e:
        raise SpecError(f"{field_}.{e.parameter}" if e.parameter else field_, e.allowed, e.received, hint=e.hint) from None


#: The workload level of a memcached topology: this path, with load generator parameters in
#: its query (``/memcached?ratio=0:1&multi_get=3``), added to the system's ``load`` table.
MEMCACHED_WORKLOAD_PATH = "/memcached"


def memcached_workload(level: str) -> dict[str, object]:
    """The load parameters a memcached workload level sets; ``ValueError`` naming what is wrong
    (the data plane checks the values when the spec is validated)."""
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(level)
    if parts.path != MEMCACHED_WORKLOAD_PATH or parts.fragment or parts.netloc:
        raise ValueError(f"a memcached system's workload is {MEMCACHED_WORKLOAD_PATH}[?PARAM=VALUE&...] (load parameters such as ratio=0:1), got {level!r}")
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"{level!r}: the query must be PARAM=VALUE pairs joined by &") from None
    params = dict(pairs)
    if len(params) != len(pairs):
        raise ValueError(f"{level!r}: a parameter is given twice")
    for k in params:
        if k in ("protocol", *_LAB_SET_LOAD):
            raise ValueError(f"{level!r}: {k} is not set by the workload")
    # A query's values are text; the parameters the data plane declares as integers
    # (multi_get=3, key_max=99) go to it as numbers, the rest as written.
    from archlab import contract

    integers = {o.name for o in contract.load_params() if o.allowed.startswith("an integer")}
    return {k: int(v) if k in integers and v.isdigit() else v for k, v in params.items()}


def _table(value: object, field_: str, keys: tuple[str, ...], example: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise SpecError(field_, f"a table such as {example}", value)
    for k in value:
        if k not in keys:
            raise SpecError(f"{field_}.{k}", "one of the keys " + ", ".join(keys), k)
    return value


def _one_of(t: Mapping[str, object], field_: str, kinds: tuple[str, ...]) -> str:
    given = [k for k in kinds if k in t]
    if len(given) != 1:
        raise SpecError(field_, "exactly one of " + ", ".join(kinds), " and ".join(given) or "none of them")
    return given[0]


def _backends(value: object, field_: str, cpus_here: frozenset[int], architectures: tuple[str, ...]) -> Backends:
    t = _table(value, field_, BACKEND_KEYS, '{ architecture = "netty", copies = 2 }')
    kind = _one_of(t, field_, ("architecture", "preset", "system"))
    name = t[kind]
    if kind == "architecture" and name not in architectures:
        raise SpecError(f"{field_}.architecture", "one of " + ", ".join(architectures), name)
    if kind == "preset" and name not in BACKEND_PRESETS:
        raise SpecError(f"{field_}.preset", "one of " + ", ".join(BACKEND_PRESETS), name)
    if kind == "system" and not isinstance(name, str):
        raise SpecError(f"{field_}.system", "the name of a [[systems]] entry with a command", name)
    copies = t.get("copies", 1)
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise SpecError(f"{field_}.copies", f"an integer in 1..={MAX_COPIES}", copies)
    cpus: tuple[tuple[int, ...] | None, ...] = (None,) * copies
    if "cpus" in t:
        raw = t["cpus"]
        if isinstance(raw, list):
            if len(raw) != copies:
                raise SpecError(f"{field_}.cpus", f"one CPU list per copy ({copies}), or one list for all", raw)
            cpus = tuple(_cpus(c, f"{field_}.cpus[{i}]", cpus_here) for i, c in enumerate(raw))
        else:
            cpus = (_cpus(raw, f"{field_}.cpus", cpus_here),) * copies
    given = t.get("options", {})
    if kind != "architecture" and "options" in t:
        raise SpecError(f"{field_}.options", "no options unless the backends are an archlab architecture (a preset is configured by the lab)", given)
    options = _checked_options(given, f"{field_}.options", "server", str(name)) if kind == "architecture" else {}
    worker = _worker(t, field_, "backends")
    return Backends(
        kind=kind,  # type: ignore[arg-type]
        name=str(name),
        copies=copies,
        cpus=cpus,
        cpu_quota=_quota(t.get("cpu_quota"), f"{field_}.cpu_quota"),
        options=tuple(sorted(options.items())),
        worker=worker,
    )


def _front(value: object, field_: str, cpus_here: frozenset[int], backends: Backends) -> Front:
    t = _table(value, field_, FRONT_KEYS, '{ proxy = "round-robin" }')
    kind = _one_of(t, field_, ("proxy", "middleware", "preset"))
    name = t[kind]
    allowed_keys = {"proxy": ("architecture", "options"), "middleware": ("workers", "sharded"), "preset": ()}[kind]
    for k in ("architecture", "workers", "sharded", "options"):
        if k in t and k not in allowed_keys:
            raise SpecError(f"{field_}.{k}", f"no {k} for a front that is a {kind}", t[k])
    architecture = None
    workers: object = None
    sharded: object = False
    options: Mapping[str, object] = {}
    if kind == "proxy":
        architecture = str(t.get("architecture", DEFAULT_PROXY_ARCHITECTURE))
        given = t.get("options", {})
        if not isinstance(given, Mapping):
            raise SpecError(f"{field_}.options", "a table of the proxy's options, e.g. { max_conns = 64 }", given)
        if "policy" in given:
            raise SpecError(f"{field_}.options.policy", "no policy here: the front's proxy key is its policy", given["policy"])
        checked = _checked_options(
            {**given, "policy": name}, f"{field_}.options", "proxy", architecture, policy_field=f"{field_}.proxy", arch_field=f"{field_}.architecture"
        )
        options = {k: v for k, v in checked.items() if k != "policy"}
    elif kind == "middleware":
        if name not in MIDDLEWARE_ARCHS:
            raise SpecError(f"{field_}.middleware", "one of " + ", ".join(MIDDLEWARE_ARCHS) + " (the middleware's design)", name)
        workers = t.get("workers", 8 if name != "event-loop" else None)
        if name == "event-loop" and "workers" in t:
            raise SpecError(f"{field_}.workers", "no workers with the event-loop design (it has none)", t["workers"])
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024):
            raise SpecError(f"{field_}.workers", "an integer in 1..=1024", workers)
        sharded = t.get("sharded", False)
        if not isinstance(sharded, bool):
            raise SpecError(f"{field_}.sharded", "true or false", sharded)
    elif name not in FRONT_PRESETS:
        raise SpecError(f"{field_}.preset", "one of " + ", ".join(FRONT_PRESETS), name)
    copies = t.get("copies", 1)
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_FRONT_COPIES:
        raise SpecError(f"{field_}.copies", f"an integer in 1..={MAX_FRONT_COPIES} (fronts side by side, one load generator each)", copies)
    front = Front(
        kind=kind,  # type: ignore[arg-type]
        name=str(name),
        architecture=architecture,
        workers=workers if isinstance(workers, int) else None,
        sharded=sharded is True,
        cpus=_cpus(t["cpus"], f"{field_}.cpus", cpus_here) if "cpus" in t else None,
        cpu_quota=_quota(t.get("cpu_quota"), f"{field_}.cpu_quota"),
        options=tuple(sorted(options.items())),
        copies=copies,
        worker=_worker(t, field_, "fronts"),
    )
    if front.protocol != backends.protocol:
        raise SpecError(
            f"{field_}.{kind}", f"a front that speaks {backends.protocol}, as the backends ({backends.kind} {backends.name}) do", name, hint=f"it speaks {front.protocol}"
        )
    return front


def _worker(t: Mapping[str, object], field_: str, what: str) -> str | None:
    """The worker ``t`` is placed on (``worker = "NAME"``), None for this host; a cgroup cap
    is this host's, so ``cpu_quota`` is refused with it."""
    worker = t.get("worker")
    if worker is None:
        return None
    if not isinstance(worker, str) or not worker.strip():
        raise SpecError(f"{field_}.worker", "the name of a Dask worker of the run's cluster (`dask worker --name NAME`)", worker)
    if "cpu_quota" in t:
        raise SpecError(f"{field_}.cpu_quota", f"no cpu_quota for {what} on a worker (the cap is a cgroup of this host)", t["cpu_quota"])
    return worker


def _checked_options(value: object, field_: str, which: str, architecture: str, policy_field: str = "", arch_field: str = "") -> dict:
    """Options checked by the data plane now, so that a bad one is refused before anything starts."""
    from archlab import contract

    if not isinstance(value, Mapping):
        raise SpecError(field_, "a table of options", value)
    lab_set = ("cpus", "backends", "host", "port")
    for k in value:
        if k in lab_set:
            raise SpecError(f"{field_}.{k}", "an option the lab does not set itself (it sets " + ", ".join(lab_set) + ")", k)
    try:
        if which == "server":
            contract.check_server(architecture, dict(value))
        else:
            contract.check_proxy(architecture, {**dict(value), "backends": "127.0.0.1:1"})
    except InvalidValue as e:
        if e.parameter == "policy" and policy_field:
            where = policy_field
        elif e.parameter in ("arch", "architecture") and arch_field:
            where = arch_field
        else:
            where = f"{field_}.{e.parameter}" if e.parameter else field_
        raise SpecError(where, e.allowed, e.received, hint=e.hint) from None
    return dict(value)


def _cpus(value: object, field_: str, cpus_here: frozenset[int]) -> tuple[int, ...]:
    cpus = parse_cpu_list(value, field_)
    missing = [c for c in cpus if c not in cpus_here]
    if missing:
        raise SpecError(field_, f"CPUs that exist here ({format_cpu_list(sorted(cpus_here))})", value, hint=f"CPU {missing[0]} is not available")
    return cpus


def _quota(value: object, field_: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.01 <= value <= 1024:
        raise SpecError(field_, "a share of CPU time in 0.01..=1024 (1.0 = one CPU; cgroup v2 cpu.max)", value)
    return float(value)
