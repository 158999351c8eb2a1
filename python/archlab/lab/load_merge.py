"""Exact merging of load shards: S summaries and S HDR interval logs of one cell become one
summary and one interval log, as if one generator had run all the shards' users.

Counts (requests, errors by class, bytes, flow, sessions, status codes) are summed; rates
(throughput, offered and planned rates) are summed, each shard's rate being its own count over
its own window. The headline latency (``latency_us``, the histogram the interval logs hold) is
recomputed from the sum of the shards' histograms with the engine's own conventions (nearest
rank rounded up, the highest value of the bucket; mean and standard deviation over bucket
medians: ``crates/metrics/src/hdr.rs`` and the ``hdrhistogram`` crate), so the merged quantiles
are those of one histogram and never averages of quantiles. The other latency sections (service
time, the closed model's response time, schedule lag, non-2xx responses) are not in the logs: their count,
mean, standard deviation, minimum and maximum merge exactly (pooled moments), their quantiles
are left null rather than invented. Second i of the merged timeline and log is second i of every
shard's window (the shards start together; the skew is recorded beside them)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from hdrh.histogram import HdrHistogram

from archlab.errors import ArchlabError

QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999))
_UNIT_COMMENT = "#[Latency values and Interval_Max in nanoseconds (ns)]"
_LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'


class MergeError(ArchlabError):
    """Shard outputs that cannot be merged (unreadable log, different models)."""


@dataclass
class IntervalLog:
    """An interval log read back: its base time (seconds since the epoch) and its intervals
    (offset from the base time, length, histogram of nanoseconds)."""

    base_time_s: float | None
    intervals: list[tuple[float, float, HdrHistogram]]
    #: The writer's own comment lines (what the log holds), without the format's.
    comments: list[str]


def read_interval_log(text: str, where: str = "interval log") -> IntervalLog:
    base: float | None = None
    start: float | None = None
    intervals = []
    comments = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#") and not line.startswith("#["):
            comments.append(line)
        elif line.startswith("#[BaseTime:"):
            base = float(line.split(":", 1)[1].split()[0])
        elif line.startswith("#[StartTime:"):
            start = float(line.split(":", 1)[1].split()[0])
        elif line and not line.startswith("#") and not line.startswith('"StartTimestamp"'):
            if line.startswith("Tag="):
                line = line.split(",", 1)[1]
            fields = line.split(",")
            if len(fields) != 4:
                raise MergeError(f"{where}:{number}: expected 'start,length,max,histogram', got {line[:60]!r}")
            try:
                histogram = HdrHistogram.decode(fields[3])
            except Exception as e:  # the package raises assorted low-level errors on bad input
                raise MergeError(f"{where}:{number}: a histogram that does not decode ({e})") from None
            intervals.append((float(fields[0]), float(fields[1]), histogram))
    return IntervalLog(base if base is not None else start, intervals, comments)


def add_histograms(histograms: Sequence[HdrHistogram]) -> HdrHistogram | None:
    """The sum of ``histograms`` (same lowest value and significant digits, as the engine writes
    them): every bucket's count added, none clamped. None for no histogram."""
    if not histograms:
        return None
    first = histograms[0]
    digits = first.significant_figures
    lowest = first.lowest_trackable_value
    highest = max(max(h.highest_trackable_value, h.get_max_value()) for h in histograms)
    total = HdrHistogram(lowest, max(highest, 2 * lowest), digits)
    for h in histograms:
        if (h.lowest_trackable_value, h.significant_figures) != (lowest, digits):
            raise MergeError(f"histograms of different layouts: lowest {h.lowest_trackable_value} digits {h.significant_figures} "
                             f"vs {lowest} and {digits}")
        if h.get_total_count():
            total.add(h)
    return total


def _buckets(h: HdrHistogram) -> list[tuple[int, int, int, int]]:
    """(lowest, highest, median, count) of every bucket holding a value, ascending."""
    out = []
    for item in h.get_recorded_iterator():
        value = item.value_iterated_to
        low, high = h.get_lowest_equivalent_value(value), h.get_highest_equivalent_value(value)
        out.append((low, high, low + ((high - low + 1) >> 1), item.count_at_value_iterated_to))
    return out


