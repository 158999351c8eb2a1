//! The options of the reverse proxy, defined once ([`ProxyOptions`], the pattern of the server's
//! `ServerOptions`): the flags of `archlab-engine proxy`, the JSON its `--options` reads beside
//! the server's keys, `archlab._native`'s check and the schema come from this one declaration.
//! What the proxy is made of (its backends and its policy) and how it treats them (pools,
//! timeouts, health) are here; how its threads wait is the architecture's, from the server's
//! options (`--threads`, `--loops`, `--cpus`, ...).
//!
//! Defaults, and where they come from: an idle pooled connection is closed after 30 s, below
//! the keep-alive timeouts of common backends (nginx 75 s, Envoy's advice that the proxy's be
//! the shorter, field notes §4.3); a backend gets 1 s to accept a connection and 60 s between
//! two reads of its response (nginx's `proxy_connect_timeout` is 60 s, its `proxy_read_timeout`
//! 60 s; a lab's backends are on loopback, where 1 s to connect is already an outage); a client
//! gets 60 s between two reads of a request body (nginx's `client_body_timeout`); a backend is
//! ejected after 3 consecutive failures (HAProxy's `fall 3`, mcrouter's TKO after 3) and probed
//! every 2 s (HAProxy's `inter 2s`); consistent hashing allows 1.25 times the mean load
//! (Mirrokni, Thorup and Zadimoghaddam 2018 use c = 1 + epsilon; 1.25 is the factor Google
//! Cloud Pub/Sub and HAProxy's `hash-balance-factor 125` use).

use archlab_options::{Choice, Int, Number, OptionError, Text};
use archlab_server::{registry, ServerOptions};
use serde_json::Value;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

/// One backend: its address and its weight (weighted round-robin, consistent hashing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendSpec {
    pub addr: SocketAddr,
    pub weight: u32,
}

/// Largest weight of a backend.
pub const MAX_WEIGHT: u32 = 1000;

/// The backends, in the order given (round-robin follows it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendList(pub Vec<BackendSpec>);

impl FromStr for BackendList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut list = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (addr, weight) = match item.split_once('*') {
                Some((a, w)) => {
                    let w: u32 = w.trim().parse().map_err(|_| format!("weight of {item:?} is not an integer"))?;
                    if !(1..=MAX_WEIGHT).contains(&w) {
                        return Err(format!("weight of {item:?} is not in 1..={MAX_WEIGHT}"));
                    }
                    (a.trim(), w)
                }
                None => (item, 1),
            };
            let addr = parse_addr(addr).ok_or_else(|| format!("{addr:?} is not HOST:PORT with a numeric host"))?;
            if list.iter().any(|b: &BackendSpec| b.addr == addr) {
                return Err(format!("{addr} is given twice"));
            }
            list.push(BackendSpec { addr, weight });
        }
        Ok(BackendList(list))
    }
}

fn parse_addr(s: &str) -> Option<SocketAddr> {
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    let port = s.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

impl fmt::Display for BackendList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", b.addr)?;
            if b.weight != 1 {
                write!(f, "*{}", b.weight)?;
            }
        }
        Ok(())
    }
}

/// How the proxy picks a backend for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Each healthy backend in turn, in the order given.
    RoundRobin,
    /// In turn, each backend as often as its weight, interleaved (nginx's smooth weighted
    /// round-robin).
    WeightedRoundRobin,
    /// A healthy backend drawn uniformly.
    Random,
    /// The healthy backend with the fewest requests in flight (ties: in turn).
    LeastRequests,
    /// Power of two choices: the less loaded of two healthy backends drawn at random
    /// (Mitzenmacher 2001; Envoy's LEAST_REQUEST, HAProxy's `random(2)`).
    P2c,
    /// Consistent hashing of the request's path or a header, with bounded loads (Mirrokni,
    /// Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads", SODA 2018).
    ConsistentHash,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::RoundRobin,
        Policy::WeightedRoundRobin,
        Policy::Random,
        Policy::LeastRequests,
        Policy::P2c,
        Policy::ConsistentHash,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::WeightedRoundRobin => "weighted-round-robin",
            Policy::Random => "random",
            Policy::LeastRequests => "least-requests",
            Policy::P2c => "p2c",
            Policy::ConsistentHash => "consistent-hash",
        }
    }
}

/// What consistent hashing hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashKey {
    /// The request target's path (without the query).
    Path,
    /// The value of a request header (case-insensitive name); a request without it hashes
    /// the empty string.
    Header(String),
}

impl FromStr for HashKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "path" => Ok(HashKey::Path),
            other => match other.strip_prefix("header:") {
                Some(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':') => {
                    Ok(HashKey::Header(name.to_ascii_lowercase()))
                }
                _ => Err(String::new()),
            },
        }
    }
}

