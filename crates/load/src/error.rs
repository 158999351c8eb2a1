//! Why a run could not start ([`ConfigError`]: a parameter refused) or not produce a report
//! ([`LoadError`]).

use std::fmt;
use std::io;
use std::net::SocketAddr;

#[derive(Debug)]
pub enum LoadError {
    /// Not a single connection could be established at the start.
    Connect { target: SocketAddr, source: io::Error },
    /// A load thread could not set itself up (epoll, timerfd, pinning) or its loop failed.
    Io { context: String, source: io::Error },
    /// The run broke an invariant of its own (a bug), e.g. a histogram that did not encode.
    Internal(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Connect { target, source } => write!(f, "cannot connect to {target}: {source}"),
            LoadError::Io { context, source } => write!(f, "{context}: {source}"),
            LoadError::Internal(m) => write!(f, "internal error in the load generator: {m}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Connect { source, .. } | LoadError::Io { source, .. } => Some(source),
            LoadError::Internal(_) => None,
        }
    }
}

/// A parameter that was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub parameter: &'static str,
    pub allowed: String,
    pub received: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {} (allowed: {})", self.parameter, self.received, self.allowed)
    }
}

impl std::error::Error for ConfigError {}
