"""archlab.latency at scale against what a competent user writes, from the same raw files.

Two inputs, both integer milliseconds (a lognormal body, median 20 ms, sigma 0.5, with a 5%
Pareto tail, xmin 30 ms, alpha 1.5; fixed seed), written by DuckDB into a temporary directory
(deleted at the end), and every contender starts from the file:

* ``samples``: a Parquet file of ``--n`` raw latencies (default 10^8) in recording order.
* ``jtl``: a JMeter 5 CSV results file of ``--jtl-gb`` GB (default 1) with a header line, 0.1% of
  its samples failed.

Contenders (each repetition of each runs in a fresh process pinned to ``--cpu``, so that its peak
RSS is its own and a multi-threaded reader gets one core like the others):

* ``archlab``: ``archlab.latency`` -- ``read_column`` (DuckDB ``GROUP BY``, exact counts) for the
  Parquet file, ``read_jtl`` for the JTL -- then its analysis on the counts.
* ``duckdb+numpy``: DuckDB reads the column (successful samples only for the JTL) into a NumPy
  array, then NumPy/SciPy compute the statistics from the raw values (below).
* ``polars+numpy``: polars reads it (``scan_csv``/``scan_parquet``, filtered and projected lazily),
  then the same NumPy/SciPy code.
* ``python-csv`` (JTL only): Python's ``csv`` module, header-driven, into a NumPy array, then
  the same statistics; the thesis's way, slow (``--contenders`` leaves it out).

The work, identical for all: n, mean with 95% Student-t interval, standard deviation,
percentiles 50/90/99/99.9 (NumPy "linear"), LLCD slope over the top 1%, the Hill plot (200
log-spaced k) and Hill at k = n/1000, the Pareto MLE and KS distance above the 99th percentile,
Gini and joint ratio; the results are cross-checked (largest relative difference printed). Each
repetition's time runs from before the file is opened to the last statistic (imports before);
its CPU time and peak RSS are the worker's own ``getrusage``. The contenders alternate
(``bench/harness.py``); archlab's speed-up over each is the median of per-pair ratios with its
bootstrap 95% interval, of wall time and of CPU time (which a busy neighbour on a shared CPU does
not inflate). Targets (issue 19): JTL >= 4x DuckDB + NumPy with archlab's peak RSS
< 0.5 GiB. Results: ``bench/results/latency_scale.json``.

    .venv/bin/python bench/latency_scale.py [--n 100000000] [--jtl-gb 1] [--reps 5] [--cases samples,jtl]
        [--contenders archlab,duckdb+numpy,polars+numpy,python-csv] [--cpu 0]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
SEED = 20261122
CASES = ("samples", "jtl")
CONTENDERS = ("archlab", "duckdb+numpy", "polars+numpy", "python-csv")
JTL_TARGET = 4.0
RSS_LIMIT_MIB = 512.0

# One latency in integer ms, in DuckDB SQL: 95% lognormal (Box-Muller), 5% Pareto.
LATENCY_SQL = """CAST(floor(CASE WHEN random() < 0.05 THEN 30 * pow(1 - random(), -1 / 1.5)
                             ELSE 20 * exp(0.5 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())) END)
                      AS BIGINT)"""


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


# --- the peers' statistics: raw values, NumPy/SciPy --------------------------------------------------
def numpy_analysis(raw: np.ndarray) -> dict:
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


# --- readers of each contender ------------------------------------------------------------------
def quiet_duckdb():
    """A DuckDB connection that prints no progress bar (it would mix with the workers' output)."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET enable_progress_bar = false")
    return connection


def duckdb_values(case: str, path: Path) -> np.ndarray:
    source = f"read_parquet('{path}')" if case == "samples" else f"read_csv('{path}', header = true)"
    where = "" if case == "samples" else " WHERE success"
    return quiet_duckdb().sql(f"SELECT elapsed FROM {source}{where}").fetchnumpy()["elapsed"].astype(float)


def polars_values(case: str, path: Path) -> np.ndarray:
    import polars as pl

    if case == "samples":
        frame = pl.scan_parquet(path).select("elapsed")
    else:
        frame = pl.scan_csv(path).filter(pl.col("success")).select("elapsed")
    return frame.collect().to_series().to_numpy().astype(float)


def csv_values(path: Path) -> np.ndarray:
    values = []
    with open(path, newline="") as handle:
        rows = csv.reader(handle)
        header = next(rows)
        elapsed, success = header.index("elapsed"), header.index("success")
        for row in rows:
            if row[success] == "true":
                values.append(int(row[elapsed]))
    return np.array(values, dtype=float)


def analyse(case: str, contender: str, path: Path) -> dict:
    if contender == "archlab":
        from archlab.latency.readers import read_column, read_jtl

        samples = read_column(path, "elapsed", "ms") if case == "samples" else read_jtl(path)
        return archlab_analysis(samples)
    if contender == "duckdb+numpy":
        return numpy_analysis(duckdb_values(case, path))
    if contender == "polars+numpy":
        return numpy_analysis(polars_values(case, path))
    if contender == "python-csv" and case == "jtl":
        return numpy_analysis(csv_values(path))
    raise SystemExit(f"no worker for {contender} on {case}")


# --- one contender per process --------------------------------------------------------------------
def worker(case: str, contender: str, path: Path) -> dict:
    import duckdb  # noqa: F401  (every library is imported before the clock starts, on all sides)
    import polars  # noqa: F401
    from scipy import stats  # noqa: F401

    import archlab.latency  # noqa: F401
    import archlab.latency.readers  # noqa: F401

    cpu = harness.self_cpu_s()
    started = time.perf_counter()
    result = analyse(case, contender, path)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "cpu_s": harness.self_cpu_s() - cpu,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "result": result}