impl fmt::Display for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HashKey::Path => f.write_str("path"),
            HashKey::Header(name) => write!(f, "header:{name}"),
        }
    }
}

/// A path of the active health check: starts with `/`, printable ASCII without spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthPath(pub String);

impl FromStr for HealthPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.starts_with('/') && s.bytes().all(|b| b.is_ascii_graphic()) {
            Ok(HealthPath(s.to_string()))
        } else {
            Err(String::new())
        }
    }
}

impl fmt::Display for HealthPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Durations in milliseconds: 1 ms to one hour.
const MILLIS: Int<u64> = Int::new(1, 3_600_000);

archlab_options::option_set! {
    /// What the reverse proxy forwards to and how: the options of `archlab-engine proxy`.
    pub struct ProxyOptions {
        /// Backends as HOST:PORT[*WEIGHT], comma-separated (numeric hosts or localhost).
        backends: BackendList = BackendList::default(), Text::<BackendList>::of(
            "HOST:PORT[*WEIGHT],... with numeric hosts, e.g. 127.0.0.1:8081,127.0.0.1:8082*2", "BACKENDS");
        /// How a backend is picked: round-robin, weighted-round-robin, random, least-requests,
        /// p2c (power of two choices) or consistent-hash.
        policy: Policy = Policy::RoundRobin, Choice { all: &Policy::ALL, name: Policy::as_str };
        /// What consistent-hash hashes: path, or header:NAME.
        hash_key: HashKey = HashKey::Path, Text::<HashKey>::of("path or header:NAME", "KEY");
        /// Consistent hashing's load bound: no backend takes more than this times the mean
        /// number of requests in flight (>= 1; Mirrokni et al. 2018's 1 + epsilon).
        hash_balance: f64 = 1.25, Number;
        /// Seed of the random and p2c policies' draws (one stream per thread).
        seed: u64 = 1, Int::<u64>::new(0, u64::MAX);
        /// Connections to one backend, open at once (pooled and in use).
        max_conns: usize = 1024, Int::<usize>::new(1, 1 << 20);
        /// A pooled keep-alive connection to a backend idle this long is closed, in ms (the
        /// clients' own idle timeout is the server's `idle_timeout_ms`).
        backend_idle_timeout_ms: u64 = 30_000, MILLIS;
        /// Time a backend has to accept a connection, in ms.
        connect_timeout_ms: u64 = 1_000, MILLIS;
        /// Time between two reads of a backend's response before the proxy gives up (504), in ms.
        backend_timeout_ms: u64 = 60_000, MILLIS;
        /// Time between two reads of a request body from the client before the proxy gives up,
        /// in ms.
        client_timeout_ms: u64 = 60_000, MILLIS;
        /// Consecutive failures (refused or failed connections, resets, timeouts, garbage)
        /// after which a backend is ejected until a probe readmits it.
        eject_after: u32 = 3, Int::<u32>::new(1, 1_000);
        /// How often an ejected backend is probed (and, with health_path, every backend
        /// checked), in ms.
        probe_interval_ms: u64 = 2_000, MILLIS;
        /// Active health checks: GET this path on every backend every probe interval; a
        /// backend answering other than 2xx, or not at all, is out until it answers 2xx.
        /// Without it, an ejected backend is readmitted once it accepts a connection.
        health_path: Option<HealthPath> = None, Text::<HealthPath>::of("a path starting with /", "PATH");
    }
}

impl ProxyOptions {
    /// Refuse what single values cannot say: no backend, a load bound below 1.
    pub fn validate(&self) -> Result<(), OptionError> {
        self.check_values()?;
        if self.backends.0.is_empty() {
            return Err(OptionError::new("backends", "at least one HOST:PORT[*WEIGHT]", "none"));
        }
        if self.hash_balance.is_nan() || self.hash_balance < 1.0 {
            return Err(OptionError::new("hash_balance", "a number >= 1", self.hash_balance.to_string()));
        }
        Ok(())
    }
}

/// The server's and the proxy's options from one JSON object holding keys of both sets (what
/// `archlab-engine proxy --options` reads); an unknown key is refused naming both sets' keys.
pub fn from_json_value(v: &Value) -> Result<(ServerOptions, ProxyOptions), OptionError> {
    let all = archlab_options::object(v)?;
    let proxy_names = ProxyOptions::names();
    let server_names = ServerOptions::names();
    let (mut for_proxy, mut for_server) = (serde_json::Map::new(), serde_json::Map::new());
    for (k, v) in all {
        if proxy_names.contains(&k.as_str()) {
            for_proxy.insert(k.clone(), v.clone());
        } else if server_names.contains(&k.as_str()) {
            for_server.insert(k.clone(), v.clone());
        } else {
            let mut names = server_names.clone();
            names.extend(proxy_names.iter());
            return Err(archlab_options::unknown(k, &names));
        }
    }
    let proxy = ProxyOptions::from_json_value(&Value::Object(for_proxy))?;
    let server = ServerOptions::from_json_value(&Value::Object(for_server))?;
    Ok((server, proxy))
}