def latency_summary_us(h: HdrHistogram | None) -> dict:
    """What ``LatencySummaryUs::of`` reports for ``h``, in µs; every field null when empty."""
    buckets = _buckets(h) if h is not None else []
    total = sum(b[3] for b in buckets)
    if total == 0:
        return {k: None for k in ("min", "mean", "stdev", "p50", "p90", "p99", "p99.9", "max")}
    mean = 0.0
    for _, _, median, count in buckets:  # the crate's order of additions, for the same rounding
        mean += median * float(count) / total
    deviation = 0.0
    for _, _, median, count in buckets:
        deviation += (median - mean) ** 2 * count
    out = {"min": buckets[0][0] / 1e3, "mean": mean / 1e3, "stdev": math.sqrt(deviation / total) / 1e3}
    for name, q in QUANTILES:
        rank = max(1, math.ceil(q * total))
        seen = 0
        for _, high, _, count in buckets:
            seen += count
            if seen >= rank:
                out[name] = high / 1e3
                break
    out["max"] = buckets[-1][1] / 1e3
    return {k: out[k] for k in ("min", "mean", "stdev", "p50", "p90", "p99", "p99.9", "max")}


def pooled_moments(parts: Sequence[tuple[int, Mapping | None]]) -> dict:
    """Count, mean, (population) standard deviation, min and max of the union of groups given
    as (count, latency section); quantiles null: they do not merge."""
    groups = [(n, s) for n, s in parts if n and isinstance(s, Mapping) and s.get("mean") is not None]
    out: dict = {k: None for k in ("min", "mean", "stdev", "p50", "p90", "p99", "p99.9", "max")}
    total = sum(n for n, _ in groups)
    if total == 0:
        return out
    mean = sum(n * float(s["mean"]) for n, s in groups) / total
    var = sum(n * (float(s.get("stdev") or 0.0) ** 2 + (float(s["mean"]) - mean) ** 2) for n, s in groups) / total
    out.update(mean=mean, stdev=math.sqrt(var), min=min(float(s["min"]) for _, s in groups), max=max(float(s["max"]) for _, s in groups))
    return out


def _sum(docs: Sequence[Mapping], *path: str) -> int | float:
    total: int | float = 0
    for d in docs:
        value: object = d
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        total += value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    return total


def _sum_maps(maps: Sequence[object]) -> dict:
    out: dict = {}
    for m in maps:
        for k, v in (m or {}).items() if isinstance(m, Mapping) else ():
            out[k] = out.get(k, 0) + v
    return out


@dataclass
class Merged:
    summary: dict
    log_text: str
    #: Each shard's summed histogram (the whole window), for checks and the shard records.
    shard_histograms: list[HdrHistogram | None]
    histogram: HdrHistogram | None


