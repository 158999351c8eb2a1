"""Stage two of spec validation: :class:`~archlab.spec.raw.RawSpec` -> :class:`Experiment`.
Values are type-checked here; what the data plane will run is checked by the data plane itself
(:mod:`archlab.contract`): every architecture with its server options, and the load generator's
parameters of every distinct cell (ranges, durations, think times, which parameter belongs to
which load model, seeds). The spec's own rules are enforced here (a value fixed and varied at
once, CPUs that overlap or do not exist, levels that would share a cell). Each failure raises
:class:`SpecError` naming the dotted TOML field (``server.ring_size``, ``factors.rate[2]``,
``load.schedule``), the allowed values and the value received; the first failure stops
validation."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import os
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping
from urllib.parse import parse_qs, urlsplit

from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import SpecError
from archlab.spec.model import (
    DB_PATH,
    DB_ROWS_MAX,
    FACTOR_MODELS,
    FACTOR_NAMES,
    LAB_OWNED_DB_SETTINGS,
    LEVEL_FACTOR,
    LOAD_MODELS,
    REQUIRED_FACTORS,
    Cell,
    DbSettings,
    Experiment,
    Factor,
    Level,
    LoadModel,
    LoadSettings,
    Placement,
    ServerOptions,
    SessionRequests,
    ThinkTime,
    needs_database,
    server_option_names,
    slug,
)
from archlab.spec import network
from archlab.spec.cluster import check_server_host, parse_cluster
from archlab.spec.raw import RawSpec
from archlab.spec.registry import Registry
from archlab.spec.repetitions import parse_repetitions
from archlab.spec.systems import SystemSpec, check_placed_database_users, check_settings_apply, check_used, is_system_level, parse_systems, registry_with
from archlab.spec.tune import expand as expand_tune
from archlab.spec.units import format_cpu_list, parse_cpu_list, parse_duration

_NAME_CHARS = "letters, digits, '.', '_' and '-' (it becomes part of the run id)"
_WORKLOAD_EXAMPLES = "a workload target such as '/prime?n=27059', '/sort?n=100000' or '/echo?size=1024'"
# What each model's load-level factor means, for error messages.
_LEVEL_MEANING = {
    "concurrency": "the closed model's users (connections)",
    "rate": "the open model's arrival rates in req/s",
    "session_rate": "the partly-open model's session arrival rates in sessions/s",
}


@dataclass(frozen=True)
class SpecEnvironment:
    """What validation checks against: the data plane's registry and the CPUs that exist here."""

    registry: Registry
    cpus: frozenset[int]

    @classmethod
    def local(cls, registry: Registry) -> "SpecEnvironment":
        # The CPUs this process may run on: a container's cpuset can be smaller than the host.
        return cls(registry=registry, cpus=frozenset(os.sched_getaffinity(0)))


def validate(raw: RawSpec, env: SpecEnvironment) -> Experiment:
    name, description, warmup_s, duration_s = _experiment(raw.section("experiment"))
    repetitions, adaptive = parse_repetitions(raw.section("experiment").get("repetitions", 1))
    max_foreign = _max_foreign(raw.section("experiment"))
    tune = None
    if "tune" in raw.tables:
        # A pool-size sweep: [tune] fills in the workload and parameter factors (archlab.spec.tune).
        tune, factors_t, server_t = expand_tune(raw.section("tune"), raw.section("factors"), raw.section("server"), raw.section("load"))
        raw = dataclasses.replace(raw, tables=MappingProxyType({**raw.tables, "factors": factors_t, "server": server_t}))
    server = _server(raw.section("server"))
    load = _load(raw.section("load"))
    systems = parse_systems(raw.entries("systems"), env.cpus, tuple(a.name for a in env.registry.architectures()))
    registry = registry_with(env.registry, systems, raw.section("factors").get("architecture"))
    factors = _factors(raw.section("factors"), registry, load.model, mixed=load.mix is not None)
    if load.mix is not None:
        _check_mix_paths(load.mix, "load.mix", raw.section("load")["mix"], registry)
    _check_not_fixed_and_varied(factors, raw)
    levels = [a for f in factors if f.name == "architecture" for a in f.levels]
    check_settings_apply(levels, raw.section("server"), [f.name for f in factors])
    check_used(systems, levels)
    _check_spread(factors, systems, load.model)
    db = _db(raw, factors, systems, env.cpus)
    check_placed_database_users(systems, db.worker if db is not None else None)
    _check_server_options(factors, server)
    placement = _placement(raw.section("placement"), env.cpus)
    link = _network(raw, factors)
    if link is not None:
        factors += tuple(Factor(network.factor_name(k), levels) for k, levels in link.varied)
    given = Experiment(
        name=name,
        description=description,
        repetitions=repetitions,
        warmup_s=warmup_s,
        duration_s=duration_s,
        factors=factors,
        server=server,
        load=load,
        placement=placement,
        db=db,
        systems=systems,
        network=link,
        tune=tune,
        cluster=parse_cluster(raw.section("cluster")) if "cluster" in raw.tables else None,
        adaptive=adaptive,
        max_foreign=max_foreign,
    )
    workloads = [str(w) for f in factors if f.name == "workload" for w in f.levels]
    check_server_host(given.cluster, [str(a) for a in levels], workloads)
    return dataclasses.replace(given, load=_check_load(given, raw))


