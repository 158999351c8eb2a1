"""Systems under test that the lab does not build: the spec's ``[[systems]]`` entries, validated
into frozen :class:`SystemSpec` values. A system is either a command the lab starts (a template
with the placeholders ``{port}``, ``{cpus}``, ``{dir}`` and ``{host}``, filled per cell or once
per run when ``reusable``; on a named Dask worker with ``worker = "NAME"``, in a run on a
cluster), a remote ``target`` URL the lab only sends load to, or a topology of
several processes (``backends`` and a ``front``, :mod:`archlab.spec.topology`). Each is a
level of the ``architecture`` factor, written ``system:NAME``. Everything that can be refused is
refused here, before any process starts: unknown placeholders, CPUs this machine does not have,
two systems on one fixed port, a ``system:`` level naming no system. How a system is started,
pinned, probed and stopped is :mod:`archlab.lab.foreign`'s business; this module only says what
the spec asked for."""

from __future__ import annotations

import difflib
import re
import shlex
import signal
import string
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence
from urllib.parse import urlsplit

from archlab.errors import InvalidValue, SpecError
from archlab.spec.registry import ArchitectureInfo, Registry
from archlab.spec.topology import TOPOLOGY_KEYS, Topology, is_topology, memcached_workload, parse_topology
from archlab.spec.units import format_cpu_list, parse_cpu_list, parse_duration

#: The prefix of an ``architecture`` level that names a ``[[systems]]`` entry.
SYSTEM_PREFIX = "system:"
#: Placeholders a command template may use, and what the lab puts there.
PLACEHOLDERS = {
    "port": "the TCP port the system must listen on",
    "cpus": "its CPU list, e.g. 2-3",
    "dir": "a scratch directory of the cell (of the run, when reusable)",
    "host": "the address it must listen on",
    # The run's PostgreSQL (the lab's database preset, configured by [db]): a system that uses
    # one of these gets the database started for it, as /db does.
    "db_url": "the lab database as postgresql://USER:PASSWORD@HOST:PORT/NAME",
    "db_jdbc": "the same as a JDBC URL, jdbc:postgresql://HOST:PORT/NAME?user=USER&password=PASSWORD",
    "db_host": "the lab database's address",
    "db_port": "its TCP port",
    "db_user": "the role to connect as",
    "db_password": "its password",
    "db_name": "the database holding table emp",
}
#: The placeholders that make the lab start its database for a system.
DB_PLACEHOLDERS = tuple(p for p in PLACEHOLDERS if p.startswith("db_"))
SYSTEM_KEYS = (
    "name",
    "command",
    "preset",
    "target",
    "host",
    "worker",
    "port",
    "cpus",
    "env",
    "ready",
    "ready_path",
    "ready_timeout",
    "stop_signal",
    "stop_grace",
    "setup",
    "teardown",
    "reusable",
    *TOPOLOGY_KEYS,
)
# Keys of a topology entry besides its own (each process's readiness and stop are the lab's).
# A topology is started per cell (reusable is not offered: its processes' counters start afresh).
_TOPOLOGY_ENTRY_KEYS = ("name", "ready_timeout", "stop_grace", *TOPOLOGY_KEYS)
ReadyKind = Literal["port", "http"]
READY_KINDS: tuple[ReadyKind, ...] = ("port", "http")
# Signals a system may ask to be stopped with (what servers document as their graceful stop).
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2")
#: Peers the lab knows how to configure itself (:mod:`archlab.lab.presets`): the command, its
#: generated configuration, readiness and stop rule come from the preset.
PRESETS = {"nginx": "nginx, one worker, a static answer: 1 KiB for /echo, 'ok' for any other path"}
# What a preset sets unless the entry says otherwise.
_PRESET_DEFAULTS = {"nginx": {"ready": "http", "ready_path": "/", "stop_signal": "SIGQUIT"}}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


@dataclass(frozen=True)
class RemoteTarget:
    """``http://HOST:PORT/BASE``: a system the lab cannot start; it sends load there and
    measures only what the load generator sees."""

    url: str
    host: str
    port: int
    base_path: str  # prefixed to every workload path ("" for none)