def merge_shards(docs: Sequence[Mapping], logs: Sequence[str], seed: int | None = None) -> Merged:
    """One summary and one interval log from the shards' (``docs`` and the texts of their
    ``logs``, in shard order); ``seed`` is the cell's own seed (the shards' are derived)."""
    if not docs or len(docs) != len(logs):
        raise MergeError(f"expected one summary and one interval log per shard, got {len(docs)} and {len(logs)}")
    models = {d.get("model") for d in docs}
    if len(models) != 1:
        raise MergeError(f"shards of different load models: {sorted(map(str, models))}")
    parsed = [read_interval_log(text, f"interval log of shard {k}") for k, text in enumerate(logs)]
    seconds = max(len(p.intervals) for p in parsed)
    per_second = [add_histograms([p.intervals[i][2] for p in parsed if i < len(p.intervals)]) for i in range(seconds)]
    shard_totals = [add_histograms([h for _, _, h in p.intervals]) for p in parsed]
    total = add_histograms([h for h in shard_totals if h is not None])
    # The merged summary is the first shard's with every field that differs recomputed.
    out = copy.deepcopy(dict(docs[0]))
    basis_is_planned = out.get("latency_basis") == "planned"
    n = len(docs)
    for key in ("connections", "max_connections", "connections_established", "requests", "responses", "bytes_received",
                "connections_opened", "requests_in_flight_at_end"):
        out[key] = int(_sum(docs, key))
    out["duration_s"] = sum(float(d["duration_s"]) for d in docs) / n
    # Little's law's boundary term: each shard's cycles sum to N_s D_s - B_s; with the merged
    # window the mean of the D_s, the merged cycles sum to N D - B for this B, exactly.
    boundaries = [d.get("closed_boundary_s") for d in docs]
    if all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in boundaries):
        shards_time = sum(int(d["connections"]) * float(d["duration_s"]) for d in docs)
        out["closed_boundary_s"] = float(sum(boundaries)) + out["connections"] * out["duration_s"] - shards_time  # type: ignore[arg-type]
    else:
        out.pop("closed_boundary_s", None)
    out["throughput_rps"] = float(_sum(docs, "throughput_rps"))
    out["interrupted"] = any(bool(d.get("interrupted")) for d in docs)
    if out.get("offered_rps") is not None:
        out["offered_rps"] = float(_sum(docs, "offered_rps"))
    if isinstance(out.get("pacing"), dict) and out["pacing"].get("rate_per_s") is not None:
        out["pacing"]["rate_per_s"] = float(_sum(docs, "pacing", "rate_per_s"))
    if seed is not None:
        out["seed"] = seed
    gen = out.get("generator") or {}
    cpus = [set(d["generator"]["cpus"]) for d in docs if isinstance((d.get("generator") or {}).get("cpus"), list)]
    threads: list[dict] = []
    for d in docs:
        for t in (d.get("generator") or {}).get("thread_cpu") or []:
            threads.append({**t, "thread": len(threads)})
    gen.update(
        threads=int(_sum(docs, "generator", "threads")),
        cpus=sorted(set().union(*cpus)) if cpus else None,
        cpu_user_s=float(_sum(docs, "generator", "cpu_user_s")),
        cpu_sys_s=float(_sum(docs, "generator", "cpu_sys_s")),
        thread_cpu=threads,
        bound=any(bool((d.get("generator") or {}).get("bound")) for d in docs),
        bound_reasons=[f"shard {k}: {r}" for k, d in enumerate(docs) for r in (d.get("generator") or {}).get("bound_reasons") or []],
    )
    out["generator"] = gen
    headline = latency_summary_us(total)
    out["latency_us"] = headline
    requests = [int(d.get("requests") or 0) for d in docs]
    # The closed model's headline is not pure service time (a request that waited for a new
    # connection counts from its planned send), so the service time is always pooled.
    for key, same_as_headline in (("response_time_us", basis_is_planned), ("service_time_us", False)):
        out[key] = headline if same_as_headline else pooled_moments([(r, d.get(key)) for r, d in zip(requests, docs)])
    out["schedule_lag_us"] = pooled_moments([(int(_sum([d], "flow", "sent")), d.get("schedule_lag_us")) for d in docs])
    non2xx = [(int((d.get("latency_non2xx_us") or {}).get("count") or 0), d.get("latency_non2xx_us")) for d in docs]
    out["latency_non2xx_us"] = {**pooled_moments(non2xx), "count": sum(c for c, _ in non2xx)}
    if isinstance(out.get("flow"), dict):
        out["flow"] = {k: int(_sum(docs, "flow", k)) for k in out["flow"]}
    if isinstance(out.get("sessions"), dict):
        sessions: dict[str, float | None] = {
            k: int(_sum(docs, "sessions", k)) for k in out["sessions"] if k != "mean_requests_per_completed_session"}
        completed = [(int(_sum([d], "sessions", "completed")), (d.get("sessions") or {}).get("mean_requests_per_completed_session")) for d in docs]
        weighted = [(c, m) for c, m in completed if c and m is not None]
        sessions["mean_requests_per_completed_session"] = (
            sum(c * m for c, m in weighted) / sum(c for c, _ in weighted) if weighted else None)
        out["sessions"] = sessions
    if isinstance(out.get("mix"), list):
        # Counts of each class add up over the shards exactly; its latencies merge only as
        # moments (the interval logs hold the run's histogram, not the classes').
        classes = [d.get("mix") or [] for d in docs]
        for i, c in enumerate(out["mix"]):
            mine = [cs[i] for cs in classes if i < len(cs)]
            for k in ("sent", "responses", "requests"):
                c[k] = int(_sum(mine, k))
            c["throughput_rps"] = float(_sum(mine, "throughput_rps"))
            c["errors"] = {"total": int(_sum(mine, "errors", "total")), "by_class": _sum_maps([(m.get("errors") or {}).get("by_class") for m in mine])}
            for key in ("response_time_us", "service_time_us"):
                c[key] = pooled_moments([(int(m.get("requests") or 0), m.get(key)) for m in mine])
    if isinstance(out.get("memcached"), dict):
        for k in ("sets", "gets", "get_keys", "hits", "misses"):
            out["memcached"][k] = int(_sum(docs, "memcached", k))
    out["errors"] = {"total": int(_sum(docs, "errors", "total")), "by_class": _sum_maps([(d.get("errors") or {}).get("by_class") for d in docs])}
    out["error_examples"] = {k: v for d in reversed(docs) for k, v in (d.get("error_examples") or {}).items()}
    out["status_codes"] = _sum_maps([d.get("status_codes") for d in docs])
    out["warmup"] = {
        "requests": int(_sum(docs, "warmup", "requests")),
        "responses": int(_sum(docs, "warmup", "responses")),
        "errors": {"total": int(_sum(docs, "warmup", "errors", "total")),
                   "by_class": _sum_maps([((d.get("warmup") or {}).get("errors") or {}).get("by_class") for d in docs])},
    }
    out["timeline"] = _timeline(docs, per_second)
    out["hdr_log"] = "hdr.log"
    return Merged(out, _write_log(parsed, per_second), shard_totals, total)


