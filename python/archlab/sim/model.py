"""Building a model in a few lines. A :class:`Model` holds stations and sources; each source is
one class of requests with a route made of steps (:func:`serve`, :func:`call`, :func:`branch`,
:func:`repeat`, :func:`fork`, :func:`balance`). The builder checks nothing itself: the Rust
core validates the whole model once, and its errors name the field by its path in the model
(``sources[0].route[1].station``), the same path the TOML format uses::

    m = Model()
    cpu = m.station("cpu", servers=4)
    m.closed("clients", clients=100, route=[serve(cpu, Exponential(0.025))])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from archlab.errors import SpecError
from archlab.sim.dists import Distribution, Exponential, as_distribution

Discipline = Literal["fcfs", "ps", "delay"]
Policy = Literal["round-robin", "random", "jsq", "power-of-two"]


@dataclass(frozen=True)
class Station:
    """``servers`` servers; ``discipline`` "fcfs" (one FIFO queue), "ps" (processor sharing) or
    "delay" (infinite servers); ``capacity`` bounds the jobs present (arrivals to a full station
    are dropped)."""

    name: str
    servers: int = 1
    discipline: Discipline = "fcfs"
    capacity: int | None = None

    def to_spec(self) -> dict:
        spec = {"name": self.name, "servers": self.servers, "discipline": self.discipline}
        if self.capacity is not None:
            spec["capacity"] = self.capacity
        return spec


StationRef = Station | str


def _name(station: StationRef) -> str:
    return station.name if isinstance(station, Station) else station


class Step:
    """One step of a route; :meth:`to_spec` gives its model-format dict."""

    def to_spec(self) -> dict:
        raise NotImplementedError


def _route(steps: Sequence[Step]) -> list[dict]:
    return [s.to_spec() for s in steps]


@dataclass(frozen=True)
class Serve(Step):
    station: StationRef
    service: Distribution

    def to_spec(self) -> dict:
        return {"step": "serve", "station": _name(self.station), "service": self.service.to_spec()}


@dataclass(frozen=True)
class Call(Step):
    station: StationRef
    callee: tuple[Step, ...]
    before: Distribution
    after: Distribution

    def to_spec(self) -> dict:
        return {"step": "call", "station": _name(self.station), "before": self.before.to_spec(),
                "callee": _route(self.callee), "after": self.after.to_spec()}


@dataclass(frozen=True)
class Branch(Step):
    options: tuple[tuple[float, tuple[Step, ...]], ...]

    def to_spec(self) -> dict:
        return {"step": "branch", "options": [{"p": float(p), "route": _route(r)} for p, r in self.options]}


@dataclass(frozen=True)
class Repeat(Step):
    route: tuple[Step, ...]
    times: int | None
    again: float | None

    def to_spec(self) -> dict:
        spec: dict = {"step": "repeat", "route": _route(self.route)}
        if self.times is not None:
            spec["times"] = self.times
        if self.again is not None:
            spec["again"] = float(self.again)
        return spec


@dataclass(frozen=True)
class Fork(Step):
    branches: tuple[tuple[Step, ...], ...]

    def to_spec(self) -> dict:
        return {"step": "fork", "branches": [_route(b) for b in self.branches]}


@dataclass(frozen=True)
class Balance(Step):
    stations: tuple[StationRef, ...]
    policy: Policy
    service: Distribution

    def to_spec(self) -> dict:
        return {"step": "balance", "stations": [_name(s) for s in self.stations], "policy": self.policy,
                "service": self.service.to_spec()}


def serve(station: StationRef, service: Distribution | float) -> Serve:
    """Queue at ``station`` and receive ``service``."""
    return Serve(station, as_distribution(service))


def call(station: StationRef, callee: Sequence[Step], before: Distribution | float = 0.0,
         after: Distribution | float = 0.0) -> Call:
    """A synchronous inter-service call: hold one server of ``station`` (an FCFS pool) for
    ``before``, through the whole ``callee`` route, then for ``after``."""
    return Call(station, tuple(callee), as_distribution(before), as_distribution(after))


def branch(*options: tuple[float, Sequence[Step]]) -> Branch:
    """Continue along one route, chosen with the given probabilities: ``branch((0.3, [..]), (0.7, [..]))``."""
    return Branch(tuple((p, tuple(r)) for p, r in options))


def repeat(route: Sequence[Step], *, times: int | None = None, again: float | None = None) -> Repeat:
    """Run ``route`` ``times`` times, or once and then again with probability ``again``."""
    return Repeat(tuple(route), times, again)


def fork(*branches: Sequence[Step]) -> Fork:
    """Run the routes in parallel and continue when all have finished (fork-join)."""
    return Fork(tuple(tuple(b) for b in branches))


def balance(stations: Sequence[StationRef], service: Distribution | float, policy: Policy = "round-robin") -> Balance:
    """Serve at one of the replica ``stations``, picked by ``policy``."""
    return Balance(tuple(stations), policy, as_distribution(service))


@dataclass
class Model:
    """Stations and sources; build with :meth:`station`, :meth:`closed`, :meth:`open`,
    :meth:`sessions`; :meth:`to_spec` gives the model-format dict the core reads."""

    stations: list[Station] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)

    def station(self, name: str, servers: int = 1, discipline: Discipline = "fcfs",
                capacity: int | None = None) -> Station:
        st = Station(name, servers, discipline, capacity)
        self.stations.append(st)
        return st

    def closed(self, name: str, clients: int, route: Sequence[Step], think: Distribution | float = 0.0) -> Model:
        """``clients`` clients, each alternating ``think`` and one request (closed model)."""
        self.sources.append({"kind": "closed", "name": name, "clients": clients,
                             "think": as_distribution(think).to_spec(), "route": _route(route)})
        return self

    def open(self, name: str, route: Sequence[Step], *, rate: float | None = None,
             interarrival: Distribution | None = None, arrival_times: Sequence[float] | None = None) -> Model:
        """Open arrivals: Poisson at ``rate``, any renewal ``interarrival`` distribution, or the
        ``arrival_times`` of a trace (exactly one of the three)."""
        if sum(x is not None for x in (rate, interarrival, arrival_times)) != 1:
            raise SpecError(f"{name}: arrivals", "exactly one of rate, interarrival, arrival_times",
                            {"rate": rate, "interarrival": interarrival, "arrival_times": arrival_times})
        source: dict = {"kind": "open", "name": name, "route": _route(route)}
        if arrival_times is not None:
            source["arrival_times"] = [float(t) for t in arrival_times]
        else:
            source["interarrival"] = (interarrival or _poisson(f"{name}: rate", rate)).to_spec()
        self.sources.append(source)
        return self

    def sessions(self, name: str, route: Sequence[Step], *, rate: float, requests_per_session: float,
                 think: Distribution | float = 0.0) -> Model:
        """Partly-open sessions: Poisson session arrivals at ``rate``; each session sends a
        request, waits for it, thinks, and continues so that it sends ``requests_per_session``
        requests on average (a geometric number, so ``again`` = 1 - 1/requests_per_session)."""
        if not requests_per_session >= 1:
            raise SpecError(f"{name}: requests_per_session", "a mean >= 1", requests_per_session)
        self.sources.append({"kind": "sessions", "name": name,
                             "interarrival": _poisson(f"{name}: rate", rate).to_spec(),
                             "think": as_distribution(think).to_spec(), "again": 1.0 - 1.0 / requests_per_session,
                             "route": _route(route)})
        return self

    def to_spec(self) -> dict:
        return {"stations": [s.to_spec() for s in self.stations], "sources": list(self.sources)}


def _poisson(field: str, rate: float | None) -> Exponential:
    if rate is None or not rate > 0 or rate == float("inf"):
        raise SpecError(field, "a finite rate > 0 (requests per time unit)", rate)
    return Exponential(1.0 / rate)
