"""JMeter JTL results (CSV, or Parquet converted from it), read by header name, as exact counts.

The thesis script split lines on "," and took the third field from the end, which in JMeter 5's
default layout is ``Latency`` (time to first byte), not ``elapsed`` (the response time), and which
breaks on quoted labels with commas. Here the header names the columns, quoting is handled by
DuckDB's CSV reader, the default measure is ``elapsed``, failed samples are dropped unless asked,
and warm-up/cool-down are trimmed by ``timeStamp`` (epoch ms, the sample's start). A file written
with ``jmeter.save.saveservice.print_field_names=false`` has no header: give ``columns`` (its
layout), or rely on JMeter 5's default order, :data:`JMETER5_DEFAULT_COLUMNS`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from archlab.latency.errors import LatencyError, check_choice, check_nonnegative
from archlab.latency.readers.columnar import Trim, existing_paths, count_values, quote
from archlab.latency.samples import Samples

# JMeter 5.x default CSV layout (jmeter.properties defaults of jmeter.save.saveservice.*).
JMETER5_DEFAULT_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName",
                           "dataType", "success", "failureMessage", "bytes", "sentBytes", "grpThreads",
                           "allThreads", "URL", "Latency", "IdleTime", "Connect")
MEASURES = ("elapsed", "Latency", "Connect")


def _has_header(path: str) -> bool:
    if path.endswith(".parquet"):
        return True
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        first = next(csv.reader(handle), [])
    return "timeStamp" in first or "elapsed" in first


def read_jtl(paths: str | Path | Sequence[str | Path], *, measure: str = "elapsed", success_only: bool = True,
             labels: Sequence[str] | None = None, warmup_s: float = 0.0, cooldown_s: float = 0.0,
             columns: Sequence[str] | None = None, memory_limit: str | None = None) -> Samples:
    """Exact counts (ms) of ``measure`` over all rows of the JTL files that pass the filters."""
    check_choice("measure", measure, MEASURES)
    check_nonnegative("warmup_s", warmup_s)
    check_nonnegative("cooldown_s", cooldown_s)
    files = existing_paths(paths)
    with_header = [_has_header(f) for f in files]
    if len(set(with_header)) > 1:
        raise LatencyError("paths: mixes JTL files with and without a header line; read them separately")
    if with_header[0]:
        options = ", header = true"
    else:
        names = list(columns or JMETER5_DEFAULT_COLUMNS)
        options = ", header = false, names = [" + ", ".join("'" + n + "'" for n in names) + "]"
    conditions = ["TRUE"]
    if success_only:
        conditions.append("lower(CAST(success AS VARCHAR)) = 'true'")
    if labels:
        listed = ", ".join("'" + label.replace("'", "''") + "'" for label in labels)
        conditions.append(f"CAST(label AS VARCHAR) IN ({listed})")
    trim = Trim("timeStamp", warmup_s, cooldown_s, "ms") if (warmup_s or cooldown_s) else None
    return count_values(files, f"CAST({quote(measure)} AS DOUBLE)", "ms", where_sql=" AND ".join(conditions),
                        trim=trim, csv_options=options, memory_limit=memory_limit)
