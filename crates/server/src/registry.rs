//! The registry: the one place that names server architectures.
//!
//! Each entry says what the architecture is (one line, shown by `archlab-engine
//! architectures`), which options it accepts, and how to build it from shared pieces. Adding
//! an architecture means composing front-ends and hand-offs and adding one entry here.

use crate::frontend::{multi_reactor, pool, reactor, thread_per_connection};
use crate::options::{OptionName, ServerOptions};
use crate::Server;
use std::fmt;

pub struct Architecture {
    pub name: &'static str,
    pub description: &'static str,
    /// Options this architecture uses; any other option given to it is an error.
    pub accepts: &'static [OptionName],
    build: fn(&ServerOptions) -> Box<dyn Server>,
}

/// Seed 000 §5.3 item 1: "A simple blocking threaded server with a thread pool of size four".
pub const DEFAULT_POOL_THREADS: usize = 4;

pub static REGISTRY: &[Architecture] = &[
    Architecture {
        name: "thread-per-connection",
        description: "acceptor thread spawns one blocking thread per connection (sTomcat-Sync, seed 001)",
        accepts: &[],
        build: |o| Box::new(thread_per_connection::ThreadPerConnection::new(o)),
    },
    Architecture {
        name: "blocking",
        description: "acceptor + fixed pool of P blocking workers, default P=4 (Blocking, seed 000)",
        accepts: &[OptionName::Threads],
        build: |o| Box::new(pool::BlockingPool::new(o, o.threads.unwrap_or(DEFAULT_POOL_THREADS))),
    },
    Architecture {
        name: "single-thread",
        description: "one epoll reactor thread: accept, read, handle, write (SingleT-Async / NIO, seeds 000-001)",
        accepts: &[],
        build: |o| Box::new(reactor::SingleThread::new(o)),
    },
    Architecture {
        name: "netty",
        description: "acceptor + N epoll event loops, each connection pinned to its loop, default N = CPUs (NettyServer, seed 001)",
        accepts: &[OptionName::Loops],
        build: |o| Box::new(multi_reactor::MultiReactor::new(o, o.loops.unwrap_or_else(|| o.cpu_count()))),
    },
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    UnknownArchitecture { name: String },
    OptionNotAccepted { architecture: &'static str, option: OptionName },
    OptionOutOfRange { option: OptionName, value: usize, allowed: &'static str },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnknownArchitecture { name } => {
                let names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
                write!(f, "architecture: expected one of {}, got {name:?}", names.join(", "))
            }
            BuildError::OptionNotAccepted { architecture, option } => {
                let a = lookup(architecture).expect("registered");
                let accepted: Vec<&str> = a.accepts.iter().map(|o| o.as_str()).collect();
                let accepted = if accepted.is_empty() { "none".to_string() } else { accepted.join(", ") };
                write!(f, "option {option} does not apply to architecture {architecture} (it accepts: {accepted})")
            }
            BuildError::OptionOutOfRange { option, value, allowed } => {
                write!(f, "{option}: expected {allowed}, got {value}")
            }
        }
    }
}

impl std::error::Error for BuildError {}

pub fn lookup(name: &str) -> Option<&'static Architecture> {
    REGISTRY.iter().find(|a| a.name == name)
}

/// Build the named architecture, refusing options it does not use and values out of range.
pub fn build(name: &str, options: &ServerOptions) -> Result<Box<dyn Server>, BuildError> {
    let arch = lookup(name).ok_or_else(|| BuildError::UnknownArchitecture { name: name.to_string() })?;
    for option in [OptionName::Threads, OptionName::Loops] {
        if let Some(value) = options.get(option) {
            if !arch.accepts.contains(&option) {
                return Err(BuildError::OptionNotAccepted { architecture: arch.name, option });
            }
            if !(1..=65_536).contains(&value) {
                return Err(BuildError::OptionOutOfRange { option, value, allowed: "an integer in 1..=65536" });
            }
        }
    }
    Ok((arch.build)(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_described() {
        let mut names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        assert!(REGISTRY.iter().all(|a| !a.description.is_empty()));
    }

    #[test]
    fn refuses_unknown_names_and_foreign_options() {
        let e = build("blockin", &ServerOptions::default()).err().unwrap();
        assert!(e.to_string().contains("expected one of thread-per-connection, blocking"), "{e}");
        let o = ServerOptions { loops: Some(2), ..Default::default() };
        let e = build("blocking", &o).err().unwrap();
        assert_eq!(e.to_string(), "option loops does not apply to architecture blocking (it accepts: threads)");
        let o = ServerOptions { threads: Some(0), ..Default::default() };
        let e = build("blocking", &o).err().unwrap();
        assert!(e.to_string().contains("threads: expected an integer in 1..=65536, got 0"), "{e}");
    }
}
