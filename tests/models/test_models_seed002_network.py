"""Seed 002 Tables 32-33 (the network of queues of §7.4, Figure 28): which of their predicted
values follow by formula from inputs recoverable from the tables themselves.

The thesis's inputs (service time of the net thread and of a worker thread, server and network
delays per configuration, taken from measurements it shows only as figures) are not printed. Four
are recoverable from each predicted column by operational laws: S_net = U_net / X (utilisation
law), D_server and D_network (delay centres: residence = demand), and S_worker = R_worker where
the workers do not queue (N = 2 VC <= m or a queue of about one job on 32 workers). With them,
every predicted column except VC = 32, WT = 8 follows from three formulas: the net thread's
residence is the open M/M/1 value S/(1 - U), the workers' utilisation is 1 - p_0 of an M/M/m at
the offered load X S_worker (Jain Box 31.2), and X solves N = X (sum of residence times) with
no think time. The VC = 32, WT = 8 columns cannot come from one M/M/8 worker centre at all (see
the last test). Table 32 is lines 1340-1360 of the seed, Table 33 lines 1374-1394; rates ops/s,
times ms."""

from __future__ import annotations

import pytest
from scipy import optimize

from archlab.models import Centre, ClosedNetwork, exact_mva, mmm

# (table, VC, WT) -> predicted: X, R net thread, R workers, R server, R network, R total,
# U net thread, U workers, request queue length.
PREDICTED = {
    (32, 4, 8): (2977, 0.05, 0.05, 2.066, 0.52, 2.687, 0.131, 0.138, 0.149),
    (32, 32, 8): (4252, 0.054, 12.396, 2.066, 0.537, 15.053, 0.186, 0.865, 52.701),
    (32, 4, 32): (2953, 0.049, 0.054, 2.084, 0.522, 2.709, 0.127, 0.147, 0.159),
    (32, 32, 32): (20524, 0.355, 0.054, 2.084, 0.625, 3.118, 0.879, 0.669, 1.105),
    (33, 4, 8): (2894, 0.052, 0.046, 2.144, 0.523, 2.764, 0.131, 0.123, 0.132),
    (33, 32, 8): (4228, 0.056, 12.411, 2.144, 0.526, 15.137, 0.191, 0.86, 52.475),
    (33, 4, 32): (2871, 0.045, 0.049, 2.168, 0.525, 2.787, 0.115, 0.131, 0.14),
    (33, 32, 32): (20645, 0.234, 0.049, 2.168, 0.65, 3.1, 0.828, 0.635, 1.007),
}
REPRODUCIBLE = [key for key in PREDICTED if key[1:] != (32, 8)]


@pytest.mark.parametrize("key", REPRODUCIBLE)
def test_predicted_columns_follow_from_recovered_inputs(key):
    _, vc, wt = key
    x, r_net, r_w, r_srv, r_nw, r_tot, u_net, u_w, q_w = PREDICTED[key]
    clients = 2 * vc
    s_net = u_net / x * 1e3  # ms, utilisation law
    s_w = r_w  # ms: the workers do not queue in these columns
    # Residence of the net thread = the open M/M/1 formula S/(1 - U), S = U/X: with U and R
    # printed to 3 decimals, R must lie in the formula's range over U +- 0.0005, widened by 0.0005.
    low, high = (u / x * 1e3 / (1 - u) for u in (u_net - 5e-4, u_net + 5e-4))
    assert low - 5e-4 <= r_net <= high + 5e-4
    # Utilisation of the workers = 1 - p0 of M/M/m at offered load X S_w; their queue = its mean.
    # S_w is printed to 3 decimals (1-2 % of its value), which bounds the agreement.
    station = mmm(x, 1e3 / s_w, wt)
    assert 1 - station.p0 == pytest.approx(u_w, abs=2e-3)
    assert station.mean_jobs == pytest.approx(q_w, rel=0.01)

    # The throughput solves N = X (S_net / (1 - X S_net) + S_w + D_server + D_network).
    def cycle(rate: float) -> float:
        return rate * (s_net / (1 - rate * s_net / 1e3) + s_w + r_srv + r_nw) / 1e3 - clients

    solved = optimize.brentq(cycle, 1.0, 1e3 / s_net * (1 - 1e-12))
    assert solved == pytest.approx(x, rel=1e-3)
    assert r_net + r_w + r_srv + r_nw == pytest.approx(r_tot, abs=2e-3)


@pytest.mark.parametrize("key", REPRODUCIBLE)
def test_exact_mva_on_the_recovered_inputs(key):
    # Exact MVA of the Figure 28 network (net thread M/M/1, workers M/M/m, server and network
    # delays) on the same inputs: within 0.1 % of the printed throughput at 8 clients, where
    # nothing queues, and 1.3-2.6 % above it at 64 clients on 32 workers, where the net thread
    # is 83-88 % busy and exact MVA's closed residence S (1 + Q(N - 1)) is below S / (1 - U).
    _, vc, wt = key
    x, r_net, r_w, r_srv, r_nw, *_, u_net, _, _ = PREDICTED[key]
    net = ClosedNetwork([Centre.queueing("net thread", u_net / x), Centre.multiserver("workers", r_w / 1e3, wt),
                         Centre.delay("server", r_srv / 1e3), Centre.delay("network", r_nw / 1e3)])
    sol = exact_mva(net, 2 * vc)
    if vc == 4:
        assert sol.throughput[0] == pytest.approx(x, rel=1e-3)
    else:
        assert 1.01 * x < sol.throughput[0] < 1.03 * x
        assert sol.residence_time[0, 0] * 1e3 < 0.85 * r_net


@pytest.mark.parametrize("table", [32, 33])
def test_vc32_wt8_columns_are_not_an_mm8_worker_centre(table):
    # Printed: 52.7 of the 64 jobs at the workers on average, yet the workers idle 13.5 % of the
    # time (U = 0.865). Choose the one worker service time that gives the printed throughput in
    # exact MVA: the 8 workers are then never idle (1 - P0 > 0.999), and the utilisation law
    # gives U = X S / m = 1.0, not 0.865. No single worker service time reproduces the column,
    # so the thesis's input there is not recoverable.
    x, r_net, r_w, r_srv, r_nw, *_, u_net, u_w, q_w = PREDICTED[(table, 32, 8)]

    def network(s_w: float) -> ClosedNetwork:
        return ClosedNetwork([Centre.queueing("net thread", u_net / x), Centre.multiserver("workers", s_w, 8),
                              Centre.delay("server", r_srv / 1e3), Centre.delay("network", r_nw / 1e3)])

    s_w = optimize.brentq(lambda s: exact_mva(network(s), 64).throughput[0] - x, 1e-4, 1e-2)
    sol = exact_mva(network(s_w), 64)
    assert sol.queue_length[1, 0] == pytest.approx(q_w, rel=0.03)
    assert 1 - sol.marginals["workers"][0] > 0.999 and sol.utilisation[1] > 0.99
    assert abs(u_w - sol.utilisation[1]) > 0.1
