"""``analyze``: every method of seed 000 §4.7 on one latency sample, as one result object.

It runs the summary, distribution fitting (ranking, goodness of fit of the best fit), the tail
estimators (LLCD, Hill, CSN), the heavy-tail checks and mass-count disparity, each from the same
:class:`Samples`. A step that cannot run on these data (e.g. a power-law tail on a sample without
distinct tail values) is recorded in ``notes`` instead of failing the whole analysis. Tail methods
use the strictly positive observations (a 0 ms latency has no logarithm); that is noted when it
drops anything. The result renders as JSON (machines), a text table (people), matplotlib figures,
or a self-contained HTML page.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archlab.latency.discrete import cell_widths, grid_step, is_tied, jitter
from archlab.latency.errors import LatencyError, ParameterError, check_choice
from archlab.latency.fitting import DEFAULT_FAMILIES, FitRanking, rank_fits
from archlab.latency.gof import GoodnessOfFit, goodness_of_fit
from archlab.latency.heavy import HeavyTailCheck, heavy_tail_check
from archlab.latency.masscount import MassCount, mass_count
from archlab.latency.samples import UNIT_SECONDS, Samples
from archlab.latency.summary import DEFAULT_PERCENTILES, Summary, summarize
from archlab.latency.intervals import bootstrap
from archlab.latency.pot import GPDFit, ThresholdStability, fit_gpd, threshold_stability
from archlab.latency.stable import StableFit, mcculloch
from archlab.latency.tails import LLCD, HillEstimator, PowerLawTail, hill, llcd, mean_excess, pareto_tail
from archlab.latency.zeta import DiscretePowerLaw

POWER_LAW_MODELS = ("auto", "discrete", "continuous")
POT_EXCEEDANCES = (1e-3, 1e-4, 1e-5)  # extreme quantiles reported by default: p99.9, p99.99, p99.999


@dataclass
class LatencyAnalysis:
    samples: Samples
    summary: Summary
    fits: FitRanking | None = None
    goodness: list[GoodnessOfFit] = field(default_factory=list)
    llcd: LLCD | None = None
    hill: HillEstimator | None = None
    power_law: PowerLawTail | DiscretePowerLaw | None = None
    power_law_pvalue: float | None = None
    pot: GPDFit | None = None
    pot_stability: ThresholdStability | None = None
    pot_quantiles: list = field(default_factory=list)  # pot.Quantile at POT_EXCEEDANCES below the rate
    pot_samples: Samples | None = None  # what the GPD was fitted to (jittered when the data are tied)
    stable: StableFit | None = None
    heavy_tail: HeavyTailCheck | None = None
    mass_count: MassCount | None = None
    notes: list[str] = field(default_factory=list)
    resolution: str | None = None  # the rounding of tied data, when one was used
    jittered: int | None = None  # observations the tail estimators saw after jittering
    intervals: dict = field(default_factory=dict)  # name -> (low, high): bootstrap CIs of tail index, Gini

    # --- machine output ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        s = self.summary
        out: dict = {
            "unit": s.unit, "count": s.count, "distinct_values": s.distinct,
            "mean": {"value": s.mean.mean, "low": s.mean.low, "high": s.mean.high, "level": s.mean.level,
                     "interval": "Student t"},
            "std": s.std, "min": s.min, "max": s.max,
            "percentiles": {"definition": s.quantile_definition, "method": s.quantile_method,
                            "interval": s.ci_method, "level": s.level,
                            "values": [{"p": e.percentile, "value": e.value, "low": _finite(e.low), "high": _finite(e.high)}
                                       for e in s.percentiles]},
            "notes": list(self.notes),
            "resolution": {"rounding": self.resolution, "tail_jittered_observations": self.jittered},
            "bootstrap_intervals": {name: {"low": _finite(low), "high": _finite(high), "level": s.level,
                                           "n_boot": n_boot, "kind": "percentile bootstrap of the counts"}
                                    for name, (low, high, n_boot) in self.intervals.items()},
        }
        if self.fits is not None:
            out["fits"] = [{"distribution": r.fit.name, "params": r.fit.params_, "loglik": r.fit.loglik_,
                            "aic": r.fit.aic_, "bic": r.fit.bic_, "delta_aic": r.delta_aic,
                            "akaike_weight": r.akaike_weight} for r in self.fits.ranked]
            out["fits_skipped"] = [{"distribution": name, "reason": reason} for name, reason in self.fits.skipped]
        out["goodness_of_fit"] = [{"distribution": g.distribution, "test": g.statistic_name, "statistic": g.statistic,
                                   "pvalue_bootstrap": g.pvalue, "pvalue_naive": _finite(g.naive_pvalue),
                                   "n_boot": g.n_boot, "bins": g.bins} for g in self.goodness]
        tail: dict = {}
        if self.llcd is not None:
            tail["llcd"] = {"alpha": self.llcd.alpha, "top_fraction": self.llcd.top_fraction,
                            "threshold": self.llcd.threshold, "r_squared": self.llcd.r_squared}
        if self.hill is not None:
            tail["hill"] = {"alpha": _finite(self.hill.alpha_), "se": _finite(self.hill.alpha_se_), "k": self.hill.k_,
                            "threshold": self.hill.threshold_, "k_method": self.hill.k_method}
        if self.power_law is not None:
            p = self.power_law
            discrete = isinstance(p, DiscretePowerLaw)
            tail["power_law_csn"] = {"model": "discrete (zeta)" if discrete else "continuous (Pareto)",
                                     "alpha": p.alpha_, "se": _finite(p.alpha_se_),
                                     "exponent": p.exponent_ if isinstance(p, DiscretePowerLaw) else p.alpha_ + 1,
                                     "xmin": p.xmin_, "n_tail": p.n_tail_, "ks": p.ks_, "pvalue": self.power_law_pvalue}
        if self.pot is not None:
            g = self.pot
            tail["gpd_pot"] = {"threshold": g.threshold, "n_exceed": g.n_exceed, "exceedance_rate": g.rate,
                               "sigma": g.sigma, "sigma_se": _finite(g.sigma_se), "xi": g.xi, "xi_se": _finite(g.xi_se),
                               "tail_index": _finite(g.tail_index), "tail_index_se": _finite(g.tail_index_se),
                               "loglik": g.loglik,
                               "threshold_choice": "given" if self.pot_stability is None else "parameter stability",
                               "quantiles": [{"exceedance": q.exceedance, "percentile": 100 * (1 - q.exceedance),
                                              "value": q.value, "se": q.se, "low": q.low, "high": q.high,
                                              "level": q.level, "interval": "delta method"} for q in self.pot_quantiles]}
        if self.stable is not None:
            f = self.stable
            tail["stable"] = {"alpha": f.alpha, "beta": f.beta, "gamma": f.gamma, "delta": f.delta,
                              "parameterization": "S0", "method": f.method}
        if self.heavy_tail is not None:
            h = self.heavy_tail
            tail["heavy_tail"] = {"index_in_0_2": h.index_in_0_2, "aggregation_stable": h.aggregation_stable,
                                  "heavy_tailed": h.heavy_tailed, "tolerance": h.tolerance, "order": h.order,
                                  "aggregation": [{"m": a.m, "n": a.n, "k": a.k, "alpha": a.alpha} for a in h.aggregation]}
        out["tail"] = tail
        if self.mass_count is not None:
            m = self.mass_count
            out["mass_count"] = {"gini": m.gini, "gini_form": "unbiased" if m.unbiased_gini else "population",
                                 "joint_ratio": m.joint_ratio, "n_half": m.n_half, "w_half": m.w_half}
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    # --- human output -----------------------------------------------------------------------------
    def to_table(self) -> str:
        """A readable table: durations in ns/µs/ms/s with 4 significant digits (JSON keeps the raw unit)."""
        d, s = self.to_dict(), self.summary
        u = s.unit

        def t(value: float | None) -> str:
            return format_duration(value, u)

        lines = [f"latency analysis: n = {s.count:,} ({s.distinct:,} distinct values), recorded in {u}",
                 f"  mean   {t(s.mean.mean)}  [{t(s.mean.low)}, {t(s.mean.high)}] ({s.level:.0%} Student t)",
                 f"  std    {t(s.std)}   min {t(s.min)}   max {t(s.max)}",
                 f"  percentiles ({s.quantile_method}: {s.quantile_definition}; {s.ci_method} {s.level:.0%} CI)"]
        for e in s.percentiles:
            interval = f"  [{t(e.low)}, {t(e.high)}]" if math.isfinite(e.low) else ""
            lines.append(f"    p{e.percentile:<7g} {t(e.value):>10}{interval}")
        if "fits" in d:
            lines.append("  fits (by AIC)              delta AIC   weight   parameters")
            for f in d["fits"]:
                params = ", ".join(f"{k}={t(v) if k in ('loc', 'scale') else f'{v:.4g}'}" for k, v in f["params"].items())
                lines.append(f"    {f['distribution']:<22} {f['delta_aic']:>10.1f} {f['akaike_weight']:>8.3f}   {params}")
        for g in d["goodness_of_fit"]:
            lines.append(f"  {g['test']} test of {g['distribution']}: statistic {g['statistic']:.4g}, bootstrap p "
                         f"{g['pvalue_bootstrap']:.3g} (B={g['n_boot']}; the naive p {_fmt(g['pvalue_naive'])} is not valid)")
        tail = d["tail"]
        if "llcd" in tail:
            lines.append(f"  tail index: LLCD top {tail['llcd']['top_fraction']:.2%} (above {t(tail['llcd']['threshold'])}): "
                         f"{_fmt(tail['llcd']['alpha'])}")
        if "hill" in tail:
            h = tail["hill"]
            lines.append(f"  tail index: Hill k={h['k']} ({h['k_method']}, above {t(h['threshold'])}): "
                         f"{_fmt(h['alpha'])} +- {_fmt(h['se'], 2)}")
        if "power_law_csn" in tail:
            p = tail["power_law_csn"]
            lines.append(f"  tail index: CSN {p['model']} xmin={t(p['xmin'])} n_tail={p['n_tail']}: {_fmt(p['alpha'])} "
                         f"+- {_fmt(p['se'], 2)}" + (f", GOF p={p['pvalue']:.3g}" if p["pvalue"] is not None else ""))
        if "gpd_pot" in tail:
            g = tail["gpd_pot"]
            lines.append(f"  tail: GPD above {t(g['threshold'])} ({g['threshold_choice']}; {g['n_exceed']} exceedances): "
                         f"xi {_fmt(g['xi'])} +- {_fmt(g['xi_se'], 2)}, sigma {t(g['sigma'])}, tail index 1/xi "
                         f"{_fmt(g['tail_index'])}")
            for q in g["quantiles"]:
                lines.append(f"    GPD p{q['percentile']:<8g} {t(q['value']):>10}  [{t(q['low'])}, {t(q['high'])}] "
                             f"({q['level']:.0%} delta method)")
        if "stable" in tail:
            f = tail["stable"]
            lines.append(f"  stable fit ({f['method']}): alpha {_fmt(f['alpha'])}, beta {_fmt(f['beta'])}, "
                         f"scale {t(f['gamma'])}, location {t(f['delta'])} (S0)")
        if "heavy_tail" in tail:
            h = tail["heavy_tail"]
            alphas = ", ".join(f"m={a['m']}: {_fmt(a['alpha'])}" for a in h["aggregation"])
            lines.append(f"  heavy tail: index in (0,2) {h['index_in_0_2']}, stable under aggregation "
                         f"{h['aggregation_stable']} ({alphas})")
        if "mass_count" in d:
            m = d["mass_count"]
            lines.append(f"  mass-count: Gini {m['gini']:.4f} ({m['gini_form']}), joint ratio {m['joint_ratio']:.1f}/"
                         f"{100 - m['joint_ratio']:.1f}, N1/2 {m['n_half']:.3g}%, W1/2 {m['w_half']:.3g}%")
        for name, (low, high, n_boot) in self.intervals.items():
            lines.append(f"  {name}: {s.level:.0%} bootstrap CI [{_fmt(low, 4)}, {_fmt(high, 4)}] (B={n_boot})")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    # --- figures ----------------------------------------------------------------------------------
    def figures(self) -> dict:
        """Every available plot, name -> matplotlib Figure."""
        from archlab.latency import plots  # matplotlib only when figures are asked for

        best = self.fits.best if self.fits is not None else None
        axes = {"pdf": plots.plot_pdf(self.samples, fit=best),
                "cdf": plots.plot_cdf(self.samples, fit=best),
                "ccdf": plots.plot_ccdf(self.samples, line=self.llcd, power_law=self.power_law)}
        if self.samples.min > 0:
            axes["pdf-log"] = plots.plot_pdf(self.samples, scale="log")
        if best is not None:
            axes["qq"] = plots.plot_qq(best, self.samples)
        if self.hill is not None:
            axes["hill"] = plots.plot_hill(self.hill)
        if self.samples.n > 10:
            axes["mean-excess"] = plots.plot_mean_excess(mean_excess(self.samples), unit=self.samples.unit,
                                                         threshold=None if self.pot is None else self.pot.threshold)
        if self.pot is not None:
            assert self.pot_samples is not None  # set with pot (analyse)
            axes["gpd-qq"] = plots.plot_gpd_qq(self.pot, self.pot_samples)
        if self.pot_stability is not None:
            axes["threshold-stability"] = plots.plot_threshold_stability(self.pot_stability, unit=self.samples.unit)
        if self.mass_count is not None:
            axes["lorenz"] = plots.plot_lorenz(self.mass_count)
            axes["mass-count"] = plots.plot_mass_count(self.mass_count, unit=self.samples.unit)
        return {name: ax.figure for name, ax in axes.items()}

    def to_html(self, path: str | Path) -> Path:
        """A self-contained HTML page: the table and every figure as an embedded PNG."""
        parts = ["<!doctype html><meta charset='utf-8'><title>latency analysis</title>",
                 f"<pre>{html.escape(self.to_table())}</pre>"]
        parts.extend(figure_html(name, figure) for name, figure in self.figures().items())
        path = Path(path)
        path.write_text("\n".join(parts), encoding="utf-8")
        return path


def figure_html(name: str, figure) -> str:
    """A matplotlib figure as an HTML <figure> holding an embedded PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    encoded = base64.b64encode(buffer.getvalue()).decode()
    return f"<figure><img alt='{name}' src='data:image/png;base64,{encoded}'><figcaption>{name}</figcaption></figure>"


