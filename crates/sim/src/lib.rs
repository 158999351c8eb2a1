//! archlab-sim: a deterministic discrete-event simulator of server systems, pure Rust.
//!
//! A model ([`spec::ModelSpec`], usually JSON from the Python face `archlab.sim`) has stations
//! (k FCFS servers, processor sharing, delay; optionally bounded, dropping arrivals when full)
//! and sources (closed clients with think times, open renewal or trace arrivals, partly-open
//! sessions), each source with a route: serve, synchronous call (the caller holds its server
//! while the callee runs), probabilistic branch, repeat, fork-join, load-balanced replicas.
//! [`model::Model::build`] validates it and compiles the routes into a flat program;
//! [`kernel::Simulator`] runs one replication by event scheduling over a (time, priority,
//! sequence) heap with one random stream per entity and purpose; [`replicate::simulate`] runs
//! replications on threads and summarises them with confidence intervals, optionally until a
//! stop rule on interval width is met.
//!
//! Determinism: no wall clock, no thread-order dependence, no hash-ordered iteration; the same
//! model, configuration and seed give bit-identical results on any number of threads. Time is
//! in model units throughout (whatever unit the model's times are written in).

pub mod dist;
pub mod error;
pub mod field_path;
pub mod kernel;
pub mod model;
pub mod output;
pub mod replicate;
pub mod rng;
pub mod spec;
pub mod stats;

pub use error::SimError;
pub use kernel::NANOUNITS;
pub use model::{Model, RunConfig};
pub use replicate::{simulate, simulate_until, Outcome};

use std::sync::atomic::AtomicBool;

/// Validate a JSON model and run configuration, simulate, and return the [`Outcome`] as JSON
/// (None when `cancel` was set before the end): with [`check_json`], the whole interface the
/// Python bindings need.
pub fn simulate_json(model_json: &str, run_json: &str, cancel: &AtomicBool) -> Result<Option<String>, SimError> {
    let model = Model::from_json(model_json)?;
    let config = RunConfig::from_json(run_json)?;
    let outcome = simulate_until(&model, &config, cancel);
    Ok(outcome.map(|o| serde_json::to_string(&o).expect("outcomes contain only serialisable values")))
}

/// Validate a JSON model and run configuration without running them.
pub fn check_json(model_json: &str, run_json: &str) -> Result<(), SimError> {
    Model::from_json(model_json)?;
    RunConfig::from_json(run_json)?;
    Ok(())
}
