"""What spec validation needs to know about the data plane, as a small protocol: the registered
architectures (name, description, the options each accepts) and a check of workload targets.
The data plane is the one place that names architectures and parses workloads, so the spec asks
it instead of keeping a copy; :class:`DataPlaneRegistry` asks the real one through
``archlab._native`` and tests can pass a fixed one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from archlab import contract


@dataclass(frozen=True)
class ArchitectureInfo:
    name: str
    description: str
    options: frozenset[str]

    @classmethod
    def from_mapping(cls, item: Mapping[str, object]) -> "ArchitectureInfo":
        """Build from one entry of ``architectures()`` / ``archlab-engine architectures --json``."""
        options = item.get("options", ())
        if not isinstance(options, Iterable) or isinstance(options, str):
            raise ValueError(f"architecture entry has a malformed 'options': {item!r}")
        return cls(name=str(item["name"]), description=str(item.get("description", "")), options=frozenset(map(str, options)))


class Registry(Protocol):
    def architectures(self) -> Sequence[ArchitectureInfo]:
        """The registered architectures, in the registry's order."""
        ...

    def check_workload(self, target: str) -> None:
        """Raise ``ValueError`` (message naming parameter, allowed values and value received)
        if ``target`` (path and query, e.g. ``/echo?size=1024``) is not a valid workload."""
        ...


@dataclass(frozen=True)
class FixedRegistry:
    """A registry given as data: for tests, and for re-validating against a known list."""

    entries: tuple[ArchitectureInfo, ...]

    def architectures(self) -> Sequence[ArchitectureInfo]:
        return self.entries

    def check_workload(self, target: str) -> None:
        if not target.startswith("/"):
            raise ValueError(f"workload target must start with '/', got {target!r}")


class DataPlaneRegistry:
    """:class:`archlab.spec.Registry` backed by the data plane of this checkout, through
    ``archlab._native`` (a missing or outdated extension is a clear error, never a fallback)."""

    def __init__(self) -> None:
        self._architectures: tuple[ArchitectureInfo, ...] | None = None

    def architectures(self) -> Sequence[ArchitectureInfo]:
        if self._architectures is None:
            self._architectures = tuple(ArchitectureInfo.from_mapping(a) for a in contract.native().architectures())
        return self._architectures

    def check_workload(self, target: str) -> None:
        contract.native().check_workload(target)
