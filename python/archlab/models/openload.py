"""A load-dependent centre under open (Poisson) load, alone or shared with closed classes.

A load-dependent centre serves at rate alpha(n)/D with n jobs present (alpha(n) = min(n, m) for m
servers; beyond the last given multiplier the rate stays at the last value, a). In a product-form
network its factor for n jobs is U^n / A(n), A(n) = alpha(1)...alpha(n), U = sum_c lambda_c D_c
the offered load of the open classes (BCMP; Lazowska et al., *Quantitative System Performance*,
1984, ch. 8). With k jobs of closed classes present as well, summing over the open jobs l gives

    h(k) = sum_l C(k + l, l) U^l / A(k + l),

so the closed classes see the centre as a load-dependent centre with multipliers
alpha_eff(k) = h(k - 1) / h(k), and given k closed jobs the open ones number l with probability
C(k + l, l) U^l / (A(k + l) h(k)). A queueing centre (alpha = 1) gives alpha_eff = 1 - U, the
familiar inflation D / (1 - U); a delay centre gives alpha_eff(k) = k, no change. Stability needs
U < a. The infinite sums are split where the multipliers become constant: past that point the
terms are negative-binomial, C(k + l, l) x^l with x = U / a, whose tail is a binomial series
summed in closed form through the negative binomial survival function. Everything is in log
space, so 64 servers or hundreds of closed jobs do not overflow."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from archlab.models.errors import UnstableError
from archlab.models.network import Centre

# Open-only marginals are listed until the probability of more jobs drops below this.
MARGINAL_TAIL = 1e-13


@dataclass(frozen=True)
class OpenLoad:
    """One load-dependent centre with open offered load U, for 0..``max_closed`` closed jobs."""

    log_h: np.ndarray  # log h(k), k = 0..max_closed
    open_jobs: np.ndarray  # E[l | k], the mean number of open jobs given k closed ones

    @property
    def effective_multipliers(self) -> tuple[float, ...]:
        """alpha_eff(k), k = 1..max_closed: the rates the closed classes see."""
        return tuple(float(v) for v in np.exp(self.log_h[:-1] - self.log_h[1:]))


def open_load(centre: Centre, offered: float, max_closed: int) -> OpenLoad:
    """h(k) and E[l | k] for k = 0..``max_closed``; raises :class:`UnstableError` when U >= a."""
    alpha = np.asarray(centre.rate_multipliers or (1.0,), dtype=float)
    top, last = alpha.size, float(alpha[-1])
    if offered >= last:
        raise UnstableError(f"{centre.name} offered load", f"< {last:g} (its largest service-rate multiplier)", offered,
                            "an open queue at or above capacity has no steady state")
    log_a = np.concatenate(([0.0], np.cumsum(np.log(alpha))))  # log A(n), n = 0..top
    k_all = np.arange(max_closed + 1)
    if offered == 0.0:
        beyond = np.maximum(k_all - top, 0)
        return OpenLoad(-(log_a[np.minimum(k_all, top)] + beyond * math.log(last)), np.zeros(k_all.size))
    log_u, log_x = math.log(offered), math.log(offered / last)
    log_h, means = np.empty(k_all.size), np.empty(k_all.size)
    for k in k_all:
        start = max(0, top - int(k))  # first l with k + l >= top (constant multipliers)
        l = np.arange(start)
        head = _log_binom(k + l, l) + l * log_u - log_a[k + l]
        prefix = (top - k) * math.log(last) - log_a[top]
        tail = prefix + _log_binomial_series(int(k), start, log_x)
        tail_mean = prefix + math.log(k + 1) + log_x + _log_binomial_series(int(k) + 1, max(start - 1, 0), log_x)
        log_h[k] = special.logsumexp(np.append(head, tail))
        with np.errstate(divide="ignore"):
            weighted = np.append(head + np.log(l), tail_mean)
        means[k] = math.exp(special.logsumexp(weighted) - log_h[k])
    return OpenLoad(log_h, means)


def open_marginal(centre: Centre, offered: float) -> np.ndarray:
    """P(n jobs), n = 0..J, of the centre under open load alone; J is where the remaining tail
    probability falls below ``MARGINAL_TAIL``."""
    alpha = np.asarray(centre.rate_multipliers or (1.0,), dtype=float)
    load = open_load(centre, offered, 0)
    if offered == 0.0:
        return np.array([1.0])
    top, last = alpha.size, float(alpha[-1])
    log_a = np.concatenate(([0.0], np.cumsum(np.log(alpha))))
    x = offered / last
    log_p_top = top * math.log(offered) - log_a[top] - load.log_h[0]
    # Past `top` the distribution is geometric with ratio x: P(n > J) = P(top) x^(J - top + 1) / (1 - x).
    extra = max(0, math.ceil((math.log(MARGINAL_TAIL) + math.log1p(-x) - log_p_top) / math.log(x)))
    n = np.arange(top + extra + 1)
    log_an = np.where(n <= top, log_a[np.minimum(n, top)], log_a[top] + (n - top) * math.log(last))
    return np.exp(n * math.log(offered) - log_an - load.log_h[0])


def _log_binom(n: np.ndarray | int, l: np.ndarray | int) -> np.ndarray:
    return special.gammaln(np.asarray(n) + 1) - special.gammaln(np.asarray(l) + 1) - special.gammaln(np.asarray(n) - np.asarray(l) + 1)


def _log_binomial_series(k: int, start: int, log_x: float) -> float:
    """log sum_{l >= start} C(k + l, l) x^l = log P(NB >= start) - (k + 1) log(1 - x), NB the
    number of failures before the (k + 1)-th success with failure probability x."""
    x = math.exp(log_x)
    survival = 0.0 if start == 0 else float(stats.nbinom.logsf(start - 1, k + 1, 1.0 - x))
    return survival - (k + 1) * math.log1p(-x)
