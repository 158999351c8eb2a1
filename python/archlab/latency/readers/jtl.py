"""JMeter results (JTL) as exact counts of one measure, with an account of every row left out.

JMeter writes its results as CSV or XML (``jmeter.save.saveservice.output_format``). Both are
read here, and so is Parquet converted from the CSV (:func:`~archlab.latency.readers.columnar.convert_to_parquet`):

* CSV with a header line: columns by name. CSV without one (``print_field_names=false``, the
  default of JMeter 2.x): the layout is recognised by its number of fields when it is one JMeter
  writes by default -- :data:`JMETER5_DEFAULT_COLUMNS` (17 fields, JMeter 5.x's
  ``bin/jmeter.properties``) or :data:`JMETER213_DEFAULT_COLUMNS` (12 fields, JMeter 2.13's) --
  else ``columns`` names it. The rows are counted by the Rust reader of ``crates/jtl`` (through
  ``archlab._native.jtl_counts``): one pass over the file in fixed blocks, splitting each row only
  as far as the columns needed, straight into exact counts, so memory stays flat whatever the
  file's size. ``reader="duckdb"`` counts them in DuckDB instead (every field read as text and
  converted in SQL), the reader the Rust one is checked against row for row. Either way quoting
  (labels with commas, quotes, line breaks) is RFC 4180's and a row that is not JMeter's is
  counted, not fatal.
* XML: the attributes of the top-level samples (``<httpSample t= lt= ct= ts= s= lb=>``, or
  ``<sample>``; sub-results nested inside a sample are part of it, as JMeter's CSV leaves them
  out): ``t`` is elapsed, ``lt`` Latency, ``ct`` Connect.
* A file cut by a killed JMeter: the CSV's last line lacks its newline, the XML its
  ``</testResults>``. Only complete rows are read (a cut CSV through a temporary copy of its
  complete lines, as DuckDB cannot stop before a file's end) and the cut row is counted.

The thesis script split lines on "," and took the third field from the end, which in JMeter 5's
default layout is ``Latency`` (time to first byte), not ``elapsed``, and which breaks on quoted
labels with commas. Here the measure is named (default ``elapsed``, the response time), failed
samples are excluded unless ``failed`` says otherwise, ``labels`` selects samplers, and
warm-up/cool-down are trimmed by ``timeStamp`` (epoch ms, the sample's start) measured on all
rows of each file. :func:`read_jtl_rows` says what each of these left out (:class:`JtlRows`).
"""

from __future__ import annotations

import csv
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import numpy as np

from archlab.latency.errors import LatencyError, check_choice, check_nonnegative
from archlab.latency.readers.columnar import existing_paths, quote
from archlab.latency.samples import Samples

# JMeter 5.x default CSV layout: the jmeter.save.saveservice.* defaults of bin/jmeter.properties
# (5.2 to 5.6.3: failure message, sent bytes, URL, idle time and connect time on) in the order
# CSVSaveService writes them.
JMETER5_DEFAULT_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName",
                           "dataType", "success", "failureMessage", "bytes", "sentBytes", "grpThreads",
                           "allThreads", "URL", "Latency", "IdleTime", "Connect")
# JMeter 2.13 default CSV layout (Debian's /usr/share/jmeter/bin/jmeter.properties: no failure
# message, URL, idle or connect time; sent bytes did not exist yet), the header of
# tests/latency/data/jmeter213_default.jtl.
JMETER213_DEFAULT_COLUMNS = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName",
                             "dataType", "success", "bytes", "grpThreads", "allThreads", "Latency")
DEFAULT_LAYOUTS = {len(JMETER5_DEFAULT_COLUMNS): ("JMeter 5.x default layout", JMETER5_DEFAULT_COLUMNS),
                   len(JMETER213_DEFAULT_COLUMNS): ("JMeter 2.13 default layout", JMETER213_DEFAULT_COLUMNS)}
