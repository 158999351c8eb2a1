//! The validated model. [`Model::build`] checks a [`ModelSpec`] field by field and compiles every
//! source's route into one flat program of [`Op`]s, so that the kernel interprets a handful of
//! instructions instead of walking a tree: a request is a program counter into that code.
//!
//! Compilation, by step: `serve` at an FCFS station is `Acquire; Hold; Release` (at a PS or delay
//! station, one `Visit`); `call` is `Acquire; Hold(before); <callee>; Hold(after); Release`, so
//! the caller keeps its server while the callee runs (simultaneous resource possession);
//! `branch` and `repeat ... again` are `Branch` instructions over code addresses; `repeat times`
//! is unrolled; `fork` starts one child job per branch, each ending in `EndBranch`; `balance`
//! picks the address of one replica's `serve`.

use std::collections::HashMap;

use crate::dist::{Dist, DistSpec};
use crate::error::{non_negative, positive, probability, SimError};
use crate::spec::{
    Discipline, ModelSpec, Policy, SourceSpec, StationSpec, StepSpec, StopMethod, StopMetric, WarmupSpec,
};

/// Index of a station in [`Model::stations`].
pub type StationId = u16;
/// Index of a distribution in [`Model::dists`].
pub type DistId = u32;
/// Address of an instruction in [`Model::ops`].
pub type Pc = u32;

/// A validated station.
#[derive(Clone, Debug)]
pub struct Station {
    pub name: String,
    pub servers: u32,
    pub discipline: Discipline,
    /// Most jobs present; `u32::MAX` when unbounded.
    pub capacity: u32,
}

/// Where the requests of an open source come from.
#[derive(Clone, Debug)]
pub enum Arrivals {
    /// A renewal process: independent inter-arrival times.
    Renewal(Dist),
    /// Explicit arrival times, non-decreasing.
    Trace(Vec<f64>),
}

/// The load model of one source.
#[derive(Clone, Debug)]
pub enum SourceKind {
    Closed { clients: u32, think: Dist },
    Open { arrivals: Arrivals },
    Sessions { interarrival: Dist, think: Dist, again: f64 },
}

/// A validated source: one class of requests.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub kind: SourceKind,
    /// Address of the first instruction of its route.
    pub entry: Pc,
}

/// One instruction of a compiled route.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Join the station (drop if full); continue once one of its servers is held.
    Acquire {
        station: StationId,
    },
    /// Let time pass while holding the station's server; drawn from the station's stream.
    Hold {
        station: StationId,
        dist: DistId,
    },
    /// Give the server back (to the next job queued, if any).
    Release {
        station: StationId,
    },
    /// Receive service at a PS or delay station: join, be served, leave.
    Visit {
        station: StationId,
        dist: DistId,
    },
    /// Go to the first target whose cumulative probability exceeds a uniform draw.
    Branch {
        site: u32,
        targets: Vec<(f64, Pc)>,
    },
    Jump {
        to: Pc,
    },
    /// Start one child job per branch address; the parent resumes at `join` when all end.
    Fork {
        branches: Vec<Pc>,
        join: Pc,
    },
    /// End of a fork branch.
    EndBranch,
    /// Pick a replica by `policy`; continue at that replica's code.
    Balance {
        site: u32,
        policy: Policy,
        targets: Vec<(StationId, Pc)>,
    },
    /// The request is complete.
    Exit,
}

/// A validated, compiled model.
#[derive(Clone, Debug)]
pub struct Model {
    pub stations: Vec<Station>,
    pub sources: Vec<Source>,
    pub ops: Vec<Op>,
    pub dists: Vec<Dist>,
    /// Number of routing sites (each `Branch` and `Balance`), each with its own random stream.
    pub sites: u32,
}

/// `repeat times` is unrolled; beyond this the model should use `again` instead.
const MAX_UNROLLED_REPEATS: u32 = 1000;

/// Most instructions a model may compile to (about 40 MB). Nested `repeat times` multiply, so a
/// few lines of model could otherwise ask for billions of instructions and exhaust memory.
pub const MAX_INSTRUCTIONS: usize = 1 << 20;

