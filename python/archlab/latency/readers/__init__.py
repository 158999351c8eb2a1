"""Readers turning latency files into :class:`~archlab.latency.samples.Samples` (exact counts).

One function per format, and :func:`read_file`, which picks the format from the file name and
first bytes (or ``format=``) and says what it left out (:class:`Reading`): ``jtl`` (JMeter results,
CSV with or without a header line, XML, or Parquet converted from CSV; failed samples left out
unless ``failed`` says otherwise), ``hdr-log`` (HdrHistogram interval logs, also archlab's own),
``load-summary`` (``archlab-engine load --json`` summaries, read through the HDR log they name;
stored runs: :func:`read_run_cell`), ``percentiles`` (``wrk --latency`` output, whose few
percentiles are a :class:`PercentileReport` and not a distribution, wrk2's spectrum and HdrHistogram
``.hgrm`` percentile distributions, in the unit the file was printed in), ``memtier``
(memtier_benchmark JSON), and ``column`` (one numeric column of CSV/Parquet files, with its unit).
:func:`read` is :func:`read_file` for callers who want samples only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from archlab.latency.errors import LatencyError, ParameterError, check_choice
from archlab.latency.readers.archlab import RunCell, is_load_summary, read_cell_rows, read_load_summary, read_run_cell, run_cells
from archlab.latency.readers.columnar import Trim, convert_to_parquet, read_column
from archlab.latency.readers.hdr import histogram_to_samples, read_hdr_log
from archlab.latency.readers.jtl import (FAILED, JMETER5_DEFAULT_COLUMNS, JMETER213_DEFAULT_COLUMNS, JtlRows, nonempty, read_jtl,
                                         read_jtl_rows)
from archlab.latency.readers.memtier import read_memtier_json
from archlab.latency.readers.text import PercentileReport, parse_percentile_text, read_percentile_text, report_text
from archlab.latency.samples import UNIT_SECONDS, Samples

FORMATS = ("auto", "jtl", "hdr-log", "load-summary", "percentiles", "memtier", "column")

__all__ = ["FAILED", "FORMATS", "JMETER213_DEFAULT_COLUMNS", "JMETER5_DEFAULT_COLUMNS", "JtlRows", "PercentileReport",
           "Reading", "RunCell", "Trim", "convert_to_parquet", "detect_format", "histogram_to_samples",
           "parse_percentile_text", "read", "read_column", "read_file", "read_hdr_log", "read_jtl", "read_jtl_rows",
           "read_cell_rows", "read_load_summary", "read_memtier_json", "read_percentile_text", "read_run_cell", "run_cells"]


def detect_format(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise LatencyError(f"{path}: expected a latency file, got no such file")
    if path.is_dir():
        raise LatencyError(f"{path}: expected a latency file (or an archlab run directory, with its manifest.json), "
                           "got a directory")
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
    if head.lstrip("\ufeff \t\r\n").startswith("<") and "<testResults" in head:
        return "jtl"  # JMeter's XML results
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


@dataclass(frozen=True)
class Reading:
    """One file read: its samples (None when it holds only printed percentiles, then in
    ``report``), what the reader left out of them, in words, and the format it was read as."""

    format: str
    samples: Samples | None
    notes: tuple[str, ...] = ()
    report: PercentileReport | None = None


# Markers of wrk2's output, whose percentile spectrum is printed in milliseconds.
_WRK2_MARKERS = ("Detailed Percentile spectrum", "HdrHistogram - Recorded Latency")


def read_file(path: str | Path, format: str = "auto", *, column: str | None = None, unit: str | None = None,
              measure: str = "elapsed", warmup_s: float = 0.0, cooldown_s: float = 0.0, section: str = "Totals",
              failed: str = "exclude", labels: Sequence[str] | None = None,
              jtl_columns: Sequence[str] | None = None) -> Reading:
    """Read ``path`` as samples, saying what was left out. ``unit`` is the unit of the values in
    the file: required for ``column``; an HDR log's recording unit (default ns); a percentile
    distribution's (``.hgrm``: HdrHistogram prints the recorded values divided by its
    outputValueUnitScalingRatio, and the file does not say which; wrk2's is ms). JTL is always
    milliseconds, memtier microseconds, wrk's values carry their unit."""
    check_choice("format", format, FORMATS)
    if unit is not None:
        check_choice("unit", unit, UNIT_SECONDS)
    chosen = detect_format(path) if format == "auto" else format
    if Path(path).is_dir():
        raise LatencyError(f"{path}: expected a latency file, got a directory")
    if chosen != "jtl" and (failed != "exclude" or labels or jtl_columns):
        raise ParameterError("failed/labels/jtl_columns", f"only for JMeter results, not for {chosen}",
                             (failed, labels, jtl_columns))
    if chosen == "jtl":
        found = read_jtl_rows(path, measure=measure, failed=failed, labels=labels, warmup_s=warmup_s,
                              cooldown_s=cooldown_s, columns=jtl_columns)
        return Reading(chosen, nonempty(found, path), tuple(found.notes(failed)))
    if chosen == "hdr-log":
        return Reading(chosen, read_hdr_log(path, unit=unit or "ns", warmup_s=warmup_s, cooldown_s=cooldown_s))
    if chosen == "load-summary":
        samples = read_load_summary(path, warmup_s=warmup_s, cooldown_s=cooldown_s)
        from archlab.store.summary import read_summary  # the one reader of load summaries

        errors = read_summary(Path(path)).measurement.errors
        notes = (f"{errors:,} failed requests are not in the HDR log (the load generator records 2xx responses only; "
                 "the summary's errors.by_class counts them)",) if errors else ()
        return Reading(chosen, samples, notes)
    if chosen == "column":
        if column is None or unit is None:
            raise ParameterError("column/unit", "a column name and its unit for a plain CSV/Parquet file",
                                 (column, unit))
        if warmup_s or cooldown_s:
            raise ParameterError("warmup_s/cooldown_s", "0 for plain columns (use read_column with a Trim)",
                                 (warmup_s, cooldown_s))
        return Reading(chosen, read_column(path, column, unit))
    if chosen == "memtier":
        report = read_memtier_json(path, section=section)
    elif chosen == "percentiles":
        report = _percentiles(Path(path), unit)
    else:
        raise LatencyError(f"{path}: expected a latency file of a known format, got one it cannot tell; name the "
                           f"format (--format, format=): one of {', '.join(FORMATS[1:])}")
    return Reading(chosen, report.samples, report=report)


