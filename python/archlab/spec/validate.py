"""Stage two of spec validation: :class:`~archlab.spec.raw.RawSpec` -> :class:`Experiment`.
Every value is type-checked and range-checked here, architectures and workloads are checked
against the data plane's registry, and cross-field rules are enforced (an option an architecture
does not accept, a value fixed and varied at once, CPUs that overlap or do not exist). Each
failure raises :class:`SpecError` naming the dotted field, the allowed values and the value
received; the first failure stops validation, in the order the spec reads."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import os
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import parse_qs, urlsplit

from archlab import contract
from archlab.contract import OptionRefused
from archlab.errors import SpecError
from archlab.spec.model import (
    DB_PATH,
    DB_ROWS_MAX,
    FACTOR_MODELS,
    FACTOR_NAMES,
    LEVEL_FACTOR,
    LOAD_KEY_MODELS,
    LOAD_MODELS,
    REQUIRED_FACTORS,
    SCHEDULES,
    SESSION_CONNECTIONS,
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
from archlab.spec.raw import RawSpec
from archlab.spec.registry import Registry
from archlab.spec.units import DURATION_SYNTAX, format_cpu_list, parse_cpu_list, parse_duration

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
    name, description, repetitions, warmup_s, duration_s = _experiment(raw.section("experiment"))
    server = _server(raw.section("server"))
    load = _load(raw.section("load"))
    factors = _factors(raw.section("factors"), env.registry, load.model)
    _check_not_fixed_and_varied(factors, raw)
    _check_seed(load, factors)
    db = _db(raw, factors)
    _check_server_options(factors, server)
    placement = _placement(raw.section("placement"), env.cpus)
    return Experiment(
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
    )


# --- scalar helpers ------------------------------------------------------------------------


def _int(value: object, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"an integer >= {minimum}", value)
    if value < minimum:
        raise SpecError(field, f"an integer >= {minimum}", value)
    return value


def _str(value: object, field: str, allowed: str) -> str:
    if not isinstance(value, str):
        raise SpecError(field, allowed, value)
    return value


# --- sections ------------------------------------------------------------------------------


def _experiment(t: Mapping[str, object]) -> tuple[str, str, int, float, float]:
    if "name" not in t:
        raise SpecError("experiment.name", f"a name of {_NAME_CHARS}", "nothing")
    name = _str(t["name"], "experiment.name", f"a name of {_NAME_CHARS}")
    if not name or len(name) > 64 or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        raise SpecError("experiment.name", f"1 to 64 {_NAME_CHARS}", name)
    description = _str(t.get("description", ""), "experiment.description", "a string")
    repetitions = _int(t.get("repetitions", 1), "experiment.repetitions", 1)
    warmup_s = parse_duration(t.get("warmup", "1s"), "experiment.warmup")
    duration_s = parse_duration(t.get("duration", "3s"), "experiment.duration", strict=True)
    return name, description, repetitions, warmup_s, duration_s


def _server(t: Mapping[str, object]) -> ServerOptions:
    """``[server]`` as given; the data plane checks the values per architecture
    (:func:`_check_server_options`)."""
    extra = tuple((n, t[n]) for n in server_option_names() if n in t and n not in ("threads", "loops"))
    return ServerOptions(threads=t.get("threads"), loops=t.get("loops"), extra=extra)  # type: ignore[arg-type]


def _models_text(models: tuple[str, ...]) -> str:
    names = [f"'{m}'" for m in models]
    return (" and ".join(names) if len(names) <= 2 else ", ".join(names)) + (" model" if len(names) == 1 else " models")


def _load(t: Mapping[str, object]) -> LoadSettings:
    model = t.get("model", "closed")
    if model not in LOAD_MODELS:
        raise SpecError("load.model", "one of " + ", ".join(f"'{m}'" for m in LOAD_MODELS), model)
    for key, value in t.items():
        if model not in LOAD_KEY_MODELS[key]:
            raise SpecError(
                f"load.{key}",
                f"no {key} for the '{model}' model",
                value,
                hint=f"{key} applies to the {_models_text(LOAD_KEY_MODELS[key])}",
            )
    think_time = parse_think_time(t.get("think_time", 0), "load.think_time")
    timeout_s = parse_duration(t.get("timeout", "5s"), "load.timeout", strict=True)
    records = t.get("records", False)
    if not isinstance(records, bool):
        raise SpecError("load.records", "true or false", records)
    if model == "closed":
        seed = _int(t["seed"], "load.seed", 0) if "seed" in t else None
        return LoadSettings(model="closed", think_time=think_time, timeout_s=timeout_s, seed=seed, records=records)
    schedule = t.get("schedule", "poisson")
    if schedule not in SCHEDULES:
        raise SpecError("load.schedule", "one of " + ", ".join(f"'{s}'" for s in SCHEDULES), schedule)
    connections = _int(t.get("connections", 16), "load.connections", 1)
    max_connections = _int(t.get("max_connections", connections), "load.max_connections", 1)
    if max_connections < connections:
        raise SpecError(
            "load.max_connections",
            f"an integer >= load.connections ({connections})",
            max_connections,
            hint="the cap counts the connections opened before the start too",
        )
    seed = _int(t["seed"], "load.seed", 0) if "seed" in t else None
    settings = LoadSettings(
        model=model,  # type: ignore[arg-type]
        think_time=think_time,
        timeout_s=timeout_s,
        schedule=schedule,  # type: ignore[arg-type]
        connections=connections,
        max_connections=max_connections,
        seed=seed,
        records=records,
    )
    if model == "partly-open":
        session_connection = t.get("session_connection", "new")
        if session_connection not in SESSION_CONNECTIONS:
            raise SpecError("load.session_connection", "one of " + ", ".join(f"'{c}'" for c in SESSION_CONNECTIONS), session_connection)
        settings = dataclasses.replace(
            settings,
            requests_per_session=_session_requests(t.get("requests_per_session", "geometric:5")),
            session_connection=session_connection,  # type: ignore[arg-type]
        )
    return settings


def _check_seed(load: LoadSettings, factors: tuple[Factor, ...]) -> None:
    """The engine refuses a seed when nothing is random; a think-time factor with a random level
    makes the experiment random (its constant cells then run without the seed)."""
    if load.seed is None:
        return
    think = next((f for f in factors if f.name == "think_time"), None)
    thinks = [ThinkTime.from_level(v) for v in think.levels] if think is not None else [load.think_time]
    if not any(load.is_random_with(z) for z in thinks):
        raise SpecError(
            "load.seed",
            "no seed when nothing is random",
            load.seed,
            hint="a seed applies to schedule = 'poisson', geometric requests_per_session "
            "or a random think_time ('exp:MEAN' or 'uniform:MIN-MAX')",
        )


THINK_TIME_SYNTAX = (
    "a think time: a duration such as '5ms' (constant), 'exp:5ms' (exponential, mean 5 ms) "
    "or 'uniform:2ms-8ms' (uniform from 2 to 8 ms), at most 24h"
)
# The engine's bound on every period (crates/load/src/config.rs, MAX_PERIOD).
_MAX_THINK_S = 24 * 3600.0


def parse_think_time(value: object, field: str) -> ThinkTime:
    """``5ms`` or a number of seconds (constant), ``exp:MEAN`` (also ``exponential:``) or
    ``uniform:MIN-MAX``, with the spec's duration syntax inside."""
    if isinstance(value, str) and ":" in value:
        kind, _, rest = value.partition(":")
        kind = kind.strip()
        if kind in ("exp", "exponential"):
            think = ThinkTime("exp", _think_part(rest, field, value))
            if think.low_s <= 0:
                raise SpecError(field, THINK_TIME_SYNTAX, value, hint="an exponential think time needs a mean > 0")
        elif kind == "uniform":
            low, dash, high = rest.partition("-")
            if not dash:
                raise SpecError(field, THINK_TIME_SYNTAX, value, hint="uniform needs MIN-MAX")
            think = ThinkTime("uniform", _think_part(low, field, value), _think_part(high, field, value))
            assert think.high_s is not None
            if think.high_s < think.low_s:
                raise SpecError(field, THINK_TIME_SYNTAX, value, hint="uniform MIN-MAX needs MIN <= MAX")
        else:
            raise SpecError(field, THINK_TIME_SYNTAX, value, hint=f"unknown distribution {kind!r} (allowed: exp, uniform)")
    else:
        try:
            think = ThinkTime("constant", parse_duration(value, field))
        except SpecError:
            raise SpecError(field, THINK_TIME_SYNTAX, value) from None
    if max(think.low_s, think.high_s or 0.0) > _MAX_THINK_S:
        raise SpecError(field, THINK_TIME_SYNTAX, value)
    return think


