"""Open and mixed product-form (Jackson / BCMP) networks, single or multiple classes.

Open classes arrive from outside at rate lambda_c; a centre's demand D_kc = visits x service
time is per job, as for :class:`~archlab.models.network.ClosedNetwork`. The solution
(Lazowska et al., *Quantitative System Performance*, 1984, ch. 7; Jain Box 34.1):

* utilisation U_k = sum_c lambda_c D_kc (of the whole centre; per server U_k / m);
* residence R_kc = D_kc / (1 - U_k) at a queueing centre, D_kc at a delay centre, and
  D_kc E[n_k] / U_k at a load-dependent centre (m servers, or any rate multipliers alpha(n)),
  E[n_k] from the centre's product-form marginal (:mod:`~archlab.models.openload`); for m
  servers this is D_kc (1 + C(m, U_k) / (m - U_k)), Erlang C. With several classes it holds
  when the centre serves them by processor sharing, or FCFS with one shared service time, as
  product form requires;
* Q_kc = lambda_c R_kc (Little), R_c = sum_k R_kc.

Mixed networks (open and closed classes; Lazowska §7.4.3 and ch. 8): the open classes take U_k^o
of each centre and the closed classes see it slowed down. At a queueing centre their demands are
inflated to D_kc / (1 - U_k^o); at a load-dependent centre they see the effective multipliers
alpha_eff(k) = h(k - 1)/h(k) of :mod:`~archlab.models.openload`; the closed model is solved by
exact MVA. Each open class then finds the closed jobs queued: R_ko = D_ko (1 + Q_k^closed) /
(1 - U_k^o) at a queueing centre, and at a load-dependent centre the mean number of open jobs
is sum_k P_k^closed(k) E[l | k]."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np

from archlab.models import _check
from archlab.models.errors import ModelError, UnstableError
from archlab.models.mva import exact_mva
from archlab.models.network import Centre, CentreKind, ClosedNetwork, NetworkSolution
from archlab.models.openload import open_load, open_marginal


def open_network(centres: Sequence[Centre], arrival_rates: float | Sequence[float] | np.ndarray) -> NetworkSolution:
    """Open network: every class arrives from outside (``arrival_rates``, jobs/s, one per
    class). Raises :class:`UnstableError` when a centre would be busy 100 % of the time."""
    d, lam = _inputs(centres, arrival_rates)
    if np.all(lam == 0):
        raise ModelError("arrival_rates", "at least one rate > 0", lam.tolist())
    offered = d @ lam
    residence = np.empty_like(d)
    util = np.empty(len(centres))
    marginals = {}
    for k, c in enumerate(centres):
        if c.kind is CentreKind.DELAY:
            residence[k] = d[k]
            util[k] = math.nan
        elif c.kind is CentreKind.QUEUEING:
            _stable(c.name, offered[k])
            residence[k] = d[k] / (1.0 - offered[k])
            util[k] = offered[k]
        else:
            p = open_marginal(c, float(offered[k]))
            marginals[c.name] = p
            mean_jobs = float(open_load(c, float(offered[k]), 0).open_jobs[0])
            residence[k] = d[k] * mean_jobs / offered[k] if offered[k] > 0 else d[k]
            util[k] = offered[k] / c.servers if c.servers else 1.0 - p[0]
    return _solution(centres, tuple(0 for _ in lam), lam, residence, util, marginals)


def mixed_network(
    centres: Sequence[Centre],
    arrival_rates: Sequence[float],
    populations: Sequence[int],
    think_time: float | Sequence[float] = 0.0,
) -> NetworkSolution:
    """Mixed network. Class c is open when ``arrival_rates[c] > 0`` and closed when
    ``populations[c] > 0`` (not both); ``think_time`` applies to the closed classes. The
    solution's ``throughput`` is lambda_c for an open class and X_c for a closed one, and its
    ``population`` holds the closed populations (0 for open classes)."""
    d, lam = _inputs(centres, arrival_rates)
    pops = tuple(_check.count("populations", p, minimum=0) for p in populations)
    n_classes = d.shape[1]
    if len(pops) != n_classes:
        raise ModelError("populations", f"one count per class ({n_classes})", list(populations))
    both = [c for c in range(n_classes) if lam[c] > 0 and pops[c] > 0]
    neither = [c for c in range(n_classes) if lam[c] == 0 and pops[c] == 0]
    if both or neither:
        raise ModelError("classes", "each class open (rate > 0) or closed (population > 0), not both",
                         f"both: {both}, neither: {neither}")
    z = (cast(float, think_time),) * n_classes if np.isscalar(think_time) else tuple(cast(Sequence[float], think_time))
    if len(z) != n_classes:
        raise ModelError("think_time", f"one value per class ({n_classes})", think_time)
    closed = [c for c in range(n_classes) if pops[c] > 0]
    opened = [c for c in range(n_classes) if lam[c] > 0]
    queueing = np.array([c.kind is CentreKind.QUEUEING for c in centres])
    u_open = d[:, opened] @ lam[opened]
    for k, c in enumerate(centres):
        if c.kind is CentreKind.QUEUEING:
            _stable(c.name, float(u_open[k]))
    if not closed:
        return open_network(centres, lam)
    total_closed = sum(pops)
    loads = {k: open_load(c, float(u_open[k]), total_closed)
             for k, c in enumerate(centres) if c.kind is CentreKind.LOAD_DEPENDENT}
    stretch = np.where(queueing, 1.0 / (1.0 - np.where(queueing, u_open, 0.0)), 1.0)
    inflated = []
    for k, c in enumerate(centres):
        demands = tuple(float(d[k, j] * stretch[k]) for j in closed)
        if k in loads:
            inflated.append(Centre.load_dependent(c.name, demands, loads[k].effective_multipliers))
        else:
            inflated.append(Centre(c.name, c.kind, demands))
    sub = exact_mva(ClosedNetwork(inflated, [z[j] for j in closed]), [pops[j] for j in closed])
    q_closed = sub.queue_length.sum(axis=1)
    residence = np.empty_like(d)
    throughput = lam.copy()
    residence[:, closed] = sub.residence_time
    throughput[closed] = sub.throughput
    open_factor = np.where(queueing, (1.0 + q_closed) / (1.0 - np.where(queueing, u_open, 0.0)), 1.0)
    util = np.where(queueing, d @ throughput, math.nan)
    for k, load in loads.items():
        p_closed = sub.marginals[centres[k].name]
        if u_open[k] > 0:
            open_factor[k] = float(np.dot(p_closed, load.open_jobs)) / u_open[k]
        c = centres[k]
        util[k] = float(d[k] @ throughput) / c.servers if c.servers else 1.0 - p_closed[0] * math.exp(-load.log_h[0])
    residence[:, opened] = d[:, opened] * open_factor[:, None]
    return _solution(centres, pops, throughput, residence, util)


def _inputs(centres: Sequence[Centre], arrival_rates: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not centres:
        raise ModelError("centres", "at least one Centre", list(centres))
    classes = {len(c.demands) for c in centres}
    if len(classes) != 1:
        raise ModelError("centres", "the same number of class demands at every centre", sorted(classes))
    lam = np.atleast_1d(np.asarray(arrival_rates, dtype=float))
    if lam.ndim != 1 or lam.size != classes.pop() or not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise ModelError("arrival_rates", f"one finite rate >= 0 per class ({len(centres[0].demands)})", arrival_rates)
    return np.array([c.demands for c in centres], dtype=float), lam


def _stable(name: str, rho: float) -> None:
    if rho >= 1.0:
        raise UnstableError(f"{name} utilisation", "< 1 (the open classes alone must not saturate it)", rho,
                            "an open queue at or above capacity has no steady state")


def _solution(centres: Sequence[Centre], pops: tuple[int, ...], throughput: np.ndarray, residence: np.ndarray,
              util: np.ndarray, marginals: dict[str, np.ndarray] | None = None) -> NetworkSolution:
    return NetworkSolution(
        centre_names=tuple(c.name for c in centres),
        population=pops,
        throughput=throughput.copy(),
        response_time=residence.sum(axis=0),
        residence_time=residence,
        queue_length=residence * throughput,
        utilisation=util,
        marginals=marginals or {},
        probability_error=max((abs(p.sum() - 1.0) for p in (marginals or {}).values()), default=0.0),
    )
