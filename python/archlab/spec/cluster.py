"""The ``[cluster]`` section of a spec: the Dask cluster its cells' load runs on as shards, the
same choice as ``archlab run --cluster ADDRESS --shards S`` made once in the spec::

    [cluster]
    address = "tcp://10.0.0.1:8786"   # a running scheduler, or "local:2" (2 local worker processes)
    shards = 2                        # load shards per cell (default: one per load worker)
    load_hosts = ["loadA", "loadB"]   # only these load workers (Dask worker names) run shards
    server_host = "sut"               # the worker that runs each server cell's server

Nothing here imports Dask: the section is plain data, validated like every other section (each
error names ``cluster.KEY``, what it accepts and what it got), and only a run that uses a
cluster loads :mod:`archlab.cluster`. :func:`choose` merges the section with the command-line
flags, the flags winning key by key, and says where each value came from so that the run's
manifest records it. A spec without the section keeps its hash (the section enters
:meth:`~archlab.spec.model.Experiment.to_dict` only when given)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

from archlab.errors import InvalidValue, SpecError

SECTION = "cluster"
KEYS = ("address", "shards", "load_hosts", "server_host")
MAX_LOCAL_WORKERS = 64
MAX_SHARDS = 1024
_ADDRESS = re.compile(r"^tcp://(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})$")
_ADDRESS_ALLOWED = f"tcp://HOST:PORT (a Dask scheduler) or local:N (N = 1..{MAX_LOCAL_WORKERS} local worker processes)"


@dataclass(frozen=True)
class ClusterAddress:
    """``tcp://HOST:PORT`` of a running scheduler, or ``local:N`` for N local worker processes."""

    kind: Literal["scheduler", "local"]
    scheduler: str | None = None
    workers: int | None = None

    @classmethod
    def parse(cls, text: object, parameter: str = "--cluster") -> "ClusterAddress":
        if not isinstance(text, str):
            raise InvalidValue(parameter, _ADDRESS_ALLOWED, text)
        if text.startswith("local:"):
            n = text[len("local:"):]
            if not n.isdigit() or not 1 <= int(n) <= MAX_LOCAL_WORKERS:
                raise InvalidValue(parameter, _ADDRESS_ALLOWED, text)
            return cls("local", workers=int(n))
        m = _ADDRESS.match(text)
        if m is None or not 1 <= int(m.group("port")) <= 65535:
            raise InvalidValue(parameter, _ADDRESS_ALLOWED, text)
        return cls("scheduler", scheduler=text)

    def __str__(self) -> str:
        return self.scheduler if self.scheduler is not None else f"local:{self.workers}"


@dataclass(frozen=True)
class ClusterSettings:
    """The section as given (``shards`` and ``load_hosts`` None when left out)."""

    address: ClusterAddress
    shards: int | None = None
    load_hosts: tuple[str, ...] | None = None
    server_host: str | None = None

    def to_dict(self) -> dict:
        d: dict[str, object] = {"address": str(self.address)}
        if self.shards is not None:
            d["shards"] = self.shards
        if self.load_hosts is not None:
            d["load_hosts"] = list(self.load_hosts)
        if self.server_host is not None:
            d["server_host"] = self.server_host
        return d