def _think_part(text: str, field: str, value: object) -> float:
    try:
        return parse_duration(text, field)
    except SpecError:
        raise SpecError(field, THINK_TIME_SYNTAX, value, hint=f"{text.strip()!r} is not {DURATION_SYNTAX}") from None


_SESSION_SYNTAX = "an integer >= 1 (fixed), 'fixed:N' or 'geometric:MEAN' with MEAN >= 1"


def _session_requests(value: object) -> SessionRequests:
    field = "load.requests_per_session"
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SpecError(field, _SESSION_SYNTAX, value)
        return SessionRequests("fixed", float(value))
    if not isinstance(value, str):
        raise SpecError(field, _SESSION_SYNTAX, value)
    kind, _, number = value.partition(":")
    try:
        mean = float(number)
    except ValueError:
        raise SpecError(field, _SESSION_SYNTAX, value) from None
    if kind == "fixed" and mean.is_integer() and mean >= 1:
        return SessionRequests("fixed", mean)
    if kind == "geometric" and 1 <= mean < float("inf"):
        return SessionRequests("geometric", mean)
    raise SpecError(field, _SESSION_SYNTAX, value)


def _factors(t: Mapping[str, object], registry: Registry, model: LoadModel) -> tuple[Factor, ...]:
    level = LEVEL_FACTOR[model]
    for name, models in FACTOR_MODELS.items():
        if name in t and model not in models:
            hint = f"{name} applies to the {_models_text(models)}"
            if name in _LEVEL_MEANING:
                hint += f"; the '{model}' model sets its load with factors.{level} ({_LEVEL_MEANING[level]})"
            raise SpecError(f"factors.{name}", f"no {name} levels for the '{model}' model", t[name], hint=hint)
    for name in (*REQUIRED_FACTORS, level):
        if name not in t:
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


