"""Seed 002 Tables 22-25 (M/M/1) and 27-30 (M/M/m) follow from their inputs by the formulas of
Table 21 / Table 26 (Jain Box 31.1 / 31.2). The tables print lambda rounded to an integer and rho
to five decimals, so the test does not pretend to know lambda exactly: it takes every rho that is
consistent with both published inputs, evaluates each metric at the ends of that interval (every
metric is monotone in rho) and requires the published value, within its own rounding, to lie in
the range. Table 31's predicted rows must equal the VC = 4 columns of those tables."""

from __future__ import annotations

import math
import re

import pytest

from archlab.models import mm1, mmm
from models_seed002_data import MM1_TABLES, MMM_TABLES, SERVICE_RATE_PER_WORKER, TABLE_31, TABLES

MS = 1e3  # the seed prints times in ms; the models use seconds with rates in ops/s

# metric label in the seed -> (how to read it from StationMetrics, time exponent)
METRICS = {
    "Prob. of 0 jobs in system": (lambda s: s.p0, 0),
    "Prob. of queuing": (lambda s: s.prob_queueing, 0),
    "Prob. of ≥ 5 jobs in system": (lambda s: s.prob_at_least(5), 0),
    "Prob. of ≥ 10 jobs in system": (lambda s: s.prob_at_least(10), 0),
    "Mean # of jobs in system": (lambda s: s.mean_jobs, 0),
    "Var. of # of jobs in system": (lambda s: s.var_jobs, 0),
    "Mean # of jobs in queue": (lambda s: s.mean_queue, 0),
    "Var. of # of jobs in queue": (lambda s: s.var_queue, 0),
    "Mean response time": (lambda s: s.mean_response, 1),
    "Var. of response time": (lambda s: s.var_response, 2),
    "90-Percentile of response time": (lambda s: s.response_quantile(0.90), 1),
    "99-Percentile of response time": (lambda s: s.response_quantile(0.99), 1),
    "Mean waiting time": (lambda s: s.mean_wait, 1),
    "Var. of waiting time": (lambda s: s.var_wait, 2),
    "90-Percentile of waiting time": (lambda s: s.wait_quantile(0.90), 1),
    "99-Percentile of waiting time": (lambda s: s.wait_quantile(0.99), 1),
}


def published(text: str) -> tuple[float, float]:
    """(value, half-width of its rounding) of a number as the seed prints it."""
    sci = re.fullmatch(r"(\d+)×10\^\{(-\d+)\}", text)
    if sci:
        return int(sci.group(1)) * 10.0 ** int(sci.group(2)), 0.5e-5
    value = float(text.replace(",", ""))
    return value, (0.5e-5 if "." in text else 0.5)


def rho_interval(table: dict, column: int, servers: int, mu: float) -> tuple[float, float]:
    """The traffic intensities consistent with the published (rounded) lambda and rho."""
    lam, lam_tol = published(table["rows"]["Arrival rate λ"][column])
    rho, rho_tol = published(table["rows"]["Traffic intensity ρ"][column])
    lo = max(rho - rho_tol, (lam - lam_tol) / (servers * mu))
    hi = min(rho + rho_tol, (lam + lam_tol) / (servers * mu))
    assert lo <= hi, "published lambda and rho disagree"
    return lo, hi


def cases():
    for number, workers in MM1_TABLES.items():
        for label in METRICS:
            if label in TABLES[number]["rows"]:
                for col in range(len(TABLES[number]["columns"])):
                    yield pytest.param(number, workers, 1, label, col, id=f"T{number}-{label}-{col}")
    for number, workers in MMM_TABLES.items():
        for label in METRICS:
            if label in TABLES[number]["rows"]:
                for col in range(len(TABLES[number]["columns"])):
                    yield pytest.param(number, workers, workers, label, col, id=f"T{number}-{label}-{col}")