MEASURES = ("elapsed", "Latency", "Connect")
SOURCE_COLUMN = "source_file"  # convert_to_parquet's column naming each row's original file
XML_ATTRIBUTES = {"elapsed": "t", "Latency": "lt", "Connect": "ct"}
# Which samples count: failed ones are left out by default, as a failed sample's time is not a
# response time of the service (an error page, a timeout, a refused connection).
FAILED = ("exclude", "include", "only")
# Who counts the rows of a CSV file: the Rust scanner, or DuckDB (see the module's docstring).
CSV_READERS = ("native", "duckdb")


@dataclass(frozen=True)
class JtlRows:
    """What a read of JTL files kept (``samples``, None when nothing) and, in rows, what it left
    out and why."""

    samples: Samples | None
    rows: int  # complete rows read
    failed: int = 0  # left out by ``failed`` (failed samples, or successful ones with failed="only")
    other_labels: int = 0  # samplers not among ``labels``
    trimmed: int = 0  # in the warm-up or cool-down
    malformed: int = 0  # not a row of the layout, or its measure (or timeStamp, when trimming) not a number
    cut: int = 0  # the last row, cut short by a killed JMeter
    unfinished: int = 0  # files that end before their end (an XML without </testResults>), cut rows or not
    layouts: tuple[str, ...] = ()
    problems: tuple[str, ...] = field(default=())  # the first malformed row of each file, in words

    @property
    def kept(self) -> int:
        return 0 if self.samples is None else self.samples.n

    def notes(self, failed: str = "exclude") -> list[str]:
        """One line per kind of row left out, saying how to count them."""
        notes = []
        if self.failed:
            what = "successful samples left out (--failed only)" if failed == "only" else \
                "failed samples left out (--failed include counts them)"
            notes.append(f"{self.failed:,} {what}")
        if self.other_labels:
            notes.append(f"{self.other_labels:,} samples of other labels left out (--label)")
        if self.trimmed:
            notes.append(f"{self.trimmed:,} samples in the warm-up or cool-down left out")
        if self.cut:
            notes.append(f"{self.cut:,} row cut short at the end of the file dropped (a killed JMeter)")
        elif self.unfinished:
            notes.append(f"{self.unfinished:,} file ends early (a killed JMeter), after a complete sample")
        if self.malformed:
            notes.append(f"{self.malformed:,} malformed rows dropped (first: {self.problems[0]})")
        return notes

    def merge(self, other: JtlRows) -> JtlRows:
        samples = self.samples if other.samples is None else other.samples if self.samples is None else \
            self.samples.merge(other.samples)
        return JtlRows(samples, self.rows + other.rows, self.failed + other.failed,
                       self.other_labels + other.other_labels, self.trimmed + other.trimmed,
                       self.malformed + other.malformed, self.cut + other.cut, self.unfinished + other.unfinished,
                       tuple(dict.fromkeys(self.layouts + other.layouts)), self.problems + other.problems)


def read_jtl(paths: str | Path | Sequence[str | Path], *, measure: str = "elapsed", success_only: bool = True,
             labels: Sequence[str] | None = None, warmup_s: float = 0.0, cooldown_s: float = 0.0,
             columns: Sequence[str] | None = None, memory_limit: str | None = None, reader: str = "native") -> Samples:
    """Exact counts (ms) of ``measure`` over all rows of the JTL files that pass the filters;
    :func:`read_jtl_rows` also says what was left out."""
    found = read_jtl_rows(paths, measure=measure, failed="exclude" if success_only else "include", labels=labels,
                          warmup_s=warmup_s, cooldown_s=cooldown_s, columns=columns, memory_limit=memory_limit,
                          reader=reader)
    return nonempty(found, paths)


def nonempty(found: JtlRows, paths: object) -> Samples:
    """``found.samples``, or an error saying why no sample is left."""
    if found.samples is not None:
        return found.samples
    why = "; ".join(found.notes()) or "no complete row"
    raise LatencyError(f"{_names(paths)}: no sample left of {found.rows:,} rows ({why})")


