//! What a replication reports, in the shapes the lab stores for measured runs: throughput,
//! response-time quantiles (p50, p90, p99, p99.9, max) per class and over all classes,
//! utilisation, jobs and queue length per station. Times are in model units; throughputs are
//! per model time unit. Everything is measured over the window [warm-up, horizon].

use serde::Serialize;

use crate::stats::Estimate;

/// Response times of one class (or all) over the window.
#[derive(Clone, Debug, Serialize)]
pub struct Responses {
    /// Requests completed in the window.
    pub completed: u64,
    /// Requests dropped in the window (a station on their route was full).
    pub dropped: u64,
    /// Completed requests per time unit.
    pub throughput: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// Per-class results.
#[derive(Clone, Debug, Serialize)]
pub struct ClassResult {
    pub name: String,
    #[serde(flatten)]
    pub responses: Responses,
    /// Batch means within this replication, when `batches` > 0.
    pub batch_means: Option<BatchMeans>,
}

/// Batch-means estimates from one long replication.
#[derive(Clone, Debug, Serialize)]
pub struct BatchMeans {
    pub batches: u32,
    /// Length of one batch (model time).
    pub width: f64,
    pub throughput: Estimate,
    pub mean_response: Estimate,
    /// Mean of the batches' p99 (kept only for all classes under a p99 stop rule).
    pub p99: Option<Estimate>,
}

/// Per-station results.
#[derive(Clone, Debug, Serialize)]
pub struct StationResult {
    pub name: String,
    /// Mean busy fraction of one server; `None` at a delay station (infinitely many servers).
    pub utilisation: Option<f64>,
    /// Time-average jobs present (waiting and in service).
    pub mean_jobs: f64,
    /// Time-average jobs waiting (present but not in service).
    pub mean_queue: f64,
    /// Departures per time unit.
    pub throughput: f64,
    /// Mean time from arrival at the station to departure (for a caller: including the callee).
    pub mean_residence: f64,
    pub p99_residence: f64,
    pub dropped: u64,
    /// The same, class by class (one per source, in model order); class values add up to the
    /// station's (utilisation, mean jobs, throughput; residence weighted by throughput).
    pub classes: Vec<StationClassResult>,
}

/// One class's share of a station.
#[derive(Clone, Debug, Serialize)]
pub struct StationClassResult {
    pub name: String,
    /// Time-average servers busy with this class, over all servers; `None` at a delay station.
    pub utilisation: Option<f64>,
    pub mean_jobs: f64,
    pub throughput: f64,
    /// NaN when no job of the class left the station in the window.
    pub mean_residence: f64,
}

/// Little's law over the window, for requests (successful or dropped) in the whole system.
#[derive(Clone, Debug, Serialize)]
pub struct LittleCheck {
    /// Time-average requests in the system, L.
    pub mean_in_system: f64,
    /// Requests finished per time unit, X.
    pub throughput: f64,
    /// Mean time in system of the requests finished in the window, R.
    pub mean_response: f64,
    /// |L T - S| / (L T), where S adds, request by request, the part of its stay inside the
    /// window: an identity that holds to rounding when the bookkeeping is right. L = X R holds
    /// only up to the requests that straddle the window's ends.
    pub identity_error: f64,
}

/// One replication.
#[derive(Clone, Debug, Serialize)]
pub struct Replication {
    pub index: u32,
    /// Start of the measurement window: the fixed warm-up, or the time MSER chose.
    pub warmup: f64,
    /// End of the run: the horizon, or later when a batch-means stop rule extended it.
    pub horizon: f64,
    /// Length of the measurement window (horizon - warm-up).
    pub window: f64,
    /// Batch means over all classes, when `batches` > 0 or under a batch-means stop rule.
    pub batch_means: Option<BatchMeans>,
    /// Events processed, warm-up included.
    pub events: u64,
    pub total: Responses,
    /// This replication's response times over all classes: HdrHistogram V2-deflate, base64,
    /// values model time x [`crate::NANOUNITS`] (what the store keeps per repetition).
    pub histogram: String,
    pub classes: Vec<ClassResult>,
    pub stations: Vec<StationResult>,
    pub little: LittleCheck,
}