@pytest.mark.parametrize(("number", "workers", "servers", "label", "column"), list(cases()))
def test_seed002_table_entry_follows_from_lambda_and_mu(number, workers, servers, label, column):
    table = TABLES[number]
    mu = SERVICE_RATE_PER_WORKER[workers] * workers / servers  # M/M/1: the whole pool as one server
    lo, hi = rho_interval(table, column, servers, mu)
    read, power = METRICS[label]
    values = [read(mmm(r * servers * mu, mu, servers)) * MS**power for r in (lo, (lo + hi) / 2, hi)]
    value, tol = published(table["rows"][label][column])
    slack = tol + 1e-9 * abs(value)
    assert min(values) - slack <= value <= max(values) + slack, (label, values, value)


@pytest.mark.parametrize(("number", "workers"), list(MM1_TABLES.items()) + list(MMM_TABLES.items()))
def test_seed002_printed_service_rates_are_the_per_worker_rate_times_m(number, workers):
    rows = TABLES[number]["rows"]
    if number in MM1_TABLES:
        # Tables 22-25 print the whole pool's rate rounded to an integer.
        assert {published(v)[0] for v in rows["Service rate μ"]} == {round(SERVICE_RATE_PER_WORKER[workers] * workers)}
    else:
        assert {published(v)[0] for v in rows["Service rate μ per worker"]} == {SERVICE_RATE_PER_WORKER[workers]}
        assert {published(v)[0] for v in rows["Number of services m"]} == {float(workers)}


def test_mm1_closed_form_matches_table22_vc1_in_seconds():
    # Table 22 (lines 1087-1105), VC = 1: rho = 0.25614 -> E[n] = rho/(1-rho) = 0.34434 (Table 21 formula).
    mu = SERVICE_RATE_PER_WORKER[8] * 8
    s = mm1(0.25614 * mu, mu)
    assert s.mean_jobs == pytest.approx(0.25614 / (1 - 0.25614), rel=1e-12)
    assert round(s.mean_jobs, 5) == 0.34434


# Table 31 (lines 1299-1313) repeats the VC = 4 column of Tables 22-25 and 27-30, rounded to 3 decimals.
TABLE_31_SOURCES = [(8, 22, 27), (16, 23, 28), (32, 24, 29), (64, 25, 30)]
TABLE_31_ROWS = {
    "Response time M/M/1 predicted": ("mm1", "Mean response time", lambda s: s.mean_response * MS),
    "Response time M/M/m predicted": ("mmm", "Mean response time", lambda s: s.mean_response * MS),
    "Variance of response time M/M/1 predicted": ("mm1", "Var. of response time", lambda s: s.var_response * MS**2),
    "Variance of response time M/M/m predicted": ("mmm", "Var. of response time", lambda s: s.var_response * MS**2),
    "Queue length M/M/1 predicted": ("mm1", "Mean # of jobs in queue", lambda s: s.mean_queue),
    "Queue length M/M/m predicted": ("mmm", "Mean # of jobs in queue", lambda s: s.mean_queue),
    "Queue wait time M/M/1 predicted": ("mm1", "Mean waiting time", lambda s: s.mean_wait * MS),
    "Queue wait time M/M/m predicted": ("mmm", "Mean waiting time", lambda s: s.mean_wait * MS),
}


@pytest.mark.parametrize("row", list(TABLE_31_ROWS))
@pytest.mark.parametrize(("column", "source"), list(enumerate(TABLE_31_SOURCES)))
def test_seed002_table31_predictions_are_the_vc4_columns(row, column, source):
    workers, mm1_table, mmm_table = source
    kind, label, read = TABLE_31_ROWS[row]
    number = mm1_table if kind == "mm1" else mmm_table
    servers = 1 if kind == "mm1" else workers
    mu = SERVICE_RATE_PER_WORKER[workers] * workers / servers
    vc4 = TABLES[number]["columns"].index("VC = 4")
    lo, hi = rho_interval(TABLES[number], vc4, servers, mu)
    values = [read(mmm(r * servers * mu, mu, servers)) for r in (lo, hi)]
    value = float(TABLE_31[row][column])
    assert min(values) - 0.0005 - 1e-9 <= value <= max(values) + 0.0005 + 1e-9, (values, value)
    assert math.isclose(value, round(published(TABLES[number]["rows"][label][vc4])[0], 3), abs_tol=1e-9)
