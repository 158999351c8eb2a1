"""Seed 002's models of its middleware (§6-7) fed from a stored run of memcached topologies: each
successful repetition of a ``[[systems]]`` entry with memcached backends and middleware fronts
becomes a :class:`MiddlewarePoint` (the design's levels read from the run's own spec: servers =
backend copies, middlewares = front copies, workers per middleware; the clients' throughput and
mean response time from the merged load summary; the middlewares' own means from the final
``stats`` line each front printed, kept in the repetition's ``probe.json``). From those points:

* :func:`factorial_from_points`: the 2^k r design of §6 (any two-level subset of servers,
  middlewares, workers), fitted by :class:`~archlab.models.factorial.FactorialDesign`;
* :func:`station_comparison`: §7.1-7.3, the whole system as one M/M/1 and as one M/M/m
  (m = every worker thread of every middleware), the service rate the largest throughput
  measured for that configuration, the arrival rate each level's throughput;
* :func:`network_comparison`: §7.4, a closed network per middleware solved by exact MVA (the
  net thread a queueing centre, the W workers one multiserver centre holding a request from
  dequeue to reply, memcached included because a worker blocks on it, the clients and the
  network a delay centre), its demands measured at the lightest load of the configuration
  and the prediction set beside every level's measurement.

Times are in milliseconds, rates in requests per second. The middlewares' statistics cover
their whole life (warm-up and measurement); the clients' cover the measurement window only."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from archlab.models.errors import ModelError
from archlab.models.factorial import FactorialDesign, design_from_records
from archlab.models.network import Centre, ClosedNetwork
from archlab.models.mva import exact_mva
from archlab.models.queueing import mm1, mmm
from archlab.models.station import StationMetrics


@dataclass(frozen=True)
class MiddlewarePoint:
    """One repetition of one cell of a middleware topology."""

    system: str
    workload: str
    concurrency: int
    repetition: int
    servers: int
    middlewares: int
    workers: int
    throughput_rps: float  # the clients', all load generators merged
    client_response_ms: float  # the clients' mean
    mw_requests: int  # every middleware's requests, warm-up included
    mw_response_ms: float  # request-weighted means over the middlewares
    mw_queue_wait_ms: float
    mw_service_ms: float  # memcached: first byte sent to last reply received
    mw_before_queue_ms: float  # arrival to enqueue: the net thread's part
    mw_worker_ms: float  # dequeue to reply: what a worker holds (memcached included)
    mw_queue_length: float  # time-averaged request-queue length, summed over the middlewares


def topology_levels(spec: Mapping[str, object]) -> dict[str, tuple[int, int, int]]:
    """``system:NAME`` -> (servers, middlewares, workers per middleware) of every topology of
    the run's spec whose front is archlab's middleware with workers."""
    out = {}
    entries = spec.get("systems")
    for s in entries if isinstance(entries, list) else []:
        front, backends = s.get("front"), s.get("backends")
        if isinstance(front, Mapping) and isinstance(backends, Mapping) and "middleware" in front and front.get("workers"):
            out["system:" + str(s["name"])] = (int(backends.get("copies", 1)), int(front.get("copies", 1)), int(front["workers"]))
    return out


def points_from_run(spec: Mapping[str, object], rows: Iterable[object], run_dir: Path) -> list[MiddlewarePoint]:
    """The points of a run (its manifest's ``spec``, its rows and its directory, where each
    repetition's ``cells/CELL/rep-R/probe.json`` is); rows of other systems, failed repetitions
    and repetitions whose middlewares printed no statistics are left out."""
    levels = topology_levels(spec)
    if not levels:
        raise ModelError("run", "a run with [[systems]] topologies whose front is archlab's middleware (middleware = ..., workers = W)", "none")
    out = []
    for row in rows:
        arch = row.cell.architecture  # type: ignore[attr-defined]
        m = row.measurement  # type: ignore[attr-defined]
        if arch not in levels or not row.ok or m is None:  # type: ignore[attr-defined]
            continue
        stats = _front_stats(run_dir / "cells" / row.cell_id / f"rep-{row.repetition}" / "probe.json")  # type: ignore[attr-defined]
        if not stats:
            continue
        servers, middlewares, workers = levels[arch]
        out.append(_point(arch, row, m, servers, middlewares, workers, stats))
    if not out:
        raise ModelError("run", "successful repetitions of middleware topologies with the middlewares' statistics in probe.json", 0)
    return out


def _front_stats(probe: Path) -> list[dict]:
    try:
        doc = json.loads(probe.read_text())
    except (OSError, ValueError):
        return []
    return [p["final_counters"] for p in doc.get("processes", []) if str(p.get("process", "")).startswith("front") and isinstance(p.get("final_counters"), dict)]


def _point(arch: str, row: object, m: object, servers: int, middlewares: int, workers: int, stats: list[dict]) -> MiddlewarePoint:
    totals = [s["totals"] for s in stats]
    n = sum(int(t["requests"]) for t in totals)

    def mean_ms(key: str) -> float:
        return sum(int(t["requests"]) * float(t[key]["mean"] or 0.0) for t in totals) / max(n, 1) / 1e3

    def split_ms(*keys: str) -> float:
        return sum(int(t["time_split_ns"][k]) for t in totals for k in keys) / max(n, 1) / 1e6

    return MiddlewarePoint(
        system=arch.removeprefix("system:"),
        workload=str(row.cell.workload),  # type: ignore[attr-defined]
        concurrency=int(row.cell.concurrency),  # type: ignore[attr-defined]
        repetition=int(row.repetition),  # type: ignore[attr-defined]
        servers=servers,
        middlewares=middlewares,
        workers=workers,
        throughput_rps=float(m.throughput_rps),  # type: ignore[attr-defined]
        client_response_ms=float(m.mean_us) / 1e3,  # type: ignore[attr-defined]
        mw_requests=n,
        mw_response_ms=mean_ms("response_us"),
        mw_queue_wait_ms=mean_ms("queue_wait_us"),
        mw_service_ms=mean_ms("service_us"),
        mw_before_queue_ms=split_ms("before_queue"),
        mw_worker_ms=split_ms("before_service", "service", "after_service"),
        mw_queue_length=sum(float(t["queue_length"]["time_avg"]) for t in totals),
    )


# --------------------------------------------------------------------------- §6: 2^k r
FACTOR_OF = {"servers": lambda p: p.servers, "middlewares": lambda p: p.middlewares, "workers": lambda p: p.workers}


def factorial_from_points(points: Sequence[MiddlewarePoint], response: str, workload: str, confidence: float = 0.90) -> tuple[FactorialDesign, dict]:
    """The 2^k r design of ``response`` (a :class:`MiddlewarePoint` field) over the factors
    among servers, middlewares and workers that take two levels in ``workload``'s points;
    returns the fitted design and each factor's (low, high)."""
    mine = [p for p in points if p.workload == workload]
    if not mine:
        raise ModelError("workload", "a workload of the run: " + ", ".join(sorted({p.workload for p in points})), workload)
    factors = {}
    for name, get in FACTOR_OF.items():
        levels = sorted({get(p) for p in mine})
        if len(levels) > 2:
            raise ModelError(name, "at most two levels for a 2^k r design", levels)
        if len(levels) == 2:
            factors[name] = (levels[0], levels[1])
    if not factors:
        raise ModelError("factors", "servers, middlewares or workers at two levels", "one level each")
    records = [{name: FACTOR_OF[name](p) for name in factors} | {response: float(getattr(p, response))} for p in mine]
    y = design_from_records(records, factors, response)
    return FactorialDesign(list(factors), confidence=confidence).fit(y), factors


# --------------------------------------------------------------------------- §7: one station
@dataclass(frozen=True)
class LevelMeans:
    """The repetitions of one configuration and level, averaged."""

    concurrency: int
    repetitions: int
    throughput_rps: float
    client_response_ms: float
    mw_response_ms: float
    mw_queue_wait_ms: float
    mw_service_ms: float
    mw_before_queue_ms: float
    mw_worker_ms: float
    mw_queue_length: float


def level_means(points: Sequence[MiddlewarePoint]) -> list[LevelMeans]:
    """One :class:`LevelMeans` per concurrency of ``points`` (one configuration), ascending."""
    out = []
    for n in sorted({p.concurrency for p in points}):
        ps = [p for p in points if p.concurrency == n]
        out.append(LevelMeans(n, len(ps), *(fmean(getattr(p, f) for p in ps) for f in (
            "throughput_rps", "client_response_ms", "mw_response_ms", "mw_queue_wait_ms", "mw_service_ms",
            "mw_before_queue_ms", "mw_worker_ms", "mw_queue_length"))))  # fmt: skip
    return out


@dataclass(frozen=True)
class StationRow:
    """One level: what M/M/1 and M/M/m predict for its arrival rate beside what was measured
    on the middlewares (None: the model is unstable there, rho >= 1)."""

    level: LevelMeans
    rho: float
    mm1_response_ms: float | None
    mmm_response_ms: float | None
    mm1_wait_ms: float | None
    mmm_wait_ms: float | None
    mm1_queue: float | None
    mmm_queue: float | None


def station_comparison(points: Sequence[MiddlewarePoint], servers: int) -> tuple[float, list[StationRow]]:
    """§7.1-7.3 for one configuration's points (one system and workload): the service rate
    mu = the largest mean throughput of its levels, m = ``servers`` (every worker thread)."""
    levels = level_means(points)
    mu = max(lv.throughput_rps for lv in levels)
    rows = []
    for lv in levels:
        rho = lv.throughput_rps / mu
        one = _stable(mm1, lv.throughput_rps, mu)
        many = _stable(mmm, lv.throughput_rps, mu / servers, servers)
        rows.append(StationRow(
            lv, rho,
            one.mean_response * 1e3 if one else None, many.mean_response * 1e3 if many else None,
            one.mean_wait * 1e3 if one else None, many.mean_wait * 1e3 if many else None,
            one.mean_queue if one else None, many.mean_queue if many else None,
        ))  # fmt: skip
    return mu, rows


def _stable(model: Callable[..., StationMetrics], *args: float) -> StationMetrics | None:
    try:
        return model(*args)
    except ModelError:  # rho >= 1: no steady state to predict
        return None


# --------------------------------------------------------------------------- §7.4: network
@dataclass(frozen=True)
class NetworkRow:
    level: LevelMeans
    throughput_rps: float  # predicted, all middlewares
    client_response_ms: float
    net_thread_ms: float  # residence at the net thread
    workers_ms: float  # residence at the workers (queue wait + holding)
    delay_ms: float  # the clients' and network's delay
    net_thread_utilisation: float
    worker_utilisation: float


@dataclass(frozen=True)
class NetworkDemands:
    """Per-request demands (ms) of one middleware's network, measured at ``concurrency``."""

    concurrency: int
    net_thread_ms: float
    worker_ms: float
    delay_ms: float


def network_comparison(points: Sequence[MiddlewarePoint], middlewares: int, workers: int) -> tuple[NetworkDemands, list[NetworkRow]]:
    """§7.4 for one configuration: each of ``middlewares`` fronts gets an equal share of the
    clients and is a closed network (net thread, ``workers`` workers, delay), solved by exact
    MVA; demands from the lightest level, predictions at every level."""
    levels = level_means(points)
    base = levels[0]
    demands = NetworkDemands(base.concurrency, base.mw_before_queue_ms, base.mw_worker_ms, max(base.client_response_ms - base.mw_response_ms, 0.0))
    network = ClosedNetwork([
        Centre.queueing("net thread", demands.net_thread_ms / 1e3),
        Centre.multiserver("workers", demands.worker_ms / 1e3, workers),
        Centre.delay("clients and network", demands.delay_ms / 1e3),
    ])  # fmt: skip
    rows = []
    for lv in levels:
        share = lv.concurrency / middlewares
        if share != int(share):
            raise ModelError("concurrency", f"a multiple of the {middlewares} middlewares (each gets an equal share)", lv.concurrency)
        sol = exact_mva(network, int(share))
        x = float(sol.throughput[0])
        r = sol.residence_time[:, 0] * 1e3
        rows.append(NetworkRow(lv, x * middlewares, float(sol.response_time[0]) * 1e3, float(r[0]), float(r[1]), float(r[2]),
                               float(sol.utilisation[0]), float(sol.utilisation[1])))
    return demands, rows


def fmt(value: float | None, digits: int = 2) -> str:
    """A table cell: ``-`` where a model has no answer."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:,.{digits}f}"
