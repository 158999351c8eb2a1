//! Measurement primitives shared by the data plane: a monotonic nanosecond clock ([`clock`]),
//! HDR latency recording (integer nanoseconds, 3 significant digits, per-thread recorders
//! merged; [`hdr`]), HDR interval logs readable from Python ([`interval_log`]), and
//! resource-usage probes of the current process ([`rusage`]), and the socket-call counters a
//! server keeps about itself ([`counters`]).

pub mod clock;
pub mod counters;
pub mod hdr;
pub mod interval_log;
pub mod rusage;