def _network(raw: RawSpec, factors: tuple[Factor, ...]) -> network.NetworkSpec | None:
    """The ``[network]`` section (:mod:`archlab.spec.network`), refused where the cells could
    not run over the link: the services of ``/call`` and ``/db`` and foreign systems live on
    this host's loopback, which the server's namespace cannot reach."""
    if network.SECTION not in raw.tables:
        return None
    for f in factors:
        for i, level in enumerate(f.levels):
            bad = (f.name == "workload" and str(level).split("?", 1)[0] in ("/call", DB_PATH)) or (
                f.name == "architecture" and is_system_level(str(level))
            )
            if bad:
                raise SpecError(
                    f"factors.{f.name}[{i}]",
                    "a level that runs over an emulated link (not /call, /db or a system:NAME)",
                    level,
                    hint="[network] puts the server in its own network namespace; remove [network] for this spec",
                )
    return network.parse(raw.section(network.SECTION))


# --- scalar helpers ------------------------------------------------------------------------


def _str(value: object, field: str, allowed: str) -> str:
    if not isinstance(value, str):
        raise SpecError(field, allowed, value)
    return value


# --- sections ------------------------------------------------------------------------------


def _experiment(t: Mapping[str, object]) -> tuple[str, str, float, float]:
    if "name" not in t:
        raise SpecError("experiment.name", f"a name of {_NAME_CHARS}", "nothing")
    name = _str(t["name"], "experiment.name", f"a name of {_NAME_CHARS}")
    if not name or len(name) > 64 or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise SpecError("experiment.name", f"1 to 64 {_NAME_CHARS}", name)
    description = _str(t.get("description", ""), "experiment.description", "a string")
    # The lab's defaults; their bounds are the load generator's (checked with the load).
    warmup_s = parse_duration(t.get("warmup", "1s"), "experiment.warmup")
    duration_s = parse_duration(t.get("duration", "3s"), "experiment.duration")
    return name, description, warmup_s, duration_s


def _max_foreign(t: Mapping[str, object]) -> float | None:
    """``max_foreign``: the share of the measured CPUs that may go to work not the lab's before
    a repetition is repeated (archlab.lab.interference); None when not given."""
    value = t.get("max_foreign")
    if value is None:
        return None
    allowed = "a share of the measured CPUs' time above 0 and below 1, e.g. 0.05"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise SpecError("experiment.max_foreign", allowed, value)
    return float(value)


def _server(t: Mapping[str, object]) -> ServerOptions:
    """``[server]`` as given; the data plane checks the values per architecture
    (:func:`_check_server_options`)."""
    extra = tuple((n, t[n]) for n in server_option_names() if n in t and n not in ("threads", "loops"))
    return ServerOptions(threads=t.get("threads"), loops=t.get("loops"), extra=extra)  # type: ignore[arg-type]


def _models_text(models: tuple[str, ...]) -> str:
    names = [f"'{m}'" for m in models]
    return (" and ".join(names) if len(names) <= 2 else ", ".join(names)) + (" model" if len(names) == 1 else " models")