@dataclass(frozen=True)
class SystemSpec:
    """One ``[[systems]]`` entry. ``command`` is a list of argument templates (no shell), None
    for a remote ``target``; ``cpus`` None means the spec's server CPUs."""

    name: str
    command: tuple[str, ...] | None = None
    preset: str | None = None  # a peer the lab configures itself (PRESETS); then command is None
    target: RemoteTarget | None = None
    host: str = "127.0.0.1"
    port: int | None = None  # fixed port; None: a free port per start
    cpus: tuple[int, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    ready: ReadyKind = "port"
    ready_path: str = "/"
    ready_timeout_s: float = 10.0
    stop_signal: str = "SIGTERM"
    stop_grace_s: float = 3.0
    setup: tuple[tuple[str, ...], ...] = ()
    teardown: tuple[tuple[str, ...], ...] = ()
    reusable: bool = False
    topology: Topology | None = None  # several processes (then command, preset and target are None)
    #: The Dask worker (``dask worker --name NAME``) that runs it; None: this host.
    worker: str | None = None

    @property
    def level(self) -> str:
        return SYSTEM_PREFIX + self.name

    @property
    def is_remote(self) -> bool:
        return self.target is not None

    @property
    def uses_database(self) -> bool:
        """Whether a template of the system (command, environment, set-up, tear-down) names the
        lab database: the lab then starts it for the system's cells."""
        templates = [*(self.command or ()), *(v for _, v in self.env), *(a for c in (*self.setup, *self.teardown) for a in c)]
        return any(name in DB_PLACEHOLDERS for t in templates for _, name, _, _ in string.Formatter().parse(t) if name)

    @property
    def signal_number(self) -> int:
        return int(getattr(signal, self.stop_signal))

    def to_dict(self) -> dict:
        d: dict[str, object] = {"name": self.name}
        if self.target is not None:
            d["target"] = self.target.url
            return d
        if self.topology is not None:
            d.update(self.topology.to_dict(), ready_timeout_s=self.ready_timeout_s, stop_grace_s=self.stop_grace_s)
            return d
        if self.preset is not None:
            d["preset"] = self.preset
        d.update(
            command=list(self.command or ()),
            host=self.host,
            port=self.port,
            cpus=format_cpu_list(self.cpus) if self.cpus else None,
            env=dict(self.env),
            ready=self.ready,
            ready_path=self.ready_path,
            ready_timeout_s=self.ready_timeout_s,
            stop_signal=self.stop_signal,
            stop_grace_s=self.stop_grace_s,
            setup=[list(c) for c in self.setup],
            teardown=[list(c) for c in self.teardown],
            reusable=self.reusable,
        )
        if self.worker is not None:  # only when given: a spec without it keeps its hash
            d["worker"] = self.worker
        return d


def is_system_level(level: object) -> bool:
    return isinstance(level, str) and level.startswith(SYSTEM_PREFIX)


def system_name(level: str) -> str:
    return level[len(SYSTEM_PREFIX) :]


def find_system(systems: Sequence[SystemSpec], level: str) -> SystemSpec:
    """The system an architecture level ``system:NAME`` names (validation made sure it exists)."""
    name = system_name(level)
    return next(s for s in systems if s.name == name)


# --- validation --------------------------------------------------------------------------


def parse_systems(
    entries: Sequence[Mapping[str, object]], cpus_here: frozenset[int], architectures: tuple[str, ...] = ()
) -> tuple[SystemSpec, ...]:
    """``architectures`` are the data plane's, which a topology's backends may run."""
    systems = tuple(_system(e, f"systems[{i}]", cpus_here, architectures) for i, e in enumerate(entries))
    seen: dict[str, int] = {}
    ports: dict[tuple[str, int], int] = {}
    for i, s in enumerate(systems):
        if s.name in seen:
            raise SpecError(f"systems[{i}].name", "a name no other system has", s.name, hint=f"systems[{seen[s.name]}] has it")
        seen[s.name] = i
        if s.port is not None:
            key = (s.host, s.port)
            if key in ports:
                raise SpecError(
                    f"systems[{i}].port",
                    "a port no other system listens on (or none: the lab picks a free one)",
                    s.port,
                    hint=f"systems[{ports[key]}] ({systems[ports[key]].name}) is fixed on {s.host}:{s.port} too",
                )
            ports[key] = i
    _check_backend_systems(systems)
    return systems


def _check_backend_systems(systems: Sequence[SystemSpec]) -> None:
    """A topology's ``backends.system`` must name a command entry (copies get their own ports)."""
    for i, s in enumerate(systems):
        if s.topology is None or s.topology.backends.kind != "system":
            continue
        name = s.topology.backends.name
        named = next((o for o in systems if o.name == name), None)
        commands = [o.name for o in systems if o.command is not None]
        if named is None or named.command is None:
            raise SpecError(
                f"systems[{i}].backends.system",
                "the name of a [[systems]] entry with a command (" + (", ".join(commands) or "there is none") + ")",
                name,
                hint="no system has that name" if named is None else f"{name} is not started from a command",
            )
        if named.port is not None and s.topology.backends.copies > 1:
            raise SpecError(f"systems[{i}].backends.copies", f"1, since {name} is fixed on port {named.port}", s.topology.backends.copies)
        if named.worker is not None:
            raise SpecError(
                f"systems[{i}].backends.system",
                "a system without worker: a topology's processes run on this host",
                name,
                hint=f"{name} is placed on worker {named.worker!r}; measure it on its own (architecture = [\"system:{name}\"])",
            )
        if named.uses_database:
            raise SpecError(
                f"systems[{i}].backends.system",
                "a system that does not name the lab database: a topology's backends get no database yet",
                name,
                hint=f"{name} uses a {{db_*}} placeholder; measure it on its own (architecture = [\"system:{name}\"])",
            )


def topology_members(systems: Sequence[SystemSpec]) -> frozenset[str]:
    """Names of the systems that topologies run as their backends."""
    return frozenset(s.topology.backends.name for s in systems if s.topology is not None and s.topology.backends.kind == "system")


def _system(t: Mapping[str, object], field: str, cpus_here: frozenset[int], architectures: tuple[str, ...] = ()) -> SystemSpec:
    name = t.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise SpecError(f"{field}.name", "1 to 40 letters, digits, '.', '_' or '-', starting with a letter or digit", name if name is not None else "nothing")
    unknown = sorted(k for k in t if k not in SYSTEM_KEYS)
    if unknown:
        raise SpecError(f"{field}.{unknown[0]}", "one of the keys " + ", ".join(SYSTEM_KEYS), unknown[0])
    given = [k for k in ("command", "preset", "target", "backends") if k in t]
    if is_topology(t) and "backends" not in given:
        given.append("backends")  # a front alone: parse_topology names the missing backends
    if len(given) != 1:
        raise SpecError(
            f"{field}",
            "exactly one of command (a system the lab starts), preset (a peer it configures: "
            + ", ".join(PRESETS)
            + "), target (a remote URL it only loads) and backends (with a front: a topology of several processes)",
            " and ".join(given) or "none of them",
        )
    if given == ["backends"]:
        extra = sorted(k for k in t if k not in _TOPOLOGY_ENTRY_KEYS)
        if extra:
            raise SpecError(f"{field}.{extra[0]}", "no such key for a topology (it has " + ", ".join(_TOPOLOGY_ENTRY_KEYS) + ")", t[extra[0]])
        return SystemSpec(
            name=name,
            topology=parse_topology(t, field, cpus_here, architectures),
            ready_timeout_s=_positive_duration(t.get("ready_timeout", "10s"), f"{field}.ready_timeout"),
            stop_grace_s=parse_duration(t.get("stop_grace", "3s"), f"{field}.stop_grace"),
        )
    topology_only = sorted(k for k in t if k in TOPOLOGY_KEYS)
    if topology_only:
        raise SpecError(f"{field}.{topology_only[0]}", "no such key unless the entry is a topology (with backends)", t[topology_only[0]])
    if "target" in t:
        extra = sorted(k for k in t if k not in ("name", "target"))
        if extra:
            raise SpecError(f"{field}.{extra[0]}", "no such key for a remote target (it has only name and target)", t[extra[0]])
        return SystemSpec(name=name, target=_target(t["target"], f"{field}.target"))
    preset = None
    if "preset" in t:
        preset = t["preset"]
        if preset not in PRESETS:
            # memcached speaks memcached: a topology says so with its load (spec/topology.py).
            hint = 'for memcached write backends = { preset = "memcached" } and load = { protocol = "memcached" }' if preset == "memcached" else ""
            raise SpecError(f"{field}.preset", "one of " + ", ".join(f"'{p}' ({d})" for p, d in PRESETS.items()), preset, hint=hint)
        defaults = dict(_PRESET_DEFAULTS[str(preset)])
        if "ready" in t:  # the entry chose its own readiness check
            defaults.pop("ready_path", None)
        t = {**defaults, **t}
    command = _command(t["command"], f"{field}.command") if preset is None else None
    host = t.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise SpecError(f"{field}.host", "an address to listen on, such as 127.0.0.1", host)
    port = t.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        raise SpecError(f"{field}.port", "a TCP port in 1..=65535 (leave it out for a free port)", port)
    cpus = None
    if "cpus" in t:
        cpus = parse_cpu_list(t["cpus"], f"{field}.cpus")
        missing = [c for c in cpus if c not in cpus_here]
        if missing:
            raise SpecError(
                f"{field}.cpus", f"CPUs that exist here ({format_cpu_list(sorted(cpus_here))})", t["cpus"], hint=f"CPU {missing[0]} is not available"
            )
    env = t.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
        raise SpecError(f"{field}.env", "a table of NAME = \"value\" strings", env)
    for key, value in env.items():  # values are templates too, e.g. DATABASE_URL = "{db_url}"
        check_placeholders(value, f"{field}.env.{key}")
    ready = t.get("ready", "http" if "ready_path" in t else "port")
    if ready not in READY_KINDS:
        raise SpecError(f"{field}.ready", "one of 'port' (accepts a connection) and 'http' (ready_path answers 2xx)", ready)
    ready_path = t.get("ready_path", "/")
    if not isinstance(ready_path, str) or not ready_path.startswith("/"):
        raise SpecError(f"{field}.ready_path", "a path starting with '/'", ready_path)
    if ready == "port" and "ready_path" in t:
        raise SpecError(f"{field}.ready_path", "no ready_path when ready = 'port'", ready_path, hint="set ready = 'http' to poll a path")
    stop_signal = t.get("stop_signal", "SIGTERM")
    if stop_signal not in STOP_SIGNALS:
        raise SpecError(f"{field}.stop_signal", "one of " + ", ".join(STOP_SIGNALS), stop_signal)
    reusable = t.get("reusable", False)
    if not isinstance(reusable, bool):
        raise SpecError(f"{field}.reusable", "true or false", reusable)
    worker = t.get("worker")
    if worker is not None and (not isinstance(worker, str) or not worker.strip()):
        raise SpecError(f"{field}.worker", "the name of a Dask worker of the run's cluster (`dask worker --name NAME`)", worker)
    spec = SystemSpec(
        name=name,
        command=command,
        preset=preset,  # type: ignore[arg-type]
        host=host,
        port=port,
        cpus=cpus,
        env=tuple((str(k), str(v)) for k, v in env.items()),
        ready=ready,
        ready_path=ready_path,
        ready_timeout_s=_positive_duration(t.get("ready_timeout", "10s"), f"{field}.ready_timeout"),
        stop_signal=stop_signal,
        stop_grace_s=parse_duration(t.get("stop_grace", "3s"), f"{field}.stop_grace"),
        setup=_commands(t.get("setup", []), f"{field}.setup"),
        teardown=_commands(t.get("teardown", []), f"{field}.teardown"),
        reusable=reusable,
        worker=worker,
    )
    return spec


def check_placed_database_users(systems: Sequence[SystemSpec], db_worker: str | None) -> None:
    """A system placed on a worker that names the lab database (``{db_*}``) needs the database
    placed too (``[db] worker``): one on this host listens on its loopback only."""
    if db_worker is not None:
        return
    for i, s in enumerate(systems):
        if s.worker is not None and s.uses_database:
            raise SpecError(f"systems[{i}].worker", "no worker for a system that names the lab database ({db_*}) while the database "
                            "runs on this host, on its loopback", s.worker, hint='place the database too: [db] worker = "NAME"')


_COMMAND_SYNTAX = "a command: a string split like a shell would (no shell runs it) or a list of arguments"


def _command(value: object, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as e:
            raise SpecError(field, _COMMAND_SYNTAX, value, hint=str(e)) from None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        argv = list(value)
    else:
        raise SpecError(field, _COMMAND_SYNTAX, value)
    if not argv:
        raise SpecError(field, _COMMAND_SYNTAX, value, hint="it is empty")
    for arg in argv:
        check_placeholders(arg, field)
    return tuple(argv)


def _commands(value: object, field: str) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list):
        raise SpecError(field, "a list of commands", value)
    return tuple(_command(c, f"{field}[{i}]") for i, c in enumerate(value))


def check_placeholders(template: str, field: str) -> None:
    """Refuse a placeholder the lab does not fill (``{{`` and ``}}`` are literal braces)."""
    allowed = "placeholders among " + ", ".join("{" + p + "}" for p in PLACEHOLDERS) + " (write {{ and }} for literal braces)"
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise SpecError(field, allowed, template, hint=str(e)) from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            close = difflib.get_close_matches(name, list(PLACEHOLDERS), n=1)
            raise SpecError(field, allowed, template, hint=f"unknown placeholder {{{name}}}" + (f"; did you mean {{{close[0]}}}?" if close else ""))


def fill(template: str, values: Mapping[str, str]) -> str:
    """A template with its placeholders filled (they were checked by validation)."""
    return template.format(**values)


def _target(value: object, field: str) -> RemoteTarget:
    allowed = "an http://HOST:PORT[/PATH] URL of a system the lab does not start"
    if not isinstance(value, str):
        raise SpecError(field, allowed, value)
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.query or parts.fragment:
        raise SpecError(field, allowed, value, hint="https is not supported by the load generator" if parts.scheme == "https" else "")
    return RemoteTarget(url=value, host=parts.hostname, port=port, base_path=parts.path.rstrip("/"))


# --- the architecture factor -------------------------------------------------------------


@dataclass(frozen=True)
class WithSystems:
    """The data plane's registry plus the spec's systems as ``system:NAME`` architectures, so
    the architecture factor is validated in one place. A workload of a spec whose levels are all
    systems is only required to be a path: a foreign system's paths are its own."""

    inner: Registry
    systems: tuple[SystemSpec, ...]
    systems_only: bool
    # What every architecture level speaks: "http", "memcached" (memcached topologies, whose
    # workload levels are /memcached?PARAM=VALUE...) or "mixed" (no workload fits both).
    protocol: str = "http"

    def architectures(self) -> Sequence[ArchitectureInfo]:
        own = tuple(ArchitectureInfo(s.level, f"[[systems]] {s.name}", frozenset()) for s in self.systems)
        return (*self.inner.architectures(), *own)

    def check_workload(self, target: str) -> None:
        if self.protocol == "mixed":
            raise ValueError("the architecture levels speak both http and memcached (a memcached topology); no workload fits both: make two specs")
        if self.protocol == "memcached":
            from archlab import contract

            params = memcached_workload(target)
            topology_load = [dict(s.topology.load) for s in self.systems if s.topology is not None and s.topology.protocol == "memcached"]
            for load in topology_load:
                try:
                    contract.check_load({**load, **params, "protocol": "memcached"})
                except InvalidValue as e:
                    raise ValueError(str(e)) from None
            return
        if not self.systems_only:
            self.inner.check_workload(target)
        elif not target.startswith("/"):
            raise ValueError(f"workload: expected a path starting with '/', got {target!r}")


def registry_with(inner: Registry, systems: tuple[SystemSpec, ...], architecture_levels: object) -> Registry:
    if not systems and not (isinstance(architecture_levels, list) and any(is_system_level(a) for a in architecture_levels)):
        return inner
    levels = architecture_levels if isinstance(architecture_levels, list) else []
    only = bool(levels) and all(is_system_level(a) for a in levels)
    if only and all(_runs_archlab_servers(systems, str(a)) for a in levels):
        only = False  # topologies of archlab's own servers: their workloads are checked like any
    spoken = {_protocol(systems, str(a)) for a in levels}
    protocol = "mixed" if len(spoken) > 1 else (spoken.pop() if spoken else "http")
    return WithSystems(inner, systems, only, protocol)


def _protocol(systems: Sequence[SystemSpec], level: str) -> str:
    named = next((s for s in systems if s.level == level), None)
    return named.topology.protocol if named is not None and named.topology is not None else "http"


def _runs_archlab_servers(systems: Sequence[SystemSpec], level: str) -> bool:
    """Whether ``level`` is a topology whose backends are archlab architectures (so the
    workload is one of archlab's)."""
    named = next((s for s in systems if s.level == level), None)
    return named is not None and named.topology is not None and named.topology.backends.kind == "architecture"


def check_used(systems: Sequence[SystemSpec], architecture_levels: Sequence[object]) -> None:
    """A declared system no cell runs would be ignored silently: refused instead (a system a
    topology runs as its backends is used)."""
    members = topology_members(systems)
    for i, s in enumerate(systems):
        if s.level not in architecture_levels and s.name not in members:
            raise SpecError(
                f"systems[{i}]",
                f"a system that factors.architecture names (add '{s.level}' to its levels)",
                s.name,
                hint="or remove the entry",
            )


def check_settings_apply(architecture_levels: Sequence[object], server: Mapping[str, object], varied: Sequence[str]) -> None:
    """``[server]`` options and the threads/loops factors set archlab's servers only: refused
    when every architecture level is a system, rather than silently ignored."""
    if not architecture_levels or not all(is_system_level(a) for a in architecture_levels):
        return
    hint = "every architecture level is a system; a system's own options go into its command"
    if server:
        key = next(iter(server))
        raise SpecError(f"server.{key}", "no [server] options, since no cell runs an archlab architecture", server[key], hint=hint)
    for name in ("threads", "loops"):
        if name in varied:
            raise SpecError(f"factors.{name}", f"no {name} levels, since no cell runs an archlab architecture", name, hint=hint)


def column_sources(architecture: str, systems: Sequence[SystemSpec]) -> dict[str, str]:
    """Where each column of a row comes from, for a cell of ``architecture``: the report and the
    manifest say which numbers a system measured itself and which the lab took from outside."""
    generator = "load generator"
    if not is_system_level(architecture):
        return {
            "throughput_latency": generator,
            "cpu": "server itself (getrusage)",
            "context_switches": "server itself (getrusage, every thread)",
            "rss": "/proc status VmHWM (outside)",
            "syscalls": "server itself (its socket-call counters)",
        }
    system = find_system(systems, architecture)
    if system.topology is not None:
        t = system.topology
        # archlab's serve and proxy count themselves; the middleware and peers are read from /proc.
        own = t.backends.kind == "architecture" and (t.front is None or t.front.kind == "proxy")
        how = "each process itself (getrusage)" if own else "archlab's serve/proxy themselves (getrusage), the others from /proc (outside)"
        return {
            "throughput_latency": generator,
            "cpu": f"sum over the topology's processes, per process in probe.json: {how}",
            "context_switches": f"sum over the topology's processes: {how}",
            "rss": "largest process of the topology",
            "syscalls": "sum of the processes' own socket-call counters" if own else "unavailable (not every process of the topology counts its socket calls)",
        }
    if system.is_remote:
        return {
            "throughput_latency": generator,
            "cpu": "unavailable (remote target)",
            "context_switches": "unavailable (remote target)",
            "rss": "unavailable (remote target)",
            "syscalls": "unavailable (remote target)",
        }
    return {
        "throughput_latency": generator,
        "cpu": "/proc/<pid>/stat of the process tree (outside)",
        "context_switches": "/proc/<pid>/task/*/status of the process tree, every thread at its last 100 ms reading (outside)",
        "rss": "/proc/<pid>/status VmRSS of the process tree, sampled (outside)",
        "syscalls": "unavailable (the system does not count its own socket calls)",
    }


def _positive_duration(value: object, field: str) -> float:
    """A duration that must be more than zero (a readiness timeout of 0 could never be met)."""
    seconds = parse_duration(value, field)
    if seconds <= 0:
        raise SpecError(field, "a duration > 0 such as \"10s\"", value)
    return seconds