impl Model {
    /// Validate and compile.
    pub fn build(spec: &ModelSpec) -> Result<Model, SimError> {
        let stations = spec.stations.iter().enumerate().map(|(i, s)| station(i, s)).collect::<Result<Vec<_>, _>>()?;
        if stations.is_empty() {
            return Err(SimError::invalid("stations", "at least one station", [(); 0]));
        }
        if stations.len() > StationId::MAX as usize {
            return Err(SimError::invalid("stations", format!("at most {} stations", StationId::MAX), stations.len()));
        }
        let mut by_name = HashMap::new();
        for (i, s) in stations.iter().enumerate() {
            if by_name.insert(s.name.clone(), i as StationId).is_some() {
                return Err(SimError::invalid(format!("stations[{i}].name"), "a name no other station has", &s.name));
            }
        }
        if spec.sources.is_empty() {
            return Err(SimError::invalid("sources", "at least one source", [(); 0]));
        }
        let mut compiler = Compiler { stations: &stations, by_name, ops: Vec::new(), dists: Vec::new(), sites: 0 };
        let mut sources = Vec::new();
        let mut names = HashMap::new();
        let mut clients = 0u64;
        for (i, s) in spec.sources.iter().enumerate() {
            let source = compiler.source(&format!("sources[{i}]"), s)?;
            if let SourceKind::Closed { clients: n, .. } = source.kind {
                if clients + u64::from(n) > MAX_CLIENTS {
                    return Err(SimError::invalid(
                        format!("sources[{i}].clients"),
                        format!("at most {MAX_CLIENTS} clients over all closed sources ({clients} before this one)"),
                        n,
                    ));
                }
                clients += u64::from(n);
            }
            if names.insert(source.name.clone(), i).is_some() {
                return Err(SimError::invalid(
                    format!("sources[{i}].name"),
                    "a name no other source has",
                    &source.name,
                ));
            }
            sources.push(source);
        }
        let Compiler { ops, dists, sites, .. } = compiler;
        Ok(Model { stations, sources, ops, dists, sites })
    }

    /// Parse a JSON model and build it.
    pub fn from_json(json: &str) -> Result<Model, SimError> {
        Model::build(&crate::spec::parse_model(json)?)
    }
}

fn station(i: usize, s: &StationSpec) -> Result<Station, SimError> {
    let field = |f: &str| format!("stations[{i}].{f}");
    if s.name.is_empty() {
        return Err(SimError::invalid(field("name"), "a non-empty name", &s.name));
    }
    if s.servers == 0 && s.discipline != Discipline::Delay {
        return Err(SimError::invalid(field("servers"), "an integer >= 1", s.servers));
    }
    let capacity = match s.capacity {
        None => u32::MAX,
        Some(0) => return Err(SimError::invalid(field("capacity"), "an integer >= 1 (or no capacity: unbounded)", 0)),
        Some(c) => c,
    };
    Ok(Station { name: s.name.clone(), servers: s.servers, discipline: s.discipline, capacity })
}

struct Compiler<'a> {
    stations: &'a [Station],
    by_name: HashMap<String, StationId>,
    ops: Vec<Op>,
    dists: Vec<Dist>,
    sites: u32,
}

