"""archlab.latency at scale vs the naive NumPy/SciPy approach, same machine, same run.

Two data sets, both integer milliseconds (a lognormal-ish body with a Pareto tail, fixed seed):

* ``counts``: 10^8 samples. archlab gets the exact count vector (what a DuckDB ``GROUP BY`` or
  an HDR log gives); the naive side holds the 10^8 raw values (float64), as the thesis script does.
* ``jtl``: a multi-GB JMeter 5 CSV file written by DuckDB into a temporary directory (deleted at
  the end). archlab reads it with ``read_jtl`` (DuckDB, out of core, exact counts); the naive side
  parses it with Python's ``csv`` module (header-driven, ``elapsed`` of successful rows) into a
  NumPy array, then the same statistics as below.

The work measured, identical on both sides: n, mean with 95% Student-t interval, standard
deviation, percentiles 50/90/99/99.9 (NumPy "linear"), LLCD slope over the top 1%, the Hill plot
(200 log-spaced k) and Hill at k = n/1000, the Pareto MLE and KS distance above the 99th
percentile, Gini and joint ratio. Each contender runs in its own fresh process, so peak RSS
(``resource.getrusage``) is its own; tracemalloc's peak (Python and NumPy allocations, not DuckDB's)
is reported with ``--tracemalloc`` (it slows per-object Python code such as CSV parsing, so the
times of that run are not comparable). Results are cross-checked (largest relative difference
printed). Not a test; a few minutes at the defaults on 2 CPUs.

    .venv/bin/python bench/latency_scale.py [--n 100000000] [--jtl-gb 2] [--skip-jtl] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
SEED = 20261122


# --- the synthetic distribution (integer ms) ---------------------------------------------------
def count_vector(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact counts of n integer-ms latencies: 95% lognormal(median 20 ms, sigma 0.5),
    5% Pareto(xmin 30 ms, alpha 1.5), rounded down, capped at 10^6 ms."""
    rng = np.random.default_rng(SEED)
    edges = np.arange(0, 1_000_002, dtype=float)
    from scipy import stats

    body = np.diff(stats.lognorm(0.5, scale=20.0).cdf(edges))
    tail = np.diff(stats.pareto(1.5, scale=30.0).cdf(edges))
    p = 0.95 * body + 0.05 * tail
    counts = rng.multinomial(n, p / p.sum())
    keep = counts > 0
    return edges[:-1][keep], counts[keep]