def _load(t: Mapping[str, object]) -> LoadSettings:
    """``[load]`` as given: the model, think time, timeout (the lab's default 5 s) and records;
    the other keys are passed to the data plane as given (:func:`_check_load`)."""
    model = t.get("model", "closed")
    if model not in LOAD_MODELS:
        try:
            contract.check_load({"model": model})
        except OptionRefused as e:
            raise SpecError("load.model", e.allowed, model, hint=e.hint) from None
        raise SpecError("load.model", "one of " + ", ".join(LOAD_MODELS), model)
    if model == "closed" and "connections" in t:
        raise SpecError(
            "load.connections",
            "no connections for the 'closed' model",
            t["connections"],
            hint="the closed model's users, one connection each, are the levels of factors.concurrency",
        )
    think_time = _think_time(t.get("think_time", 0), "load.think_time")
    timeout_s = parse_duration(t.get("timeout", "5s"), "load.timeout")
    records = t.get("records", False)
    if not isinstance(records, bool):
        raise SpecError("load.records", "true or false", records)
    mix = _mix(t["mix"], "load.mix") if "mix" in t else None
    rcvbuf = t.get("rcvbuf")
    if rcvbuf is not None and (isinstance(rcvbuf, bool) or not isinstance(rcvbuf, int)):
        raise SpecError("load.rcvbuf", "an integer number of bytes", rcvbuf)
    backend = t.get("backend")
    if backend is not None and not isinstance(backend, str):
        raise SpecError("load.backend", contract.load_param("backend").allowed, backend)
    return LoadSettings(
        model=model, think_time=think_time, timeout_s=timeout_s, seed=t.get("seed"), records=records, mix=mix, rcvbuf=rcvbuf, backend=backend  # type: ignore[arg-type]
    )


def _mix(value: object, field: str) -> str:
    """A request mix as the spec writes it (``"/a:2,/b:98"`` or a list of ``{path, weight}``
    tables), read by the data plane: its canonical text."""
    try:
        return contract.mix(value)[0]
    except OptionRefused as e:
        raise SpecError(field, e.allowed, value, hint=e.hint) from None


# Workloads that need a service the lab starts per cell (PostgreSQL, a downstream): one path
# per cell decides it, so a mix's classes cannot use them.
_SERVICE_PATHS = ("/db", "/call")


def _check_mix_paths(mix: str, field: str, value: object, registry: Registry) -> None:
    """Every class of a mix is a workload the server knows, and none needs a lab service."""
    for path, _weight in contract.mix(mix)[1]:
        if path.split("?", 1)[0] in _SERVICE_PATHS:
            raise SpecError(field, "classes of workloads that need no lab service (not /db or /call)", value, hint=f"class {path}")
        try:
            registry.check_workload(path)
        except ValueError as e:
            raise SpecError(field, _WORKLOAD_EXAMPLES + " in each class", value, hint=f"class {path}: {e}") from None


def _think_time(value: object, field: str) -> ThinkTime:
    try:
        return ThinkTime.parse(value)
    except OptionRefused as e:
        raise SpecError(field, e.allowed, value, hint=e.hint) from None


# Keys of [load] passed to the load generator as given, and the parameter each sets.
_LOAD_PARAMS = {
    "schedule": "arrivals",
    "connections": "connections",
    "max_connections": "max_connections",
    "requests_per_session": "requests_per_session",
    "session_connection": "session_connection",
}
# The TOML key behind each parameter the load generator may refuse (the others are the cell's).
_LOAD_KEYS = {
    "model": "load.model",
    "arrivals": "load.schedule",
    "max_connections": "load.max_connections",
    "requests_per_session": "load.requests_per_session",
    "session_connection": "load.session_connection",
    "seed": "load.seed",
    "timeout": "load.timeout",
    "records": "load.records",
    "mix": "load.mix",
    "rcvbuf": "load.rcvbuf",
    "backend": "load.backend",
    "warmup": "experiment.warmup",
    "duration": "experiment.duration",
    "cpus": "placement.client_cpus",
    "threads": "placement.client_cpus",
}


