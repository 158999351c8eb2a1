//! Independent replications, run in parallel, and their summary with Student-t confidence
//! intervals. Replication i always uses the streams of index i and results are ordered by index,
//! so the outcome does not depend on the number of threads or on their scheduling. With a stop
//! rule, replications are added in waves (one per thread) until the watched interval is narrow
//! enough or the budget is spent. Under a batch-means stop rule the one replication extends
//! itself instead (see the kernel). With `warmup = "mser"` every replication first runs as a
//! pilot to the horizon recording requests in system per time bin; MSER-5 chooses one
//! truncation time from the bin-by-bin average of the pilots, and the replications run again
//! with their window starting there. Runs are deterministic, so each second run is its pilot's
//! trajectory with the statistics restarted at the chosen time.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::kernel::{encode, quantiles, sum_histograms, Histograms, Simulator, MSER_BATCH, MSER_BINS};
use crate::model::{Model, RunConfig, StopLimit, Warmup};
use crate::output::{Replication, Responses};
use crate::spec::{StopMethod, StopMetric};
use crate::stats::{mser, Estimate, Truncation};

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
    pub classes: Vec<StationClassSummary>,
}

/// One class's share of a station, over replications.
#[derive(Clone, Debug, Serialize)]
pub struct StationClassSummary {
    pub name: String,
    pub utilisation: Option<Estimate>,
    pub mean_jobs: Estimate,
    pub throughput: Estimate,
    pub mean_residence: Estimate,
}

/// What the stop rule saw when it stopped.
#[derive(Clone, Debug, Serialize)]
pub struct StopReport {
    pub method: StopMethod,
    pub metric: StopMetric,
    pub target: f64,
    /// The watched interval's half-width / |mean| when the rule stopped.
    pub achieved: f64,
    pub met: bool,
    /// The watched interval itself: over replications, or over batch means of the one run.
    pub estimate: Estimate,
    /// Where the batch-means run ended (`None` for the replications method).
    pub horizon: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub replications: u32,
    pub confidence: f64,
    pub events: u64,
    /// Start of the statistics window (the same in every replication).
    pub warmup: f64,
    /// MSER-5's choice, with `warmup = "mser"`: batches of 5 bins of the replication-averaged
    /// series of requests in system. `at_limit` means the series had not settled within its
    /// first half: lengthen the horizon.
    pub mser: Option<Truncation>,
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
    simulate_until(model, config, &AtomicBool::new(false)).expect("nothing cancels the run")
}

/// [`simulate`], stopping early with None once `cancel` is set (by another thread: a Ctrl-C
/// seen by the Python bindings). A model whose time advances slowly can run for hours; this is
/// how such a run is ended without killing the process.
pub fn simulate_until(model: &Model, config: &RunConfig, cancel: &AtomicBool) -> Option<Outcome> {
    let cancelled = || cancel.load(Ordering::Relaxed);
    let (warmup, mser) = choose_warmup(model, config, cancel);
    if cancelled() {
        return None;
    }
    let mut runs = run_range(model, config, warmup, 0, config.replications, cancel);
    if cancelled() {
        return None;
    }
    let mut stop = None;
    if let Some(rule) = &config.stop {
        let report = |estimate: Estimate, horizon: Option<f64>, method| {
            let achieved = estimate.relative_half_width();
            let met = achieved <= rule.relative_half_width;
            StopReport {
                method,
                metric: rule.metric,
                target: rule.relative_half_width,
                achieved,
                met,
                estimate,
                horizon,
            }
        };
        match rule.method {
            StopLimit::Replications { max_replications } => loop {
                let estimate = watched(&runs, rule.metric, config.confidence);
                let n = runs.len() as u32;
                let r = report(estimate, None, StopMethod::Replications);
                if r.met || n >= max_replications {
                    stop = Some(r);
                    break;
                }
                let wave = (config.threads as u32).max(1).min(max_replications - n);
                runs.extend(run_range(model, config, warmup, n, n + wave, cancel));
                if cancelled() {
                    return None;
                }
            },
            StopLimit::BatchMeans { .. } => {
                let run = &runs[0].0;
                let batches = run.batch_means.as_ref().expect("a batch-means stop rule keeps batches");
                let estimate = match rule.metric {
                    StopMetric::Throughput => batches.throughput,
                    StopMetric::MeanResponse => batches.mean_response,
                    StopMetric::P99 => batches.p99.expect("a p99 stop rule keeps batch histograms"),
                };
                stop = Some(report(estimate, Some(run.horizon), StopMethod::BatchMeans));
            }
        }
    }
    let summary = summarise(model, config, &runs, stop, mser);
    Some(Outcome { summary, replications: runs.into_iter().map(|(r, _)| r).collect() })
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
fn run_range(
    model: &Model,
    config: &RunConfig,
    warmup: f64,
    start: u32,
    end: u32,
    cancel: &AtomicBool,
) -> Vec<(Replication, Histograms)> {
    parallel(config, start, end, cancel, |i| Simulator::new(model, config, i, warmup, false, cancel).run(i))
}

/// `work(i)` for i in `start..end` on up to `config.threads` threads (on the calling thread when
/// that is one); results in index order. Once `cancel` is set no further index starts (those
/// running stop at their next check).
fn parallel<T: Send>(
    config: &RunConfig,
    start: u32,
    end: u32,
    cancel: &AtomicBool,
    work: impl Fn(u32) -> T + Sync,
) -> Vec<T> {
    let threads = config.threads.min((end - start) as usize).max(1);
    if threads == 1 {
        // One worker: the calling thread, which saves starting a thread per call (a short run,
        // such as one replication of a small model, takes about as long as that).
        return (start..end).take_while(|_| !cancel.load(Ordering::Relaxed)).map(work).collect();
    }
    let next = AtomicU32::new(start);
    let done = Mutex::new(Vec::with_capacity((end - start) as usize));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end || cancel.load(Ordering::Relaxed) {
                    break;
                }
                let result = work(i);
                done.lock().expect("no replication panics while holding the lock").push((i, result));
            });
        }
    });
    let mut done = done.into_inner().expect("threads have joined");
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The warm-up rule's start of the window, and MSER's choice when it made it. MSER-5 reads
/// the time-average number of requests in system in [`MSER_BINS`] equal time bins, averaged bin
/// by bin over pilot runs of every replication (one series with the noise of one run divided
/// by sqrt(n), as Hoad, Robinson and Davies 2010, J. Oper. Res. Soc. 61(9), apply MSER-5), and
/// cuts after the chosen batches of bins.
fn choose_warmup(model: &Model, config: &RunConfig, cancel: &AtomicBool) -> (f64, Option<Truncation>) {
    match config.warmup {
        Warmup::Fixed(t) => (t, None),
        Warmup::Mser => {
            let pilots = parallel(config, 0, config.replications, cancel, |i| {
                Simulator::new(model, config, i, 0.0, true, cancel).pilot()
            });
            if pilots.len() < config.replications as usize {
                return (0.0, None); // cancelled: the caller returns before using this
            }
            let width = pilots[0].0;
            let n = pilots.len() as f64;
            let mean: Vec<f64> =
                (0..MSER_BINS).map(|b| pilots.iter().map(|(_, series)| series[b]).sum::<f64>() / n).collect();
            let t = mser(&mean, MSER_BATCH).expect("MSER_BINS makes more than two batches");
            (t.observations_deleted as f64 * width, Some(t))
        }
    }
}

