"""One short real run of each load model through the runner, on loopback against the
single-thread server with a tiny response, and the raw records of the open run exported to
Parquet and JTL. Light loads (a few hundred requests per second, about 1 % of what the server
serves) keep the generator and the server far from saturation, so the checks are of consistency,
not of speed: the stored row is the summary's, the achieved rate is close to the offered rate,
the counts add up, and every request's times are in order."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
from conftest import run_cli, spec_text

from archlab.lab.rawrecords import RecordsFile
from archlab.lab.session import run_spec
from archlab.store import Manifest, Store

SHORT = 'name = "models"\nrepetitions = 1\nwarmup = "200ms"\nduration = "1s"'
FACTORS = 'architecture = ["single-thread"]\nworkload = ["/echo?size=16"]\n'
# Relative distance allowed between what was offered and what completed in a 1 s window: a
# request planned in the window but done after it (or planned in the warm-up and done in it)
# moves at most the few requests in flight at its edges, far below this.
RATE_TOLERANCE = 0.10


def run_one(tmp_path: Path, load: str, factors: str) -> tuple[Manifest, dict, dict]:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=SHORT, factors=FACTORS + factors, load=load))
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, stream=io.StringIO())
    view = store.load_run(handle.run_id)
    manifest, rows = view.manifest, [r.to_json() for r in view.rows]
    assert manifest.status == "complete" and len(rows) == 1
    (row,) = rows
    assert row["status"] == "ok", row["error"]
    summary = json.loads(Path(row["summary_path"]).read_text())
    return manifest, row, summary


def check_row_is_the_summary(row: dict, summary: dict) -> None:
    assert row["load_model"] == summary["model"]
    assert row["requests"] == summary["requests"] and row["throughput_rps"] == summary["throughput_rps"]
    # The reported latency: the headline for the closed model (service time, but from the
    # planned send for a request that waited for a new connection), response time from the
    # planned send time for the open models.
    reported = "latency_us" if summary["model"] == "closed" else "response_time_us"
    assert summary["latency_basis"] == ("sent" if summary["model"] == "closed" else "planned")
    assert row["p99_us"] == summary[reported]["p99"] and row["service_p99_us"] == summary["service_time_us"]["p99"]
    assert row["errors"] == summary["errors"]["total"] == sum(row["errors_by_class"].values()) == 0
    assert sum(summary["status_codes"].values()) == summary["requests"]


# Think times. The engine plans each request of a user at its previous completion plus the
# think time it draws (crates/load/src/engine/driver.rs), so per user "next planned - last
# done" in the raw records IS the draw, to the nanosecond and whatever the machine's load: the
# draws are checked against the distribution itself, with bounds from sampling error alone.
# * Mean. n independent Exp(Z) draws have a mean of standard deviation Z / sqrt(n) (an
#   exponential's standard deviation is its mean); 5 of them is a normal tail of 5.7e-7 (the
#   central limit theorem is close here: the mean's skewness is 2 / sqrt(n), under 0.05 for
#   n > 1600). The window adds a selection: a draw is seen only when the completions on both
#   sides of it fall in the window, and a long draw straddles an edge more often. At most one
#   draw per user per edge is lost, and a straddling exponential draw is 2 Z on average
#   (length-biased), so losing them lowers the mean by about 2 N Z / n; twice that is allowed.
# * Shape. The Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant (Massart 1990,
#   "The tight constant in the DKW inequality", Annals of Probability 18(3)) bounds the largest
#   distance between the empirical distribution function of n draws and the true one:
#   P(sup |F_n - F| > eps) <= 2 exp(-2 n eps^2), so eps = sqrt(ln(2 / 1e-6) / (2 n)) fails a
#   right implementation once in a million runs; the 2 N draws the edges may remove move F_n
#   by at most 2 N / n more. Against this, a constant think time is 0.63 away, an exponential
#   of mean 1.25 Z about 0.08.
THINK_Z_SCORE = 5.0
THINK_DKW_ALPHA = 1e-6


def test_closed_model_with_exponential_think_time_obeys_the_response_time_law(engine_path, tmp_path):
    users, z = 16, 0.002
    spec = tmp_path / "spec.toml"
    experiment = 'name = "think"\nrepetitions = 1\nwarmup = "200ms"\nduration = "2s"'
    load = 'model = "closed"\nthink_time = "exp:2ms"\nrecords = true'
    spec.write_text(spec_text(experiment=experiment, factors=FACTORS + f"concurrency = [{users}]", load=load))
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, stream=io.StringIO())
    (result,) = store.load_run(handle.run_id).rows
    row = result.to_json()
    assert row["status"] == "ok", row["error"]
    summary = json.loads(Path(row["summary_path"]).read_text())
    check_row_is_the_summary(row, summary)
    assert (row["think_time"], row["think_time_s"]) == ("exp:2ms", z)
    assert summary["pacing"]["think_time"]["distribution"] == "exponential"
    assert summary["pacing"]["think_time"]["mean_s"] == z

    # Exact: every user (one keep-alive connection each) appears, and each record after a
    # user's first was planned at or after the completion before it.
    recs = np.concatenate(list(RecordsFile.open(Path(row["summary_path"]).with_name("records.bin")).chunks()))
    assert len(recs) == row["requests"]
    connections = np.unique(recs["connection"])
    assert len(connections) == users
    gaps = []
    for conn in connections:
        mine = np.sort(recs[recs["connection"] == conn], order="planned_ns")
        gaps.append(mine["planned_ns"][1:].astype(np.int64) - mine["done_ns"][:-1].astype(np.int64))
    think = np.concatenate(gaps) / 1e9
    n = len(think)
    assert n == row["requests"] - users and think.min() >= 0

    # The draws: their mean, and their whole distribution (see THINK_Z_SCORE above).
    mean_bound = THINK_Z_SCORE * z / np.sqrt(n) + 4 * users * z / n
    assert abs(think.mean() - z) <= mean_bound, (think.mean(), z, mean_bound, n)
    x = np.sort(think)
    expected = 1.0 - np.exp(-x / z)
    distance = max(np.max(np.arange(1, n + 1) / n - expected), np.max(expected - np.arange(n) / n))
    dkw_bound = np.sqrt(np.log(2 / THINK_DKW_ALPHA) / (2 * n)) + 2 * users / n
    assert distance <= dkw_bound, (distance, dkw_bound, n)

    # The interactive response time law (Denning & Buzen 1978, "The operational analysis of
    # queueing network models", ACM Computing Surveys 10(3); Jain 1991, "The Art of Computer
    # Systems Performance Analysis", section 33.2): N users that think Z on average between a
    # response and their next request achieve X = N / (R + Z), whatever Z's distribution. With R
    # measured from each request's planned send (which holds the think timer's late wake-ups on
    # a busy machine too), the store checks it on the row with a tolerance derived from the
    # sampling error of the window (archlab.littles_law).
    law = result.littles_law
    assert law is not None and law.planned_holds, law
def test_closed_model_run(engine_path, tmp_path):
    manifest, row, summary = run_one(tmp_path, 'model = "closed"\nthink_time = "1ms"', "concurrency = [2]")
    check_row_is_the_summary(row, summary)
    assert manifest.load_model == "closed" and row["concurrency"] == 2 and row["rate_rps"] is None
    assert row["offered_rps"] is None and row["schedule_lag_p99_us"] is None
    # The closed model's latency is its service time.
    assert row["p50_us"] == row["service_p50_us"]
    # Two users, each waiting 1 ms between requests: at most 2 / 1 ms = 2000 req/s.
    assert 0 < row["throughput_rps"] <= 2000


def test_open_model_run_and_records(engine_path, tmp_path):
    load = 'model = "open"\nschedule = "constant"\nconnections = 4\nmax_connections = 16\nrecords = true'
    manifest, row, summary = run_one(tmp_path, load, "rate = [500]")
    check_row_is_the_summary(row, summary)
    assert manifest.load_model == "open" and row["rate_rps"] == 500 and row["concurrency"] is None
    assert summary["pacing"]["arrivals"] == "constant" and summary["coordinated_omission_corrected"] is True
    # A constant schedule plans exactly rate x window arrivals (to one at the edges).
    assert row["offered_rps"] == pytest.approx(500, abs=2)
    assert row["throughput_rps"] == pytest.approx(row["offered_rps"], rel=RATE_TOLERANCE)
    flow = summary["flow"]
    assert flow["arrivals"] == flow["sent"] + flow["never_started"]
    assert row["never_started"] == flow["never_started"] and row["sent_late"] == flow["sent_late"]
    # Every request's service time is part of its response time, so each quantile is too.
    assert 0 < row["service_p50_us"] <= row["p50_us"] and row["service_p99_us"] <= row["p99_us"]

    # Raw records: one per request of the window, exported to Parquet and read back.
    records = Path(row["summary_path"]).with_name("records.bin")
    assert RecordsFile.open(records).count == row["requests"]
    store = str(tmp_path / "runs")
    done = run_cli("records", "export", manifest.run_id, "--store", store)
    assert done.returncode == 0, done.stderr
    parquet = records.with_name("records.parquet")
    assert done.stdout.strip() == f"{parquet}\t{row['requests']} rows"
    con = duckdb.connect()
    count, ordered, ok = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE planned_ns <= sent_ns AND sent_ns <= first_byte_ns AND first_byte_ns <= done_ns), "
        "count(*) FILTER (WHERE error_class IS NULL AND status = 200) FROM read_parquet(?)",
        [str(parquet)],
    ).fetchone()
    assert count == row["requests"] and ordered == count and ok == count
    # The response time of the records gives the summary's median to the histogram's precision
    # (3 significant digits).
    median_us = con.execute("SELECT quantile_disc((done_ns - planned_ns) / 1000.0, 0.5) FROM read_parquet(?)", [str(parquet)]).fetchone()[0]
    assert median_us == pytest.approx(row["p50_us"], rel=0.01)

    # The JTL export of the same file, row by row: same order, same status, connection, bytes,
    # and JTL's elapsed (whole ms from the send) from the Parquet times.
    done = run_cli("records", "export", manifest.run_id, "--store", store, "--format", "jtl")
    assert done.returncode == 0, done.stderr
    with records.with_name("records.jtl.csv").open(newline="") as f:
        jtl = list(csv.DictReader(f))
    rows = con.execute(
        "SELECT status, connection, bytes_received, bytes_sent, (done_ns - sent_ns) // 1000000 FROM read_parquet(?)", [str(parquet)]
    ).fetchall()
    assert len(jtl) == len(rows) == count
    for j, (status, connection, received, sent, elapsed_ms) in zip(jtl, rows):
        assert (j["responseCode"], j["threadName"], j["bytes"], j["sentBytes"], j["elapsed"]) == (
            str(status), f"conn-{connection}", str(received), str(sent), str(elapsed_ms)
        )


def test_partly_open_model_run(engine_path, tmp_path):
    load = 'model = "partly-open"\nschedule = "constant"\nrequests_per_session = 3\nthink_time = "1ms"\nsession_connection = "new"\nmax_connections = 32'
    manifest, row, summary = run_one(tmp_path, load, "session_rate = [100]")
    check_row_is_the_summary(row, summary)
    assert manifest.load_model == "partly-open" and row["session_rate"] == 100
    sessions = summary["sessions"]
    # Fixed sessions of 3 requests: every completed session made exactly 3.
    assert sessions["mean_requests_per_completed_session"] == 3
    assert row["offered_rps"] == pytest.approx(100, abs=2)  # sessions planned per second
    # Each session makes 3 requests in about 3 ms, so the window completes about 3 x 100 req/s.
    assert row["throughput_rps"] == pytest.approx(3 * row["offered_rps"], rel=RATE_TOLERANCE)
    assert sessions["aborted"] == 0 and summary["connections_opened"] >= sessions["started"]
