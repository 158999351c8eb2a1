"""memtier_benchmark ``--json-out-file`` results.

memtier writes, under ``"ALL STATS"``, one object per command type (``Sets``, ``Gets``, ``Waits``,
...) and ``Totals``; each has ``"Percentile Latencies"`` with keys like ``"p99.00"`` or
``"p99.000"`` (milliseconds) and, since version 2.0, ``"Histogram log format" -> "Compressed
Histogram"``: the full HdrHistogram (microseconds, 3 significant digits) encoded as in HdrHistogram
logs (RedisLabs/memtier_benchmark, ``run_stats.cpp``, ``result_print_to_json``). The histogram
gives exact-count samples; the printed percentiles are kept for comparison.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from archlab import documents
from archlab.latency.errors import LatencyError
from archlab.latency.readers.hdr import decode_histogram, histogram_to_samples
from archlab.latency.readers.text import PercentileReport

_PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)$")


def read_memtier_json(path: str | Path, *, section: str = "Totals", bucket_value: str = "median") -> PercentileReport:
    """The ``section`` (Totals, Gets, Sets, ...) of a memtier JSON result; ``samples`` (in us) when
    the file carries the compressed histogram."""
    path = Path(path)
    try:
        document = json.loads(documents.read_text(path))
        stats = document["ALL STATS"]
    except FileNotFoundError:
        raise LatencyError(f"{path}: expected a memtier JSON result, got no such file") from None
    except OSError as error:
        raise LatencyError(f"{path}: expected a readable memtier JSON result, got {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:  # ValueError: not UTF-8, or not JSON
        raise LatencyError(f"{path}: expected a memtier JSON result (with \"ALL STATS\"), got {_clip(str(error))}") from None
    if not isinstance(stats, dict):
        raise LatencyError(f"{path}: expected a memtier JSON result (\"ALL STATS\" a table), got {type(stats).__name__}")
    if section not in stats:
        sections = [k for k, v in stats.items() if isinstance(v, dict) and "Percentile Latencies" in v]
        raise LatencyError(f"section: expected one of {sections}, got {section!r}")
    block = stats[section]
    printed = block.get("Percentile Latencies", {}) if isinstance(block, dict) else None
    if not isinstance(printed, dict):
        raise LatencyError(f"{path}: expected \"ALL STATS\".{section} to hold \"Percentile Latencies\", got {_clip(str(block))}")
    where = f"{path}: \"ALL STATS\".{section}"
    percentiles = {float(m.group(1)): _ms(v, f"{where}.{k}") * 1000.0 for k, v in printed.items()
                   if (m := _PERCENTILE_KEY.match(k))}
    histogram_format = printed.get("Histogram log format", {})
    encoded = histogram_format.get("Compressed Histogram") if isinstance(histogram_format, dict) else None
    if encoded is not None and not isinstance(encoded, str):
        raise LatencyError(f"{where}: expected an encoded HdrHistogram string, got {_clip(str(encoded))}")
    samples = histogram_to_samples(decode_histogram(encoded), "us", bucket_value) if encoded else None
    mean = block.get("Average Latency", block.get("Latency"))
    count = block.get("Count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, float)) or count < 0):
        raise LatencyError(f"{where}.Count: expected a number of requests, got {_clip(str(count))}")
    return PercentileReport("us", dict(sorted(percentiles.items())),
                            None if mean is None else _ms(mean, f"{where}.Average Latency") * 1000.0, None,
                            _ms(block["Max Latency"], f"{where}.Max Latency") * 1000.0 if "Max Latency" in block else None,
                            int(count) if count is not None else None, samples)


def _ms(value: object, where: str) -> float:
    """A latency memtier printed (ms), as a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise LatencyError(f"{where}: expected a latency in ms (a number >= 0), got {_clip(str(value))}")
    return float(value)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
