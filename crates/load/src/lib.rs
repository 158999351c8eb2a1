//! Load generator library of archlab: one connection machinery, three load models ([`Pacing`]) — closed
//! (N users looping request -> response -> think time), open (planned send times from a
//! constant or Poisson schedule, seeded, sharded over threads, each request taking a free
//! connection or opening one up to a cap) and partly-open (Poisson sessions of several
//! requests with think times) — with rates or users that may step and ramp inside a run
//! (`schedule.rs`), over keep-alive HTTP/1.1 (optionally pipelined) or memcached
//! text-protocol connections on T pinned threads, each waiting on its sockets through epoll or
//! its own io_uring ([`Backend`]: `auto` takes io_uring when the kernel allows it),
//! latency recorded the HDR way in nanoseconds. Every request carries its planned
//! and sent times, so both the response time (coordinated omission corrected) and the
//! service time are kept, with the schedule lag and the late and never-started arrivals. A
//! run yields a [`LoadReport`]: whole-window and per-second HDR histograms, an HDR interval
//! log, counters by error class and status, the generator's CPU per thread, and the
//! versioned JSON [`Summary`] (schema in `schema/load-summary.schema.json`) written by
//! `archlab-engine load`.
//!
//! Configuration is validated up front ([`LoadParams`] -> [`LoadConfig`]); a run is bounded
//! by its warm-up + duration whatever the server does, can be stopped early through a
//! [`StopHandle`], and reports when its measurement window opens and closes ([`Phase`]).

mod config;
mod control;
mod dist;
mod error;
mod keys;
mod mix;
mod protocol;
mod records;
mod report;
mod run;
mod schedule;
mod search;
mod stats;
mod timer;
mod units;
mod values;

pub use archlab_wire::memcached::Retrieval;
pub use config::memcached::{
    KeyPattern, KeyPatterns, McWorkload, Ratio, ValueSize, DEFAULT_KEY_MAX, DEFAULT_KEY_PREFIX,
};
pub use config::{
    normalise, ArrivalKind, Backend, IoBackend, LoadConfig, LoadParams, Model, Pacing, Protocol, SessionConnection,
    DEFAULT_SEED,
};
pub use control::{Phase, StopHandle};
pub use dist::{think_time_seconds, ArrivalStream, Arrivals, Rng, SessionLength, ThinkTime};
pub use error::{ConfigError, LoadError};
pub use mix::{Mix, MixClass, MAX_CLASSES, MIX_SYNTAX};
pub use protocol::http::ResponseReader;
pub use protocol::memcached::McClient;
pub use protocol::Progress;
pub use records::{export_jtl, Record, RecordReader, RecordsHeader, JTL_HEADER, RECORD_LEN};
pub use report::{
    ClassSummary, ClassTotals, CountedLatency, Errors, Generator, LiveSecond, LoadReport, PacingSummary, Rcvbuf,
    ScheduleSegment, Sessions, Summary, ThreadCpu, TimelineEntry, WarmupCounts, JSON_SCHEMA, SCHEMA, SCHEMA_VERSION,
};
pub use run::{run_load, run_load_live, run_load_with};
pub use schedule::{Intensity, Profile, Segment};
pub use search::{search_rate, Objective, SearchError, SearchRange, SearchResult, SearchStep};
pub use stats::{ErrorClass, ErrorCounts, FlowCounts, McCounts, Outcome, Tally};
pub use units::{format_duration, parse_duration, parse_seconds, DURATION_SYNTAX};
