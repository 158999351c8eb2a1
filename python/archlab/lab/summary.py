"""Reading the load generator's JSON summary (``archlab/load-summary``, versions 1 and 2) into a
:class:`~archlab.store.records.Measurement`. The schema name and version are checked first, so a
summary written by an incompatible engine is reported as such rather than misread."""

from __future__ import annotations

import json
from pathlib import Path

from archlab.errors import ArchlabError
from archlab.store.records import Measurement

SCHEMA = "archlab/load-summary"
# Version 2 added the open and partly-open models' fields and kept every field of version 1;
# the version-2 fields read here are optional, so a version-1 summary reads as before.
SCHEMA_VERSIONS = (1, 2)


class SummaryError(ArchlabError):
    """A load summary is missing, unreadable, or of a schema this archlab does not read."""


def _bound(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _open_fields(doc: dict) -> dict:
    """The version-2 fields of the open models (absent from version 1, which is closed only)."""
    model = doc.get("model")
    service = doc.get("service_time_us") or {}
    lag = doc.get("schedule_lag_us") or {}
    flow = doc.get("flow") or {}
    is_open = model in ("open", "partly-open")
    return {
        "load_model": model if isinstance(model, str) else None,
        "offered_rps": _float_or_none(doc.get("offered_rps")) if is_open else None,
        "service_p50_us": _float_or_none(service.get("p50")),
        "service_p99_us": _float_or_none(service.get("p99")),
        "service_p999_us": _float_or_none(service.get("p99.9")),
        "schedule_lag_p99_us": _float_or_none(lag.get("p99")) if is_open else None,
        "sent_late": int(flow["sent_late"]) if is_open and "sent_late" in flow else None,
        "never_started": int(flow["never_started"]) if is_open and "never_started" in flow else None,
    }


def read_summary(path: Path) -> Measurement:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise SummaryError(f"the load generator wrote no summary at {path.name}") from None
    except (OSError, json.JSONDecodeError) as e:
        raise SummaryError(f"unreadable load summary {path.name}: {e}") from None
    return parse_summary(doc)


def parse_summary(doc: dict) -> Measurement:
    if doc.get("schema") != SCHEMA or doc.get("schema_version") not in SCHEMA_VERSIONS:
        raise SummaryError(
            f"load summary has schema {doc.get('schema')!r} version {doc.get('schema_version')!r}; "
            f"expected {SCHEMA!r} version {' or '.join(map(str, SCHEMA_VERSIONS))}"
        )
    try:
        # The open models' latency is the response time from the planned send time; the
        # engine's `latency_us` is that for them (and the service time for the closed model).
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
    except (KeyError, TypeError, ValueError) as e:
        raise SummaryError(f"load summary lacks or garbles field {e}") from None