impl Compiler<'_> {
    fn source(&mut self, path: &str, s: &SourceSpec) -> Result<Source, SimError> {
        let (name, kind, route) = match s {
            SourceSpec::Closed { name, clients, think, route } => {
                if *clients == 0 || u64::from(*clients) > MAX_CLIENTS {
                    return Err(SimError::invalid(
                        format!("{path}.clients"),
                        format!("an integer in 1..={MAX_CLIENTS}"),
                        clients,
                    ));
                }
                (name, SourceKind::Closed { clients: *clients, think: think.build(&format!("{path}.think"))? }, route)
            }
            SourceSpec::Open { name, interarrival, arrival_times, route } => {
                let arrivals = match (interarrival, arrival_times) {
                    (Some(d), None) => {
                        let d = d.build(&format!("{path}.interarrival"))?;
                        if d.mean() <= 0.0 {
                            return Err(SimError::invalid(format!("{path}.interarrival"), "a mean > 0", d.mean()));
                        }
                        Arrivals::Renewal(d)
                    }
                    (None, Some(times)) => Arrivals::Trace(trace(&format!("{path}.arrival_times"), times)?),
                    _ => {
                        let given = (interarrival.is_some(), arrival_times.is_some());
                        return Err(SimError::invalid(
                            path,
                            "exactly one of `interarrival` and `arrival_times`",
                            format_args!("interarrival given: {}, arrival_times given: {}", given.0, given.1),
                        ));
                    }
                };
                (name, SourceKind::Open { arrivals }, route)
            }
            SourceSpec::Sessions { name, interarrival, think, again, route } => {
                let interarrival = interarrival.build(&format!("{path}.interarrival"))?;
                if interarrival.mean() <= 0.0 {
                    return Err(SimError::invalid(format!("{path}.interarrival"), "a mean > 0", interarrival.mean()));
                }
                let think = think.build(&format!("{path}.think"))?;
                let again = probability(&format!("{path}.again"), *again, true)?;
                (name, SourceKind::Sessions { interarrival, think, again }, route)
            }
        };
        if name.is_empty() {
            return Err(SimError::invalid(format!("{path}.name"), "a non-empty name", name));
        }
        if route.is_empty() {
            return Err(SimError::invalid(format!("{path}.route"), "at least one step", [(); 0]));
        }
        let entry = self.pc();
        let first_dist = self.dists.len();
        self.route(&format!("{path}.route"), route)?;
        self.ops.push(Op::Exit);
        if let SourceKind::Closed { think, .. } = &kind {
            // Time would never pass: each client's next request would start at the instant its
            // last one ended, and the run would spin at time 0 for ever.
            if think.takes_no_time() && self.dists[first_dist..].iter().all(Dist::takes_no_time) {
                return Err(SimError::invalid(
                    format!("{path}.think"),
                    "a think time > 0 when every step of the route takes no time (the clients would cycle at time 0 for ever)",
                    0.0,
                ));
            }
        }
        Ok(Source { name: name.clone(), kind, entry })
    }

    fn pc(&self) -> Pc {
        self.ops.len() as Pc
    }

    fn site(&mut self) -> u32 {
        self.sites += 1;
        self.sites - 1
    }

    fn dist(&mut self, path: &str, d: &DistSpec) -> Result<DistId, SimError> {
        self.dists.push(d.build(path)?);
        Ok(self.dists.len() as DistId - 1)
    }

    fn lookup(&self, path: &str, name: &str) -> Result<StationId, SimError> {
        self.by_name.get(name).copied().ok_or_else(|| {
            let mut names: Vec<&str> = self.stations.iter().map(|s| s.name.as_str()).collect();
            names.sort_unstable();
            SimError::invalid(path, format!("one of the stations {names:?}"), name)
        })
    }

    fn route(&mut self, path: &str, steps: &[StepSpec]) -> Result<(), SimError> {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{path}[{i}]");
            self.step(&path, step)?;
            if self.ops.len() > MAX_INSTRUCTIONS {
                return Err(too_large(&path, self.ops.len()));
            }
        }
        Ok(())
    }

    /// `serve` at one station: three instructions at an FCFS station, one elsewhere.
    fn serve(&mut self, station: StationId, dist: DistId) {
        if self.stations[station as usize].discipline == Discipline::Fcfs {
            self.ops.push(Op::Acquire { station });
            self.ops.push(Op::Hold { station, dist });
            self.ops.push(Op::Release { station });
        } else {
            self.ops.push(Op::Visit { station, dist });
        }
    }

    fn step(&mut self, path: &str, step: &StepSpec) -> Result<(), SimError> {
        match step {
            StepSpec::Serve { station, service } => {
                let st = self.lookup(&format!("{path}.station"), station)?;
                let d = self.dist(&format!("{path}.service"), service)?;
                self.serve(st, d);
            }
            StepSpec::Call { station, before, callee, after } => {
                let st = self.lookup(&format!("{path}.station"), station)?;
                if self.stations[st as usize].discipline != Discipline::Fcfs {
                    return Err(SimError::invalid(
                        format!("{path}.station"),
                        "an FCFS station (a caller holds one of its servers while it waits)",
                        station,
                    ));
                }
                self.ops.push(Op::Acquire { station: st });
                let d = self.dist(&format!("{path}.before"), before)?;
                self.ops.push(Op::Hold { station: st, dist: d });
                self.route(&format!("{path}.callee"), callee)?;
                let d = self.dist(&format!("{path}.after"), after)?;
                self.ops.push(Op::Hold { station: st, dist: d });
                self.ops.push(Op::Release { station: st });
            }
            StepSpec::Branch { options } => {
                if options.is_empty() {
                    return Err(SimError::invalid(format!("{path}.options"), "at least one option", [(); 0]));
                }
                let mut cumulative = 0.0;
                let mut probs = Vec::new();
                for (i, o) in options.iter().enumerate() {
                    cumulative += probability(&format!("{path}.options[{i}].p"), o.p, false)?;
                    probs.push(cumulative);
                }
                if (cumulative - 1.0).abs() > 1e-9 {
                    return Err(SimError::invalid(
                        format!("{path}.options"),
                        "probabilities p summing to 1",
                        cumulative,
                    ));
                }
                // Rounding must never let a uniform draw fall past the last option.
                *probs.last_mut().expect("options is not empty") = f64::INFINITY;
                let site = self.site();
                let at = self.ops.len();
                self.ops.push(Op::Branch { site, targets: Vec::new() });
                let mut targets = Vec::new();
                let mut jumps = Vec::new();
                for (i, o) in options.iter().enumerate() {
                    targets.push((probs[i], self.pc()));
                    self.route(&format!("{path}.options[{i}].route"), &o.route)?;
                    jumps.push(self.ops.len());
                    self.ops.push(Op::Jump { to: 0 });
                }
                self.patch_jumps(&jumps);
                self.ops[at] = Op::Branch { site, targets };
            }
            StepSpec::Repeat { route, times, again } => match (times, again) {
                (Some(n), None) => {
                    if *n == 0 || *n > MAX_UNROLLED_REPEATS {
                        return Err(SimError::invalid(
                            format!("{path}.times"),
                            format!("an integer in 1..={MAX_UNROLLED_REPEATS}"),
                            n,
                        ));
                    }
                    let start = self.ops.len();
                    self.route(&format!("{path}.route"), route)?;
                    // Every copy is as long as the first: refuse before copying, so that nested
                    // repeats are refused after compiling one copy of each, not a million.
                    let total = self.ops.len() + (self.ops.len() - start) * (*n as usize - 1);
                    if total > MAX_INSTRUCTIONS {
                        return Err(too_large(path, total));
                    }
                    for _ in 1..*n {
                        self.route(&format!("{path}.route"), route)?;
                    }
                }
                (None, Some(p)) => {
                    let p = probability(&format!("{path}.again"), *p, true)?;
                    let start = self.pc();
                    self.route(&format!("{path}.route"), route)?;
                    let site = self.site();
                    let next = self.pc() + 1;
                    self.ops.push(Op::Branch { site, targets: vec![(p, start), (f64::INFINITY, next)] });
                }
                _ => {
                    return Err(SimError::invalid(
                        path,
                        "exactly one of `times` and `again`",
                        format_args!("times = {times:?}, again = {again:?}"),
                    ))
                }
            },
            StepSpec::Fork { branches } => {
                if branches.is_empty() {
                    return Err(SimError::invalid(format!("{path}.branches"), "at least one branch", [(); 0]));
                }
                let at = self.ops.len();
                self.ops.push(Op::EndBranch);
                let mut starts = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    starts.push(self.pc());
                    self.route(&format!("{path}.branches[{i}]"), b)?;
                    self.ops.push(Op::EndBranch);
                }
                self.ops[at] = Op::Fork { branches: starts, join: self.pc() };
            }
            StepSpec::Balance { stations, policy, service } => {
                if stations.is_empty() {
                    return Err(SimError::invalid(format!("{path}.stations"), "at least one replica", [(); 0]));
                }
                let ids = stations
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.lookup(&format!("{path}.stations[{i}]"), s))
                    .collect::<Result<Vec<_>, _>>()?;
                let d = self.dist(&format!("{path}.service"), service)?;
                let site = self.site();
                let at = self.ops.len();
                self.ops.push(Op::Exit);
                let mut targets = Vec::new();
                let mut jumps = Vec::new();
                for &st in &ids {
                    targets.push((st, self.pc()));
                    self.serve(st, d);
                    jumps.push(self.ops.len());
                    self.ops.push(Op::Jump { to: 0 });
                }
                self.patch_jumps(&jumps);
                self.ops[at] = Op::Balance { site, policy: *policy, targets };
            }
        }
        Ok(())
    }

    /// Point the jumps at `at` to the next instruction to be emitted.
    fn patch_jumps(&mut self, at: &[usize]) {
        let end = self.pc();
        for &j in at {
            self.ops[j] = Op::Jump { to: end };
        }
    }
}