/// Both sets as one JSON object (the inverse of [`from_json_value`]).
pub fn to_json(server: &ServerOptions, proxy: &ProxyOptions) -> Value {
    let mut all = server.to_json();
    if let (Some(all), Value::Object(p)) = (all.as_object_mut(), proxy.to_json()) {
        all.extend(p);
    }
    all
}

/// Check that architecture `arch` can run the proxy with these options: the server's checks
/// (`registry::check`), an architecture that can proxy, and the proxy's own ([`ProxyOptions::validate`]).
pub fn check(arch: &str, server: &ServerOptions, proxy: &ProxyOptions) -> Result<(), OptionError> {
    let a = registry::check(arch, server).map_err(|e| e.option_error())?;
    if !a.proxy.can_proxy() {
        let allowed = format!("an architecture that can proxy ({})", registry::proxy_architectures());
        return Err(OptionError::new("arch", allowed, format!("{arch:?}")));
    }
    proxy.validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_with_weights_and_refuse_bad_ones() {
        let list: BackendList = "127.0.0.1:1, 127.0.0.1:2*3,localhost:4".parse().unwrap();
        assert_eq!(list.0.len(), 3);
        assert_eq!(list.0[1].weight, 3);
        assert_eq!(list.0[2].addr, "127.0.0.1:4".parse().unwrap());
        assert_eq!(list.to_string(), "127.0.0.1:1,127.0.0.1:2*3,127.0.0.1:4");
        for bad in ["example.com:80", "127.0.0.1", "127.0.0.1:1*0", "127.0.0.1:1*x", "127.0.0.1:1,127.0.0.1:1"] {
            assert!(bad.parse::<BackendList>().is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_name_the_option() {
        let e = ProxyOptions::from_json(r#"{"policy": "fastest"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"policy: expected one of round-robin, weighted-round-robin, random, least-requests, p2c, consistent-hash, got "fastest""#
        );
        let e = ProxyOptions::default().validate().unwrap_err();
        assert_eq!(e.to_string(), "backends: expected at least one HOST:PORT[*WEIGHT], got none");
        let o = ProxyOptions::from_json(r#"{"backends": "127.0.0.1:9", "hash_balance": 0.5}"#).unwrap();
        assert_eq!(o.validate().unwrap_err().to_string(), "hash_balance: expected a number >= 1, got 0.5");
        let e = ProxyOptions::from_json(r#"{"hash_key": "cookie"}"#).unwrap_err();
        assert!(e.to_string().starts_with("hash_key: expected path or header:NAME"), "{e}");
        let o = ProxyOptions::from_json(r#"{"hash_key": "header:X-User", "health_path": "/health"}"#).unwrap();
        assert_eq!(o.hash_key, HashKey::Header("x-user".into()));
        assert_eq!(o.to_json()["health_path"], "/health");
    }

    #[test]
    fn no_option_is_both_the_servers_and_the_proxys() {
        // One flag per name on `archlab-engine proxy`, one owner per key of its JSON object: a
        // name in both sets would be listed twice by --help and set only one of the two.
        let server = ServerOptions::names();
        let shared: Vec<_> = ProxyOptions::names().into_iter().filter(|n| server.contains(n)).collect();
        assert!(shared.is_empty(), "options of both the server and the proxy: {shared:?}");
    }

    #[test]
    fn one_object_holds_both_sets() {
        let v: Value = serde_json::from_str(r#"{"backends": "127.0.0.1:9", "policy": "p2c", "threads": 8}"#).unwrap();
        let (server, proxy) = from_json_value(&v).unwrap();
        assert_eq!((server.threads, proxy.policy), (Some(8), Policy::P2c));
        assert!(check("blocking", &server, &proxy).is_ok());
        let e = check("tokio", &ServerOptions::default(), &proxy).unwrap_err();
        assert_eq!(e.field, "arch");
        assert!(e.allowed.contains("blocking, blocking-ring") && !e.allowed.contains("tokio"), "{e}");
        let e = check("blocking", &ServerOptions { loops: Some(2), ..Default::default() }, &proxy).unwrap_err();
        assert_eq!(e.field, "loops");
        let v: Value = serde_json::from_str(r#"{"backend": "127.0.0.1:9"}"#).unwrap();
        let e = from_json_value(&v).unwrap_err();
        assert!(e.allowed.contains("threads") && e.allowed.contains("backends"), "{e}");
        let back = from_json_value(&to_json(&server, &proxy)).unwrap();
        assert_eq!(to_json(&back.0, &back.1), to_json(&server, &proxy));
    }
}