def _check_load(exp: Experiment, raw: RawSpec) -> LoadSettings:
    """The load generator's parameters of every distinct cell, checked by the data plane; returns
    the load settings with what it resolved (arrivals, connections, session lengths). A seed
    must be wanted by some cell (cells that draw nothing at random run without it)."""
    t = raw.section("load")
    given = {param: t[key] for key, param in _LOAD_PARAMS.items() if key in t}
    shapes: dict[str, tuple[Cell, dict]] = {}
    for cell in exp.cells():
        params = {**exp.load_params(cell), **given}
        # The client CPUs are checked against the CPUs the spec is checked for (_placement),
        # which need not be this machine's.
        del params["cpus"]
        shapes.setdefault(json.dumps(params, sort_keys=True, default=str), (cell, params))
    resolved, random = None, []
    for cell, params in shapes.values():
        out = _load_checked(exp, raw, cell, params)
        resolved = resolved or out
        if "seed" in out:
            random.append((cell, params))
    load = exp.load
    if load.seed is not None:
        # With the seed, on a cell that draws at random (which checks the seed itself), or on
        # one that draws nothing (which the data plane refuses, saying why).
        cell, params = random[0] if random else next(iter(shapes.values()))
        _load_checked(exp, raw, cell, {**params, "seed": load.seed})
    assert resolved is not None  # every spec has at least one cell
    if load.model == "closed":
        return load
    load = dataclasses.replace(
        load, schedule=resolved["arrivals"], connections=resolved["connections"], max_connections=resolved["max_connections"]
    )
    if load.model == "partly-open":
        load = dataclasses.replace(
            load, requests_per_session=SessionRequests.of(resolved["requests_per_session"]), session_connection=resolved["session_connection"]
        )
    return load


def _load_checked(exp: Experiment, raw: RawSpec, cell: Cell, params: dict) -> dict:
    try:
        return contract.check_load(params)
    except OptionRefused as e:
        key, value = _load_key(exp, raw, cell, e.parameter, e.received)
        raise SpecError(key, e.allowed, value, hint=e.hint) from None


def _load_key(exp: Experiment, raw: RawSpec, cell: Cell, param: str, received: object) -> tuple[str, object]:
    """The TOML key and value behind a load parameter of ``cell``."""
    levels = cell.factor_levels()

    def level_of(factor: str) -> tuple[str, object] | None:
        f = exp.factor(factor)
        if f is None:
            return None
        i = f.levels.index(levels[factor])
        return f"factors.{factor}[{i}]", raw.section("factors")[factor][i]  # type: ignore[index]

    by_factor = {"connections": "concurrency", "rate": "rate", "session_rate": "session_rate", "think_time": "think_time", "path": "workload", "mix": "mix", "rcvbuf": "rcvbuf"}
    if param in by_factor and (found := level_of(by_factor[param])) is not None:
        if param != "connections" or exp.load.model == "closed":
            return found
    key = _LOAD_KEYS.get(param) or {"connections": "load.connections", "think_time": "load.think_time"}.get(param)
    if key is None:
        return f"load ({param})", received
    section, _, name = key.partition(".")
    table = raw.section(section)
    return key, table.get(name, received) if section != "placement" else table.get(name, exp.placement.client_cpu_list)


def _factors(t: Mapping[str, object], registry: Registry, model: LoadModel, *, mixed: bool = False) -> tuple[Factor, ...]:
    """The factors in canonical order; ``mixed``: ``[load]`` gives a request mix (then, as with
    ``factors.mix``, the mix's paths are the workload)."""
    level = LEVEL_FACTOR[model]
    mixed = mixed or "mix" in t
    if mixed and "workload" in t:
        raise SpecError(
            "factors.workload",
            "no workload levels with a request mix (the mix's paths are the workload)",
            t["workload"],
            hint="give the paths as classes of the mix, or remove the mix",
        )
    for name, models in FACTOR_MODELS.items():
        if name in t and model not in models:
            hint = f"{name} applies to the {_models_text(models)}"
            if name in _LEVEL_MEANING:
                hint += f"; the '{model}' model sets its load with factors.{level} ({_LEVEL_MEANING[level]})"
            raise SpecError(f"factors.{name}", f"no {name} levels for the '{model}' model", t[name], hint=hint)
    for name in (*REQUIRED_FACTORS, level):
        if name not in t and not (name == "workload" and mixed):
            allowed = "a non-empty list of levels" + (f" ({_LEVEL_MEANING[name]})" if name == level and model != "closed" else "")
            raise SpecError(f"factors.{name}", allowed, "nothing")
    factors = []
    for name in FACTOR_NAMES:  # canonical order, whatever order the TOML uses
        if name not in t:
            continue
        values = t[name]
        field = f"factors.{name}"
        if not isinstance(values, list) or not values:
            raise SpecError(field, "a non-empty list of levels", values)
        levels = tuple(_LEVEL_CHECKS[name](v, f"{field}[{i}]", registry) for i, v in enumerate(values))
        if name == "mix":
            for i, (v, lv) in enumerate(zip(values, levels)):
                _check_mix_paths(str(lv), f"{field}[{i}]", v, registry)
        _check_distinct(name, values, levels)
        factors.append(Factor(name=name, levels=levels))
    return tuple(factors)


