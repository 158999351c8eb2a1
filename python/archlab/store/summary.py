"""The load generator's JSON summary (``archlab/load-summary``, versions 1 and 2, published in
``crates/load/schema/``), read in one place for every reader: the runner turns it into a row's
:class:`~archlab.store.records.Measurement` and its Little's-law check, :mod:`archlab.latency`
follows it to its HDR interval log, the report draws its timeline. The schema name and version
are checked first, so a summary written by an incompatible engine is reported as such rather
than misread."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from archlab import documents
from archlab.errors import ArchlabError
from archlab.littles_law import Completions, LittlesLaw, Think, check_closed_window
from archlab.store.records import Measurement

SCHEMA = "archlab/load-summary"
# Version 2 added the open and partly-open models' fields and kept every field of version 1;
# the version-2 fields read here are optional, so a version-1 summary reads as before.
SCHEMA_VERSIONS = (1, 2)


class SummaryError(ArchlabError):
    """A load summary is missing, unreadable, or of a schema this archlab does not read."""


@dataclass(frozen=True)
class TimelinePoint:
    """One interval of the window: its index (seconds since the window opened), its length and
    the requests per second completed in it."""

    second: int
    length_s: float
    throughput_rps: float


@dataclass(frozen=True)
class ClassResult:
    """One class of a request mix over the window (the summary's ``mix`` entries): its counts,
    and the latency of its 2xx responses on the same basis as the run's headline (response time
    for the open models, service time for the closed one) plus the service time's p99. The
    classes' ``sent``, ``responses`` and ``requests`` add up to the run's."""

    index: int
    path: str
    weight: float
    share: float
    sent: int
    responses: int
    requests: int
    errors: int
    throughput_rps: float
    p50_us: float | None
    p90_us: float | None
    p99_us: float | None
    p999_us: float | None
    mean_us: float | None
    service_p99_us: float | None


@dataclass(frozen=True)
class LoadSummary:
    """One summary, typed. ``hdr_log`` is the interval log it names (absolute when read from a
    file: the summary names it relative to its own directory), ``None`` when it names none."""

    measurement: Measurement
    #: closed | open | partly-open; None in a summary of schema version 1 (closed only).
    model: str | None
    hdr_log: Path | None
    timeline: tuple[TimelinePoint, ...]
    #: Little's law on the window (closed model), None where it is not defined (see
    #: :mod:`archlab.littles_law`) or the summary lacks the figures (version 1).
    littles_law: LittlesLaw | None
    #: The classes of a request mix, in the mix's order; empty without a mix.
    classes: tuple[ClassResult, ...] = ()


def _bound(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _open_fields(doc: Mapping) -> dict:
    """The version-2 fields of the open models (absent from version 1, which is closed only)."""
    model = doc.get("model")
    service = doc.get("service_time_us") or {}
    lag = doc.get("schedule_lag_us") or {}
    flow = doc.get("flow") or {}
    is_open = model in ("open", "partly-open")
    return {
        "offered_rps": _float_or_none(doc.get("offered_rps")) if is_open else None,
        "service_p50_us": _float_or_none(service.get("p50")),
        "service_p99_us": _float_or_none(service.get("p99")),
        "service_p999_us": _float_or_none(service.get("p99.9")),
        "schedule_lag_p99_us": _float_or_none(lag.get("p99")) if is_open else None,
        "sent_late": int(flow["sent_late"]) if is_open and "sent_late" in flow else None,
        "never_started": int(flow["never_started"]) if is_open and "never_started" in flow else None,
    }


def _measurement(doc: Mapping) -> Measurement:
    # The open models' latency is the response time from the planned send time; the engine's
    # `latency_us` is that for them (and the service time for the closed model).
    lat = doc["response_time_us"] if doc.get("latency_basis") == "planned" else doc["latency_us"]
    errors = doc.get("errors", {})
    return Measurement(
        duration_s=float(doc["duration_s"]),
        requests=int(doc["requests"]),
        throughput_rps=float(doc["throughput_rps"]),
        p50_us=float(lat["p50"]),
        p90_us=float(lat["p90"]),
        p99_us=float(lat["p99"]),
        p999_us=float(lat["p99.9"]),
        max_us=float(lat["max"]),
        mean_us=float(lat["mean"]),
        errors=int(errors.get("total", 0)),
        errors_by_class={str(k): int(v) for k, v in errors.get("by_class", {}).items()},
        generator_bound=_bound(doc.get("generator", {}).get("bound")),
        **_open_fields(doc),
    )


def _classes(doc: Mapping) -> tuple[ClassResult, ...]:
    mix = doc.get("mix")
    if not isinstance(mix, list):
        return ()
    planned = doc.get("latency_basis") == "planned"
    out = []
    for c in mix:
        lat = c["response_time_us"] if planned else c["service_time_us"]
        out.append(
            ClassResult(
                index=int(c["class"]),
                path=str(c["path"]),
                weight=float(c["weight"]),
                share=float(c["share"]),
                sent=int(c["sent"]),
                responses=int(c["responses"]),
                requests=int(c["requests"]),
                errors=int(c["errors"]["total"]),
                throughput_rps=float(c["throughput_rps"]),
                p50_us=_float_or_none(lat.get("p50")),
                p90_us=_float_or_none(lat.get("p90")),
                p99_us=_float_or_none(lat.get("p99")),
                p999_us=_float_or_none(lat.get("p99.9")),
                mean_us=_float_or_none(lat.get("mean")),
                service_p99_us=_float_or_none(c["service_time_us"].get("p99")),
            )
        )
    return tuple(out)


def _timeline(doc: Mapping) -> tuple[TimelinePoint, ...]:
    points = []
    for entry in doc.get("timeline") or ():
        if not isinstance(entry, Mapping):
            continue
        second, length, rate = (entry.get(k) for k in ("second", "length_s", "throughput_rps"))
        if all(_float_or_none(v) is not None for v in (second, length, rate)):
            points.append(TimelinePoint(int(second), float(length), float(rate)))  # type: ignore[arg-type]
    return tuple(points)


def _completions(count: int, stats: object) -> Completions | None:
    """``count`` completions with the mean, stdev and max (µs) of ``stats``; None if absent."""
    if not isinstance(stats, Mapping):
        return None
    mean, stdev, top = (_float_or_none(stats.get(k)) for k in ("mean", "stdev", "max"))
    if mean is None or stdev is None or top is None:
        return None
    return Completions(count, mean * 1e-6, stdev * 1e-6, top * 1e-6)


def _think(doc: Mapping) -> Think | None:
    pacing = doc.get("pacing") or {}
    think = pacing.get("think_time") if isinstance(pacing, Mapping) else None
    if not isinstance(think, Mapping):
        # Version 1 knew only a constant think time.
        z = _float_or_none(doc.get("think_time_s"))
        return Think.constant(z) if z is not None else None
    mean = _float_or_none(think.get("mean_s"))
    low, high = _float_or_none(think.get("min_s")), _float_or_none(think.get("max_s"))
    if mean is None:
        return None
    distribution = think.get("distribution")
    if distribution == "uniform" and low is not None and high is not None:
        return Think.uniform(low, high)
    if distribution == "exponential":
        return Think.exponential(mean)
    return Think.constant(mean) if distribution == "constant" else None


def _littles_law(doc: Mapping, m: Measurement) -> LittlesLaw | None:
    """Little's law on a closed-model window. Every completion occupied its user: 2xx responses
    with their latency, other statuses with theirs (``latency_non2xx_us``), timeouts with the
    request timeout (the time the generator waited before giving up). Errors without a
    response time (connect, read, closed...) are not in R: a row with many of them is flagged,
    and says why in its errors. Not defined: open and partly-open models (their population is
    not measured), a number of users that varies over the window, pipelined connections (more
    than one request per user in flight)."""
    pacing: Mapping = doc["pacing"] if isinstance(doc.get("pacing"), Mapping) else {}
    if doc.get("model", "closed") != "closed" or pacing.get("users_schedule") or int(doc.get("pipeline", 1) or 1) > 1:
        return None
    users, think = doc.get("connections"), _think(doc)
    headline = _completions(m.requests, doc.get("latency_us"))
    planned = _completions(m.requests, doc.get("response_time_us"))
    if not isinstance(users, int) or users < 1 or think is None or headline is None or m.duration_s <= 0:
        return None
    non2xx = doc.get("latency_non2xx_us") or {}
    other = _completions(int(non2xx.get("count") or 0), non2xx) if isinstance(non2xx, Mapping) else None
    timeout_s = _float_or_none(doc.get("request_timeout_s"))
    timeouts = int(m.errors_by_class.get("timeout", 0))
    waited = Completions(timeouts, timeout_s, 0.0, timeout_s) if timeouts and timeout_s is not None else None
    for extra in (other, waited):
        if extra is not None and extra.count > 0:
            headline = headline.plus(extra)
            planned = planned.plus(extra) if planned is not None else None
    if headline.count < 1 or not all(math.isfinite(v) for v in (headline.mean_s, headline.stdev_s, headline.max_s)):
        return None
    boundary = _float_or_none(doc.get("closed_boundary_s"))
    return check_closed_window(users, m.duration_s, headline, think, planned, boundary)


def read_summary(path: Path) -> LoadSummary:
    """The summary at ``path``; its HDR log's path made absolute."""
    try:
        doc = json.loads(documents.read_text(path))
    except FileNotFoundError:
        raise SummaryError(f"the load generator wrote no summary at {path}") from None
    except OSError as e:
        raise SummaryError(f"unreadable load summary {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SummaryError(f"unreadable load summary {path}: {e}") from None
    summary = parse_summary(doc, where=str(path))
    if summary.hdr_log is not None and not summary.hdr_log.is_absolute():
        summary = replace(summary, hdr_log=Path(path).parent / summary.hdr_log)
    return summary


def parse_summary(doc: object, where: str = "load summary") -> LoadSummary:
    """A summary document already parsed from JSON; ``where`` names it in errors."""
    if not isinstance(doc, Mapping) or doc.get("schema") != SCHEMA or doc.get("schema_version") not in SCHEMA_VERSIONS:
        found = (doc.get("schema"), doc.get("schema_version")) if isinstance(doc, Mapping) else (type(doc).__name__, None)
        raise SummaryError(
            f"{where}: schema {found[0]!r} schema_version {found[1]!r}; expected {SCHEMA!r} schema_version "
            f"{' or '.join(map(str, SCHEMA_VERSIONS))}"
        )
    if doc.get("requests") == 0:
        # Valid, but its latency statistics are null: nothing to measure (a starved generator,
        # a server that answered nothing in time).
        errors: Mapping = doc["errors"] if isinstance(doc.get("errors"), Mapping) else {}
        by_class = {k: v for k, v in (errors.get("by_class") or {}).items() if v}
        raise SummaryError(f"{where}: no request completed in the measurement window (errors: {by_class or errors.get('total', 0)})")
    try:
        measurement = _measurement(doc)
        classes = _classes(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise SummaryError(f"{where} lacks or garbles field {e}") from None
    log, model = doc.get("hdr_log"), doc.get("model")
    return LoadSummary(measurement, model if isinstance(model, str) else None,
                       Path(log) if isinstance(log, str) and log else None, _timeline(doc), _littles_law(doc, measurement),
                       classes)
