"""Goodness of fit of a :class:`~archlab.latency.fitting.DistributionFit`: Kolmogorov-Smirnov and
chi-squared statistics, with p-values that stay valid although the parameters were fitted to the
same data.

The textbook KS and chi-squared p-values assume a fully specified distribution; with estimated
parameters the KS p-value is far too large (Lilliefors 1967; Stephens 1974), which is the first
defect of the thesis script. Here the p-value comes from a parametric bootstrap: draw n values from
the fitted distribution, refit the same family, recompute the statistic, and count how often it is
at least the observed one (p = (1 + #{T* >= T}) / (B + 1), Davison & Hinkley 1997, eq. 4.11).
The naive p-value is reported next to it only to show the difference. Both statistics are computed
exactly from the counts. The chi-squared test uses equiprobable bins under the fitted distribution
(Moore 1986), with about 2 n^(2/5) bins and never fewer than 5 expected per bin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from archlab.latency.discrete import round_to
from archlab.latency.errors import LatencyError, check_choice, check_positive_int
from archlab.latency.fitting import DistributionFit
from archlab.latency.samples import Samples

STATISTICS = ("ks", "chi2")


def ks_statistic(samples: Samples, cdf) -> float:
    """sup |F_n - F| for a continuous F, checked on both sides of every jump of F_n."""
    model = cdf(samples.values)
    above = samples.cumulative / samples.n
    below = (samples.cumulative - samples.counts) / samples.n
    return float(max(np.max(np.abs(above - model)), np.max(np.abs(model - below))))


def chi2_bin_count(n: int) -> int:
    return int(max(2, min(math.ceil(2 * n ** 0.4), n // 5)))


def chi2_statistic(samples: Samples, dist, bins: int | None = None) -> tuple[float, int]:
    """Pearson's statistic over ``bins`` equiprobable bins of ``dist``; returns (statistic, bins)."""
    bins = chi2_bin_count(samples.n) if bins is None else bins
    inner_edges = dist.ppf(np.arange(1, bins) / bins)
    # Observations equal to an edge count in the bin to the right of it: F is continuous, so
    # the choice is immaterial for continuous data and consistent for tied (rounded) data.
    index = np.searchsorted(inner_edges, samples.values, side="right")
    observed = np.bincount(index, weights=samples.counts, minlength=bins)
    expected = samples.n / bins
    return float(np.sum((observed - expected) ** 2) / expected), bins


@dataclass(frozen=True)
class GoodnessOfFit:
    distribution: str
    statistic_name: str
    statistic: float
    pvalue: float  # parametric bootstrap, valid with fitted parameters
    naive_pvalue: float  # as if the parameters were known in advance: biased, for contrast only
    n_boot: int
    bins: int | None = None


def _statistic(name: str, samples: Samples, fit: DistributionFit, bins: int | None) -> float:
    if name == "ks":
        return ks_statistic(samples, fit.dist_.cdf)
    return chi2_statistic(samples, fit.dist_, bins)[0]


def goodness_of_fit(fit: DistributionFit, samples: Samples, statistic: str = "ks", *,
                    n_boot: int = 200, seed: int | np.random.Generator = 0,
                    resolution: str | float | None = None) -> GoodnessOfFit:
    """Parametric-bootstrap goodness of fit of ``fit`` (already fitted to ``samples``).

    For rounded data (integer ms, HDR buckets) pass ``resolution`` ("auto": the detected grid,
    "hdr", or a step; see :mod:`archlab.latency.discrete`): each synthetic sample is then rounded
    to the same grid before the refit, so the bootstrap distribution of the statistic includes the
    ties the observed one has. Without it, tied data get falsely small p-values.
    Cost: ``n_boot`` draws of n values and refits; for very large n analyse a subsample.
    """
    check_choice("statistic", statistic, STATISTICS)
    check_positive_int("n_boot", n_boot, 1)
    if not hasattr(fit, "dist_"):
        raise LatencyError(f"goodness_of_fit: {fit.name} is not fitted; call fit(samples) first")
    rng = np.random.default_rng(seed)
    n = samples.n
    bins = chi2_bin_count(n) if statistic == "chi2" else None
    observed = _statistic(statistic, samples, fit, bins)
    exceed = 0
    for _ in range(n_boot):
        draws = fit.dist_.rvs(size=n, random_state=rng)
        synthetic = Samples.from_values(round_to(draws, samples, resolution) if resolution is not None else draws,
                                        samples.unit)
        refit = DistributionFit(fit.family, fit.shifted)
        try:
            refit.fit(synthetic)
        except LatencyError:
            continue  # a degenerate synthetic sample cannot be refitted; it is not "as extreme"
        exceed += _statistic(statistic, synthetic, refit, bins) >= observed
    if statistic == "ks":
        naive = float(sps.kstwo.sf(observed, n))
    else:
        assert bins is not None  # chi2 always has its bins
        naive = float(sps.chi2.sf(observed, bins - 1 - fit.n_params_)) if bins - 1 > fit.n_params_ else math.nan
    return GoodnessOfFit(fit.name, statistic, observed, (1 + exceed) / (n_boot + 1), naive, n_boot, bins)
