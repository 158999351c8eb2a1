//! Search for the highest open-model rate that meets a latency objective ("max throughput
//! under an SLO"): repeated open-model runs, bisecting the rate between a bound known (or
//! assumed) to pass and one that fails, each run judged on its coordinated-omission-corrected
//! latency. A step passes when the quantile of the response time is within the objective, the
//! share of errors is within the allowance, the run achieved what was offered (no backlog
//! hidden by the window closing) and the generator was not the bottleneck — a generator-bound
//! step cannot vouch for the server, so it counts as failed, with that reason kept.

use crate::config::{ConfigError, LoadConfig, LoadParams, Model};
use crate::error::LoadError;
use crate::report::LoadReport;
use crate::run::run_load;
use std::time::Duration;

/// What a rate must meet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Objective {
    /// Quantile of the response time, e.g. 0.99.
    pub quantile: f64,
    pub max_latency: Duration,
    /// Largest share of requests that may fail (errors / (requests + errors)).
    pub max_error_ratio: f64,
}

/// The bisection: rates in `[low, high]`, at most `steps` runs, stop when
/// `high - low <= precision * low`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchRange {
    pub low: f64,
    pub high: f64,
    pub steps: u32,
    pub precision: f64,
}

/// One run of the search.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchStep {
    pub rate: f64,
    pub achieved_rps: f64,
    /// The objective's quantile of the response time, µs (`None`: nothing completed).
    pub latency_us: Option<f64>,
    pub error_ratio: f64,
    pub passed: bool,
    /// Why the step failed (empty when it passed).
    pub reasons: Vec<String>,
}

#[derive(Debug)]
pub struct SearchResult {
    /// The highest rate that passed, and its report (`None` when none did).
    pub best: Option<(f64, LoadReport)>,
    pub steps: Vec<SearchStep>,
}

/// Judge one report against the objective.
fn judge(rate: f64, r: &LoadReport, obj: &Objective) -> SearchStep {
    let latency_us = (!r.latency.is_empty()).then(|| r.latency.value_at_quantile(obj.quantile) as f64 / 1e3);
    let errors = r.totals.errors.total();
    let error_ratio = errors as f64 / (r.totals.requests + errors).max(1) as f64;
    let achieved = r.throughput_rps();
    let mut reasons = Vec::new();
    match latency_us {
        Some(l) if l <= obj.max_latency.as_secs_f64() * 1e6 => {}
        Some(l) => reasons.push(format!("p{} {l:.1} us above the objective", obj.quantile * 100.0)),
        None => reasons.push("nothing completed".into()),
    }
    if error_ratio > obj.max_error_ratio {
        reasons.push(format!("error ratio {error_ratio:.4} above {}", obj.max_error_ratio));
    }
    // Below 95 % of the arrivals actually planned in the window (Poisson counts vary around
    // the rate) the server is falling behind: the backlog grows.
    let offered = r.totals.flow.arrivals as f64 / r.window_s().max(1e-9);
    if achieved < 0.95 * offered {
        reasons.push(format!("achieved {achieved:.0}/s of {offered:.0}/s offered"));
    }
    reasons.extend(r.generator_bound_reasons().into_iter().map(|g| format!("generator-bound: {g}")));
    SearchStep { rate, achieved_rps: achieved, latency_us, error_ratio, passed: reasons.is_empty(), reasons }
}

/// Run the search; `base` must be an open-model run (its rate is replaced at each step).
/// `on_step` sees each step as it ends.
pub fn search_rate(
    base: &LoadParams,
    obj: &Objective,
    range: &SearchRange,
    on_step: &mut dyn FnMut(&SearchStep),
) -> Result<SearchResult, SearchError> {
    let refuse = |parameter, allowed: &str, received: String| {
        SearchError::Config(ConfigError { parameter, allowed: allowed.into(), received })
    };
    if base.model != Model::Open {
        return Err(refuse("model", "open (the search varies the arrival rate)", base.model.name().into()));
    }
    if !(range.low > 0.0 && range.low < range.high && range.high.is_finite()) {
        return Err(refuse("search_range", "LOW-HIGH with 0 < LOW < HIGH", format!("{}-{}", range.low, range.high)));
    }
    if !(obj.quantile > 0.0 && obj.quantile <= 1.0 && (0.0..1.0).contains(&obj.max_error_ratio)) {
        return Err(refuse("objective", "a quantile in (0, 1] and an error ratio in [0, 1)", format!("{obj:?}")));
    }
    let (mut low, mut high) = (range.low, range.high);
    let mut result = SearchResult { best: None, steps: Vec::new() };
    // First the high end (it may pass), then the low end, then bisect.
    let mut next = Some(high);
    let mut low_checked = false;
    for _ in 0..range.steps.max(1) {
        let Some(rate) = next else { break };
        let mut p = base.clone();
        p.rate = Some(rate);
        let report = run_load(&LoadConfig::new(p).map_err(SearchError::Config)?).map_err(SearchError::Load)?;
        let step = judge(rate, &report, obj);
        on_step(&step);
        let passed = step.passed;
        result.steps.push(step);
        if passed {
            if result.best.as_ref().is_none_or(|(b, _)| rate > *b) {
                result.best = Some((rate, report));
            }
            if rate >= high {
                break; // the whole range passes
            }
            low = rate;
            low_checked = true;
        } else {
            high = rate;
            if !low_checked && rate > low {
                next = Some(low);
                continue;
            }
            if rate <= low {
                break; // even the low end fails
            }
        }
        next = (high - low > range.precision * low).then(|| (low + high) / 2.0);
    }
    Ok(result)
}

#[derive(Debug)]
pub enum SearchError {
    Config(ConfigError),
    Load(LoadError),
}

impl std::fmt::Display for SearchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchError::Config(e) => e.fmt(f),
            SearchError::Load(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SearchError {}
