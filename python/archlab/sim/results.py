"""What a simulation returns, as typed values: :class:`SimulationResult` holds the estimates over
replications (mean and Student-t confidence interval of every metric) and every replication's own
numbers. Times are in model units and throughputs per model time unit; :meth:`SimulationResult.to_measurement`
converts to the lab's stored shape (microseconds, requests per second) for a given time unit, so
reports treat simulated and measured runs alike. The classes mirror the JSON the Rust core emits
(``archlab-sim`` ``output.rs`` and ``replicate.rs``); :func:`_decode` fills them generically from
their type hints, so adding a field means adding it in one place on each side."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass

from scipy import stats as _st

from archlab.store.records import Measurement


@dataclass(frozen=True)
class Estimate:
    """A mean over n observations (replications or batches) with its confidence interval."""

    mean: float
    half_width: float  # nan with fewer than two observations
    std_dev: float
    n: int
    confidence: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the confidence interval of the mean."""
        return self.low <= value <= self.high

    def prediction_interval(self, level: float | None = None) -> tuple[float, float]:
        """Where one more observation falls with probability ``level`` (default: the estimate's
        confidence): mean +- t s sqrt(1 + 1/n). This, not the interval of the mean, is what a
        single published run should be compared with."""
        level = self.confidence if level is None else level
        t = _st.t.ppf(0.5 + level / 2.0, self.n - 1)
        half = t * self.std_dev * math.sqrt(1.0 + 1.0 / self.n)
        return self.mean - half, self.mean + half

    def __str__(self) -> str:
        return f"{self.mean:.6g} +- {self.half_width:.3g}"


@dataclass(frozen=True)
class Pooled:
    """Quantiles of all replications' samples pooled in one HDR histogram."""

    count: int
    p50: float
    p90: float
    p99: float
    p999: float
    histogram: str  # HdrHistogram V2-deflate base64; values are model time x 1e9

    def decode(self):
        """The pooled histogram as an ``hdrh`` HdrHistogram (values: model time x 1e9)."""
        from archlab.latency.readers.hdr import decode_histogram

        return decode_histogram(self.histogram)


@dataclass(frozen=True)
class ResponseEstimates:
    throughput: Estimate
    mean: Estimate
    p50: Estimate
    p90: Estimate
    p99: Estimate
    p999: Estimate
    max: Estimate
    drop_rate: Estimate
    pooled: Pooled


@dataclass(frozen=True)
class StationClassEstimates:
    """One class's share of a station; class values add up to the station's (utilisation, mean
    jobs, throughput; mean residence weighted by throughput)."""

    name: str
    utilisation: Estimate | None  # busy servers of this class over all servers; None at a delay station
    mean_jobs: Estimate
    throughput: Estimate
    mean_residence: Estimate


@dataclass(frozen=True)
class StationEstimates:
    name: str
    utilisation: Estimate | None  # None at a delay station
    mean_jobs: Estimate
    mean_queue: Estimate
    throughput: Estimate
    mean_residence: Estimate
    drop_rate: Estimate
    residence: Pooled
    classes: dict[str, StationClassEstimates]


@dataclass(frozen=True)
class StopReport:
    """What the stop rule saw when it stopped: the watched ``estimate`` (over replications, or
    over the batch means of one extended run) and its relative half-width ``achieved``."""

    method: str  # replications | batch_means
    metric: str
    target: float
    achieved: float
    met: bool
    estimate: Estimate
    horizon: float | None  # where a batch-means run ended


@dataclass(frozen=True)
class Truncation:
    """MSER's choice on one series (White 1997; Franklin & White 2008): ``batches_deleted`` of
    ``batches`` batches of ``batch_size`` observations are cut from the start. ``at_limit``: the
    minimum fell on the search limit (half the series), so the run may still be in its transient
    and should be longer."""

    batch_size: int
    batches: int
    batches_deleted: int
    observations_deleted: int
    statistic: float
    at_limit: bool


@dataclass(frozen=True)
class Responses:
    completed: int
    dropped: int
    throughput: float
    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    max: float


@dataclass(frozen=True)
class BatchMeans:
    batches: int
    width: float  # length of one batch, model time
    throughput: Estimate
    mean_response: Estimate
    p99: Estimate | None  # only over all classes under a p99 stop rule


@dataclass(frozen=True)
class ClassReplication(Responses):
    name: str
    batch_means: BatchMeans | None


@dataclass(frozen=True)
class StationClassReplication:
    name: str
    utilisation: float | None
    mean_jobs: float
    throughput: float
    mean_residence: float  # nan when no job of the class left the station


@dataclass(frozen=True)
class StationReplication:
    name: str
    utilisation: float | None
    mean_jobs: float
    mean_queue: float
    throughput: float
    mean_residence: float
    p99_residence: float
    dropped: int
    classes: dict[str, StationClassReplication]


@dataclass(frozen=True)
class LittleCheck:
    """Little's law over the window: L (time-average requests in system), X, R, and the relative
    error of the exact accounting identity (rounding only)."""

    mean_in_system: float
    throughput: float
    mean_response: float
    identity_error: float


@dataclass(frozen=True)
class Replication:
    """One replication: its window [warmup, horizon] (``horizon`` beyond the configured one when
    a batch-means stop rule extended the run), its numbers, and its response-time ``histogram``
    (V2-deflate base64, model time x 1e9) over all classes."""

    index: int
    warmup: float
    horizon: float
    window: float
    batch_means: BatchMeans | None
    events: int
    total: Responses
    histogram: str
    classes: dict[str, ClassReplication]
    stations: dict[str, StationReplication]
    little: LittleCheck