def _resolution(samples: Samples, resolution: str | float | None) -> str | float | None:
    """The resolution to use, or None: data without ties, or without a detectable grid."""
    if resolution is None or resolution == "none" or not is_tied(samples):
        return None
    return resolution if cell_widths(samples, resolution) is not None else None


def _describe_resolution(samples: Samples, resolution: str | float) -> str:
    if resolution == "hdr":
        return "HdrHistogram buckets, 3 significant digits"
    step = grid_step(samples) if resolution == "auto" else float(resolution)
    return f"grid step {step:g} {samples.unit}"


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


_DURATION_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def format_duration(value: float | None, unit: str, digits: int = 4) -> str:
    """``value`` (in ``unit``) in the largest of s/ms/µs/ns that keeps it >= 1, e.g. 93.44 µs."""
    if value is None or not math.isfinite(value):
        return "n/a"
    seconds = float(f"{value * UNIT_SECONDS[unit]:.{digits}g}")  # round first: 0.99999 ms is "1 ms"
    if seconds == 0:
        return f"0 {unit.replace('us', 'µs')}"
    for name, scale in _DURATION_UNITS:
        if abs(seconds) >= scale or name == "ns":
            return f"{seconds / scale:.{digits}g} {name}"
    raise AssertionError("unreachable")


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def analyze(samples: Samples, *, percentiles: Sequence[float] = DEFAULT_PERCENTILES, quantile_method: str = "linear",
            level: float = 0.95, ci: str = "bootstrap", n_boot: int = 1000, families=DEFAULT_FAMILIES,
            gof_boot: int = 0, tail_fraction: float = 0.01, hill_k: int | str = "auto", tail_gof_boot: int = 0,
            resolution: str | float | None = "auto", jitter_max: int = 100_000, tail_boot: int = 0,
            power_law: str = "auto", pot_threshold: float | str | None = "auto", stable: bool = True,
            seed: int = 0) -> LatencyAnalysis:
    """Run everything. ``gof_boot``/``tail_gof_boot`` > 0 add the (costly) parametric-bootstrap KS and
    chi-squared tests of the best fit and CSN's power-law p-value.

    ``resolution`` is the rounding of tied data (:mod:`archlab.latency.discrete`): "auto" detects
    a constant grid (integer ms), "hdr" means HdrHistogram buckets, a number is a step, None
    treats the data as continuous. When the data are tied and rounded, the tail estimators run on
    the seeded jittered sample (a seeded subsample of ``jitter_max`` observations beyond that,
    which bounds their cost) and the goodness-of-fit bootstrap rounds its synthetic samples.
    ``tail_boot`` > 0 adds percentile-bootstrap intervals of the Hill and CSN indices (at the
    chosen k and xmin) and of the Gini coefficient.

    ``power_law`` picks the CSN power-law model: "discrete" (zeta, :mod:`archlab.latency.zeta`) fits
    the rounded values themselves, without jitter; "continuous" the Pareto on the (jittered) tail;
    "auto" is discrete for data on an integer grid (integer ms; not for HDR buckets, whose widths
    grow with the value) and continuous otherwise. ``pot_threshold`` is the peaks-over-threshold
    threshold: "auto" chooses it by parameter stability (:func:`~archlab.latency.pot.threshold_stability`),
    a number fixes it, None skips the GPD. ``stable`` adds McCulloch's alpha-stable fit."""
    check_choice("power_law", power_law, POWER_LAW_MODELS)
    if not (pot_threshold is None or pot_threshold == "auto" or isinstance(pot_threshold, (int, float))):
        raise ParameterError("pot_threshold", "'auto', a number or None", pot_threshold)
    result = LatencyAnalysis(samples, summarize(samples, percentiles, method=quantile_method, level=level, ci=ci,
                                                n_boot=n_boot, seed=seed))

    def attempt(what: str, step):
        try:
            return step()
        except LatencyError as error:
            result.notes.append(f"{what} skipped: {error}")
            return None

    resolution_used = _resolution(samples, resolution)
    if resolution_used is not None:
        result.resolution = _describe_resolution(samples, resolution_used)
    result.fits = attempt("distribution fitting", lambda: rank_fits(samples, families))
    if result.fits is not None and gof_boot > 0:
        for statistic in ("ks", "chi2"):
            test = attempt(f"{statistic} test", lambda s=statistic: goodness_of_fit(
                result.fits.best, samples, s, n_boot=gof_boot, seed=seed, resolution=resolution_used))
            if test is not None:
                result.goodness.append(test)
    positive = samples if samples.min > 0 else attempt("tail analysis", lambda: samples.at_least(
        float(samples.values[samples.values > 0][0]) if samples.max > 0 else math.inf))
    if positive is not None and positive is not samples:
        result.notes.append(f"tail methods use the {positive.n} positive observations of {samples.n}")
    if positive is not None:
        result.llcd = attempt("LLCD", lambda: llcd(positive, tail_fraction))
        tail_samples = positive
        if resolution_used is not None:
            tail_samples = jitter(positive, resolution_used, seed=seed, max_values=jitter_max)
            result.jittered = tail_samples.n
            estimators = ("Hill, the GPD and the heavy-tail check" if _discrete_step(positive, resolution, power_law)
                          is not None else "Hill, CSN, the GPD and the heavy-tail check")
            result.notes.append(f"the data are rounded ({result.resolution}) and tied: {estimators} "
                                f"use {tail_samples.n} observations"
                                + (f" (a seeded subsample of {positive.n})" if tail_samples.n < positive.n else "")
                                + f" jittered uniformly within their rounding cell (seed {seed})")
        result.hill = attempt("Hill estimator", lambda: HillEstimator(hill_k, seed=seed).fit(tail_samples))
        step = _discrete_step(positive, resolution, power_law)
        if step is not None:
            result.power_law = attempt("discrete power-law tail", lambda: DiscretePowerLaw(step=step).fit(positive))
            if result.power_law is not None and tail_gof_boot > 0:
                result.power_law_pvalue = result.power_law.gof(positive, n_boot=tail_gof_boot, seed=seed)
        else:
            result.power_law = attempt("power-law tail", lambda: PowerLawTail().fit(tail_samples))
            if result.power_law is not None and tail_gof_boot > 0:
                result.power_law_pvalue = result.power_law.gof(tail_samples, n_boot=tail_gof_boot, seed=seed)
        if pot_threshold is not None:
            _peaks_over_threshold(result, tail_samples, pot_threshold, attempt)
        if result.hill is not None:
            result.heavy_tail = attempt("heavy-tail check", lambda: heavy_tail_check(
                tail_samples, seed=seed, hill_estimator=result.hill))
    result.mass_count = attempt("mass-count disparity", lambda: mass_count(samples))
    if stable:
        result.stable = attempt("stable fit", lambda: mcculloch(samples))
    if tail_boot > 0:
        _tail_intervals(result, tail_samples if positive is not None else None, level, tail_boot, seed, attempt)
    return result


