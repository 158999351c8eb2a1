//! The parameters of a load run as given, defined once: each parameter's name, type, default
//! and documentation in one declaration ([`LoadParams`]), from which come the flags of
//! `archlab-engine load`, the JSON of `load --params FILE` and of the Python side's
//! `archlab._native.check_load`, and the schema the spec is checked against. Values are read
//! here in their syntax (durations, schedules, think times, key patterns); whether they make
//! sense together (a rate for the closed model, a seed when nothing is random) is decided by
//! [`LoadConfig::new`](super::LoadConfig::new), which names the parameter by the same key.

use super::memcached::{KeyPatterns, Ratio, ValueSize};
use super::{ArrivalKind, Backend, Model, SessionConnection};
use crate::dist::{SessionLength, ThinkTime};
use crate::mix::{Mix, MIX_SYNTAX};
use crate::schedule::Profile;
use crate::units::Period;
use archlab_netio::CpuList;
use archlab_options::{Choice, Flag, Int, Kind, NoFlag, Number, Text};
use archlab_wire::memcached::Retrieval;
use serde_json::Value;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// Protocol of a run's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Http,
    /// The memcached text protocol, with the workload of the `mc_*`, `ratio`, `key_*`,
    /// `data_size` and `verify` parameters (memtier's notation).
    Memcached,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Http, Protocol::Memcached];
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Memcached => "memcached",
        }
    }
}

const RETRIEVALS: [Retrieval; 2] = [Retrieval::Get, Retrieval::Gets];

fn retrieval_name(r: Retrieval) -> &'static str {
    match r {
        Retrieval::Get => "get",
        Retrieval::Gets => "gets",
    }
}

/// The server: HOST:PORT, a host name resolved once (its first address).
fn resolve(s: &str) -> Result<SocketAddr, String> {
    let mut addrs = s.to_socket_addrs().map_err(|e| e.to_string())?;
    addrs.next().ok_or_else(|| "the name has no address".to_string())
}

/// A ramp: one segment FROM-TO@DURATION with FROM != TO (several go in a `*_steps` parameter).
fn parse_ramp(s: &str) -> Result<Profile, String> {
    let p: Profile = s.parse()?;
    match p.segments() {
        [one] if one.from != one.to => Ok(p),
        _ => Err("a ramp is one FROM-TO@DURATION segment with FROM != TO (use the *_steps parameter for more)".into()),
    }
}

/// Think times in their syntax (`5ms`, `exp:5ms`, `uniform:2ms-8ms`); a JSON number is a
/// constant think time in seconds.
#[derive(Clone, Copy)]
struct ThinkKind;

impl Kind for ThinkKind {
    type Value = ThinkTime;
    fn allowed(&self) -> String {
        "a think time: a duration (constant), exp:MEAN (exponential) or uniform:MIN-MAX".into()
    }
    fn value_name(&self) -> &'static str {
        "THINK"
    }
    fn parse(&self, text: &str) -> Result<ThinkTime, String> {
        text.parse()
    }
    fn parse_json(&self, v: &Value) -> Result<ThinkTime, String> {
        match v {
            Value::String(s) => s.parse(),
            Value::Number(n) => Period.parse_json(&Value::Number(n.clone())).map(ThinkTime::Constant),
            _ => Err(String::new()),
        }
    }
    fn to_json(&self, v: &ThinkTime) -> Value {
        Value::from(v.to_string())
    }
}

/// Session lengths in their syntax (`fixed:5`, `5`, `geometric:4`); a JSON integer is a fixed
/// length.
#[derive(Clone, Copy)]
struct SessionKind;

impl Kind for SessionKind {
    type Value = SessionLength;
    fn allowed(&self) -> String {
        "fixed:N (or N) or geometric:MEAN".into()
    }
    fn value_name(&self) -> &'static str {
        "LENGTH"
    }
    fn parse(&self, text: &str) -> Result<SessionLength, String> {
        text.parse()
    }
    fn parse_json(&self, v: &Value) -> Result<SessionLength, String> {
        match v {
            Value::String(s) => s.parse(),
            Value::Number(n) if n.is_u64() => n.to_string().parse(),
            _ => Err(String::new()),
        }
    }
    fn to_json(&self, v: &SessionLength) -> Value {
        Value::from(v.to_string())
    }
}

