//! Configuration of the closed-model driver in two stages: [`ClosedParams`] is raw input with
//! public fields and defaults (what a CLI or a spec file fills in), [`ClosedConfig`] is the
//! validated, immutable form the driver accepts. Every refusal names the parameter, the allowed
//! values and the value received, so an experiment spec can point at the offending line.

use archlab_netio::CpuList;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Longest duration accepted for the window, the warm-up and the timeouts: bounds a run.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);
/// More connections than this would exhaust file descriptors or ports before measuring anything.
const MAX_CONNECTIONS: usize = 1_000_000;

/// Raw parameters of a closed-model run; validate with [`ClosedConfig::new`].
#[derive(Clone, Debug)]
pub struct ClosedParams {
    pub target: SocketAddr,
    /// Value of the `Host` header; `None` uses the target address.
    pub host: Option<String>,
    /// Request target including the query, e.g. `/prime?n=27059`.
    pub path: String,
    /// Concurrent users N of the closed model, one keep-alive connection each.
    pub connections: usize,
    /// Length of the measurement window.
    pub duration: Duration,
    /// Time before the window during which completions are not recorded.
    pub warmup: Duration,
    /// Think time Z between a response and the next request of the same user.
    pub think_time: Duration,
    /// Load threads; `None` = one per CPU of `cpus`, or 1 without `cpus` (capped by connections).
    pub threads: Option<usize>,
    /// CPUs to pin the load threads to (thread i on `cpus.nth(i)`).
    pub cpus: Option<CpuList>,
    /// A request not answered within this is counted as `timeout` and its connection reopened.
    pub request_timeout: Duration,
    /// A connection not established within this is counted as a `connect` error.
    pub connect_timeout: Duration,
}

