"""Matplotlib figures for every method: PDF (histogram + KDE), CDF, CCDF/LLCD (with the power-law
fit), Q-Q, Hill plot, mean-excess plot, GPD Q-Q and threshold-stability plots, Lorenz curve and
the mass-count plot.

Each function draws on the ``ax`` it is given, or on a fresh :class:`matplotlib.figure.Figure`
(no pyplot state, so it works headless and in threads), and returns the Axes. The plotted numbers
are the library's own results, so a figure never disagrees with the table beside it.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from scipy import stats

from archlab.latency.empirical import ecdf, histogram, kde
from archlab.latency.fitting import DistributionFit
from archlab.latency.masscount import MassCount
from archlab.latency.samples import Samples
from archlab.latency.pot import GPDFit, ThresholdStability, gpd_qq_points
from archlab.latency.tails import LLCD, HillEstimator, MeanExcess, PowerLawTail
from archlab.latency.zeta import DiscretePowerLaw


def _axes(ax: Axes | None) -> Axes:
    return ax if ax is not None else Figure(figsize=(6, 4), layout="constrained").add_subplot()


def _finish(ax: Axes, samples: Samples, fit: DistributionFit | None, function: str, x: np.ndarray,
            ylabel: str, title: str) -> Axes:
    """Overlay the fitted ``function`` (pdf or cdf) when there is a fit, then label the axes."""
    if fit is not None:
        ax.plot(x, getattr(fit.dist_, function)(x), "--", label=fit.name)
    ax.set(xlabel=f"latency ({samples.unit})", ylabel=ylabel, title=title)
    ax.legend()
    return ax


def plot_pdf(samples: Samples, ax: Axes | None = None, *, scale: str = "linear", fit: DistributionFit | None = None) -> Axes:
    """Histogram density (linear or log bins) with the KDE (on ln x for log bins) and an optional fit."""
    ax = _axes(ax)
    hist = histogram(samples, scale=scale)
    ax.stairs(hist.density, hist.edges, fill=True, alpha=0.35, label=f"histogram ({scale} bins)")
    density = kde(samples, log_scale=scale == "log")
    ax.plot(density.x, density.density, label="KDE")
    if scale == "log":
        ax.set_xscale("log")
        ax.set_yscale("log")
    return _finish(ax, samples, fit, "pdf", density.x, "density", "PDF")


def plot_cdf(samples: Samples, ax: Axes | None = None, *, fit: DistributionFit | None = None) -> Axes:
    """Empirical CDF with its DKW band, and an optional fitted CDF."""
    ax = _axes(ax)
    curve = ecdf(samples)
    ax.step(curve.x, curve.cdf, where="post", label="ECDF")
    ax.fill_between(curve.x, np.clip(curve.cdf - curve.dkw_epsilon, 0, 1), np.clip(curve.cdf + curve.dkw_epsilon, 0, 1),
                    step="post", alpha=0.25, label=f"{curve.level:.0%} DKW band")
    return _finish(ax, samples, fit, "cdf", curve.x, "P(X <= x)", "CDF")


def plot_ccdf(samples: Samples, ax: Axes | None = None, *, line: LLCD | None = None,
              power_law: PowerLawTail | DiscretePowerLaw | None = None) -> Axes:
    """Log-log survival P(X >= x) (the LLCD) with the fitted LLCD line over its top fraction and
    the CSN power law above its xmin (scaled by the tail's share n_tail / n)."""
    ax = _axes(ax)
    curve = ecdf(samples)
    positive = curve.x > 0
    ax.loglog(curve.x[positive], curve.survival_ge[positive], ".", markersize=2, label="P(X >= x)")
    if line is not None:
        x = 10 ** line.log_x
        ax.loglog(x, 10 ** (line.slope * line.log_x + line.intercept), "-",
                  label=f"LLCD top {line.top_fraction:.2%}: alpha = {line.alpha:.3g}")
    if power_law is not None:
        x = curve.x[curve.x >= power_law.xmin_]
        share = power_law.n_tail_ / samples.n
        if isinstance(power_law, DiscretePowerLaw):
            model, name = power_law.survival(x), "discrete power law"
        else:
            model, name = (power_law.xmin_ / x) ** power_law.alpha_, "power law"
        ax.loglog(x, share * model, "--", label=f"{name} above {power_law.xmin_:g}: alpha = {power_law.alpha_:.3g}")
    ax.set(xlabel=f"latency ({samples.unit})", ylabel="P(X >= x)", title="CCDF (log-log)")
    ax.legend()
    return ax


def qq_points(fit: DistributionFit, samples: Samples, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(theoretical, empirical) quantile pairs X_(i) <-> F^-1((i - 0.5)/n), for at most ``max_points``
    ranks i (all of them when n is small; otherwise evenly spaced plus the top 100 ranks)."""
    n = samples.n
    if n <= max_points:
        ranks = np.arange(1, n + 1)
    else:
        ranks = np.unique(np.concatenate([np.linspace(1, n, max_points - 100).round(), np.arange(n - 99, n + 1)]))
    ranks = ranks.astype(np.int64)
    return fit.dist_.ppf((ranks - 0.5) / n), samples.order_statistics(ranks - 1)


def plot_qq(fit: DistributionFit, samples: Samples, ax: Axes | None = None) -> Axes:
    ax = _axes(ax)
    theoretical, empirical = qq_points(fit, samples)
    ax.plot(theoretical, empirical, ".", markersize=3)
    low, high = np.nanmin([theoretical.min(), empirical.min()]), np.nanmax([theoretical.max(), empirical.max()])
    ax.plot([low, high], [low, high], "k--", linewidth=1)
    ax.set(xlabel=f"{fit.name} quantile ({samples.unit})", ylabel=f"sample quantile ({samples.unit})", title="Q-Q")
    return ax


def plot_hill(estimator: HillEstimator, ax: Axes | None = None) -> Axes:
    """Hill plot: alpha(k) against k on a log axis (Drees, de Haan & Resnick 2000), chosen k marked."""
    ax = _axes(ax)
    ax.semilogx(estimator.curve_k_, estimator.curve_alpha_, label="Hill alpha(k)")
    ax.axvline(estimator.k_, color="k", linestyle=":", label=f"k = {estimator.k_}: alpha = {estimator.alpha_:.3g}")
    ax.set(xlabel="k (number of top order statistics)", ylabel="tail index alpha", title="Hill plot")
    finite = estimator.curve_alpha_[np.isfinite(estimator.curve_alpha_)]
    if finite.size:
        ax.set_ylim(0, min(float(np.percentile(finite, 95)) * 1.5, 20))
    ax.legend()
    return ax


def plot_mean_excess(result: MeanExcess, ax: Axes | None = None, unit: str = "ms", threshold: float | None = None) -> Axes:
    """Mean-excess plot e(u) against u: rising linearly for a Pareto tail, flat for an exponential
    (a GPD with shape xi has e(u) linear in u with slope xi / (1 - xi)); the GPD threshold marked."""
    ax = _axes(ax)
    ax.plot(result.threshold, result.mean_excess, ".", markersize=3, label="e(u) = E[X - u | X > u]")
    if threshold is not None:
        ax.axvline(threshold, color="k", linestyle=":", label=f"GPD threshold {threshold:.4g}")
    ax.set(xlabel=f"threshold u ({unit})", ylabel=f"mean excess ({unit})", title="Mean-excess plot")
    ax.legend()
    return ax


def plot_lorenz(result: MassCount, ax: Axes | None = None) -> Axes:
    ax = _axes(ax)
    p, lorenz = result.lorenz
    ax.plot(p, lorenz, label=f"Lorenz (Gini = {result.gini:.3f})")
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="equality")
    ax.set(xlabel="fraction of requests (smallest first)", ylabel="fraction of total latency", title="Lorenz curve")
    ax.legend()
    return ax


def plot_mass_count(result: MassCount, ax: Axes | None = None, unit: str = "ms") -> Axes:
    """Count and mass CDFs against the value, annotated with the joint ratio, N1/2 and W1/2."""
    ax = _axes(ax)
    ax.plot(result.x, result.count_cdf, label="count CDF F_c")
    ax.plot(result.x, result.mass_cdf, label="mass CDF F_m")
    if result.x[0] > 0:
        ax.set_xscale("log")
    joint = result.joint_ratio
    ax.set(xlabel=f"latency ({unit})", ylabel="cumulative fraction",
           title=f"mass-count: joint {joint:.1f}/{100 - joint:.1f}, N1/2 = {result.n_half:.2f}%, W1/2 = {result.w_half:.2f}%")
    ax.legend()
    return ax


def plot_gpd_qq(fit: GPDFit, samples: Samples, ax: Axes | None = None) -> Axes:
    """Q-Q plot of the excesses over the threshold against the fitted GPD (Coles 2001, §4.3.5)."""
    ax = _axes(ax)
    model, empirical = gpd_qq_points(fit, samples)
    ax.plot(model, empirical, ".", markersize=3)
    high = float(np.nanmax([np.nanmax(model[np.isfinite(model)]), empirical.max()]))
    ax.plot([0, high], [0, high], "k--", linewidth=1)
    ax.set(xlabel=f"GPD quantile of the excess ({samples.unit})", ylabel=f"excess over {fit.threshold:.4g} ({samples.unit})",
           title=f"GPD Q-Q: xi = {fit.xi:.3g}, sigma = {fit.sigma:.4g}")
    return ax


def plot_threshold_stability(result: ThresholdStability, ax: Axes | None = None, unit: str = "ms") -> Axes:
    """xi and the modified scale sigma - xi u against the threshold, with their intervals; both
    level off above a threshold where the GPD holds (Coles 2001, §4.3.4). The chosen one marked."""
    ax = _axes(ax)
    z = float(stats.norm.ppf(0.5 + result.level / 2))
    ax.errorbar(result.threshold, result.xi, yerr=z * result.xi_se, fmt="o-", markersize=3, capsize=2,
                label=f"xi ({result.level:.0%} interval)")
    ax.axvline(result.chosen, color="k", linestyle=":", label=f"chosen u = {result.chosen:.4g}")
    ax.set(xscale="log" if result.threshold[0] > 0 else "linear", xlabel=f"threshold u ({unit})", ylabel="shape xi",
           title="GPD parameter stability")
    right = ax.twinx()
    right.plot(result.threshold, result.modified_scale, "s--", color="tab:orange", markersize=3,
               label="modified scale sigma - xi u")
    right.set_ylabel(f"modified scale ({unit})")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize="small")
    return ax