def _timeline(docs: Sequence[Mapping], per_second: Sequence[HdrHistogram | None]) -> list[dict]:
    by_second: dict[int, list[Mapping]] = {}
    for d in docs:
        for entry in d.get("timeline") or []:
            by_second.setdefault(int(entry["second"]), []).append(entry)
    out = []
    for second in sorted(by_second):
        entries = by_second[second]
        merged = {
            "second": second,
            "length_s": max(float(e["length_s"]) for e in entries),
            "requests": int(_sum(entries, "requests")),
            "throughput_rps": float(_sum(entries, "throughput_rps")),
            "p99_us": latency_summary_us(per_second[second] if second < len(per_second) else None)["p99"],
            "errors": int(_sum(entries, "errors")),
        }
        for key in ("arrivals", "planned_rps", "planned_users"):
            if any(key in e for e in entries):
                merged[key] = _sum(entries, key)
        out.append(merged)
    return out


def _write_log(parsed: Sequence[IntervalLog], per_second: Sequence[HdrHistogram | None]) -> str:
    """The merged interval log, in the layout of ``crates/metrics/src/interval_log.rs``: base
    time the earliest shard's, interval i starting where the earliest shard's second i did."""
    bases = [p.base_time_s for p in parsed if p.base_time_s is not None]
    base = min(bases) if bases else 0.0
    # The engine's description of one shard's command would mislead here; what the log holds stays.
    held = [c for c in parsed[0].comments if not c.startswith("#archlab-engine")]
    lines = [f"#archlab: {len(parsed)} load shards merged (histograms added); each shard's log is shards/shard-K/hdr.log",
             *held, _UNIT_COMMENT,
             "#[Histogram log format version 1.3]", f"#[StartTime: {base:.3f} (seconds since epoch)]",
             f"#[BaseTime: {base:.3f} (seconds since epoch)]", _LEGEND]
    for i, histogram in enumerate(per_second):
        if histogram is None:
            continue
        starts = [(p.base_time_s or base) + p.intervals[i][0] - base for p in parsed if i < len(p.intervals)]
        length = max(p.intervals[i][1] for p in parsed if i < len(p.intervals))
        payload = histogram.encode().decode("ascii")
        lines.append(f"{min(starts):.3f},{length:.3f},{float(histogram.get_max_value()):.3f},{payload}")
    return "\n".join(lines) + "\n"
