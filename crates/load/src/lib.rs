//! Load generator library of archlab. Today one driver, the closed model
//! ([`run_closed`]): N keep-alive HTTP/1.1 connections, each one user looping request ->
//! response -> think time, over T pinned epoll threads, latency recorded the HDR way in
//! nanoseconds. A run yields a [`LoadReport`]: whole-window and per-second HDR histograms, an
//! HDR interval log, counters by error class and status, and the versioned JSON [`Summary`]
//! written by `archlab-engine load`.
//!
//! Configuration is validated up front ([`ClosedParams`] -> [`ClosedConfig`]); a run is bounded
//! by its warm-up + duration whatever the server does, can be stopped early through a
//! [`StopHandle`], and reports when its measurement window opens and closes ([`Phase`]).
//! The closed model never corrects coordinated omission, and says so in its output.

mod closed;
mod config;
mod control;
mod error;
mod report;
mod response;
mod stats;
mod timer;

pub use closed::{run_closed, run_closed_with};
pub use config::{ClosedConfig, ClosedParams, ConfigError};
pub use control::{Phase, StopHandle};
pub use error::LoadError;
pub use report::{
    CountedLatency, Errors, Generator, LoadReport, Summary, TimelineEntry, WarmupCounts, SCHEMA, SCHEMA_VERSION,
};
pub use stats::{ErrorClass, ErrorCounts, Tally};
