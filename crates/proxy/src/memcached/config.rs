//! The middleware's configuration in two stages: [`MiddlewareConfig`] holds what the caller
//! asked for, [`MiddlewareConfig::validate`] checks every field against its range and names
//! the field, the allowed values and the value received when it refuses one. The architecture
//! is a closed enum ([`Arch`]); an option that means nothing for the chosen architecture is
//! refused, never silently ignored.

use archlab_wire::memcached::MAX_VALUE_BYTES;
use archlab_wire::memcached_request::DEFAULT_MAX_VALUE_BYTES;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How requests travel from the net thread to the memcached servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Seed 002's design: one blocking FIFO (`archlab-handoff` queue) to W workers with
    /// blocking connections to every server.
    Seed,
    /// The same, with the LMAX-style ring (blocking wait, work-pool dispatch) instead of the FIFO.
    Ring,
    /// The same, with W actors (bounded mailboxes, smallest-mailbox routing) instead of the FIFO.
    Actor,
    /// No hand-off: the net thread also drives non-blocking connections to the servers, with
    /// requests of many clients pipelined on each (twemproxy's shape).
    EventLoop,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Seed, Arch::Ring, Arch::Actor, Arch::EventLoop];

    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Seed => "seed",
            Arch::Ring => "ring",
            Arch::Actor => "actor",
            Arch::EventLoop => "event-loop",
        }
    }

    pub fn parse(s: &str) -> Result<Arch, ConfigError> {
        Arch::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| ConfigError {
            parameter: "arch",
            allowed: Arch::ALL.map(Arch::as_str).join(", "),
            received: s.to_string(),
        })
    }

    /// Whether the architecture hands requests to worker threads (and so has `workers`).
    pub fn has_workers(self) -> bool {
        self != Arch::EventLoop
    }

    pub fn description(self) -> &'static str {
        match self {
            Arch::Seed => "net thread -> blocking FIFO -> W workers with blocking server connections (seed 002)",
            Arch::Ring => {
                "net thread -> ring buffer (blocking wait, work pool) -> W workers with blocking server connections"
            }
            Arch::Actor => "net thread -> W actors (bounded mailboxes) with blocking server connections",
            Arch::EventLoop => "one event loop: clients and non-blocking, pipelined server connections on one poller",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Default workers of the hand-off architectures (the seed's experiments used 8 to 64).
pub const DEFAULT_WORKERS: usize = 8;
pub const MAX_WORKERS: usize = 1024;
pub const MAX_SERVERS: usize = 64;
/// Statistics window of seed 002 §1.9 (five seconds).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);
/// How long a server may stay silent while a reply is due (mcrouter's `--server-timeout`
/// default, field notes §2.2).
pub const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_secs(1);
/// memcached's minimum `-I` (1 KiB).
pub const MIN_VALUE_BYTES: usize = 1024;
/// Ring slots of `--arch ring`.
pub const RING_SLOTS: usize = 1024;
/// Mailbox capacity of each actor of `--arch actor`.
pub const ACTOR_MAILBOX: usize = 1024;

/// What the middleware is asked to be.
#[derive(Clone, Debug, PartialEq)]
pub struct MiddlewareConfig {
    /// The memcached servers, in order (round-robin and sharding follow it).
    pub servers: Vec<SocketAddr>,
    pub arch: Arch,
    /// Worker threads (hand-off architectures); `None`: [`DEFAULT_WORKERS`].
    pub workers: Option<usize>,
    /// Split multi-gets into one request per server (seed 002 §1.7.3).
    pub sharded: bool,
    /// Length of a statistics window.
    pub window: Duration,
    /// A server silent this long while a reply is due has failed.
    pub server_timeout: Duration,
    /// Largest value a `set` may carry.
    pub max_value_bytes: usize,
    /// Write one HDR interval log per distribution into this directory.
    pub stats_dir: Option<PathBuf>,
}

impl MiddlewareConfig {
    /// The seed's design in front of `servers`, everything else at its default.
    pub fn new(servers: Vec<SocketAddr>) -> MiddlewareConfig {
        MiddlewareConfig {
            servers,
            arch: Arch::Seed,
            workers: None,
            sharded: false,
            window: DEFAULT_WINDOW,
            server_timeout: DEFAULT_SERVER_TIMEOUT,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            stats_dir: None,
        }
    }

    /// Worker threads the architecture runs (0 for the event loop).
    pub fn worker_count(&self) -> usize {
        if self.arch.has_workers() {
            self.workers.unwrap_or(DEFAULT_WORKERS)
        } else {
            0
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |parameter, allowed: &str, received: String| {
            Err(ConfigError { parameter, allowed: allowed.to_string(), received })
        };
        if self.servers.is_empty() || self.servers.len() > MAX_SERVERS {
            return err("servers", "1 to 64 HOST:PORT addresses", format!("{} addresses", self.servers.len()));
        }
        if let Some(w) = self.workers {
            if !self.arch.has_workers() {
                return err("workers", "no value with --arch event-loop (it has no worker threads)", w.to_string());
            }
            if !(1..=MAX_WORKERS).contains(&w) {
                return err("workers", "an integer in 1..=1024", w.to_string());
            }
        }
        let ms = |d: Duration| format!("{} ms", d.as_secs_f64() * 1e3);
        if self.window < Duration::from_millis(10) || self.window > Duration::from_secs(3600) {
            return err("window", "a duration from 10ms to 1h", ms(self.window));
        }
        if self.server_timeout < Duration::from_millis(1) || self.server_timeout > Duration::from_secs(3600) {
            return err("server_timeout", "a duration from 1ms to 1h", ms(self.server_timeout));
        }
        if !(MIN_VALUE_BYTES..=MAX_VALUE_BYTES).contains(&self.max_value_bytes) {
            return err(
                "max_item_bytes",
                "an integer in 1024..=134217728 (1 KiB to 128 MiB)",
                self.max_value_bytes.to_string(),
            );
        }
        Ok(())
    }
}

/// A configuration value out of its allowed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub parameter: &'static str,
    pub allowed: String,
    pub received: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: expected {}, got {}", self.parameter, self.allowed, self.received)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> MiddlewareConfig {
        MiddlewareConfig::new(vec!["127.0.0.1:11211".parse().unwrap()])
    }

    #[test]
    fn errors_name_the_field_the_range_and_the_value() {
        let mut c = config();
        c.workers = Some(0);
        assert_eq!(c.validate().unwrap_err().to_string(), "invalid workers: expected an integer in 1..=1024, got 0");
        c.workers = Some(4);
        c.arch = Arch::EventLoop;
        assert_eq!(c.validate().unwrap_err().parameter, "workers");
        c.workers = None;
        assert!(c.validate().is_ok());
        assert_eq!(c.worker_count(), 0);
        let mut c = config();
        c.servers.clear();
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid servers: expected 1 to 64 HOST:PORT addresses, got 0 addresses"
        );
        let mut c = config();
        c.max_value_bytes = 10;
        assert_eq!(c.validate().unwrap_err().parameter, "max_item_bytes");
        let mut c = config();
        c.server_timeout = Duration::ZERO;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid server_timeout: expected a duration from 1ms to 1h, got 0 ms"
        );
    }

    #[test]
    fn arch_names_round_trip_and_unknown_lists_the_allowed() {
        for a in Arch::ALL {
            assert_eq!(Arch::parse(a.as_str()), Ok(a));
        }
        assert_eq!(
            Arch::parse("netty").unwrap_err().to_string(),
            "invalid arch: expected seed, ring, actor, event-loop, got netty"
        );
    }
}
