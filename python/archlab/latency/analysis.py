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

from archlab.latency.errors import LatencyError
from archlab.latency.fitting import DEFAULT_FAMILIES, FitRanking, rank_fits
from archlab.latency.gof import GoodnessOfFit, goodness_of_fit
from archlab.latency.heavy import HeavyTailCheck, heavy_tail_check
from archlab.latency.masscount import MassCount, mass_count
from archlab.latency.samples import Samples
from archlab.latency.summary import DEFAULT_PERCENTILES, Summary, summarize
from archlab.latency.tails import LLCD, HillEstimator, PowerLawTail, llcd


@dataclass
class LatencyAnalysis:
    samples: Samples
    summary: Summary
    fits: FitRanking | None = None
    goodness: list[GoodnessOfFit] = field(default_factory=list)
    llcd: LLCD | None = None
    hill: HillEstimator | None = None
    power_law: PowerLawTail | None = None
    power_law_pvalue: float | None = None
    heavy_tail: HeavyTailCheck | None = None
    mass_count: MassCount | None = None
    notes: list[str] = field(default_factory=list)

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
            tail["power_law_csn"] = {"alpha": self.power_law.alpha_, "se": self.power_law.alpha_se_,
                                     "xmin": self.power_law.xmin_, "n_tail": self.power_law.n_tail_,
                                     "ks": self.power_law.ks_, "pvalue": self.power_law_pvalue}
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
        d, s = self.to_dict(), self.summary
        u = s.unit
        lines = [f"latency analysis: n = {s.count} ({s.distinct} distinct values), unit {u}",
                 f"  mean   {s.mean.mean:.4g}  [{s.mean.low:.4g}, {s.mean.high:.4g}] ({s.level:.0%} Student t)",
                 f"  std    {s.std:.4g}   min {s.min:.4g}   max {s.max:.4g}",
                 f"  percentiles ({s.quantile_method}: {s.quantile_definition}; {s.ci_method} {s.level:.0%} CI)"]
        for e in s.percentiles:
            interval = f"  [{e.low:.4g}, {e.high:.4g}]" if math.isfinite(e.low) else ""
            lines.append(f"    p{e.percentile:<7g} {e.value:>12.4g}{interval}")
        if "fits" in d:
            lines.append("  fits (by AIC)              delta AIC   weight   parameters")
            for f in d["fits"]:
                params = ", ".join(f"{k}={v:.4g}" for k, v in f["params"].items())
                lines.append(f"    {f['distribution']:<22} {f['delta_aic']:>10.1f} {f['akaike_weight']:>8.3f}   {params}")
        for g in d["goodness_of_fit"]:
            lines.append(f"  {g['test']} test of {g['distribution']}: statistic {g['statistic']:.4g}, bootstrap p "
                         f"{g['pvalue_bootstrap']:.3g} (B={g['n_boot']}; the naive p {_fmt(g['pvalue_naive'])} is not valid)")
        tail = d["tail"]
        if "llcd" in tail:
            lines.append(f"  tail index: LLCD top {tail['llcd']['top_fraction']:.2%}: {tail['llcd']['alpha']:.3g}")
        if "hill" in tail:
            h = tail["hill"]
            lines.append(f"  tail index: Hill k={h['k']} ({h['k_method']}): {h['alpha']:.3g} +- {h['se']:.2g}")
        if "power_law_csn" in tail:
            p = tail["power_law_csn"]
            lines.append(f"  tail index: CSN xmin={p['xmin']:.4g} n_tail={p['n_tail']}: {p['alpha']:.3g} +- {p['se']:.2g}"
                         + (f", GOF p={p['pvalue']:.3g}" if p["pvalue"] is not None else ""))
        if "heavy_tail" in tail:
            h = tail["heavy_tail"]
            alphas = ", ".join(f"m={a['m']}: {a['alpha']:.3g}" for a in h["aggregation"])
            lines.append(f"  heavy tail: index in (0,2) {h['index_in_0_2']}, stable under aggregation "
                         f"{h['aggregation_stable']} ({alphas})")
        if "mass_count" in d:
            m = d["mass_count"]
            lines.append(f"  mass-count: Gini {m['gini']:.4f} ({m['gini_form']}), joint ratio {m['joint_ratio']:.1f}/"
                         f"{100 - m['joint_ratio']:.1f}, N1/2 {m['n_half']:.3g}%, W1/2 {m['w_half']:.3g}%")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    # --- figures ----------------------------------------------------------------------------------
    def figures(self) -> dict:
        """Every available plot, name -> matplotlib Figure."""
        from archlab.latency import plots  # matplotlib only when figures are asked for

        best = self.fits.best if self.fits is not None else None
        axes = {"pdf": plots.plot_pdf(self.samples, fit=best),
                "cdf": plots.plot_cdf(self.samples, fit=best),
                "ccdf": plots.plot_ccdf(self.samples, line=self.llcd)}
        if self.samples.min > 0:
            axes["pdf-log"] = plots.plot_pdf(self.samples, scale="log")
        if best is not None:
            axes["qq"] = plots.plot_qq(best, self.samples)
        if self.hill is not None:
            axes["hill"] = plots.plot_hill(self.hill)
        if self.mass_count is not None:
            axes["lorenz"] = plots.plot_lorenz(self.mass_count)
            axes["mass-count"] = plots.plot_mass_count(self.mass_count, unit=self.samples.unit)
        return {name: ax.figure for name, ax in axes.items()}

    def to_html(self, path: str | Path) -> Path:
        """A self-contained HTML page: the table and every figure as an embedded PNG."""
        parts = ["<!doctype html><meta charset='utf-8'><title>latency analysis</title>",
                 f"<pre>{html.escape(self.to_table())}</pre>"]
        for name, figure in self.figures().items():
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=90)
            encoded = base64.b64encode(buffer.getvalue()).decode()
            parts.append(f"<figure><img alt='{name}' src='data:image/png;base64,{encoded}'>"
                         f"<figcaption>{name}</figcaption></figure>")
        path = Path(path)
        path.write_text("\n".join(parts), encoding="utf-8")
        return path


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def analyze(samples: Samples, *, percentiles: Sequence[float] = DEFAULT_PERCENTILES, quantile_method: str = "linear",
            level: float = 0.95, ci: str = "bootstrap", n_boot: int = 1000, families=DEFAULT_FAMILIES,
            gof_boot: int = 0, tail_fraction: float = 0.01, hill_k: int | str = "auto", tail_gof_boot: int = 0,
            seed: int = 0) -> LatencyAnalysis:
    """Run everything. ``gof_boot``/``tail_gof_boot`` > 0 add the (costly) parametric-bootstrap KS and
    chi-squared tests of the best fit and CSN's power-law p-value."""
    result = LatencyAnalysis(samples, summarize(samples, percentiles, method=quantile_method, level=level, ci=ci,
                                                n_boot=n_boot, seed=seed))

    def attempt(what: str, step):
        try:
            return step()
        except LatencyError as error:
            result.notes.append(f"{what} skipped: {error}")
            return None

    result.fits = attempt("distribution fitting", lambda: rank_fits(samples, families))
    if result.fits is not None and gof_boot > 0:
        for statistic in ("ks", "chi2"):
            test = attempt(f"{statistic} test", lambda s=statistic: goodness_of_fit(
                result.fits.best, samples, s, n_boot=gof_boot, seed=seed))
            if test is not None:
                result.goodness.append(test)
    positive = samples if samples.min > 0 else attempt("tail analysis", lambda: samples.at_least(
        float(samples.values[samples.values > 0][0]) if samples.max > 0 else math.inf))
    if positive is not None and positive is not samples:
        result.notes.append(f"tail methods use the {positive.n} positive observations of {samples.n}")
    if positive is not None:
        result.llcd = attempt("LLCD", lambda: llcd(positive, tail_fraction))
        result.hill = attempt("Hill estimator", lambda: HillEstimator(hill_k, seed=seed).fit(positive))
        result.power_law = attempt("power-law tail", lambda: PowerLawTail().fit(positive))
        if result.power_law is not None and tail_gof_boot > 0:
            result.power_law_pvalue = result.power_law.gof(positive, n_boot=tail_gof_boot, seed=seed)
        if result.hill is not None:
            result.heavy_tail = attempt("heavy-tail check", lambda: heavy_tail_check(
                positive, seed=seed, hill_estimator=result.hill))
    result.mass_count = attempt("mass-count disparity", lambda: mass_count(samples))
    return result