def run_worker(case: str, contender: str, path: Path, cpu: int) -> dict:
    done = subprocess.run(["taskset", "-c", str(cpu), sys.executable, __file__, "--worker", case, contender, str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{contender} on {case} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_samples(path: Path, n: int) -> None:
    duckdb = quiet_duckdb()
    duckdb.execute(f"SELECT setseed({(SEED % 1000) / 1000})")
    duckdb.execute(f"COPY (SELECT {LATENCY_SQL} AS elapsed FROM range({n})) TO '{path}' (FORMAT parquet)")


def write_jtl(path: Path, gigabytes: float) -> int:
    duckdb = quiet_duckdb()
    rows = int(gigabytes * 1e9 / 128)  # about 128 bytes per row in this layout
    duckdb.execute(f"SELECT setseed({(SEED % 1000) / 1000})")
    query = f"""
        COPY (SELECT 1700000000000 + i * 3 AS timeStamp, {LATENCY_SQL} AS elapsed,
                     'GET /api/items' AS label, '200' AS responseCode, 'OK' AS responseMessage,
                     'Thread Group 1-' || (i % 200 + 1) AS threadName, 'text' AS dataType,
                     CASE WHEN random() < 0.999 THEN 'true' ELSE 'false' END AS success,
                     '' AS failureMessage, 1523 AS bytes, 118 AS sentBytes, 200 AS grpThreads, 200 AS allThreads,
                     'http://127.0.0.1:8080/api/items' AS URL, 3 AS Latency, 0 AS IdleTime, 1 AS Connect
              FROM range({rows}) t(i))
        TO '{path}' (HEADER, DELIMITER ',')"""
    duckdb.execute(query)
    return rows


def measure(case: str, path: Path, names: list[str], reps: int, cpu: int) -> dict:
    """Alternate the contenders on one file; a table row per contender."""
    outputs: dict[str, dict] = {}

    def contender(name: str) -> harness.Contender:
        def once() -> harness.Sample:
            out = run_worker(case, name, path, cpu)
            outputs[name] = out
            peaks.setdefault(name, []).append(out["peak_rss_mib"])
            return harness.Sample(out["seconds"], float(out["result"]["n"]), out["cpu_s"],
                                  {"peak_rss_mib": out["peak_rss_mib"]})

        return harness.Contender(name, once)

    peaks: dict[str, list[float]] = {}
    result = harness.alternate([contender(n) for n in names], reps)
    reference = outputs["archlab"]["result"]
    rows = []
    for name in names:
        got = outputs[name]["result"]
        differences = {key: abs(got[key] - reference[key]) / max(abs(reference[key]), 1e-300) for key in reference}
        worst = max(differences, key=differences.get)
        row = {"case": case, "contender": name, "median_s": statistics.median(result.values(name)),
               "cpu_ns_per_sample": result.cpu_per_unit_us(name) * 1000, "peak_rss_mib": max(peaks[name]),
               "n": got["n"], "largest_rel_diff": differences[worst], "largest_diff_of": worst}
        if name != "archlab":
            row["speedup"] = result.ratio("archlab", name, higher_is_better=False)
            row["cpu_speedup"] = result.cpu_ratio("archlab", name)
            # Memory: one figure per contender (the largest over repetitions), so a plain ratio.
            row["rss_ratio"] = max(peaks[name]) / max(peaks["archlab"])
        rows.append(row)
    return {"rows": rows, "raw": harness.raw_samples(result)}


def print_case(title: str, rows: list[dict]) -> None:
    print(f"\n{title}: n = {rows[0]['n']:,}")
    print(f"  {'contender':<14} {'median s':>9} {'CPU ns/sample':>14} {'peak RSS MiB':>13}  archlab speed-up [95% CI]: "
          "wall; CPU    largest rel. diff of the results")
    for row in rows:
        line = f"  {row['contender']:<14} {row['median_s']:>9.2f} {row['cpu_ns_per_sample']:>14.1f} {row['peak_rss_mib']:>13.0f}"
        speedup = f"{row['speedup']}; {row['cpu_speedup']}" if "speedup" in row else "-"
        line += f"  {speedup:<44} {row['largest_rel_diff']:.1e} ({row['largest_diff_of']})"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=harness.count(), default=100_000_000, help="samples of the Parquet case (default 10^8)")
    parser.add_argument("--jtl-gb", type=harness.number(), default=1.0, help="size of the generated JTL file (default 1 GB)")
    parser.add_argument("--reps", type=harness.count(), default=5, help="alternating repetitions per contender (fresh processes)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--contenders", default=",".join(CONTENDERS[:3]),
                        help=f"comma-separated subset of {','.join(CONTENDERS)} (archlab always runs; "
                             "default leaves python-csv out)")
    parser.add_argument("--cpu", type=harness.count(0), default=0, help="the CPU every worker is pinned to")
    parser.add_argument("--worker", nargs=3, metavar=("CASE", "CONTENDER", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], Path(args.worker[2]))))
        return 0
    cases = [c for c in args.cases.split(",") if c]
    names = ["archlab"] + [n for n in dict.fromkeys(args.contenders.split(",")) if n and n != "archlab"]
    if bad := [c for c in cases if c not in CASES] + [n for n in names if n not in CONTENDERS]:
        print(f"bench: --cases takes {','.join(CASES)}, --contenders {','.join(CONTENDERS)}; got {','.join(bad)}",
              file=sys.stderr)
        return 2
    if args.reps < 1 or args.n < 1000 or args.jtl_gb <= 0:
        print(f"bench: expected --reps >= 1, --n >= 1000, --jtl-gb > 0; got {args.reps}, {args.n}, {args.jtl_gb}",
              file=sys.stderr)
        return 2
    facts = harness.machine_facts({p: harness.package_version(p) for p in ("duckdb", "polars", "numpy", "scipy",
                                                                           "archlab")})
    print(f"archlab.latency at scale; workers pinned to CPU {args.cpu}; {args.reps} alternating repetitions after a "
          f"warm-up; " + ", ".join(f"{k} {v}" for k, v in facts["tools"].items()))
    table, raw = [], {}
    temp = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    try:
        for case in cases:
            started = time.perf_counter()
            if case == "samples":
                path = temp / "samples.parquet"
                write_samples(path, args.n)
                title = f"Parquet file of {args.n:.0e} raw samples ({path.stat().st_size / 1e6:.0f} MB)"
            else:
                path = temp / "results.jtl"
                write_jtl(path, args.jtl_gb)
                title = f"JTL file of {path.stat().st_size / 1e9:.2f} GB"
            print(f"{title} written in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            done = measure(case, path, [n for n in names if case == "jtl" or n != "python-csv"], args.reps, args.cpu)
            print_case(title, done["rows"])
            table += done["rows"]
            raw[case] = done["raw"]
            path.unlink()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    for row in table:
        if row["case"] == "jtl" and row["contender"] == "duckdb+numpy":
            archlab_rss = next(r["peak_rss_mib"] for r in table if r["case"] == "jtl" and r["contender"] == "archlab")
            print(f"\nJTL target over DuckDB + NumPy: wall {row['speedup']}, {harness.verdict(row['speedup'], JTL_TARGET)}; "
                  f"CPU {row['cpu_speedup']}, {harness.verdict(row['cpu_speedup'], JTL_TARGET)}; archlab's peak RSS {archlab_rss:.0f} MiB "
                  f"({'below' if archlab_rss < RSS_LIMIT_MIB else 'NOT below'} {RSS_LIMIT_MIB:.0f} MiB)")
    settings = {"n": args.n, "jtl_gb": args.jtl_gb, "reps": args.reps, "cpu": args.cpu, "contenders": names,
                "cases": cases}
    print(f"results: {harness.write_results('latency_scale', table, facts, settings, raw)}")
    return 0


if __name__ == "__main__":
    harness.run_main(main)