# --- archlab ------------------------------------------------------------------------------------
def archlab_analysis(samples) -> dict:
    from archlab.latency import HillEstimator, PowerLawTail, llcd, mass_count, quantile, summarize
    from archlab.latency.tails import _k_grid

    summary = summarize(samples, PERCENTILES, ci="none")
    positive = samples.at_least(1.0)
    slope = llcd(positive, 0.01)
    k = max(1, positive.n // 1000)
    hill = HillEstimator(k).fit(positive)
    xmin = float(quantile(positive, 0.99))
    tail = PowerLawTail(xmin=xmin).fit(positive)
    mc = mass_count(samples)
    assert hill.curve_k_.size == _k_grid(positive.n - 1, 200).size
    return {"n": summary.count, "mean": summary.mean.mean, "mean_low": summary.mean.low, "std": summary.std,
            **{f"p{e.percentile:g}": e.value for e in summary.percentiles},
            "llcd_alpha": slope.alpha, "hill_alpha": hill.alpha_, "hill_curve_sum": float(np.sum(hill.curve_alpha_)),
            "pareto_alpha": tail.alpha_, "pareto_ks": tail.ks_, "gini": mc.gini, "joint_ratio": mc.joint_ratio}


# --- the naive approach: raw values, NumPy/SciPy ----------------------------------------------------
def naive_analysis(raw: np.ndarray) -> dict:
    from scipy import stats

    n = raw.size
    mean, std = float(raw.mean()), float(raw.std(ddof=1))
    half = stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)
    pct = np.percentile(raw, PERCENTILES)
    ordered = np.sort(raw)
    positive = ordered[ordered >= 1.0]
    m = positive.size
    # LLCD: P(X >= x) at the distinct values of the top 1%
    first = min(m - 1, max(0, math.ceil(0.99 * m) - 1))
    top_values = np.unique(positive[first:])
    survival = (m - np.searchsorted(positive, top_values, side="left")) / m
    slope = np.polyfit(np.log10(top_values), np.log10(survival), 1)[0]
    # Hill: descending logs and their cumulative sums
    logs = np.log(positive[::-1])
    cumulative = np.cumsum(logs)
    grid = np.unique(np.round(np.logspace(0, math.log10(m - 1), 200)).astype(np.int64))
    gamma = cumulative[grid - 1] / grid - logs[grid]
    with np.errstate(divide="ignore"):
        curve = np.where(gamma > 0, 1.0 / np.where(gamma > 0, gamma, 1.0), np.inf)
    k = max(1, m // 1000)
    hill = 1.0 / (cumulative[k - 1] / k - logs[k])
    # Pareto MLE and KS above the 99th percentile
    xmin = float(np.percentile(positive, 99))
    tail = positive[positive >= xmin]
    alpha = tail.size / float(np.sum(np.log(tail / xmin)))
    values, index, tail_counts = np.unique(tail, return_index=True, return_counts=True)
    above = (index + tail_counts) / tail.size
    below = index / tail.size
    model = 1.0 - (xmin / values) ** alpha
    ks = float(max(np.max(np.abs(above - model)), np.max(np.abs(model - below))))
    # Gini and joint ratio from the Lorenz curve of the sorted raw values
    lorenz = np.concatenate([[0.0], np.cumsum(ordered) / ordered.sum()])
    p = np.arange(n + 1) / n
    gini = 1.0 - float(np.sum((lorenz[1:] + lorenz[:-1]) / n))
    joint = 100.0 * (1.0 - float(np.interp(1.0, p + lorenz, p)))
    return {"n": n, "mean": mean, "mean_low": mean - half, "std": std,
            **{f"p{q:g}": float(v) for q, v in zip(PERCENTILES, pct)},
            "llcd_alpha": -float(slope), "hill_alpha": float(hill), "hill_curve_sum": float(np.sum(curve)),
            "pareto_alpha": alpha, "pareto_ks": ks, "gini": gini, "joint_ratio": joint}


def naive_read_jtl(path: Path) -> np.ndarray:
    values = []
    with open(path, newline="") as handle:
        rows = csv.reader(handle)
        header = next(rows)
        elapsed, success = header.index("elapsed"), header.index("success")
        for row in rows:
            if row[success] == "true":
                values.append(int(row[elapsed]))
    return np.array(values, dtype=float)


# --- one contender per process --------------------------------------------------------------------
def worker(kind: str, data: Path, trace: bool) -> dict:
    from scipy import stats  # noqa: F401  (imported before the clock starts, on both sides)

    import archlab.latency  # noqa: F401

    if trace:
        tracemalloc.start()
    if kind == "counts-archlab":
        from archlab.latency import Samples

        loaded = np.load(data)
        started = time.perf_counter()
        result = archlab_analysis(Samples.from_counts(loaded["values"], loaded["counts"]))
    elif kind == "counts-naive":
        loaded = np.load(data)
        raw = np.repeat(loaded["values"], loaded["counts"])  # the raw samples the naive approach holds
        np.random.default_rng(SEED).shuffle(raw)  # in recording order, not sorted
        started = time.perf_counter()
        result = naive_analysis(raw)
    elif kind == "jtl-archlab":
        from archlab.latency.readers import read_jtl

        started = time.perf_counter()
        result = archlab_analysis(read_jtl(data))
    elif kind == "jtl-naive":
        started = time.perf_counter()
        result = naive_analysis(naive_read_jtl(data))
    else:
        raise SystemExit(f"unknown worker {kind}")
    seconds = time.perf_counter() - started
    traced_peak = tracemalloc.get_traced_memory()[1] / 2 ** 20 if trace else math.nan
    return {"seconds": seconds, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "tracemalloc_peak_mib": traced_peak, "result": result}


def run_worker(kind: str, data: Path, trace: bool = False) -> dict:
    done = subprocess.run([sys.executable, __file__, "--worker", kind, str(data)] + (["--tracemalloc"] if trace else []),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_jtl(path: Path, gigabytes: float) -> int:
    import duckdb

    rows = int(gigabytes * 1e9 / 128)  # about 128 bytes per row in this layout
    duckdb.sql(f"SELECT setseed({(SEED % 1000) / 1000})")
    query = f"""
        COPY (SELECT 1700000000000 + i * 3 AS timeStamp,
                     CAST(floor(CASE WHEN random() < 0.05 THEN 30 * pow(1 - random(), -1 / 1.5)
                                     ELSE 20 * exp(0.5 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())) END)
                          AS BIGINT) AS elapsed,
                     'GET /api/items' AS label, '200' AS responseCode, 'OK' AS responseMessage,
                     'Thread Group 1-' || (i % 200 + 1) AS threadName, 'text' AS dataType,
                     CASE WHEN random() < 0.999 THEN 'true' ELSE 'false' END AS success,
                     '' AS failureMessage, 1523 AS bytes, 118 AS sentBytes, 200 AS grpThreads, 200 AS allThreads,
                     'http://127.0.0.1:8080/api/items' AS URL, 3 AS Latency, 0 AS IdleTime, 1 AS Connect
              FROM range({rows}) t(i))
        TO '{path}' (HEADER, DELIMITER ',')"""
    duckdb.sql(query)
    return rows


def compare(label: str, archlab: dict, naive: dict) -> None:
    a, b = archlab["result"], naive["result"]
    differences = {key: abs(a[key] - b[key]) / max(abs(b[key]), 1e-300) for key in b}
    worst = max(differences, key=differences.get)
    print(f"{label}: n = {a['n']:,}")
    print(f"  {'':18} {'time s':>9} {'peak RSS MiB':>13} {'tracemalloc MiB':>16}")
    for name, r in (("archlab.latency", archlab), ("naive NumPy/SciPy", naive)):
        traced = "-" if math.isnan(r["tracemalloc_peak_mib"]) else f"{r['tracemalloc_peak_mib']:.0f}"
        print(f"  {name:18} {r['seconds']:9.2f} {r['peak_rss_mib']:13.0f} {traced:>16}")
    print(f"  ratio naive/archlab: time {naive['seconds'] / archlab['seconds']:.1f}x, "
          f"peak RSS {naive['peak_rss_mib'] / archlab['peak_rss_mib']:.1f}x; "
          f"largest relative difference of the results {differences[worst]:.1e} ({worst})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000_000, help="samples of the counts benchmark (default 10^8)")
    parser.add_argument("--jtl-gb", type=float, default=2.0, help="size of the generated JTL file (default 2 GB)")
    parser.add_argument("--skip-jtl", action="store_true")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also trace Python/NumPy allocations (slows the naive CSV parsing a lot)")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "DATA"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]), args.tracemalloc)))
        return
    print(f"archlab.latency scale benchmark ({os.cpu_count()} CPUs)")
    temp = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    try:
        values, counts = count_vector(args.n)
        np.savez(temp / "counts.npz", values=values, counts=counts)
        compare(f"{args.n:.0e} samples, {values.size:,} distinct integer-ms values",
                run_worker("counts-archlab", temp / "counts.npz", args.tracemalloc),
                run_worker("counts-naive", temp / "counts.npz", args.tracemalloc))
        if not args.skip_jtl:
            jtl = temp / "results.jtl"
            started = time.perf_counter()
            rows = write_jtl(jtl, args.jtl_gb)
            size = jtl.stat().st_size
            print(f"JTL file: {rows:,} rows, {size / 1e9:.2f} GB (written in {time.perf_counter() - started:.0f} s)")
            compare(f"JTL {size / 1e9:.2f} GB", run_worker("jtl-archlab", jtl, args.tracemalloc),
                    run_worker("jtl-naive", jtl, args.tracemalloc))
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