impl ClosedParams {
    /// Defaults: path `/`, 16 connections, 10 s window after 1 s of warm-up, no think time,
    /// 2 s request and connect timeouts (wrk's default timeout).
    pub fn new(target: SocketAddr) -> Self {
        ClosedParams {
            target,
            host: None,
            path: "/".into(),
            connections: 16,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            think_time: Duration::ZERO,
            threads: None,
            cpus: None,
            request_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
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

/// Validated parameters of a closed-model run.
#[derive(Clone, Debug)]
pub struct ClosedConfig {
    target: SocketAddr,
    host: String,
    path: String,
    connections: usize,
    duration: Duration,
    warmup: Duration,
    think_time: Duration,
    threads: usize,
    cpus: Option<CpuList>,
    request_timeout: Duration,
    connect_timeout: Duration,
}

fn refuse(parameter: &'static str, allowed: impl Into<String>, received: impl fmt::Debug) -> ConfigError {
    ConfigError { parameter, allowed: allowed.into(), received: format!("{received:?}") }
}

fn check_period(parameter: &'static str, d: Duration, zero_ok: bool) -> Result<(), ConfigError> {
    let ok = (zero_ok || !d.is_zero()) && d <= MAX_PERIOD;
    let lower = if zero_ok { ">= 0" } else { "> 0" };
    ok.then_some(()).ok_or_else(|| refuse(parameter, format!("a duration {lower} and <= 24h"), d))
}

/// A request target or Host value must not be able to break the request line or headers.
fn is_header_safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

impl ClosedConfig {
    pub fn new(p: ClosedParams) -> Result<Self, ConfigError> {
        if p.connections == 0 || p.connections > MAX_CONNECTIONS {
            return Err(refuse("connections", format!("an integer in 1..={MAX_CONNECTIONS}"), p.connections));
        }
        let threads = match (p.threads, &p.cpus) {
            (Some(t), _) => t,
            (None, Some(cpus)) => cpus.ids().len().min(p.connections),
            (None, None) => 1,
        };
        if threads == 0 || threads > p.connections {
            return Err(refuse(
                "threads",
                format!("an integer in 1..=connections ({}): each thread owns at least one connection", p.connections),
                threads,
            ));
        }
        check_period("duration", p.duration, false)?;
        check_period("warmup", p.warmup, true)?;
        check_period("think_time", p.think_time, true)?;
        check_period("request_timeout", p.request_timeout, false)?;
        check_period("connect_timeout", p.connect_timeout, false)?;
        if !p.path.starts_with('/') || !is_header_safe(&p.path) {
            return Err(refuse(
                "path",
                "a request target starting with '/' without spaces or control characters",
                &p.path,
            ));
        }
        let host = p.host.unwrap_or_else(|| p.target.to_string());
        if !is_header_safe(&host) {
            return Err(refuse("host", "a non-empty Host value without spaces or control characters", &host));
        }
        Ok(ClosedConfig {
            target: p.target,
            host,
            path: p.path,
            connections: p.connections,
            duration: p.duration,
            warmup: p.warmup,
            think_time: p.think_time,
            threads,
            cpus: p.cpus,
            request_timeout: p.request_timeout,
            connect_timeout: p.connect_timeout,
        })
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }
    pub fn host(&self) -> &str {
        &self.host
    }
    pub fn path(&self) -> &str {
        &self.path
    }
    pub fn connections(&self) -> usize {
        self.connections
    }
    pub fn duration(&self) -> Duration {
        self.duration
    }
    pub fn warmup(&self) -> Duration {
        self.warmup
    }
    pub fn think_time(&self) -> Duration {
        self.think_time
    }
    pub fn threads(&self) -> usize {
        self.threads
    }
    pub fn cpus(&self) -> Option<&CpuList> {
        self.cpus.as_ref()
    }
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
    /// CPU of load thread `i`, if pinning was asked for.
    pub fn cpu_of_thread(&self, i: usize) -> Option<usize> {
        self.cpus.as_ref().map(|c| c.nth(i))
    }
    /// Connections owned by load thread `i`: N/T, the first N mod T threads one more.
    pub fn connections_of_thread(&self, i: usize) -> usize {
        self.connections / self.threads + usize::from(i < self.connections % self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ClosedParams {
        ClosedParams::new("127.0.0.1:8080".parse().unwrap())
    }

    fn refused(p: ClosedParams) -> ConfigError {
        ClosedConfig::new(p).unwrap_err()
    }

    #[test]
    fn defaults_are_valid_and_threads_follow_cpus() {
        let c = ClosedConfig::new(params()).unwrap();
        assert_eq!((c.threads(), c.host(), c.path()), (1, "127.0.0.1:8080", "/"));
        let mut p = params();
        p.cpus = Some(CpuList::new(vec![0, 1, 2, 3]).unwrap());
        p.connections = 3;
        // One thread per CPU, but never more threads than connections.
        assert_eq!(ClosedConfig::new(p).unwrap().threads(), 3);
    }

    #[test]
    fn connections_are_spread_evenly() {
        let mut p = params();
        p.connections = 10;
        p.threads = Some(4);
        let c = ClosedConfig::new(p).unwrap();
        let per: Vec<usize> = (0..4).map(|i| c.connections_of_thread(i)).collect();
        assert_eq!(per, [3, 3, 2, 2]);
    }

    #[test]
    fn refusals_name_parameter_allowed_and_received() {
        let mut p = params();
        p.connections = 0;
        let e = refused(p);
        assert_eq!(e.parameter, "connections");
        assert_eq!(e.received, "0");
        assert!(e.to_string().contains("invalid connections: 0 (allowed: an integer in 1..="), "{e}");

        let mut p = params();
        p.connections = 2;
        p.threads = Some(3);
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("threads", "3"));
        assert!(e.allowed.contains("connections (2)"), "{e}");

        let mut p = params();
        p.threads = Some(0);
        assert_eq!(refused(p).parameter, "threads");

        let mut p = params();
        p.duration = Duration::ZERO;
        let e = refused(p);
        assert_eq!(e.parameter, "duration");
        assert!(e.to_string().contains("> 0"), "{e}");

        let mut p = params();
        p.request_timeout = Duration::ZERO;
        assert_eq!(refused(p).parameter, "request_timeout");

        let mut p = params();
        p.warmup = Duration::from_secs(100_000);
        assert_eq!(refused(p).parameter, "warmup");

        for bad in ["prime", "/a b", "/x\r\nEvil: 1", ""] {
            let mut p = params();
            p.path = bad.into();
            assert_eq!(refused(p).parameter, "path", "{bad:?}");
        }
        let mut p = params();
        p.host = Some("a b".into());
        assert_eq!(refused(p).parameter, "host");
    }
}