def _architecture_level(value: object, field: str, registry: Registry) -> str:
    names = [a.name for a in registry.architectures()]
    allowed = "one of " + ", ".join(names)
    if not isinstance(value, str) or value not in names:
        close = difflib.get_close_matches(str(value), names, n=1)
        raise SpecError(field, allowed, value, hint=f"did you mean {close[0]!r}?" if close else "")
    return value


def _workload_level(value: object, field: str, registry: Registry) -> str:
    target = _str(value, field, _WORKLOAD_EXAMPLES)
    try:
        registry.check_workload(target)
    except ValueError as e:
        raise SpecError(field, _WORKLOAD_EXAMPLES, target, hint=str(e)) from None
    return target


def _integer_level(value: object, field: str, _registry: Registry) -> int:
    """An integer level (the users of the closed model); its range is the load generator's."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, "an integer", value)
    return value


def _server_option_level(value: object, field: str, _registry: Registry) -> int:
    """A level of a server option (threads, loops): an integer, whose range the data plane
    checks with the architectures (:func:`_check_server_options`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, contract.server_option(field.split(".")[1].split("[")[0]).allowed, value)
    return value


def _think_time_level(value: object, field: str, _registry: Registry) -> Level:
    return _think_time(value, field).level


def _mix_level(value: object, field: str, _registry: Registry) -> str:
    """A request mix level: its canonical text (so two spellings of one mix are one level)."""
    return _mix(value, field)