fn too_large(path: &str, instructions: usize) -> SimError {
    SimError::invalid(
        path,
        format!(
            "a model of at most {MAX_INSTRUCTIONS} instructions (repeat times copies its route; use repeat again \
             for long loops)"
        ),
        format_args!("at least {instructions} instructions"),
    )
}

fn trace(path: &str, times: &[f64]) -> Result<Vec<f64>, SimError> {
    if times.is_empty() {
        return Err(SimError::invalid(path, "at least one arrival time", [(); 0]));
    }
    let mut last = 0.0;
    for (i, &t) in times.iter().enumerate() {
        non_negative(&format!("{path}[{i}]"), t)?;
        if t < last {
            return Err(SimError::invalid(format!("{path}[{i}]"), format!("a time >= the previous one ({last})"), t));
        }
        last = t;
    }
    Ok(times.to_vec())
}

/// Where the statistics window of a replication starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    /// A fixed time.
    Fixed(f64),
    /// Chosen per replication by MSER-5 on its response times (see [`crate::stats::mser`]).
    Mser,
}

/// A validated stop rule (see [`crate::spec::StopSpec`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StopRule {
    pub metric: StopMetric,
    pub relative_half_width: f64,
    pub method: StopLimit,
}

/// The stop rule's method with its cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopLimit {
    Replications { max_replications: u32 },
    BatchMeans { max_horizon: f64 },
}