@dataclass(frozen=True)
class SimulationResult:
    """Estimates over replications (``response`` over all classes, ``classes``, ``stations``)
    and the replications themselves. Times in model units, throughputs per model time unit."""

    replications_run: int
    confidence: float
    events: int
    warmup: float  # start of the statistics window, the same in every replication
    mser: Truncation | None  # MSER-5's choice with warmup="mser"
    response: ResponseEstimates
    classes: dict[str, ResponseEstimates]
    stations: dict[str, StationEstimates]
    stop: StopReport | None
    replications: list[Replication]

    @property
    def throughput(self) -> Estimate:
        return self.response.throughput

    @classmethod
    def from_json(cls, data: dict) -> SimulationResult:
        summary = data["summary"]
        return cls(
            replications_run=summary["replications"],
            confidence=summary["confidence"],
            events=summary["events"],
            warmup=summary["warmup"],
            mser=_decode(Truncation | None, summary["mser"]),
            response=_decode(ResponseEstimates, summary["total"]),
            classes={c["name"]: _decode(ResponseEstimates, c) for c in summary["classes"]},
            stations=_decode(dict[str, StationEstimates], summary["stations"]),
            stop=_decode(StopReport | None, summary["stop"]),
            replications=[_decode(Replication, r) for r in data["replications"]],
        )

    def to_measurement(self, time_unit_s: float = 1.0) -> Measurement:
        """The lab's stored summary of a measured run, from the replication means, taking one
        model time unit as ``time_unit_s`` seconds (closed or open as the model is)."""
        r, us = self.response, time_unit_s * 1e6
        window = sum(rep.window for rep in self.replications) / len(self.replications)
        return Measurement(
            duration_s=window * time_unit_s,
            requests=round(sum(rep.total.completed for rep in self.replications) / len(self.replications)),
            throughput_rps=r.throughput.mean / time_unit_s,
            p50_us=r.p50.mean * us, p90_us=r.p90.mean * us, p99_us=r.p99.mean * us,
            p999_us=r.p999.mean * us, max_us=r.max.mean * us, mean_us=r.mean.mean * us,
            errors=round(sum(rep.total.dropped for rep in self.replications) / len(self.replications)),
        )

    def table(self) -> str:
        """A terminal summary: mean +- half-width of the headline metrics."""
        level = f"{self.confidence:.0%}"
        r = self.response
        lines = [f"{self.replications_run} replications, {self.events} events, {level} confidence intervals",
                 f"  throughput      {r.throughput}", f"  mean response   {r.mean}",
                 f"  p50 / p90       {r.p50} / {r.p90}", f"  p99 / p99.9     {r.p99} / {r.p999}"]
        if self.mser is not None:
            lines.append(f"  MSER-5 warm-up   {self.warmup:.6g} ({self.mser.batches_deleted} of {self.mser.batches} batches)"
                         + ("  at the search limit: the run had not settled, lengthen the horizon"
                            if self.mser.at_limit else ""))
        if self.stop is not None:
            stop = self.stop
            where = f", horizon {stop.horizon:g}" if stop.horizon is not None else ""
            lines.append(f"  stop ({stop.method}) {stop.metric} {stop.estimate}: relative half-width {stop.achieved:.3g} "
                         f"{'<=' if stop.met else '>'} {stop.target:g}{where}")
        for name, s in self.stations.items():
            util = f"util {s.utilisation}  " if s.utilisation is not None else ""
            lines.append(f"  station {name:<10} {util}jobs {s.mean_jobs}  queue {s.mean_queue}")
            if len(s.classes) > 1:
                for cname, c in s.classes.items():
                    if c.throughput.mean > 0:
                        cutil = f"util {c.utilisation}  " if c.utilisation is not None else ""
                        lines.append(f"    class {cname:<10} {cutil}jobs {c.mean_jobs}  X {c.throughput}  "
                                     f"residence {c.mean_residence}")
        return "\n".join(lines)


@functools.cache
def _fields(cls) -> tuple[tuple[str, object], ...]:
    """A dataclass's field names with their resolved types. Resolving the annotations (strings,
    under ``from __future__ import annotations``) costs far more than building the value, and a
    result holds hundreds of these values, so it is done once per class."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _decode(hint, data):
    """Build a value of type ``hint`` from the core's JSON (null floats are NaN; lists of named
    objects become dicts keyed by name)."""
    return _decoder(hint)(data)


@functools.cache
def _decoder(hint) -> typing.Callable[[typing.Any], typing.Any]:
    """The function that decodes JSON into a value of type ``hint``, built once per type: a
    result holds hundreds of values of a handful of types, and inspecting a type costs more than
    building its value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = _decoder([a for a in args if a is not type(None)][0])
        return lambda data: None if data is None else inner(data)
    if origin is dict:
        value = _decoder(args[1])
        return lambda data: {item["name"]: value(item) for item in data}
    if origin is list:
        element = _decoder(args[0])
        return lambda data: [element(item) for item in data]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        cls: type = hint
        fields = tuple((name, _decoder(field_hint)) for name, field_hint in _fields(cls))
        return lambda data: cls(**{name: decode(data[name]) for name, decode in fields})
    if hint is float:
        return _float
    return _verbatim


def _float(data) -> float:
    return math.nan if data is None else float(data)


def _verbatim(data):
    return data
