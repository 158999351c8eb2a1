"""Buzen's convolution algorithm for single-class closed networks, computed in log space: the
normalising constants G(n) are kept as log G(n) and combined with log-sum-exp, so nothing
overflows however large the population or the number of servers. It is the independent second
exact solver: X(n) = G(n-1)/G(n) and the marginal P_i(j | N) = f_i(j) G^{-i}(N-j) / G(N) need no
recursion on differences, which is what makes it a trustworthy check of :func:`exact_mva`."""

from __future__ import annotations

import numpy as np
from scipy import special

from archlab.models import _check
from archlab.models.errors import ModelError
from archlab.models.network import Centre, CentreKind, ClosedNetwork, NetworkSolution, utilisation


def convolution(network: ClosedNetwork, population: int) -> NetworkSolution:
    """Exact solution of a single-class network at ``population`` by log-space convolution."""
    if network.n_classes != 1:
        raise ModelError("network", "a single-class network (use exact_mva for several classes)", network.n_classes)
    n = _check.count("population", population)
    factors = [_log_factor(c, n) for c in network.centres]
    think = _log_factor(Centre.delay("think", network.think_times[0]), n)
    # prefix[k] = all factors before k (with think time), suffix[k] = all factors from k on.
    prefix = [think]
    for f in factors:
        prefix.append(_log_convolve(prefix[-1], f))
    suffix = [np.where(np.arange(n + 1) == 0, 0.0, -np.inf)]
    for f in reversed(factors):
        suffix.append(_log_convolve(suffix[-1], f))
    suffix.reverse()
    log_g = prefix[-1]
    x = float(np.exp(log_g[n - 1] - log_g[n]))
    queue, idle, marginals = [], {}, {}
    for k, (centre, f) in enumerate(zip(network.centres, factors)):
        log_rest = _log_convolve(prefix[k], suffix[k + 1])  # G^{-k}
        p = np.exp(f + log_rest[::-1] - log_g[n])  # P_k(j | N), j = 0..N
        queue.append(float(np.dot(np.arange(n + 1), p)))
        if centre.kind is CentreKind.LOAD_DEPENDENT:
            idle[k] = float(p[0])
            marginals[centre.name] = p
    q = np.array(queue)[:, None]
    residence = q / x
    return NetworkSolution(
        centre_names=tuple(c.name for c in network.centres),
        population=(n,),
        throughput=np.array([x]),
        response_time=residence.sum(axis=0),
        residence_time=residence,
        queue_length=q,
        utilisation=utilisation(network, np.array([x]), idle),
        marginals=marginals,
        probability_error=max((abs(p.sum() - 1.0) for p in marginals.values()), default=0.0),
    )


def _log_factor(centre: Centre, n: int) -> np.ndarray:
    """log f(j), j = 0..n: D^j / prod_{k<=j} alpha(k) (a delay centre has alpha(k) = k)."""
    j = np.arange(n + 1)
    d = centre.demands[0]
    if d == 0.0:
        return np.where(j == 0, 0.0, -np.inf)
    log_f = j * np.log(d)
    if centre.kind is CentreKind.DELAY:
        return log_f - special.gammaln(j + 1)
    if centre.kind is CentreKind.LOAD_DEPENDENT:
        return log_f - np.concatenate(([0.0], np.cumsum(np.log(centre.alpha(j[1:])))))
    return log_f


def _log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """c[n] = log sum_{j<=n} exp(a[j] + b[n-j])."""
    n = a.size
    idx = np.arange(n)[:, None] - np.arange(n)[None, :]  # n - j
    terms = np.where(idx >= 0, a[None, :] + b[np.clip(idx, 0, None)], -np.inf)
    return special.logsumexp(terms, axis=1)