def read_jtl_rows(paths: str | Path | Sequence[str | Path], *, measure: str = "elapsed", failed: str = "exclude",
                  labels: Sequence[str] | None = None, warmup_s: float = 0.0, cooldown_s: float = 0.0,
                  columns: Sequence[str] | None = None, memory_limit: str | None = None,
                  reader: str = "native") -> JtlRows:
    """:func:`read_jtl` of each file, merged exactly, with the account of rows left out.
    ``reader`` counts CSV rows in Rust (``native``) or in DuckDB (``duckdb``, which
    ``memory_limit`` bounds)."""
    check_choice("measure", measure, MEASURES)
    check_choice("failed", failed, FAILED)
    check_choice("reader", reader, CSV_READERS)
    check_nonnegative("warmup_s", warmup_s)
    check_nonnegative("cooldown_s", cooldown_s)
    query = _Query(measure, failed, tuple(labels) if labels else None, warmup_s, cooldown_s, memory_limit, reader)
    total = None
    for path in existing_paths(paths):
        part = _read_one(Path(path), query, tuple(columns) if columns else None)
        total = part if total is None else total.merge(part)
    assert total is not None  # existing_paths refuses an empty list
    return total


@dataclass(frozen=True)
class _Query:
    measure: str
    failed: str
    labels: tuple[str, ...] | None
    warmup_s: float
    cooldown_s: float
    memory_limit: str | None
    reader: str = "native"


def _names(paths: object) -> str:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)  # type: ignore[call-overload]
    return ", ".join(str(p) for p in items)


def _read_one(path: Path, query: _Query, columns: tuple[str, ...] | None) -> JtlRows:
    if path.is_dir():
        raise LatencyError(f"{path}: expected a JTL file, got a directory")
    if path.suffix.lower() == ".parquet":
        return _read_table(path, f"read_parquet('{_text(path)}')", None, query, "Parquet")
    with open(path, "rb") as handle:
        head = handle.read(65536)
    if not head.strip():
        raise LatencyError(f"{path}: expected JMeter results (CSV or XML), got an empty file")
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        return _read_xml(path, query)
    return _read_csv(path, head, query, columns)


# --- CSV -----------------------------------------------------------------------------------------

def _read_csv(path: Path, head: bytes, query: _Query, columns: tuple[str, ...] | None) -> JtlRows:
    first_line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace").lstrip("\ufeff")
    try:
        first = next(csv.reader([first_line]), [])
    except csv.Error:  # e.g. a carriage return or NUL inside the line: not a CSV header or row
        first = [first_line]
    if "timeStamp" in first or "elapsed" in first:
        names, header, layout = tuple(first), True, "CSV with a header line"
    elif columns is not None:
        names, header, layout = columns, False, "CSV in the layout given"
    else:
        known = DEFAULT_LAYOUTS.get(len(first))
        if known is None or not first[0].strip().isdigit():
            raise LatencyError(
                f"{path}: expected JMeter CSV results, a header line naming timeStamp and elapsed or rows in JMeter's "
                f"default layout (5.x: 17 fields, 2.13: 12 fields, starting with the epoch-ms timeStamp); got a first "
                f"line of {len(first)} fields {_shown(first_line)} (--jtl-columns names another layout)")
        layout, names = known
        header = False
        layout = f"CSV without a header, {layout}"
    needed = [query.measure] + (["success"] if query.failed != "include" else []) + (["label"] if query.labels else []) \
        + (["timeStamp"] if query.warmup_s or query.cooldown_s else [])
    missing = [n for n in needed if n not in names]
    if missing:
        hint = " (JMeter writes Connect with jmeter.save.saveservice.connect_time=true)" if "Connect" in missing else ""
        raise LatencyError(f"{path}: expected the JMeter columns {', '.join(needed)}, got no {', '.join(missing)} among "
                           f"{_clip(', '.join(names), 200)}{hint}")
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(max(0, size - 1))
        complete = handle.read(1) == b"\n"
    if query.reader == "native":
        return _count_csv(path, names, header, layout, query, complete)
    with tempfile.TemporaryDirectory(prefix="archlab-jtl-") as scratch:
        source, cut = path, 0
        if not complete:  # a killed JMeter: read the complete lines only
            trimmed, cut = _complete_lines(path, Path(scratch) / path.name)
            if trimmed is None:
                return JtlRows(None, 0, cut=cut, unfinished=1, layouts=(layout,))
            source = trimmed
        listed = ", ".join(f"{quote(n)}: 'VARCHAR'" for n in names)
        table = (f"read_csv('{_text(source)}', header = {str(header).lower()}, columns = {{{listed}}}, auto_detect = false, "
                 "delim = ',', quote = '\"', escape = '\"', ignore_errors = true, store_rejects = true)")
        found = _read_table(path, table, names, query, layout)
    return replace(found, cut=found.cut + cut, unfinished=found.unfinished + (0 if complete else 1))