/// Batches of a `batch_means` stop rule when `batches` is 0.
pub const DEFAULT_STOP_BATCHES: u32 = 20;

// Bounds of what a run may ask for, each far above any use and far below what the machine can
// allocate: every replication keeps its result (with its histogram, a few KiB) until the
// summary; every batch keeps counters per class and, under a p99 stop rule, a histogram (and a
// batch-means run keeps up to twice `batches`); every thread has its own stack. Without them,
// `batches = 4294967295` aborted the process on a failed 32 GiB allocation.
/// Most replications of a run, also as a stop rule's `max_replications`.
pub const MAX_REPLICATIONS: u32 = 10_000;
/// Most batches of batch means.
pub const MAX_BATCHES: u32 = 1_000;
/// Most worker threads.
pub const MAX_THREADS: u32 = 1_024;
/// Most clients of all closed sources of a model together: each has its own random stream and
/// job state in every replication running at once (`clients = 4294967295` asked for 128 GiB).
pub const MAX_CLIENTS: u64 = 1_000_000;

/// A validated run configuration (see [`crate::spec::RunSpec`]).
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub horizon: f64,
    pub warmup: Warmup,
    pub replications: u32,
    pub seed: u64,
    pub threads: usize,
    pub batches: u32,
    pub confidence: f64,
    pub stop: Option<StopRule>,
}