def _rate_level(value: object, field: str, _registry: Registry) -> float:
    """A rate per second (an int or a float in TOML); its range is the load generator's."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise SpecError(field, "a number per second", value)
    return float(value)


_LEVEL_CHECKS: dict[str, Callable[[object, str, Registry], Level]] = {
    "architecture": _architecture_level,
    "workload": _workload_level,
    "concurrency": _integer_level,
    "rate": _rate_level,
    "session_rate": _rate_level,
    "threads": _server_option_level,
    "loops": _server_option_level,
    "think_time": _think_time_level,
    "mix": _mix_level,
    "rcvbuf": _integer_level,
}


def _check_distinct(name: str, values: list, levels: tuple[Level, ...]) -> None:
    """Equal levels (or levels that would share a cell id) would make two cells the same."""
    seen: dict[object, int] = {}
    for i, level in enumerate(levels):
        key = slug(level) if isinstance(level, str) else level
        if key in seen:
            j = seen[key]
            same = "is the same level as" if levels[j] == level else "would get the same cell id as"
            raise SpecError(f"factors.{name}[{i}]", "levels that differ from each other", values[i], hint=f"it {same} factors.{name}[{j}]")
        seen[key] = i


def _check_spread(factors: tuple[Factor, ...], systems: tuple[SystemSpec, ...], model: str) -> None:
    """A topology whose load is spread over M processes (its fronts, or its backends without a
    front) gets one load generator per process, so every closed-model population must give
    each at least one user."""
    targets = max((s.topology.load_targets for s in systems if s.topology is not None), default=1)
    if targets == 1 or model != "closed":
        return
    for f in factors:
        if f.name == "concurrency":
            small = [n for n in f.levels if isinstance(n, int) and n < targets]
            if small:
                raise SpecError("factors.concurrency", f"levels >= {targets}: a system spreads its load over {targets} processes, "
                                "each driven by its own load generator with at least one user", small[0])


def _check_not_fixed_and_varied(factors: tuple[Factor, ...], raw: RawSpec) -> None:
    varied = {f.name for f in factors}
    for section, key in (("server", "threads"), ("server", "loops"), ("load", "think_time"), ("load", "mix"), ("load", "rcvbuf")):
        if key in varied and key in raw.section(section):
            raise SpecError(
                f"{section}.{key}",
                f"no value, since [factors] varies {key}",
                raw.section(section)[key],
                hint=f"remove either {section}.{key} or factors.{key}",
            )


def _check_server_options(factors: tuple[Factor, ...], server: ServerOptions) -> None:
    """Every architecture with every level of threads and loops (and the fixed options) is
    checked by the data plane: an option the architecture does not take, or a value out of
    range, is refused against the TOML key that set it."""
    archs = [str(a) for f in factors if f.name == "architecture" for a in f.levels if not is_system_level(a)]
    varied = {f.name: f for f in factors}

    def choices(option: str) -> list[tuple[str, object]]:
        if option in varied:
            return [(f"factors.{option}[{i}]", level) for i, level in enumerate(varied[option].levels)]
        fixed = getattr(server, option)
        return [(f"server.{option}", fixed)] if fixed is not None else [("", None)]

    for arch, (threads_key, threads), (loops_key, loops) in itertools.product(archs, choices("threads"), choices("loops")):
        options: dict[str, object] = dict(server.extra)
        keys: dict[str, tuple[str, object]] = {name: (f"server.{name}", value) for name, value in server.extra}
        for name, key, value in (("threads", threads_key, threads), ("loops", loops_key, loops)):
            if value is not None:
                options[name], keys[name] = value, (key, value)
        try:
            contract.check_server(arch, options)
        except OptionRefused as e:
            key, value = keys.get(e.parameter, (f"server.{e.parameter}" if e.parameter else "server", e.received))
            raise SpecError(key, e.allowed, value, hint=e.hint) from None


def _db(raw: RawSpec, factors: tuple[Factor, ...], systems: tuple[SystemSpec, ...], available: frozenset[int]) -> DbSettings | None:
    """``[db]``: refused unless some cell runs the database workload or a system that names the
    lab database (``{db_url}``...), so a setting is never silently ignored; pool and wait are
    the server's options ``db_pool`` and ``db_wait_ms`` (checked, and defaulted, by the data
    plane), rows the lab database's table size, cpus and settings PostgreSQL's CPU set and
    ``postgresql.conf`` parameters, worker the Dask worker it runs on (a run on a cluster)."""
    workloads = [str(w) for f in factors if f.name == "workload" for w in f.levels]
    db_workloads = [w for w in workloads if needs_database(w)]
    levels = [str(a) for f in factors if f.name == "architecture" for a in f.levels]
    db_systems = [s.name for s in systems if s.uses_database and s.level in levels]
    defaults = DbSettings.defaults()
    if "db" not in raw.tables:
        _check_db_ids(db_workloads, defaults.rows, f"the default db.rows ({defaults.rows})")
        return None
    t = raw.section("db")
    if not db_workloads and not db_systems:
        raise SpecError(
            "db",
            f"no [db] section, since no workload queries the database ({DB_PATH}?id=N) and no system names it ({{db_url}}...)",
            ", ".join(f"{k} = {t[k]!r}" for k in t) or "[db]",
            hint=f"the workloads are {', '.join(workloads)}; [db] configures the lab database",
        )
    pool = t.get("pool", defaults.pool)
    wait_ms: object = defaults.wait_ms
    whole_ms = f"a duration in whole milliseconds, as the server's db_wait_ms ({contract.server_option('db_wait_ms').allowed})"
    if "wait" in t:
        wait_s = parse_duration(t["wait"], "db.wait")
        wait_ms = round(wait_s * 1000)
        if abs(wait_s * 1000 - wait_ms) > 1e-6:
            raise SpecError("db.wait", whole_ms, t["wait"])
    arch = next((a for a in levels if not is_system_level(a)), None)
    if arch is None:
        server_keys = [k for k in ("pool", "wait") if k in t]
        if server_keys:
            raise SpecError(f"db.{server_keys[0]}", "no such setting, since no cell runs an archlab architecture", t[server_keys[0]], hint="a system's connection pool is its own")
    else:
        try:
            contract.check_server(arch, {"db_pool": pool, "db_wait_ms": wait_ms})
        except OptionRefused as e:
            if e.parameter == "db_wait_ms":
                raise SpecError("db.wait", whole_ms, t["wait"]) from None
            raise SpecError("db.pool", e.allowed, pool, hint="connections of the server's pool") from None
    rows = t.get("rows", defaults.rows)
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= DB_ROWS_MAX:
        raise SpecError("db.rows", f"an integer in 1..={DB_ROWS_MAX:,} (rows of table emp)", rows)
    _check_db_ids(db_workloads, rows, f"db.rows ({rows})")
    cpus = None
    if "cpus" in t:
        cpus = parse_cpu_list(t["cpus"], "db.cpus")
        missing = [c for c in cpus if c not in available]
        if missing:
            raise SpecError("db.cpus", f"CPUs that exist here ({format_cpu_list(sorted(available))})", t["cpus"], hint=f"CPU {missing[0]} is not available")
    settings = _db_settings(t.get("settings", {}))
    worker = t.get("worker")
    if worker is not None and (not isinstance(worker, str) or not worker.strip()):
        raise SpecError("db.worker", "the name of a Dask worker of the run's cluster (`dask worker --name NAME`) to run the lab database on", worker)
    return DbSettings(pool=pool, wait_ms=wait_ms, rows=rows, cpus=cpus, settings=settings, worker=worker)  # type: ignore[arg-type]


# A postgresql.conf parameter name: lower-case words, or a custom "extension.name".
_PG_SETTING_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?$")


def _db_settings(value: object) -> tuple[tuple[str, str], ...]:
    """``[db] settings``: postgresql.conf parameters as a table (``shared_buffers = "256MB"``,
    ``work_mem = "8MB"``, ``jit = false``), passed to the server as ``-c name=value``;
    PostgreSQL itself refuses an unknown name or a bad value when the run starts it."""
    allowed = 'a table of postgresql.conf parameters, e.g. { shared_buffers = "256MB", jit = false }'
    if not isinstance(value, Mapping):
        raise SpecError("db.settings", allowed, value)
    out = []
    for name, v in value.items():
        field = f"db.settings.{name}"
        if not _PG_SETTING_RE.match(name):
            raise SpecError(field, "a postgresql.conf parameter name (lower-case letters, digits and _)", name)
        if name in LAB_OWNED_DB_SETTINGS:
            raise SpecError(field, "a parameter the lab does not set itself (" + ", ".join(sorted(LAB_OWNED_DB_SETTINGS)) + " are the lab's)", name)
        if isinstance(v, bool):
            text = "on" if v else "off"
        elif isinstance(v, (int, float, str)):
            text = str(v)
        else:
            raise SpecError(field, "a string, number or boolean", v)
        if not text or any(c in text for c in "\n\r\0"):
            raise SpecError(field, "a non-empty value on one line", v)
        out.append((name, text))
    return tuple(out)


def _check_db_ids(workloads: list[str], rows: int, source: str) -> None:
    """A ``/db?id=N`` beyond the table would answer 404 to every request: refuse it here."""
    for w in workloads:
        for ident in parse_qs(urlsplit(w).query).get("id", []):
            if ident.isdigit() and int(ident) > rows:
                raise SpecError(
                    "factors.workload",
                    f"{DB_PATH}?id=N with N <= {source}",
                    w,
                    hint="table emp has ids 1..=rows; set [db] rows to at least the id",
                )


def _placement(t: Mapping[str, object], available: frozenset[int]) -> Placement:
    if not available:
        raise SpecError("placement", "a machine with at least one usable CPU", "none")
    server = parse_cpu_list(t["server_cpus"], "placement.server_cpus") if "server_cpus" in t else None
    client = parse_cpu_list(t["client_cpus"], "placement.client_cpus") if "client_cpus" in t else None
    for field, cpus, value in (("placement.server_cpus", server, t.get("server_cpus")), ("placement.client_cpus", client, t.get("client_cpus"))):
        missing = [c for c in cpus or () if c not in available]
        if missing:
            raise SpecError(field, f"CPUs that exist here ({format_cpu_list(sorted(available))})", value, hint=f"CPU {missing[0]} is not available")
    # Defaults: the server alone on the last CPU, the load generator on the others, so the
    # generator never competes with the server it measures.
    if server is None:
        free = sorted(available - set(client or ())) or sorted(available)
        server = (free[-1],)
    if client is None:
        client = tuple(sorted(available - set(server))) or server
    overlap = sorted(set(server) & set(client))
    if overlap and len(available) > 1:
        raise SpecError(
            "placement.client_cpus",
            f"CPUs not used by the server ({format_cpu_list(server)})",
            format_cpu_list(client),
            hint=f"CPU {overlap[0]} is in both lists; server and load generator would compete",
        )
    return Placement(server_cpus=server, client_cpus=client)