def _count_csv(path: Path, names: Sequence[str], header: bool, layout: str, query: _Query,
               complete: bool) -> JtlRows:
    """The rows of a CSV file counted by the Rust reader (only its complete lines when cut)."""
    from archlab import _native

    end = None if complete else _complete_end(path)
    if end == 0:
        return JtlRows(None, 0, cut=1, unfinished=1, layouts=(layout,))
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)
    trimming = bool(query.warmup_s or query.cooldown_s)
    try:
        found = _native.jtl_counts(
            str(path), len(names), header, index[query.measure],
            index["success"] if query.failed != "include" else None, query.failed,
            labels=(index["label"], list(query.labels)) if query.labels else None,
            trim=(index["timeStamp"], query.warmup_s * 1000.0, query.cooldown_s * 1000.0) if trimming else None,
            end=end)
    except OSError as error:
        raise LatencyError(f"{path}: expected a readable JTL file, got {error}") from None
    samples = Samples(np.array(found["values"], dtype=float), np.array(found["counts"], dtype=np.int64), "ms") \
        if found["values"] else None
    problems = (f"{path}: {found['first_problem']}",) if found["first_problem"] else ()
    if found["malformed"] and not problems:
        problems = (f"{path}: {found['malformed']:,} rows whose {query.measure} is not a number >= 0",)
    return JtlRows(samples, found["rows"], found["failed"], found["other_labels"], found["trimmed"], found["malformed"],
                   0 if complete else 1, 0 if complete else 1, (layout,), problems)


def _complete_end(path: Path) -> int:
    """The offset just past the last newline of ``path`` (0 when it has none)."""
    with open(path, "rb") as handle:
        end = handle.seek(0, 2)
        while end > 0:  # the last newline, found by reading backwards in blocks
            start = max(0, end - 65536)
            handle.seek(start)
            at = handle.read(end - start).rfind(b"\n")
            if at >= 0:
                return start + at + 1
            end = start
    return 0


def _complete_lines(path: Path, copy: Path) -> tuple[Path | None, int]:
    """A copy of ``path`` up to its last newline, and 1 if a partial row followed it."""
    end = _complete_end(path)
    if end == 0:
        return None, 1
    with open(path, "rb") as handle:
        with open(copy, "wb") as out:
            left = end
            while left:
                chunk = handle.read(min(left, 1 << 20))
                out.write(chunk)
                left -= len(chunk)
    return copy, 1


