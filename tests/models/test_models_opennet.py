"""Open and mixed product-form networks: single stations against the M/M/1 and M/M/m closed
forms, the operational laws on the solutions, and three published mixed-network examples as
tested in the Octave `queueing` package (mmarzolla/queueing, inst/qnmix.m at commit f36e01c):
Lazowska et al. (Zahorjan) p. 148, Bolch et al. Example 8.6 p. 345, and Schwetman CSD-TR-355
Figure 10 p. 26. Octave's R is per visit; here residence = visits x R."""

from __future__ import annotations

import numpy as np
import pytest

from archlab.models import Centre, ModelError, UnstableError, littles_law, mm1, mmm, utilisation_law
from archlab.models.opennet import mixed_network, open_network


def test_single_queueing_centre_is_mm1():
    sol = open_network([Centre.queueing("cpu", 0.004)], 200.0)
    ref = mm1(200.0, 250.0)
    assert sol.response_time[0] == pytest.approx(ref.mean_response, rel=1e-12)
    assert sol.utilisation[0] == pytest.approx(0.8)


def test_multiserver_centre_is_mmm():
    # seed 002 Table 27 inputs (lambda 6854/s, mu 877.67656/s, 8 servers).
    sol = open_network([Centre.multiserver("workers", 1 / 877.67656, 8)], 6854.0)
    ref = mmm(6854.0, 877.67656, 8)
    assert sol.response_time[0] == pytest.approx(ref.mean_response, rel=1e-10)
    assert sol.utilisation[0] == pytest.approx(6854 / 877.67656 / 8)


def test_open_network_obeys_the_operational_laws():
    centres = [Centre.queueing("cpu", (0.002, 0.001)), Centre.queueing("disk", (0.003, 0.0)),
               Centre.delay("net", (0.0005, 0.0005)), Centre.multiserver("pool", (0.004, 0.002), 4)]
    lam = np.array([100.0, 300.0])
    sol = open_network(centres, lam)
    for k, c in enumerate(centres[:2]):
        assert sol.utilisation[k] == pytest.approx(sum(utilisation_law(lam[j], c.demands[j]) for j in range(2)))
    for j in range(2):
        assert sol.queue_length[:, j].sum() == pytest.approx(littles_law(lam[j], sol.response_time[j]))
    with pytest.raises(UnstableError, match="^cpu utilisation"):
        open_network(centres, [300.0, 500.0])
    with pytest.raises(ModelError, match="^arrival_rates"):
        open_network(centres, [1.0])


def test_mixed_lazowska_p148():
    # Classes: two open (lambda 1, 1/2), two closed (N = 1 each); visits 1, so D = S.
    centres = [Centre.queueing("1", (1 / 4, 1 / 2, 1 / 2, 1)), Centre.queueing("2", (1 / 6, 1, 1, 4 / 3))]
    sol = mixed_network(centres, [1, 0.5, 0, 0], [0, 0, 1, 1])
    assert sol.queue_length[:, 2] == pytest.approx([4 / 19, 15 / 19], abs=1e-4)
    assert sol.queue_length[:, 3] == pytest.approx([5 / 19, 14 / 19], abs=1e-4)


def test_mixed_bolch_example_8_6():
    visits = np.array([[2, 1], [2.5, 1.5], [1, 0.5], [1, 0.4]])  # classes x centres
    service = np.array([[0.4, 0.6], [0.8, 1.6], [0.3, 0.5], [0.5, 0.8]])
    d = visits * service
    centres = [Centre.queueing(f"c{k}", tuple(d[:, k])) for k in range(2)]
    sol = mixed_network(centres, [0.5, 0.25, 0, 0], [0, 0, 1, 1])
    per_visit = sol.residence_time.T / visits  # classes x centres, Octave's R
    assert per_visit[2:] == pytest.approx(np.array([[4.829, 6.951], [7.727, 11.636]]), abs=1e-3)
    assert per_visit[:2] == pytest.approx(np.array([[8.822, 10.766], [17.645, 28.710]]), abs=1e-3)
    assert sol.queue_length.T[2:] == pytest.approx(np.array([[0.582, 0.418], [0.624, 0.376]]), abs=1e-3)
    assert sol.queue_length.T[:2] == pytest.approx(np.array([[8.822, 5.383], [11.028, 10.766]]), abs=1e-3)
    assert sol.throughput[2:] == pytest.approx([0.120, 0.081], abs=1e-3)
    # Per-class utilisation of the open classes, U = lambda D: [0.4 0.3; 0.5 0.6].
    assert (d[:2].T * [0.5, 0.25]).T == pytest.approx(np.array([[0.4, 0.3], [0.5, 0.6]]))


def test_mixed_schwetman_figure_10():
    centres = [Centre.queueing("1", (0.25, 0.25)), Centre.queueing("2", (0.0, 0.10))]
    sol = mixed_network(centres, [1, 0], [0, 3])
    assert sol.residence_time[0, 0] == pytest.approx(1.201, abs=1e-3)
    assert [sol.residence_time[0, 1], sol.residence_time[1, 1]] == pytest.approx([0.885, 0.135], abs=1e-3)
    # Little's law for the closed class: its 3 jobs are all somewhere.
    assert sol.queue_length[:, 1].sum() == pytest.approx(3.0)


def test_mixed_refusals_and_open_only():
    centres = [Centre.queueing("1", (0.25, 0.25))]
    with pytest.raises(ModelError, match="^classes"):
        mixed_network(centres, [1, 1], [0, 3])
    with pytest.raises(UnstableError, match="^m offered load: expected < 2"):
        mixed_network([Centre.multiserver("m", (0.5, 0.1), 2)], [4, 0], [0, 1])
    with pytest.raises(UnstableError):
        mixed_network(centres, [4, 0], [0, 1])
    only_open = mixed_network(centres, [1, 2], [0, 0])
    assert only_open.response_time == pytest.approx(open_network(centres, [1, 2]).response_time)
