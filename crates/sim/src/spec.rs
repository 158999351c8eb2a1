//! The raw model, exactly as written in a model file or built by the Python face: plain serde
//! structs, nothing checked yet beyond types. [`crate::model::Model::build`] turns it into the
//! validated, compiled model or reports the first invalid field by its path. Tags are closed
//! sets (`kind`, `step`, `discipline`, `policy`, `dist`): an unknown tag is a parse error that
//! lists the allowed ones. Beside each type, its [`Shape`] (its fields and theirs) lets a parse
//! error name the field by its path ([`crate::field_path`]); a test checks each against serde's
//! own list of fields.

use serde::{Deserialize, Serialize};

use crate::dist::{DistSpec, DIST};
use crate::error::SimError;
use crate::field_path::{check, parse, Shape, NUMBER, NUMBERS, STRING, STRINGS, U32, U64};

/// Parse a JSON model; an error names the field by its path in the model file
/// (`sources[0].route[1].service.dist`).
pub fn parse_model(json: &str) -> Result<ModelSpec, SimError> {
    parse(json, &MODEL, "")
}

/// Parse a JSON run configuration; an error names the field as the model file's
/// `[simulation]` table holds it (`simulation.stop.metric`).
pub fn parse_run(json: &str) -> Result<RunSpec, SimError> {
    parse(json, &RUN, RUN_TABLE)
}

/// The model file's table of the run configuration: the prefix of its fields in errors.
pub const RUN_TABLE: &str = "simulation";

/// A whole model: the stations and the sources of work that visit them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub stations: Vec<StationSpec>,
    pub sources: Vec<SourceSpec>,
}

/// How a station serves the jobs present.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Discipline {
    /// `servers` servers fed by one first-come-first-served queue (a thread pool, cores).
    #[default]
    Fcfs,
    /// Processor sharing among the jobs present, at most `servers` jobs at full speed.
    Ps,
    /// Infinite servers: every job is served at once (a network hop, a fixed latency).
    Delay,
}

/// One station.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StationSpec {
    pub name: String,
    #[serde(default = "one")]
    pub servers: u32,
    #[serde(default)]
    pub discipline: Discipline,
    /// Most jobs present (waiting and in service); a job arriving to a full station is dropped.
    #[serde(default)]
    pub capacity: Option<u32>,
}

fn one() -> u32 {
    1
}

fn zero() -> DistSpec {
    DistSpec::Deterministic { value: 0.0 }
}

/// A source of requests; each source is one class of requests with its own route.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceSpec {
    /// `clients` clients, each alternating a think time and one request (closed model).
    Closed {
        name: String,
        clients: u32,
        #[serde(default = "zero")]
        think: DistSpec,
        route: Vec<StepSpec>,
    },
    /// Requests arriving independently of responses (open model): a renewal process with the
    /// given inter-arrival distribution, or the explicit `arrival_times` of a trace.
    Open {
        name: String,
        #[serde(default)]
        interarrival: Option<DistSpec>,
        #[serde(default)]
        arrival_times: Option<Vec<f64>>,
        route: Vec<StepSpec>,
    },
    /// Partly-open model (Schroeder et al. 2006): sessions arrive as an open stream; each sends
    /// a request, waits for its response, thinks, and sends another with probability `again`.
    Sessions {
        name: String,
        interarrival: DistSpec,
        #[serde(default = "zero")]
        think: DistSpec,
        again: f64,
        route: Vec<StepSpec>,
    },
}

/// How a load balancer picks a replica.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    RoundRobin,
    Random,
    /// Join the shortest queue (fewest jobs present; ties broken at random).
    Jsq,
    /// Power of two choices: the shorter of two replicas drawn at random.
    PowerOfTwo,
}

/// One step of a request's route.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "step", rename_all = "lowercase", deny_unknown_fields)]
pub enum StepSpec {
    /// Queue at `station` and receive `service`.
    Serve { station: String, service: DistSpec },
    /// Hold one server of `station` (an FCFS thread pool) for `before`, then through the whole
    /// `callee` route (the synchronous call), then for `after`: the caller's thread waits.
    Call {
        station: String,
        #[serde(default = "zero")]
        before: DistSpec,
        callee: Vec<StepSpec>,
        #[serde(default = "zero")]
        after: DistSpec,
    },
    /// Continue along one of the options, chosen with probabilities `p` (summing to 1).
    Branch { options: Vec<OptionSpec> },
    /// Run `route` `times` times, or once and then again with probability `again` each time.
    Repeat {
        route: Vec<StepSpec>,
        #[serde(default)]
        times: Option<u32>,
        #[serde(default)]
        again: Option<f64>,
    },
    /// Run every branch in parallel and continue when all have finished (fork-join).
    Fork { branches: Vec<Vec<StepSpec>> },
    /// Serve at one of the replica `stations`, picked by `policy`.
    Balance { stations: Vec<String>, policy: Policy, service: DistSpec },
}

/// One option of a branch.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSpec {
    pub p: f64,
    pub route: Vec<StepSpec>,
}