# The catalog stores concurrency, threads and loops as 32-bit integers (store/catalog.py).
_MAX_LEVEL = 2**31 - 1


def _positive_level(value: object, field: str, _registry: Registry) -> int:
    level = _int(value, field, 1)
    if level > _MAX_LEVEL:
        raise SpecError(field, f"an integer in 1..={_MAX_LEVEL}", value)
    return level


def _server_option_level(value: object, field: str, _registry: Registry) -> int:
    """A level of a server option (threads, loops): an integer, whose range the data plane
    checks with the architectures (:func:`_check_server_options`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, contract.server_option(field.split(".")[1].split("[")[0]).allowed, value)
    return value


def _think_time_level(value: object, field: str, _registry: Registry) -> Level:
    return parse_think_time(value, field).level


def _rate_level(value: object, field: str, _registry: Registry) -> float:
    """A rate per second, > 0 and finite (an int or a float in TOML)."""
    allowed = "a number > 0 per second"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(field, allowed, value)
    if not 0 < float(value) < float("inf"):
        raise SpecError(field, allowed, value)
    return float(value)


_LEVEL_CHECKS = {
    "architecture": _architecture_level,
    "workload": _workload_level,
    "concurrency": _positive_level,
    "rate": _rate_level,
    "session_rate": _rate_level,
    "threads": _server_option_level,
    "loops": _server_option_level,
    "think_time": _think_time_level,
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


def _check_not_fixed_and_varied(factors: tuple[Factor, ...], raw: RawSpec) -> None:
    varied = {f.name for f in factors}
    for section, key in (("server", "threads"), ("server", "loops"), ("load", "think_time")):
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
    archs = [str(a) for f in factors if f.name == "architecture" for a in f.levels]
    varied = {f.name: f for f in factors}

    def choices(option: str) -> list[tuple[str, object]]:
        if option in varied:
            return [(f"factors.{option}[{i}]", level) for i, level in enumerate(varied[option].levels)]
        fixed = getattr(server, option)
        return [(f"server.{option}", fixed)] if fixed is not None else [("", None)]

    for arch, (threads_key, threads), (loops_key, loops) in itertools.product(archs, choices("threads"), choices("loops")):
        options: dict[str, object] = dict(server.extra)
        keys = {name: (f"server.{name}", value) for name, value in server.extra}
        for name, key, value in (("threads", threads_key, threads), ("loops", loops_key, loops)):
            if value is not None:
                options[name], keys[name] = value, (key, value)
        try:
            contract.check_server(arch, options)
        except OptionRefused as e:
            key, value = keys.get(e.parameter, (f"server.{e.parameter}" if e.parameter else "server", e.received))
            raise SpecError(key, e.allowed, value, hint=e.hint) from None


def _db(raw: RawSpec, factors: tuple[Factor, ...]) -> DbSettings | None:
    """``[db]``: refused unless some cell runs the database workload, so a setting is never
    silently ignored; pool and wait are the server's options ``db_pool`` and ``db_wait_ms``
    (checked, and defaulted, by the data plane), rows the lab database's table size."""
    workloads = [str(w) for f in factors if f.name == "workload" for w in f.levels]
    db_workloads = [w for w in workloads if needs_database(w)]
    defaults = DbSettings.defaults()
    if "db" not in raw.tables:
        _check_db_ids(db_workloads, defaults.rows, f"the default db.rows ({defaults.rows})")
        return None
    t = raw.section("db")
    if not db_workloads:
        raise SpecError(
            "db",
            f"no [db] section, since no workload queries the database ({DB_PATH}?id=N)",
            ", ".join(f"{k} = {t[k]!r}" for k in t) or "[db]",
            hint=f"the workloads are {', '.join(workloads)}; [db] configures the {DB_PATH} workload only",
        )
    pool = t.get("pool", defaults.pool)
    wait_ms: object = defaults.wait_ms
    whole_ms = f"a duration in whole milliseconds, as the server's db_wait_ms ({contract.server_option('db_wait_ms').allowed})"
    if "wait" in t:
        wait_s = parse_duration(t["wait"], "db.wait")
        wait_ms = round(wait_s * 1000)
        if abs(wait_s * 1000 - wait_ms) > 1e-6:
            raise SpecError("db.wait", whole_ms, t["wait"])
    arch = next(str(a) for f in factors if f.name == "architecture" for a in f.levels)
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
    return DbSettings(pool=pool, wait_ms=wait_ms, rows=rows)  # type: ignore[arg-type]


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
