//! Options every architecture is built from. Which options an architecture accepts is
//! declared in the registry; an option given to an architecture that does not use it is an
//! error, never silently ignored.

use archlab_netio::CpuList;
use archlab_wire::http::Limits;
use std::fmt;

/// The tunable options, by name (as on the command line and in experiment specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionName {
    /// Size of a worker pool.
    Threads,
    /// Number of event loops.
    Loops,
}

impl OptionName {
    pub fn as_str(self) -> &'static str {
        match self {
            OptionName::Threads => "threads",
            OptionName::Loops => "loops",
        }
    }
}

impl fmt::Display for OptionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Worker pool size (architectures that accept [`OptionName::Threads`]).
    pub threads: Option<usize>,
    /// Event loop count (architectures that accept [`OptionName::Loops`]).
    pub loops: Option<usize>,
    /// CPUs the server runs on; threads that are pinned individually are spread over them.
    pub cpus: Option<CpuList>,
    pub limits: Limits,
    /// TCP_NODELAY on accepted connections (default on: responses go out at once).
    pub nodelay: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions { threads: None, loops: None, cpus: None, limits: Limits::default(), nodelay: true }
    }
}

impl ServerOptions {
    pub fn get(&self, name: OptionName) -> Option<usize> {
        match name {
            OptionName::Threads => self.threads,
            OptionName::Loops => self.loops,
        }
    }

    /// Number of CPUs the server may use: the pinned list, else the CPUs this process may run on.
    pub fn cpu_count(&self) -> usize {
        match &self.cpus {
            Some(l) => l.ids().len(),
            None => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        }
    }
}