/// Request mixes in their syntax (`/a:2,/b:98`); JSON also takes a list of `{path, weight}`.
#[derive(Clone, Copy)]
struct MixKind;

impl Kind for MixKind {
    type Value = Mix;
    fn allowed(&self) -> String {
        MIX_SYNTAX.into()
    }
    fn value_name(&self) -> &'static str {
        "PATH:WEIGHT,..."
    }
    fn parse(&self, text: &str) -> Result<Mix, String> {
        text.parse()
    }
    fn parse_json(&self, v: &Value) -> Result<Mix, String> {
        Mix::from_json(v)
    }
    fn to_json(&self, v: &Mix) -> Value {
        Value::from(v.to_string())
    }
}

/// SO_RCVBUF of the generator's connections, bytes (the server's socket buffer bounds).
const SOCKET_BUFFER: Int<usize> = Int::new(1024, 1 << 30);

const STEPS: &str =
    "comma-separated segments RATE@DURATION (held) or FROM-TO@DURATION (linear), e.g. 1000@10s,2000@10s";
const RAMP: &str = "one segment FROM-TO@DURATION with FROM != TO, e.g. 1000-5000@30s";
/// Connections and threads (their lower bound depends on the model; see `LoadConfig::new`).
const COUNT: Int<usize> = Int::new(0, super::MAX_CONNECTIONS as u64);

fn steps() -> Text<Profile> {
    Text::of(STEPS, "SEGMENTS")
}

fn ramp() -> Text<Profile> {
    Text { allowed: RAMP, value_name: "FROM-TO@DURATION", parse: parse_ramp, show: |p| p.to_string() }
}