def _discrete_step(samples: Samples, resolution: str | float | None, model: str) -> float | None:
    """The integer grid step for the discrete power law, or None for the continuous one."""
    if model == "continuous":
        return None
    step = None if resolution == "hdr" else (grid_step(samples) if resolution in ("auto", None, "none")
                                             else float(resolution))
    if step is not None and not np.all(samples.values / step == np.round(samples.values / step)):
        step = None
    if model == "discrete" and step is None:
        raise ParameterError("power_law", "'continuous' or 'auto' for data not on an integer grid "
                             "(HDR buckets, or non-integer values)", model)
    if model == "auto" and resolution in (None, "none"):
        return None  # the caller said: treat the data as continuous
    return step


def _peaks_over_threshold(result: LatencyAnalysis, samples: Samples, threshold: float | str, attempt) -> None:
    """GPD above the threshold (chosen by parameter stability for "auto") and extreme quantiles."""
    if threshold == "auto":
        result.pot_stability = attempt("GPD threshold stability", lambda: threshold_stability(samples))
        if result.pot_stability is None:
            return
        threshold = result.pot_stability.chosen
    result.pot = attempt("GPD (peaks over threshold)", lambda: fit_gpd(samples, float(threshold)))
    if result.pot is None:
        return
    result.pot_samples = samples
    level = result.summary.level
    result.pot_quantiles = [result.pot.quantile(p, level) for p in POT_EXCEEDANCES if p < result.pot.rate]


