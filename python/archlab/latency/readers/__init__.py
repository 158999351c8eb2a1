"""Readers turning latency files into :class:`~archlab.latency.samples.Samples` (exact counts).

One function per format, and :func:`read`, which picks the format from the file name and first
bytes (or ``format=``): ``jtl`` (JMeter CSV results or Parquet converted from them), ``hdr-log``
(HdrHistogram interval logs, also archlab's own), ``load-summary`` (``archlab-engine load --json``
summaries, read through the HDR log they name; stored runs: :func:`read_run_cell`),
``percentiles`` (wrk/wrk2 output, ``.hgrm``; only a percentile spectrum can become samples), ``memtier`` (memtier_benchmark JSON), and
``column`` (one numeric column of CSV/Parquet files, with its unit).
"""

from __future__ import annotations

from pathlib import Path

from archlab.latency.errors import LatencyError, ParameterError, check_choice
from archlab.latency.readers.archlab import RunCell, is_load_summary, read_load_summary, read_run_cell, run_cells
from archlab.latency.readers.columnar import Trim, convert_to_parquet, read_column
from archlab.latency.readers.hdr import histogram_to_samples, read_hdr_log
from archlab.latency.readers.jtl import JMETER5_DEFAULT_COLUMNS, read_jtl
from archlab.latency.readers.memtier import read_memtier_json
from archlab.latency.readers.text import PercentileReport, parse_percentile_text, read_percentile_text
from archlab.latency.samples import Samples

FORMATS = ("auto", "jtl", "hdr-log", "load-summary", "percentiles", "memtier", "column")

__all__ = ["FORMATS", "JMETER5_DEFAULT_COLUMNS", "PercentileReport", "RunCell", "Trim", "convert_to_parquet", "detect_format",
           "histogram_to_samples", "parse_percentile_text", "read", "read_column", "read_hdr_log", "read_jtl",
           "read_load_summary", "read_memtier_json", "read_percentile_text", "read_run_cell", "run_cells"]


def detect_format(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise LatencyError(f"path: no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".jtl":
        return "jtl"
    if suffix in (".hlog", ".hdr"):
        return "hdr-log"
    if suffix == ".hgrm":
        return "percentiles"
    with open(path, "rb") as handle:
        head = handle.read(4096).decode("utf-8", errors="replace")
    if suffix == ".json" or head.lstrip().startswith("{"):
        if is_load_summary(path):
            return "load-summary"
        return "memtier" if '"ALL STATS"' in head else "unknown"
    first_line = head.splitlines()[0] if head else ""
    if "timeStamp" in first_line and "elapsed" in first_line:
        return "jtl"
    if "HISTF" in head or '"StartTimestamp"' in head or head.startswith("#[StartTime"):
        return "hdr-log"
    if "Latency Distribution" in head or "Percentile" in head:
        return "percentiles"
    if suffix in (".csv", ".parquet"):
        return "column"
    return "unknown"


def read(path: str | Path, format: str = "auto", *, column: str | None = None, unit: str | None = None,
         measure: str = "elapsed", warmup_s: float = 0.0, cooldown_s: float = 0.0,
         section: str = "Totals") -> Samples:
    """Read ``path`` as samples. ``unit`` is required for ``column`` and is the recording unit of
    an HDR log (default ns); JTL is always milliseconds, memtier microseconds."""
    check_choice("format", format, FORMATS)
    chosen = detect_format(path) if format == "auto" else format
    if chosen == "jtl":
        return read_jtl(path, measure=measure, warmup_s=warmup_s, cooldown_s=cooldown_s)
    if chosen == "hdr-log":
        return read_hdr_log(path, unit=unit or "ns", warmup_s=warmup_s, cooldown_s=cooldown_s)
    if chosen == "load-summary":
        return read_load_summary(path, warmup_s=warmup_s, cooldown_s=cooldown_s)
    if chosen == "column":
        if column is None or unit is None:
            raise ParameterError("column/unit", "a column name and its unit for a plain CSV/Parquet file",
                                 (column, unit))
        time_trim = None
        if warmup_s or cooldown_s:
            raise ParameterError("warmup_s/cooldown_s", "0 for plain columns (use read_column with a Trim)",
                                 (warmup_s, cooldown_s))
        return read_column(path, column, unit, trim=time_trim)
    report = (read_memtier_json(path, section=section) if chosen == "memtier"
              else read_percentile_text(path, unit=unit or "ms") if chosen == "percentiles" else None)
    if report is None:
        raise LatencyError(f"{path}: cannot tell the format; pass format= one of {', '.join(FORMATS[1:])}")
    if report.samples is None:
        raise LatencyError(f"{path}: holds only a few percentiles ({sorted(report.percentiles)}), not a "
                           "distribution; use read_percentile_text/read_memtier_json to get them")
    return report.samples
