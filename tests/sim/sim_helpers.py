"""Helpers for the simulator's tests (a plain module, not a conftest: ``tests/conftest.py`` is
imported as ``conftest`` by other tests). Every simulation a test runs goes through
:func:`run_checked`, which asserts Little's law on each replication (the exact accounting
identity L T = sum of stays inside the window, to rounding) and basic sanity of every station,
so the law is checked on every run of the suite, whatever else the test asserts.

Tolerances: a reference value must lie inside the simulation's confidence interval at level
:data:`LEVEL` (Student t over independent replications), widened only by a stated bias bound
(HDR quantile resolution, finite-horizon bias). With about 60 such comparisons in the suite a
correct simulator fails one with probability about 6 %% at 99.9 %% per comparison; seeds are
fixed, so a run is reproducible and a failure points at a real change."""

from __future__ import annotations

import math

from scipy import stats

from archlab import sim

LEVEL = 0.999

# HDR histograms keep 3 significant digits: a quantile read from one is within 0.1 % of the
# exact sample quantile (relative bucket width 2^-10 < 10^-3).
HDR_RELATIVE = 1e-3


def interval(est: sim.Estimate, level: float = LEVEL) -> tuple[float, float]:
    """The confidence interval of ``est`` at ``level`` (re-derived from its n and std_dev)."""
    half = stats.t.ppf(0.5 + level / 2, est.n - 1) * est.std_dev / math.sqrt(est.n)
    return est.mean - half, est.mean + half


def assert_within(est: sim.Estimate, exact: float, *, bias: float = 0.0, what: str = "") -> None:
    """``exact`` lies in the LEVEL interval of ``est`` widened by ``bias`` (absolute)."""
    lo, hi = interval(est)
    assert lo - bias <= exact <= hi + bias, f"{what}: exact {exact:.6g} outside [{lo:.6g}, {hi:.6g}] (+- bias {bias:.3g})"


def run_checked(model: sim.Model | dict, simulation: sim.Simulation) -> sim.SimulationResult:
    result = simulation.run(model)
    for rep in result.replications:
        assert rep.little.identity_error < 1e-9, f"Little's law identity broken in replication {rep.index}: {rep.little}"
        for name, st in rep.stations.items():
            assert st.mean_queue >= -1e-9 and st.mean_jobs >= -1e-9, f"{name}: negative level {st}"
            if st.utilisation is not None:
                assert -1e-12 <= st.utilisation <= 1 + 1e-12, f"{name}: utilisation {st.utilisation}"
    return result