fn summarise(
    model: &Model,
    config: &RunConfig,
    runs: &[(Replication, Histograms)],
    stop: Option<StopReport>,
    mser: Option<Truncation>,
) -> Summary {
    let level = config.confidence;
    let est = |f: &dyn Fn(&Replication) -> f64| Estimate::from_values(runs.iter().map(|(r, _)| f(r)), level);
    let responses = |get: &dyn Fn(&Replication) -> &Responses, hist: &dyn Fn(&Histograms) -> Cow<Histogram<u64>>| {
        ResponsesSummary {
            throughput: est(&|r| get(r).throughput),
            mean: est(&|r| get(r).mean),
            p50: est(&|r| get(r).p50),
            p90: est(&|r| get(r).p90),
            p99: est(&|r| get(r).p99),
            p999: est(&|r| get(r).p999),
            max: est(&|r| get(r).max),
            drop_rate: est(&|r| get(r).dropped as f64 / r.window),
            pooled: pooled(runs.iter().map(|(_, h)| hist(h))),
        }
    };
    let total = responses(&|r| &r.total, &|h| sum_histograms(h.classes.iter().map(Cow::Borrowed)));
    let classes = (0..model.sources.len())
        .map(|i| ClassSummary {
            name: model.sources[i].name.clone(),
            responses: responses(&|r| &r.classes[i].responses, &|h| Cow::Borrowed(&h.classes[i])),
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
            residence: pooled(runs.iter().map(|(_, h)| Cow::Borrowed(&h.stations[i]))),
            classes: (0..model.sources.len())
                .map(|c| StationClassSummary {
                    name: model.sources[c].name.clone(),
                    utilisation: runs[0].0.stations[i].classes[c]
                        .utilisation
                        .map(|_| est(&|r| r.stations[i].classes[c].utilisation.unwrap_or(f64::NAN))),
                    mean_jobs: est(&|r| r.stations[i].classes[c].mean_jobs),
                    throughput: est(&|r| r.stations[i].classes[c].throughput),
                    mean_residence: est(&|r| r.stations[i].classes[c].mean_residence),
                })
                .collect(),
        })
        .collect();
    Summary {
        replications: runs.len() as u32,
        confidence: level,
        events: runs.iter().map(|(r, _)| r.events).sum(),
        warmup: runs[0].0.warmup,
        mser,
        total,
        classes,
        stations,
        stop,
    }
}

/// The histograms added up (borrowed where they exist already: a copy of a large histogram
/// costs more than a short run's events).
fn pooled<'h>(hists: impl Iterator<Item = Cow<'h, Histogram<u64>>>) -> Pooled {
    let all = sum_histograms(hists);
    let [p50, p90, p99, p999] = quantiles(&all, [0.5, 0.9, 0.99, 0.999]);
    Pooled { count: all.len(), p50, p90, p99, p999, histogram: encode(&all) }
}