def _percentiles(path: Path, unit: str | None) -> PercentileReport:
    text = report_text(path)
    spectrum_unit = "ms" if any(marker in text for marker in _WRK2_MARKERS) else unit
    try:
        report = parse_percentile_text(text, unit=unit or spectrum_unit or "ms", spectrum_unit=spectrum_unit or "ms")
    except LatencyError as error:
        raise LatencyError(f"{path}: {error}") from None
    if report.samples is not None and spectrum_unit is None:
        raise LatencyError(f"{path}: expected the unit of its values (HdrHistogram prints them divided by "
                           "outputValueUnitScalingRatio, and the file does not say by how much), got none: "
                           "give --unit ns, us, ms or s")
    return report


def read(path: str | Path, format: str = "auto", *, column: str | None = None, unit: str | None = None,
         measure: str = "elapsed", warmup_s: float = 0.0, cooldown_s: float = 0.0,
         section: str = "Totals") -> Samples:
    """:func:`read_file`'s samples; a file of printed percentiles only is an error."""
    reading = read_file(path, format, column=column, unit=unit, measure=measure, warmup_s=warmup_s,
                        cooldown_s=cooldown_s, section=section)
    if reading.samples is None:
        report = reading.report
        raise LatencyError(f"{path}: holds only a few percentiles ({sorted(report.percentiles) if report else []}), "
                           "not a distribution; use read_file (or read_percentile_text/read_memtier_json) for them")
    return reading.samples
