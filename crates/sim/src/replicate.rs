//! Independent replications, run in parallel, and their summary with Student-t confidence
//! intervals. Replication i always uses the streams of index i and results are ordered by index,
//! so the outcome does not depend on the number of threads or on their scheduling. With a stop
//! rule, replications are added in waves (one per thread) until the watched interval is narrow
//! enough or the budget is spent.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::engine::{quantile, Histograms, Simulator};
use crate::model::{Model, RunConfig};
use crate::output::{Replication, Responses};
use crate::spec::StopMetric;
use crate::stats::Estimate;

/// Estimates over replications of one class's (or all classes') responses.
#[derive(Clone, Debug, Serialize)]
pub struct ResponsesSummary {
    pub throughput: Estimate,
    pub mean: Estimate,
    pub p50: Estimate,
    pub p90: Estimate,
    pub p99: Estimate,
    pub p999: Estimate,
    pub max: Estimate,
    /// Dropped requests per time unit.
    pub drop_rate: Estimate,
    /// Quantiles of all replications' responses pooled in one histogram.
    pub pooled: Pooled,
}

/// One histogram of all replications' samples, and its quantiles.
#[derive(Clone, Debug, Serialize)]
pub struct Pooled {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    /// HdrHistogram V2-deflate, base64; values are model time x [`crate::NANOUNITS`].
    pub histogram: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    pub name: String,
    #[serde(flatten)]
    pub responses: ResponsesSummary,
}

#[derive(Clone, Debug, Serialize)]
pub struct StationSummary {
    pub name: String,
    pub utilisation: Option<Estimate>,
    pub mean_jobs: Estimate,
    pub mean_queue: Estimate,
    pub throughput: Estimate,
    pub mean_residence: Estimate,
    pub drop_rate: Estimate,
    pub residence: Pooled,
}

/// What the stop rule saw when it stopped.
#[derive(Clone, Debug, Serialize)]
pub struct StopReport {
    pub metric: StopMetric,
    pub target: f64,
    pub achieved: f64,
    pub met: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub replications: u32,
    pub confidence: f64,
    pub events: u64,
    pub total: ResponsesSummary,
    pub classes: Vec<ClassSummary>,
    pub stations: Vec<StationSummary>,
    pub stop: Option<StopReport>,
}

/// Everything a simulation produces.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub summary: Summary,
    pub replications: Vec<Replication>,
}

/// Run `config.replications` replications (more under a stop rule) and summarise them.
pub fn simulate(model: &Model, config: &RunConfig) -> Outcome {
    let mut runs = run_range(model, config, 0, config.replications);
    let mut stop = None;
    if let Some(rule) = &config.stop {
        loop {
            let achieved = watched(&runs, rule.metric, config.confidence).relative_half_width();
            let n = runs.len() as u32;
            let met = achieved <= rule.relative_half_width;
            if met || n >= rule.max_replications {
                stop = Some(StopReport { metric: rule.metric, target: rule.relative_half_width, achieved, met });
                break;
            }
            let wave = (config.threads as u32).max(1).min(rule.max_replications - n);
            runs.extend(run_range(model, config, n, n + wave));
        }
    }
    let summary = summarise(model, config, &runs, stop);
    Outcome { summary, replications: runs.into_iter().map(|(r, _)| r).collect() }
}

fn watched(runs: &[(Replication, Histograms)], metric: StopMetric, confidence: f64) -> Estimate {
    let pick = |r: &Replication| match metric {
        StopMetric::Throughput => r.total.throughput,
        StopMetric::MeanResponse => r.total.mean,
        StopMetric::P99 => r.total.p99,
    };
    Estimate::from_values(runs.iter().map(|(r, _)| pick(r)), confidence)
}

/// Replications `start..end` on up to `config.threads` threads, in index order.
fn run_range(model: &Model, config: &RunConfig, start: u32, end: u32) -> Vec<(Replication, Histograms)> {
    let next = AtomicU32::new(start);
    let done = Mutex::new(Vec::with_capacity((end - start) as usize));
    let threads = config.threads.min((end - start) as usize).max(1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                let result = Simulator::new(model, config, i).run(i);
                done.lock().expect("no replication panics while holding the lock").push(result);
            });
        }
    });
    let mut done = done.into_inner().expect("threads have joined");
    done.sort_by_key(|(r, _)| r.index);
    done
}

fn summarise(
    model: &Model,
    config: &RunConfig,
    runs: &[(Replication, Histograms)],
    stop: Option<StopReport>,
) -> Summary {
    let level = config.confidence;
    let est = |f: &dyn Fn(&Replication) -> f64| Estimate::from_values(runs.iter().map(|(r, _)| f(r)), level);
    let responses =
        |get: &dyn Fn(&Replication) -> &Responses, hist: &dyn Fn(&Histograms) -> Histogram<u64>| ResponsesSummary {
            throughput: est(&|r| get(r).throughput),
            mean: est(&|r| get(r).mean),
            p50: est(&|r| get(r).p50),
            p90: est(&|r| get(r).p90),
            p99: est(&|r| get(r).p99),
            p999: est(&|r| get(r).p999),
            max: est(&|r| get(r).max),
            drop_rate: est(&|r| get(r).dropped as f64 / r.window),
            pooled: pooled(runs.iter().map(|(_, h)| hist(h))),
        };
    let total = responses(&|r| &r.total, &|h| {
        let mut all = crate::engine::new_histogram();
        for c in &h.classes {
            all.add(c).expect("auto-resizing histograms accept any value");
        }
        all
    });
    let classes = (0..model.sources.len())
        .map(|i| ClassSummary {
            name: model.sources[i].name.clone(),
            responses: responses(&|r| &r.classes[i].responses, &|h| h.classes[i].clone()),
        })
        .collect();
    let stations = (0..model.stations.len())
        .map(|i| StationSummary {
            name: model.stations[i].name.clone(),
            utilisation: runs[0].0.stations[i]
                .utilisation
                .map(|_| est(&|r| r.stations[i].utilisation.unwrap_or(f64::NAN))),
            mean_jobs: est(&|r| r.stations[i].mean_jobs),
            mean_queue: est(&|r| r.stations[i].mean_queue),
            throughput: est(&|r| r.stations[i].throughput),
            mean_residence: est(&|r| r.stations[i].mean_residence),
            drop_rate: est(&|r| r.stations[i].dropped as f64 / r.window),
            residence: pooled(runs.iter().map(|(_, h)| h.stations[i].clone())),
        })
        .collect();
    Summary {
        replications: runs.len() as u32,
        confidence: level,
        events: runs.iter().map(|(r, _)| r.events).sum(),
        total,
        classes,
        stations,
        stop,
    }
}

fn pooled(hists: impl Iterator<Item = Histogram<u64>>) -> Pooled {
    let mut all = crate::engine::new_histogram();
    for h in hists {
        all.add(&h).expect("auto-resizing histograms accept any value");
    }
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(&all, &mut bytes).expect("serialising into a Vec cannot fail");
    Pooled {
        count: all.len(),
        p50: quantile(&all, 0.5),
        p90: quantile(&all, 0.9),
        p99: quantile(&all, 0.99),
        p999: quantile(&all, 0.999),
        histogram: base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}