def parse_shards(value: object, parameter: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHARDS:
        raise SpecError(parameter, f"an integer in 1..={MAX_SHARDS} (load shards per cell)", value)
    return value


def parse_cluster(table: Mapping[str, object]) -> ClusterSettings:
    """``[cluster]`` -> :class:`ClusterSettings` (its keys already checked by the raw stage)."""
    if "address" not in table:
        raise SpecError(f"{SECTION}.address", f"{_ADDRESS_ALLOWED} (the section needs it)", "nothing")
    try:
        address = ClusterAddress.parse(table["address"], f"{SECTION}.address")
    except InvalidValue as e:
        raise SpecError(e.parameter, e.allowed, e.received) from None
    shards = parse_shards(table["shards"], f"{SECTION}.shards") if "shards" in table else None
    hosts = None
    if "load_hosts" in table:
        given = table["load_hosts"]
        allowed = "a non-empty list of distinct Dask worker names (`dask worker --name NAME`)"
        if not isinstance(given, list) or not given:
            raise SpecError(f"{SECTION}.load_hosts", allowed, given)
        for i, name in enumerate(given):
            if not isinstance(name, str) or not name.strip():
                raise SpecError(f"{SECTION}.load_hosts[{i}]", "a Dask worker name (a non-empty string)", name)
            if name in given[:i]:
                raise SpecError(f"{SECTION}.load_hosts[{i}]", allowed, name, hint=f"{name!r} is listed twice")
        if shards is not None and shards > len(given):
            raise SpecError(f"{SECTION}.shards", f"at most the {len(given)} load host(s) of cluster.load_hosts", shards)
        hosts = tuple(given)
    server_host = table.get("server_host")
    if server_host is not None and (not isinstance(server_host, str) or not server_host.strip()):
        raise SpecError(f"{SECTION}.server_host", "a Dask worker name (`dask worker --name NAME`) to run the servers on", server_host)
    return ClusterSettings(address, shards, hosts, server_host)


@dataclass(frozen=True)
class ClusterChoice:
    """What a run uses: the address, the shards (None: one per load worker), the load hosts
    (None: every load worker), the server's worker (None: this host), and where each came
    from, for the manifest."""

    address: ClusterAddress
    shards: int | None
    load_hosts: tuple[str, ...] | None
    address_from: str
    shards_from: str
    server_host: str | None = None

    def to_dict(self) -> dict:
        return {
            "address": str(self.address), "address_from": self.address_from,
            "shards": self.shards, "shards_from": self.shards_from,
            "load_hosts": list(self.load_hosts) if self.load_hosts is not None else None,
            "server_host": self.server_host,
        }  # fmt: skip


def choose(flag_address: str | None, flag_shards: int | None, spec: ClusterSettings | None) -> ClusterChoice | None:
    """The cluster a run uses: ``--cluster`` over ``[cluster] address``, ``--shards`` over
    ``[cluster] shards``; None for a local run. ``--shards`` with neither is refused."""
    if flag_address is None and spec is None:
        if flag_shards is not None:
            raise SpecError("--shards", "--shards only with --cluster or a spec with a [cluster] section", flag_shards)
        return None
    address = ClusterAddress.parse(flag_address) if flag_address is not None else spec.address  # type: ignore[union-attr]
    address_from = "--cluster" if flag_address is not None else "[cluster] address"
    if flag_shards is not None:
        shards: int | None = parse_shards(flag_shards, "--shards")
        shards_from = "--shards"
    elif spec is not None and spec.shards is not None:
        shards, shards_from = spec.shards, "[cluster] shards"
    else:
        shards, shards_from = None, "one per load worker"
    hosts = spec.load_hosts if spec is not None else None
    if hosts is not None and shards is not None and shards > len(hosts):
        raise SpecError("--shards", f"at most the {len(hosts)} load host(s) of the spec's cluster.load_hosts", shards)
    return ClusterChoice(address, shards, hosts, address_from, shards_from, spec.server_host if spec is not None else None)


def settings_in(text: str, source: str = "<spec>") -> ClusterSettings | None:
    """The ``[cluster]`` section of spec text, validated alone (before the whole spec is, so a
    run can open its cluster first); None when the spec has none."""
    from archlab.spec.raw import parse_toml  # here: raw imports this module

    raw = parse_toml(text, source)
    return parse_cluster(raw.section(SECTION)) if SECTION in raw.tables else None


# Workloads whose server reaches a service the lab starts on the client's host (PostgreSQL, the
# downstream of /call and of service programs): a server on another host would not reach it.
_LOCAL_SERVICE_PATHS = ("/db", "/call", "/program")


def check_server_host(settings: ClusterSettings | None, architectures: Sequence[str], workloads: Sequence[str]) -> None:
    """Refuse ``server_host`` where it cannot apply rather than ignore it: it places archlab's
    own servers, not ``system:NAME`` levels, and none whose workload needs a service of this host."""
    if settings is None or settings.server_host is None:
        return
    field_ = f"{SECTION}.server_host"
    for a in architectures:
        if a.startswith("system:"):
            raise SpecError(field_, "a spec whose architectures are all archlab's own (system:NAME levels run on this host)", a)
    for w in workloads:
        if w.split("?", 1)[0] in _LOCAL_SERVICE_PATHS:
            raise SpecError(field_, "workloads that need no service of this host (/db, /call and /program reach one started here)", w)
