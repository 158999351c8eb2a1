"""archlab.latency: latency analysis (seed 000 §4.7), statistically sound and at scale.

Everything runs on :class:`Samples`, distinct values with exact counts, so raw samples and
pre-aggregated counts give identical results at a cost set by the number of distinct values.

* summary: :func:`summarize` (mean with Student-t CI, percentiles of a stated definition with
  bootstrap or binomial CIs), :func:`quantile`, :func:`ecdf`, :func:`histogram`, :func:`kde`
* fitting: :class:`DistributionFit`, :func:`rank_fits` (AIC/BIC), :func:`compare_fits` (Vuong/Wilks),
  :func:`goodness_of_fit` (KS / chi-squared with parametric-bootstrap p-values)
* tails: :func:`llcd`, :func:`pareto_tail`, :func:`hill`, :class:`HillEstimator`, :class:`PowerLawTail`,
  :func:`mean_excess`, :func:`heavy_tail_check`, :func:`aggregate`, :func:`mass_count`,
  :class:`DiscretePowerLaw` (zeta, integer data), :func:`fit_gpd` and :func:`threshold_stability`
  (peaks over threshold), :func:`mcculloch` (alpha-stable fit)
* rounded, tied data: :mod:`archlab.latency.discrete` (resolution, seeded jitter, rounding)
* input: :mod:`archlab.latency.readers` (JTL, HdrHistogram logs, archlab load summaries and runs,
  wrk/hgrm text, memtier JSON, CSV/Parquet columns, out-of-core through DuckDB)
* output: :func:`analyze` -> :class:`LatencyAnalysis` (``to_json``, ``to_table``, ``figures``,
  ``to_html``); plots in :mod:`archlab.latency.plots`
"""

from archlab.latency.analysis import LatencyAnalysis, analyze
from archlab.latency.empirical import ECDF, Histogram, KernelDensity, ecdf, histogram, kde
from archlab.latency.errors import InsufficientData, LatencyError, ParameterError
from archlab.latency.fitting import DistributionFit, Family, FitRanking, LikelihoodRatio, compare_fits, rank_fits
from archlab.latency.gof import GoodnessOfFit, chi2_statistic, goodness_of_fit, ks_statistic
from archlab.latency.heavy import HeavyTailCheck, aggregate, heavy_tail_check
from archlab.latency.masscount import MassCount, mass_count
from archlab.latency.pot import GPDFit, ThresholdStability, fit_gpd, threshold_stability
from archlab.latency.stable import StableFit, mcculloch
from archlab.latency.quantiles import QuantileMethod, percentiles, quantile
from archlab.latency.readers import read
from archlab.latency.samples import Samples
from archlab.latency.summary import Summary, summarize
from archlab.latency.tails import (LLCD, HillEstimator, MeanExcess, PowerLawTail, TailIndex, hill, llcd, mean_excess,
                                   pareto_tail)
from archlab.latency.zeta import DiscretePowerLaw

__all__ = ["DiscretePowerLaw", "GPDFit", "StableFit", "ThresholdStability", "fit_gpd", "mcculloch", "threshold_stability",
           "ECDF", "LLCD", "DistributionFit", "Family", "FitRanking", "GoodnessOfFit", "HeavyTailCheck", "HillEstimator",
           "Histogram", "InsufficientData", "KernelDensity", "LatencyAnalysis", "LatencyError", "LikelihoodRatio",
           "MassCount", "MeanExcess", "ParameterError", "PowerLawTail", "QuantileMethod", "Samples", "Summary", "TailIndex",
           "aggregate", "analyze", "chi2_statistic", "compare_fits", "ecdf", "goodness_of_fit", "heavy_tail_check",
           "hill", "histogram", "kde", "ks_statistic", "llcd", "mass_count", "mean_excess", "pareto_tail", "percentiles", "quantile",
           "rank_fits", "read", "summarize"]
