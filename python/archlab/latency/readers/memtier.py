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
import re
from pathlib import Path

from archlab.latency.errors import LatencyError
from archlab.latency.readers.hdr import decode_histogram, histogram_to_samples
from archlab.latency.readers.text import PercentileReport

_PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)$")


def read_memtier_json(path: str | Path, *, section: str = "Totals", bucket_value: str = "median") -> PercentileReport:
    """The ``section`` (Totals, Gets, Sets, ...) of a memtier JSON result; ``samples`` (in us) when
    the file carries the compressed histogram."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        stats = document["ALL STATS"]
    except FileNotFoundError:
        raise LatencyError(f"path: no such file: {path}") from None
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise LatencyError(f"{path}: not a memtier JSON result ({error})") from error
    if section not in stats:
        sections = [k for k, v in stats.items() if isinstance(v, dict) and "Percentile Latencies" in v]
        raise LatencyError(f"section: expected one of {sections}, got {section!r}")
    block = stats[section]
    printed = block.get("Percentile Latencies", {})
    percentiles = {float(m.group(1)): float(v) * 1000.0 for k, v in printed.items()
                   if (m := _PERCENTILE_KEY.match(k))}
    encoded = printed.get("Histogram log format", {}).get("Compressed Histogram")
    samples = histogram_to_samples(decode_histogram(encoded), "us", bucket_value) if encoded else None
    mean = block.get("Average Latency", block.get("Latency"))
    return PercentileReport("us", dict(sorted(percentiles.items())), None if mean is None else float(mean) * 1000.0,
                            None, float(block["Max Latency"]) * 1000.0 if "Max Latency" in block else None,
                            int(block["Count"]) if "Count" in block else None, samples)