archlab_options::option_set! {
    /// The parameters of a load run as given (see [`LoadConfig`](super::LoadConfig) for the
    /// validated form).
    pub struct LoadParams {
        /// Server to load, HOST:PORT (a host name is resolved once, first address).
        target: Option<SocketAddr> = None,
            Text::<SocketAddr> { allowed: "HOST:PORT, e.g. 127.0.0.1:8080", value_name: "HOST:PORT", parse: resolve, show: |a| a.to_string() };
        /// HTTP request target: path and query, e.g. "/prime?n=27059" (default /).
        path: Option<String> = None, Text::<String>::of("a request target such as /prime?n=27059", "PATH");
        /// Host header value (default: the target as given).
        host: Option<String> = None, Text::<String>::of("a Host header value", "HOST");
        /// Load model: closed (N users looping), open (planned send times, rate) or partly-open
        /// (sessions arriving at session_rate).
        model: Model = Model::Closed, Choice { all: &Model::ALL, name: Model::name };
        /// Closed: concurrent users N, one keep-alive connection each (with a users schedule:
        /// its peak, which is the default then). Open and partly-open: connections opened
        /// before the start. Default 16.
        connections: Option<usize> = None, COUNT;
        /// Open and partly-open: most connections at once (default: connections).
        max_connections: Option<usize> = None, COUNT;
        /// Open model: requests per second.
        rate: Option<f64> = None, Number;
        /// Partly-open model: sessions per second.
        session_rate: Option<f64> = None, Number;
        /// Open model: a varying rate over the window instead of rate, comma-separated segments
        /// RATE@DURATION (held) or FROM-TO@DURATION (linear), e.g. "1000@10s,2000@10s". The
        /// window lasts the sum of the segments (duration may be left out), the warm-up holds
        /// the first rate; Poisson or constant spacing as arrivals.
        rate_steps: Option<Profile> = None, steps();
        /// Open model: one linear ramp FROM-TO@DURATION, e.g. "1000-5000@30s" (a one-segment
        /// rate_steps).
        rate_ramp: Option<Profile> = None, ramp();
        /// Partly-open model: sessions per second varying over the window, as rate_steps.
        session_rate_steps: Option<Profile> = None, steps();
        /// Partly-open model: one linear ramp of sessions per second, as rate_ramp.
        session_rate_ramp: Option<Profile> = None, ramp();
        /// Closed model: users varying over the window, segments USERS@DURATION or
        /// FROM-TO@DURATION, e.g. "8@5s,16@5s". A ramp spends equal time at each whole count.
        /// Users start at the scheduled times; a stopping user finishes its request in flight.
        /// One connection per user at the peak, opened before the start.
        users_steps: Option<Profile> = None, steps();
        /// Closed model: one linear ramp of users FROM-TO@DURATION, e.g. "1-64@30s".
        users_ramp: Option<Profile> = None, ramp();
        /// Open and partly-open: spacing of arrivals (default poisson).
        arrivals: Option<ArrivalKind> = None, Choice { all: &ArrivalKind::ALL, name: ArrivalKind::name };
        /// Partly-open: requests per session, "fixed:N" (or "N") or "geometric:MEAN" (default
        /// geometric:5).
        requests_per_session: Option<SessionLength> = None, SessionKind;
        /// Partly-open: a new connection per session, or a pool (default new).
        session_connection: Option<SessionConnection> = None,
            Choice { all: &SessionConnection::ALL, name: SessionConnection::name };
        /// Seed of every random draw (Poisson arrivals, random think times, session lengths,
        /// random keys and value sizes); when something is random and no seed is given, the
        /// generator's default seed.
        seed: Option<u64> = None, Int::<u64>::new(0, u64::MAX);
        /// A request sent later than this after its planned time counts as late.
        late_after: Duration = Duration::from_millis(1), Period;
        /// Spin on the sockets instead of sleeping in epoll, so that no response waits for a
        /// load thread to wake up: for latency measurements with cpus reserved for the
        /// generator. The threads then use their whole CPUs, so CPU use no longer flags a
        /// generator-bound run.
        busy_poll: bool = false, Flag;
        /// How the load threads wait on their sockets: epoll, io-uring (one ring per thread,
        /// batched submission, multishot receive into provided buffers, registered files; HTTP
        /// without pipelining) or auto (io-uring when the kernel allows it and the run can use
        /// it, else epoll; the summary says which ran and why).
        backend: Backend = Backend::Auto, Choice { all: &Backend::ALL, name: Backend::name };
        /// Length of the measurement window, e.g. 10s, 500ms (default 10s, or the length of a
        /// rate or users schedule, which it must equal when given).
        duration: Option<Duration> = None, Period;
        /// Warm-up before the window; its completions are not recorded.
        warmup: Duration = Duration::from_secs(1), Period;
        /// Think time Z between a response and the next request of the same user or session
        /// (closed and partly-open): "5ms" (constant), "exp:5ms" (exponential, mean 5 ms) or
        /// "uniform:2ms-8ms".
        think as think_time: ThinkTime = ThinkTime::default(), ThinkKind;
        /// Load threads (default: one per CPU of cpus, else 1; never more than connections).
        threads: Option<usize> = None, COUNT;
        /// CPUs for the generator, e.g. "0" or "2-3"; load thread i is pinned to the i-th.
        cpus: Option<CpuList> = None, Text::<CpuList>::of("a CPU list such as 1, 0-1 or 0,2-3", "CPUS");
        /// Request timeout: a response not complete by then counts `timeout`, the connection is
        /// reopened.
        request_timeout as timeout: Duration = Duration::from_secs(2), Period;
        /// Connect timeout.
        connect_timeout: Duration = Duration::from_secs(2), Period;
        /// Protocol: HTTP/1.1, or the memcached text protocol (the mc_command, multi_get, ratio,
        /// key_* and data_size parameters, memtier's notation).
        protocol: Protocol = Protocol::Http, Choice { all: &Protocol::ALL, name: Protocol::name };
        /// memcached: retrieval command (default get).
        mc_command: Option<Retrieval> = None, Choice { all: &RETRIEVALS, name: retrieval_name };
        /// memcached: keys per retrieval (memtier --multi-key-get; default 1).
        multi_get: Option<u32> = None, Int::<u32>::new(0, u64::MAX);
        /// memcached: SETS:GETS cycle per connection (memtier --ratio; default 1:10).
        ratio: Option<Ratio> = None, Text::<Ratio>::of("SETS:GETS with integers, not both 0, e.g. 1:10", "S:G");
        /// memcached: key patterns SET:GET (memtier --key-pattern), each R (uniform), S
        /// (sequential, per connection), G (gaussian, key_median/key_stddev), Z (Zipf,
        /// key_zipf_exp) or P (parallel: each connection walks its own slice of the range; P:P
        /// only) (default R:R).
        key_pattern: Option<KeyPatterns> = None, Text::<KeyPatterns>::of("SET:GET patterns of R, S, G, Z, P, e.g. R:R", "SET:GET");
        /// memcached: exponent s of the Z pattern, 0 < s < 5 (memtier --key-zipf-exp; default 1).
        key_zipf_exp: Option<f64> = None, Number;
        /// memcached: key prefix (default memtier-).
        key_prefix: Option<String> = None, Text::<String>::of("a key prefix", "PREFIX");
        /// memcached: smallest key index (default 0).
        key_min: Option<u64> = None, Int::<u64>::new(0, u64::MAX);
        /// memcached: largest key index (default 10000000).
        key_max: Option<u64> = None, Int::<u64>::new(0, u64::MAX);
        /// memcached: centre of the G pattern (default: middle of the range).
        key_median: Option<f64> = None, Number;
        /// memcached: standard deviation of the G pattern (default: range/6).
        key_stddev: Option<f64> = None, Number;
        /// memcached: value size in bytes, "N" or "uniform:MIN-MAX" (default 32).
        data_size: Option<ValueSize> = None, Text::<ValueSize>::of("N or uniform:MIN-MAX (bytes, <= 1048576)", "SIZE");
        /// memcached: check every value read back and the order of multi-get replies.
        verify: bool = false, Flag;
        /// HTTP: several request classes in one run instead of one path, PATH:WEIGHT pairs
        /// separated by commas, e.g. "/response?size=102400:2,/response?size=100:98" (JMeter's
        /// throughput controller); each request's class is drawn from the seeded generator.
        /// Counts and latency per class in the summary.
        mix: Option<Mix> = None, MixKind;
        /// SO_RCVBUF of the generator's connections in bytes, set before connecting so the
        /// window scale fits it (Linux doubles it; the summary reports what the kernel applied).
        /// Default: the kernel's auto-tuning.
        rcvbuf: Option<usize> = None, SOCKET_BUFFER;
        /// HTTP: persistent connections (`--no-keep-alive` sends `Connection: close` and uses
        /// each connection for one request).
        keep_alive: bool = true, NoFlag;
        /// Close each connection after this many responses and open a new one.
        requests_per_connection: Option<u32> = None, Int::<u32>::new(0, u64::MAX);
        /// HTTP pipelining depth D: each connection keeps D requests in flight, answered in
        /// order (closed model, keep-alive, no think time; each response sends the next
        /// request).
        pipeline: u32 = 1, Int::<u32>::new(0, u64::MAX);
        /// Stream one fixed-size binary record per request of the window to this file (memory
        /// stays flat); convert with `archlab-engine records export`.
        records: Option<PathBuf> = None, Text::<PathBuf> {
            allowed: "a file path",
            value_name: "FILE",
            parse: |s| Ok(PathBuf::from(s)),
            show: |p| p.display().to_string(),
        };
    }
}

impl LoadParams {
    /// Every parameter at its default, the target given.
    pub fn new(target: SocketAddr) -> Self {
        LoadParams { target: Some(target), ..Default::default() }
    }
}