def _tail_intervals(result: LatencyAnalysis, tail_samples: Samples | None, level: float, n_boot: int, seed: int,
                    attempt) -> None:
    """Percentile-bootstrap intervals (multinomial resampling of the counts) of the Hill index at
    the chosen k, the Pareto MLE above the CSN xmin, and the Gini coefficient. k and xmin are held
    fixed, so the intervals do not include the uncertainty of choosing them."""
    def record(name: str, statistic, samples: Samples) -> None:
        bounds = attempt(f"{name} interval", lambda: bootstrap(statistic, samples, level=level, n_boot=n_boot,
                                                                   seed=seed))
        if bounds is not None:
            result.intervals[name] = (float(bounds.low), float(bounds.high), n_boot)

    if result.hill is not None and tail_samples is not None:
        k = result.hill.k_
        record(f"Hill alpha (k={k})", lambda s: float(hill(s, k)[0]) if k < s.n else math.nan, tail_samples)
    if isinstance(result.power_law, DiscretePowerLaw):
        xmin, step = result.power_law.xmin_, result.power_law.step
        record(f"CSN discrete alpha (xmin={format_duration(xmin, result.samples.unit)})",
               lambda s: DiscretePowerLaw(xmin, step=step).fit(s.at_least(xmin)).alpha_, result.samples.at_least(xmin))
    elif result.power_law is not None and tail_samples is not None:
        xmin = result.power_law.xmin_
        record(f"CSN alpha (xmin={format_duration(xmin, tail_samples.unit)})", lambda s: pareto_tail(s, xmin).alpha,
               tail_samples)
    if result.mass_count is not None:
        record("Gini", lambda s: mass_count(s, unbiased=result.mass_count.unbiased_gini).gini, result.samples)