def _read_table(path: Path, table: str, names: tuple[str, ...] | None, query: _Query, layout: str) -> JtlRows:
    """Counts by category and value of one file, in one scan (two when trimming)."""
    value = f"TRY_CAST({quote(query.measure)} AS DOUBLE)"
    bad = "v IS NULL OR NOT isfinite(v) OR v < 0"
    conditions = [("malformed", bad)]
    trimming = bool(query.warmup_s or query.cooldown_s)
    if trimming:
        conditions.append(("malformed", "t IS NULL"))
    if query.labels:
        listed = ", ".join("'" + label.replace("'", "''") + "'" for label in query.labels)
        conditions.append(("other_labels", f"label IS NULL OR label NOT IN ({listed})"))
    if query.failed != "include":
        succeeded = "coalesce(lower(trim(ok)) = 'true', false)"
        conditions.append(("failed", f"NOT {succeeded}" if query.failed == "exclude" else succeeded))
    if trimming:
        warmup, cooldown = query.warmup_s * 1000.0, query.cooldown_s * 1000.0
        conditions.append(("trimmed", f"t < first + {warmup!r} OR t > last - {cooldown!r}"))
    category = "CASE " + " ".join(f"WHEN {c} THEN '{name}'" for name, c in conditions) + " ELSE 'kept' END"
    columns = [f"{value} AS v"]
    if query.failed != "include":
        columns.append("CAST(success AS VARCHAR) AS ok")
    if query.labels:
        columns.append("CAST(label AS VARCHAR) AS label")
    connection = duckdb.connect()
    try:
        if query.memory_limit:
            connection.execute(f"SET memory_limit = '{query.memory_limit}'")
        connection.execute("SET preserve_insertion_order = false")
        if trimming:
            # Windows are measured per run: per file, or per source_file of a Parquet file that
            # convert_to_parquet made from several.
            known = names or [r[0] for r in connection.execute(f"DESCRIBE SELECT * FROM {table}").fetchall()]
            run = quote(SOURCE_COLUMN) if SOURCE_COLUMN in known else "''"
            columns += ['TRY_CAST("timeStamp" AS DOUBLE) AS t', f"{run} AS run"]
        rows = f"rows AS (SELECT {', '.join(columns)} FROM {table})"
        if trimming:
            sql = (f"WITH {rows}, bounds AS (SELECT run, min(t) AS first, max(t) AS last FROM rows GROUP BY run) "
                   f"SELECT {category} AS c, v, count(*) FROM rows JOIN bounds USING (run) GROUP BY c, v")
        else:
            sql = f"WITH {rows} SELECT {category} AS c, v, count(*) FROM rows GROUP BY c, v"
        groups = connection.execute(sql).fetchall()
        rejected, problem = _rejected(connection) if names is not None else (0, None)
    except duckdb.Error as error:
        raise LatencyError(f"{path}: expected {layout}, got {_clip(str(error).splitlines()[0], 200)}") from None
    finally:
        connection.close()
    by_category: Counter[str] = Counter()
    kept_values, kept_counts = [], []
    for name, v, count in groups:
        by_category[name] += count
        if name == "kept":
            kept_values.append(v)
            kept_counts.append(count)
    problems = [problem] if problem else []
    if by_category["malformed"] and not problems:
        problems.append(f"{by_category['malformed']:,} rows whose {query.measure} is not a number >= 0")
    samples = Samples.from_counts(np.array(kept_values, dtype=float), np.array(kept_counts, dtype=np.int64), "ms") \
        if kept_counts else None
    n_rows = sum(by_category.values()) + rejected
    return JtlRows(samples, n_rows, by_category["failed"], by_category["other_labels"], by_category["trimmed"],
                   by_category["malformed"] + rejected, 0, 0, (layout,), tuple(f"{path}: {p}" for p in problems))


def _rejected(connection: duckdb.DuckDBPyConnection) -> tuple[int, str | None]:
    """Lines DuckDB's CSV reader refused (wrong number of fields, unclosed quote, bad UTF-8)."""
    row = connection.execute(
        "SELECT count(DISTINCT line), min(line), arg_min(error_message, line) FROM reject_errors").fetchone()
    assert row is not None  # an aggregate always gives one row
    count, line, message = row
    return int(count), (f"line {line}: {_clip(message.splitlines()[0], 120)}" if count else None)


def _shown(line: str) -> str:
    """A line quoted in an error, or said to be binary when it is not text."""
    if sum(not c.isprintable() for c in line) > len(line) // 10:
        return f"of {len(line)} characters that are not text (binary data?)"
    return repr(_clip(line))


def _text(path: Path) -> str:
    return str(path).replace("'", "''")


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


# --- XML -----------------------------------------------------------------------------------------