impl RunConfig {
    /// Validate a [`crate::spec::RunSpec`].
    pub fn build(spec: &crate::spec::RunSpec) -> Result<RunConfig, SimError> {
        let horizon = positive("simulation.horizon", spec.horizon)?;
        let warmup = match &spec.warmup {
            WarmupSpec::Time(t) => {
                let t = non_negative("simulation.warmup", *t)?;
                if t >= horizon {
                    return Err(SimError::invalid("simulation.warmup", format!("a time < horizon ({horizon})"), t));
                }
                Warmup::Fixed(t)
            }
            WarmupSpec::Rule(rule) if rule == "mser" => Warmup::Mser,
            WarmupSpec::Rule(rule) => {
                return Err(SimError::invalid("simulation.warmup", r#"a time >= 0 or "mser""#, rule));
            }
        };
        if !(1..=MAX_REPLICATIONS).contains(&spec.replications) {
            return Err(SimError::invalid(
                "simulation.replications",
                format!("an integer in 1..={MAX_REPLICATIONS}"),
                spec.replications,
            ));
        }
        if spec.batches == 1 || spec.batches > MAX_BATCHES {
            return Err(SimError::invalid(
                "simulation.batches",
                format!("0 (no batch means) or an integer in 2..={MAX_BATCHES}"),
                spec.batches,
            ));
        }
        if spec.threads > MAX_THREADS {
            return Err(SimError::invalid(
                "simulation.threads",
                format!("0 (one per core) or an integer in 1..={MAX_THREADS}"),
                spec.threads,
            ));
        }
        if !(spec.confidence > 0.0 && spec.confidence < 1.0) {
            return Err(SimError::invalid("simulation.confidence", "a level in (0, 1)", spec.confidence));
        }
        let mut batches = spec.batches;
        let stop = match &spec.stop {
            None => None,
            Some(stop) => {
                let relative_half_width = positive("simulation.stop.relative_half_width", stop.relative_half_width)?;
                let method = match stop.method {
                    StopMethod::Replications => {
                        if stop.max_horizon.is_some() {
                            return Err(SimError::invalid(
                                "simulation.stop.max_horizon",
                                "no max_horizon with method = \"replications\" (it caps method = \"batch_means\")",
                                stop.max_horizon,
                            ));
                        }
                        let max = stop.max_replications.unwrap_or(0);
                        if max > MAX_REPLICATIONS {
                            return Err(SimError::invalid(
                                "simulation.stop.max_replications",
                                format!("an integer <= {MAX_REPLICATIONS}"),
                                max,
                            ));
                        }
                        if max < spec.replications.max(2) {
                            return Err(SimError::invalid(
                                "simulation.stop.max_replications",
                                format!("an integer >= replications and >= 2 ({})", spec.replications.max(2)),
                                stop.max_replications,
                            ));
                        }
                        StopLimit::Replications { max_replications: max }
                    }
                    StopMethod::BatchMeans => {
                        if stop.max_replications.is_some() {
                            return Err(SimError::invalid(
                                "simulation.stop.max_replications",
                                "no max_replications with method = \"batch_means\" (it extends one run; cap it with max_horizon)",
                                stop.max_replications,
                            ));
                        }
                        if spec.replications != 1 {
                            return Err(SimError::invalid(
                                "simulation.replications",
                                "1 with stop.method = \"batch_means\" (one long run, extended by batches)",
                                spec.replications,
                            ));
                        }
                        let max_horizon = match stop.max_horizon {
                            Some(h) if h.is_finite() && h > horizon => h,
                            other => {
                                return Err(SimError::invalid(
                                    "simulation.stop.max_horizon",
                                    format!("a time > horizon ({horizon})"),
                                    other,
                                ))
                            }
                        };
                        if batches == 0 {
                            batches = DEFAULT_STOP_BATCHES;
                        }
                        StopLimit::BatchMeans { max_horizon }
                    }
                };
                Some(StopRule { metric: stop.metric, relative_half_width, method })
            }
        };
        let threads = match spec.threads {
            0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            n => n as usize,
        };
        Ok(RunConfig {
            horizon,
            warmup,
            replications: spec.replications,
            seed: spec.seed,
            threads,
            batches,
            confidence: spec.confidence,
            stop,
        })
    }

    /// Parse a JSON run configuration and validate it.
    pub fn from_json(json: &str) -> Result<RunConfig, SimError> {
        RunConfig::build(&crate::spec::parse_run(json)?)
    }
}
