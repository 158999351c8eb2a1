"""Load-dependent centres (m servers, or any rate multipliers alpha(n)) in open and mixed
networks. Open: against the M/M/m closed forms of Jain Box 31.2 (Erlang C, p_n) and M/M/inf
(Poisson marginals). Mixed: against a direct numerical solution of the global balance
equations of the continuous-time Markov chain on a small case (no published mixed example with
multi-server centres was found; the Octave `queueing` package's `qnmix` takes single-server and
delay centres only), which checks the product-form reduction of archlab.models.openload
independently of it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import sparse
from scipy.sparse import linalg

from archlab.models import Centre, UnstableError, littles_law, mminf, mmm
from archlab.models.opennet import mixed_network, open_network


@pytest.mark.parametrize(("lam", "mu", "m"), [(6854.0, 877.67656, 8), (7749.0, 400.81152, 64), (3.0, 1.0, 4)])
def test_open_multiserver_centre_is_mmm_with_its_marginals(lam, mu, m):
    # lambda, mu and m of seed 002 Tables 27 and 30 (VC = 4), and a small case.
    sol = open_network([Centre.multiserver("pool", 1 / mu, m)], lam)
    ref = mmm(lam, mu, m)
    assert sol.response_time[0] == pytest.approx(ref.mean_response, rel=1e-10)
    assert sol.queue_length[0, 0] == pytest.approx(ref.mean_jobs, rel=1e-10)
    p = sol.marginals["pool"]
    assert p == pytest.approx([ref.prob_jobs(n) for n in range(p.size)], rel=1e-9, abs=1e-300)
    assert sol.probability_error < 1e-12


def test_general_rate_multipliers_equal_their_special_cases():
    # alpha(n) = n for n <= 400 is M/M/inf at this load: Poisson(lambda D) jobs, R = D.
    lam, d = 30.0, 0.2
    sol = open_network([Centre.load_dependent("inf", d, np.arange(1, 401))], lam)
    ref = mminf(lam, 1 / d)
    assert sol.response_time[0] == pytest.approx(d, rel=1e-12)
    assert sol.marginals["inf"][:40] == pytest.approx([ref.prob_jobs(n) for n in range(40)], rel=1e-9)
    # alpha = [1, 2, 3] is three servers.
    a = open_network([Centre.load_dependent("ld", 0.1, [1, 2, 3])], 25.0)
    b = open_network([Centre.multiserver("ms", 0.1, 3)], 25.0)
    assert a.response_time == pytest.approx(b.response_time, rel=1e-12)
    assert a.utilisation[0] == pytest.approx(1 - a.marginals["ld"][0])  # busy fraction for a general centre


def test_open_network_with_load_dependent_centres_and_two_classes():
    # Jackson/BCMP product form: each centre's marginal depends on its own offered load only,
    # a class's share of the centre's jobs is its share of the load, and Little holds per class.
    disk = Centre.load_dependent("disk", (0.004, 0.002), [1.0, 1.6, 2.0])
    centres = [Centre.queueing("cpu", (0.002, 0.001)), disk, Centre.multiserver("pool", (0.01, 0.01), 4)]
    lam = np.array([100.0, 200.0])
    sol = open_network(centres, lam)
    alone = open_network([Centre.load_dependent("disk", 0.008, [1.0, 1.6, 2.0])], 100.0)  # same offered load 0.8
    assert sol.marginals["disk"] == pytest.approx(alone.marginals["disk"], rel=1e-12)
    assert sol.queue_length[1, 0] / sol.queue_length[1, 1] == pytest.approx(0.4 / 0.4)
    for j in range(2):
        assert sol.queue_length[:, j].sum() == pytest.approx(littles_law(lam[j], sol.response_time[j]))
    with pytest.raises(UnstableError, match="^disk offered load: expected < 2"):
        open_network([disk], [300.0, 500.0])


def _global_balance(lam, s_open, s_closed, alphas, population, cap):
    """Solve the CTMC of a two-centre mixed network by its global balance equations.

    Open class: arrives at centre A (Poisson, rate lam), then visits B, then leaves. Closed class:
    `population` jobs cycle A -> B -> A. Both centres are processor-sharing with service-rate
    multiplier alpha(n) for n jobs present; a class-c job at a centre with n jobs completes at
    rate alpha(n) / (n s_c). State (open at A, open at B, closed at A); open counts are truncated
    at `cap`, far beyond any mass that matters here. Returns the mean open jobs at A and B, the
    mean closed jobs at A and the closed throughput.
    """

    def rate(centre, n):
        a = alphas[centre]
        return a[min(n, len(a)) - 1]

    states = list(itertools.product(range(cap + 1), range(cap + 1), range(population + 1)))
    index = {st: i for i, st in enumerate(states)}
    rows, cols, vals = [], [], []

    def add(src, dst, r):
        if dst in index and r > 0:
            rows.append(index[src]), cols.append(index[dst]), vals.append(r)

    for oa, ob, ca in states:
        cb = population - ca
        na, nb = oa + ca, ob + cb
        src = (oa, ob, ca)
        add(src, (oa + 1, ob, ca), lam)
        if na:
            add(src, (oa - 1, ob + 1, ca), rate(0, na) * oa / na / s_open[0])
            add(src, (oa, ob, ca - 1), rate(0, na) * ca / na / s_closed[0])
        if nb:
            add(src, (oa, ob - 1, ca), rate(1, nb) * ob / nb / s_open[1])
            add(src, (oa, ob, ca + 1), rate(1, nb) * cb / nb / s_closed[1])
    size = len(states)
    q = sparse.csr_matrix((vals, (rows, cols)), shape=(size, size))
    q = q - sparse.diags(np.asarray(q.sum(axis=1)).ravel())
    a = q.T.tolil()
    a[0, :] = np.ones(size)  # replace one balance equation by the normalisation
    rhs = np.zeros(size)
    rhs[0] = 1.0
    pi = linalg.spsolve(a.tocsr(), rhs)
    st = np.array(states)
    cb = population - st[:, 2]
    nb = st[:, 1] + cb
    x_closed = sum(p * rate(1, n) * c / n / s_closed[1] for p, n, c in zip(pi, nb, cb) if n)
    return pi @ st[:, 0], pi @ st[:, 1], pi @ st[:, 2], x_closed


@pytest.mark.parametrize(
    ("alphas", "centres"),
    [
        (([1.0, 2.0], [1.0, 1.5, 1.8]),
         lambda d: [Centre.multiserver("A", d[0], 2), Centre.load_dependent("B", d[1], [1.0, 1.5, 1.8])]),
        (([1.0], [1.0, 2.0, 3.0]), lambda d: [Centre.queueing("A", d[0]), Centre.multiserver("B", d[1], 3)]),
    ],
)
def test_mixed_network_with_load_dependent_centres_equals_global_balance(alphas, centres):
    lam, s_open, s_closed, population = 1.0, (0.6, 0.5), (0.8, 0.4), 3
    demands = [(s_open[0], s_closed[0]), (s_open[1], s_closed[1])]
    sol = mixed_network(centres(demands), [lam, 0], [0, population])
    open_a, open_b, closed_a, x_closed = _global_balance(lam, s_open, s_closed, alphas, population, cap=60)
    assert sol.throughput[1] == pytest.approx(x_closed, rel=1e-9)
    assert sol.queue_length[:, 0] == pytest.approx([open_a, open_b], rel=1e-9)
    assert sol.queue_length[0, 1] == pytest.approx(closed_a, rel=1e-9)
    assert sol.queue_length[:, 1].sum() == pytest.approx(population, rel=1e-12)
