"""The hill-climbing controller converges on a simulated pool server (archlab.sim) whose best
size is known in closed form, and again after the program mix changes mid-run.

The plant (archlab.tuning.plant) is the machine-repairman server of
test_tuning_model_based.py: one CPU, exponential CPU time S (1 + k (m - 1)), downstream wait Z,
N = 80 clients >= m, so its throughput is X(m) = (1 - p0(m)) / S(m) exactly. "Converged" means
the controller's size is one whose true throughput is within TOL = 5% of the maximum, which is
what one control interval can resolve: an interval of 3000 time units completes about
X * 3000 = 2400 requests; treating completions as a renewal count with coefficient of variation
about 1, the relative standard error of one interval's throughput is about 1 / sqrt(2400) = 2.0%,
that of the difference of two intervals sqrt(2) times that, 2.9%. The controller's threshold of
5% (1.7 standard errors, a false win in ~5% of probes) keeps it from drifting on noise, and a
size whose true throughput is more than 5% below the best loses the comparison with the best
most of the time, so the band the test accepts is the band the threshold implies."""

import math

from archlab.tuning import HillClimber
from archlab.tuning.plant import PoolPlant

K = 0.02
TOL = 0.05


def band(s: float, z: float, limit: int = 80) -> tuple[int, set[int]]:
    def x(m):
        sm = s * (1 + K * (m - 1))
        total = sum(math.factorial(m) / math.factorial(m - j) * (sm / z) ** j for j in range(m + 1))
        return (1 - 1 / total) / sm

    xs = {m: x(m) for m in range(1, limit + 1)}
    best = max(xs, key=xs.get)
    return best, {m for m, v in xs.items() if v >= (1 - TOL) * xs[best]}


def test_converges_and_follows_a_change_of_the_program_mix():
    plant = PoolPlant(cpu_s=1.0, wait_s=9.0, thread_cost=K, clients=80, interval=3000, seed=7)
    ctl = HillClimber(initial=2, maximum=80, threshold=TOL)
    best1, good1 = band(1.0, 9.0)
    best2, good2 = band(1.0, 29.0)
    assert (best1, best2) == (13, 26)  # the closed form's optima, far apart
    sizes = []
    for i in range(120):  # bounded: 120 intervals of one simulated run each
        if i == 60:
            plant.change(cpu_s=1.0, wait_s=29.0)
        ctl.observe(plant.run(ctl.size))
        sizes.append(ctl.current)
    assert set(sizes[40:60]) <= good1, sizes
    assert set(sizes[100:]) <= good2, sizes
    assert sizes[0] < min(good1)  # it started far below and climbed


def test_the_state_machine_alternates_measure_and_probe_within_bounds():
    ctl = HillClimber(initial=4, minimum=2, maximum=6, step=4)
    seen = []
    for _ in range(20):
        seen.append(ctl.size)
        ctl.observe(100.0)  # a flat plant: no probe ever wins
    assert all(2 <= m <= 6 for m in seen)
    assert ctl.current == 4  # never moved on a flat plant