def _read_xml(path: Path, query: _Query) -> JtlRows:
    attribute = XML_ATTRIBUTES[query.measure]
    trimming = bool(query.warmup_s or query.cooldown_s)
    first_t, last_t = np.inf, -np.inf  # trimming windows are measured on every well-formed sample
    kept_t, kept_v = [], []
    counts: Counter[str] = Counter()
    first_problem = None
    seen, depth, ended = 0, 0, False
    parser: ET.XMLPullParser = ET.XMLPullParser(events=("start", "end"))

    def take(events) -> None:
        nonlocal seen, depth, ended, first_t, last_t, first_problem
        for event, element in events:
            if event == "start":
                depth += 1
                if depth == 1 and element.tag != "testResults":
                    raise LatencyError(f"{path}: expected JMeter XML results (<testResults>), got <{_clip(element.tag)}>")
                continue
            depth -= 1
            ended = depth == 0
            if depth != 1:
                continue
            seen += 1
            category, v, stamp = _xml_sample(element.attrib, attribute, query)
            element.clear()
            if category == "malformed":
                counts[category] += 1
                first_problem = first_problem or f"sample {seen}: {query.measure} {element.attrib.get(attribute)!r}"
                continue
            if trimming:
                first_t, last_t = min(first_t, stamp), max(last_t, stamp)
            if category:
                counts[category] += 1
            else:
                kept_t.append(stamp)
                kept_v.append(v)

    cut = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            try:
                parser.feed(chunk)
                take(parser.read_events())  # the parser reports its errors here
            except ET.ParseError as error:  # not well-formed before the end of the file
                line, column = error.position
                raise LatencyError(f"{path}:{line}:{column}: expected JMeter XML results, got {_clip(str(error), 120)}") from None
            except LookupError as error:  # an XML declaration naming an encoding Python does not know
                raise LatencyError(f"{path}: expected JMeter XML results, got {_clip(str(error), 120)}") from None
    try:
        parser.close()
        take(parser.read_events())
    except ET.ParseError:  # the document ended early: a killed JMeter
        cut = 1 if depth >= 2 or _ends_in_a_start_tag(path) else 0  # inside a sample, not between two
    samples, trimmed = None, 0
    v = np.array(kept_v, dtype=float)
    if trimming and v.size:
        stamps = np.array(kept_t, dtype=float)
        inside = (stamps >= first_t + query.warmup_s * 1000.0) & (stamps <= last_t - query.cooldown_s * 1000.0)
        trimmed = int((~inside).sum())
        v = v[inside]
    if v.size:
        samples = Samples.from_values(v, "ms")
    layout = "XML" if ended else "XML cut before </testResults>"
    problems = (f"{path}: {first_problem}",) if first_problem else ()
    return JtlRows(samples, seen, counts["failed"], counts["other_labels"], trimmed, counts["malformed"], cut,
                   0 if ended else 1, (layout,), problems)


def _ends_in_a_start_tag(path: Path) -> bool:
    """Whether the file ends inside a tag that opens an element (a sample cut in its attributes)."""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        handle.seek(max(0, handle.tell() - 65536))
        tail = handle.read()
    rest = tail[tail.rfind(b">") + 1:].strip()
    return rest.startswith(b"<") and not rest.startswith((b"</", b"<!--", b"<?"))


def _xml_sample(attrib: dict[str, str], attribute: str, query: _Query) -> tuple[str | None, float, float]:
    """(why one sample is left out, None when kept; its value; its timeStamp)."""
    try:
        v = float(attrib[attribute])
        stamp = float(attrib["ts"]) if (query.warmup_s or query.cooldown_s) else 0.0
    except (KeyError, ValueError):
        return "malformed", 0.0, 0.0
    if not (np.isfinite(v) and v >= 0 and np.isfinite(stamp)):
        return "malformed", 0.0, 0.0
    if query.labels and attrib.get("lb") not in query.labels:
        return "other_labels", v, stamp
    if query.failed != "include":
        succeeded = attrib.get("s", "").strip().lower() == "true"
        if succeeded != (query.failed == "exclude"):
            return "failed", v, stamp
    return None, v, stamp