/// Stop rule on the width of a confidence interval.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopSpec {
    pub metric: StopMetric,
    /// Stop once half-width / mean <= this.
    pub relative_half_width: f64,
    #[serde(default)]
    pub method: StopMethod,
    /// Cap of the `replications` method.
    #[serde(default)]
    pub max_replications: Option<u32>,
    /// Cap of the `batch_means` method: the run is never extended past this time.
    #[serde(default)]
    pub max_horizon: Option<f64>,
}

/// How a stop rule narrows the interval.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopMethod {
    /// Add independent replications (interval over replications).
    #[default]
    Replications,
    /// Extend one long run by batches (interval over batch means).
    BatchMeans,
}

/// Warm-up: a fixed time, or a rule that chooses it from the run's own data.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum WarmupSpec {
    Time(f64),
    /// `"mser"`: MSER-5 on the series of response times of each replication.
    Rule(String),
}

impl Default for WarmupSpec {
    fn default() -> Self {
        WarmupSpec::Time(0.0)
    }
}

/// The metric a stop rule watches (over all classes).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopMetric {
    Throughput,
    MeanResponse,
    P99,
}

/// How to run a model: horizon, warm-up, replications and seeds. Times are in model units.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub horizon: f64,
    #[serde(default)]
    pub warmup: WarmupSpec,
    #[serde(default = "one")]
    pub replications: u32,
    #[serde(default)]
    pub seed: u64,
    /// Worker threads for replications; 0 = as many as the machine has.
    #[serde(default)]
    pub threads: u32,
    /// Batches for batch means within each replication; 0 = none (20 under a `batch_means`
    /// stop rule, which keeps between `batches` and twice as many, merging pairs as it grows).
    #[serde(default)]
    pub batches: u32,
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    #[serde(default)]
    pub stop: Option<StopSpec>,
}

fn default_confidence() -> f64 {
    0.95
}

// The format's shapes, one per type above (checked against serde's field lists in the tests).
pub static MODEL: Shape =
    Shape::Table { check: check::<ModelSpec>, fields: &[("stations", &STATIONS), ("sources", &SOURCES)] };
static STATIONS: Shape = Shape::List { check: check::<Vec<StationSpec>>, item: &STATION };
static STATION: Shape = Shape::Table {
    check: check::<StationSpec>,
    fields: &[("name", &STRING), ("servers", &U32), ("discipline", &DISCIPLINE), ("capacity", &U32)],
};
static DISCIPLINE: Shape = Shape::Leaf { check: check::<Discipline>, expected: None };
static SOURCES: Shape = Shape::List { check: check::<Vec<SourceSpec>>, item: &SOURCE };
static SOURCE: Shape = Shape::Tagged {
    check: check::<SourceSpec>,
    tag: "kind",
    variants: &[
        ("closed", &[("name", &STRING), ("clients", &U32), ("think", &DIST), ("route", &ROUTE)]),
        ("open", &[("name", &STRING), ("interarrival", &DIST), ("arrival_times", &NUMBERS), ("route", &ROUTE)]),
        (
            "sessions",
            &[("name", &STRING), ("interarrival", &DIST), ("think", &DIST), ("again", &NUMBER), ("route", &ROUTE)],
        ),
    ],
};
static ROUTE: Shape = Shape::List { check: check::<Vec<StepSpec>>, item: &STEP };
static ROUTES: Shape = Shape::List { check: check::<Vec<Vec<StepSpec>>>, item: &ROUTE };
static STEP: Shape = Shape::Tagged {
    check: check::<StepSpec>,
    tag: "step",
    variants: &[
        ("serve", &[("station", &STRING), ("service", &DIST)]),
        ("call", &[("station", &STRING), ("before", &DIST), ("callee", &ROUTE), ("after", &DIST)]),
        ("branch", &[("options", &OPTIONS)]),
        ("repeat", &[("route", &ROUTE), ("times", &U32), ("again", &NUMBER)]),
        ("fork", &[("branches", &ROUTES)]),
        ("balance", &[("stations", &STRINGS), ("policy", &POLICY), ("service", &DIST)]),
    ],
};
static OPTIONS: Shape = Shape::List { check: check::<Vec<OptionSpec>>, item: &OPTION };
static OPTION: Shape = Shape::Table { check: check::<OptionSpec>, fields: &[("p", &NUMBER), ("route", &ROUTE)] };
static POLICY: Shape = Shape::Leaf { check: check::<Policy>, expected: None };
pub static RUN: Shape = Shape::Table {
    check: check::<RunSpec>,
    fields: &[
        ("horizon", &NUMBER),
        ("warmup", &WARMUP),
        ("replications", &U32),
        ("seed", &U64),
        ("threads", &U32),
        ("batches", &U32),
        ("confidence", &NUMBER),
        ("stop", &STOP),
    ],
};
static WARMUP: Shape = Shape::Leaf { check: check::<WarmupSpec>, expected: Some(r#"a time >= 0 or "mser""#) };
static STOP: Shape = Shape::Table {
    check: check::<StopSpec>,
    fields: &[
        ("metric", &STOP_METRIC),
        ("relative_half_width", &NUMBER),
        ("method", &STOP_METHOD),
        ("max_replications", &U32),
        ("max_horizon", &NUMBER),
    ],
};
static STOP_METRIC: Shape = Shape::Leaf { check: check::<StopMetric>, expected: None };
static STOP_METHOD: Shape = Shape::Leaf { check: check::<StopMethod>, expected: None };
