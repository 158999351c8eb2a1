//! Configuration of a load run in two stages: [`LoadParams`] (`params.rs`) is raw input with
//! public fields and defaults, defined once for the command line, JSON and the control plane
//! (with `Option`s so that "given" can be told from "defaulted"); [`LoadConfig`] is the
//! validated, immutable form a run accepts. The load model is a closed enum, [`Pacing`], so that
//! a combination that means nothing (a rate for the closed model, a session length for the open
//! one) cannot be represented: it is refused here, naming the parameter by its key, the allowed
//! values and the value received, so that an experiment spec or a command line can point at the
//! offending option. [`normalise`] gives back what a run would do, every default filled in, as
//! parameters again.

pub mod memcached;
pub mod params;

pub use params::{LoadParams, Protocol};

use crate::dist::{Arrivals, SessionLength, ThinkTime};
pub use crate::error::ConfigError;
use crate::mix::Mix;
use crate::schedule::Profile;
use archlab_netio::CpuList;
use archlab_wire::memcached::Retrieval;
use memcached::{McWorkload, Ratio, ValueSize, DEFAULT_KEY_MAX, DEFAULT_KEY_PREFIX};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Longest duration accepted for the window, the warm-up and the timeouts: bounds a run.
const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);
/// More connections than this would exhaust file descriptors or ports before measuring anything.
pub(crate) const MAX_CONNECTIONS: usize = 1_000_000;
/// Highest arrival rate accepted (requests or sessions per second).
const MAX_RATE: f64 = 1e8;
/// Seed used when none is given, so that two runs of the same spec get the same schedule.
pub const DEFAULT_SEED: u64 = 0x5eed;

/// Which load model the raw parameters ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Model {
    /// N users, each request -> response -> think time.
    #[default]
    Closed,
    /// Planned send times from a schedule, independent of completions.
    Open,
    /// Sessions arrive on a schedule; each makes several requests with think times, then leaves.
    PartlyOpen,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Closed, Model::Open, Model::PartlyOpen];

    pub fn name(self) -> &'static str {
        match self {
            Model::Closed => "closed",
            Model::Open => "open",
            Model::PartlyOpen => "partly-open",
        }
    }
}

/// How the load threads wait on their sockets (the `backend` parameter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// io_uring when this kernel lets the process set up a ring and the run can use it, epoll
    /// otherwise (the summary says which ran, and why not io_uring).
    #[default]
    Auto,
    /// Level-triggered epoll, one `send` and one `recv` per request.
    Epoll,
    /// One io_uring per load thread: batched submission, multishot receive into provided
    /// buffers, registered files (HTTP without pipelining).
    IoUring,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Auto, Backend::Epoll, Backend::IoUring];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Epoll => "epoll",
            Backend::IoUring => "io-uring",
        }
    }
}

/// The backend a run used (`auto` resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackend {
    Epoll,
    IoUring,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Epoll => "epoll",
            IoBackend::IoUring => "io-uring",
        }
    }
}

/// Connection of a partly-open session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionConnection {
    /// Each session connects, makes its requests and closes (Tsung, k6 `noVUConnectionReuse`).
    New,
    /// Sessions take an idle connection from a pool (opened up to the cap) and give it back.
    Pooled,
}

impl SessionConnection {
    pub const ALL: [SessionConnection; 2] = [SessionConnection::New, SessionConnection::Pooled];

    pub fn name(self) -> &'static str {
        match self {
            SessionConnection::New => "new",
            SessionConnection::Pooled => "pooled",
        }
    }
}

/// The validated load model.
#[derive(Clone, Debug, PartialEq)]
pub enum Pacing {
    /// `users` keep-alive connections, one user each; no queue inside the generator. With a
    /// `schedule`, `users` is its peak and the users active follow it.
    Closed { users: usize, think: ThinkTime, schedule: Option<Profile> },
    /// Requests planned by `arrivals`; each takes an idle connection, or opens one while fewer
    /// than `max_connections` exist, or waits (counted in the response time) for one. With a
    /// `schedule` (requests per second over the window), the rate of `arrivals` is its mean.
    Open { arrivals: Arrivals, connections: usize, max_connections: usize, schedule: Option<Profile> },
    /// Sessions planned by `sessions`; `length` requests each, sequential, `think` between them.
    PartlyOpen {
        sessions: Arrivals,
        length: SessionLength,
        think: ThinkTime,
        connection: SessionConnection,
        connections: usize,
        max_connections: usize,
        /// Sessions per second over the window, if the rate varies.
        schedule: Option<Profile>,
    },
}

impl Pacing {
    pub fn model(&self) -> Model {
        match self {
            Pacing::Closed { .. } => Model::Closed,
            Pacing::Open { .. } => Model::Open,
            Pacing::PartlyOpen { .. } => Model::PartlyOpen,
        }
    }

    /// Connections opened before the run starts (and checked for reachability).
    pub fn initial_connections(&self) -> usize {
        match *self {
            Pacing::Closed { users, .. } => users,
            Pacing::Open { connections, .. } | Pacing::PartlyOpen { connections, .. } => connections,
        }
    }

    /// Connection slots: never more connections than this at once.
    pub fn max_connections(&self) -> usize {
        match *self {
            Pacing::Closed { users, .. } => users,
            Pacing::Open { max_connections, .. } | Pacing::PartlyOpen { max_connections, .. } => max_connections,
        }
    }

    /// Think time between requests of a user or session (none in the open model).
    pub fn think(&self) -> ThinkTime {
        match *self {
            Pacing::Closed { think, .. } | Pacing::PartlyOpen { think, .. } => think,
            Pacing::Open { .. } => ThinkTime::default(),
        }
    }

    /// The schedule of arrivals (requests or sessions), if the model has one.
    pub fn arrivals(&self) -> Option<Arrivals> {
        match *self {
            Pacing::Closed { .. } => None,
            Pacing::Open { arrivals, .. } => Some(arrivals),
            Pacing::PartlyOpen { sessions, .. } => Some(sessions),
        }
    }

    /// The varying arrival rate (open: requests/s, partly-open: sessions/s), if any.
    pub fn rate_schedule(&self) -> Option<&Profile> {
        match self {
            Pacing::Open { schedule, .. } | Pacing::PartlyOpen { schedule, .. } => schedule.as_ref(),
            Pacing::Closed { .. } => None,
        }
    }

    /// The varying number of users of the closed model, if any.
    pub fn users_schedule(&self) -> Option<&Profile> {
        match self {
            Pacing::Closed { schedule, .. } => schedule.as_ref(),
            _ => None,
        }
    }

    /// Latency is measured from the planned send time (coordinated omission corrected).
    pub fn corrects_coordinated_omission(&self) -> bool {
        !matches!(self, Pacing::Closed { .. })
    }
}

/// Spacing of arrivals as given in raw input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalKind {
    Constant,
    Poisson,
}

impl ArrivalKind {
    pub const ALL: [ArrivalKind; 2] = [ArrivalKind::Constant, ArrivalKind::Poisson];

    pub fn name(self) -> &'static str {
        match self {
            ArrivalKind::Constant => "constant",
            ArrivalKind::Poisson => "poisson",
        }
    }
}

/// The parameters with their defaults resolved and the memcached workload built: what the
/// checks below read. A schedule keeps the key it was given under (`rate_steps` or
/// `rate_ramp`), so that a refusal names it.
struct Given {
    target: SocketAddr,
    host: Option<String>,
    path: String,
    model: Model,
    connections: usize,
    max_connections: Option<usize>,
    rate: Option<f64>,
    session_rate: Option<f64>,
    rate_schedule: Option<(&'static str, Profile)>,
    session_rate_schedule: Option<(&'static str, Profile)>,
    users_schedule: Option<(&'static str, Profile)>,
    pipeline: u32,
    backend: Backend,
    arrivals: Option<ArrivalKind>,
    think: ThinkTime,
    requests_per_session: Option<SessionLength>,
    session_connection: Option<SessionConnection>,
    seed: Option<u64>,
    late_after: Duration,
    busy_poll: bool,
    duration: Duration,
    warmup: Duration,
    threads: Option<usize>,
    cpus: Option<CpuList>,
    request_timeout: Duration,
    connect_timeout: Duration,
    memcached: Option<McWorkload>,
    records: Option<std::path::PathBuf>,
    keep_alive: bool,
    requests_per_connection: Option<u32>,
    mix: Option<Mix>,
    rcvbuf: Option<usize>,
}

/// One schedule from a `*_steps` / `*_ramp` pair (both given is refused).
fn one_schedule(
    steps: (&'static str, Option<Profile>),
    ramp: (&'static str, Option<Profile>),
) -> Result<Option<(&'static str, Profile)>, ConfigError> {
    match (steps, ramp) {
        ((s, Some(_)), (r, Some(ramp))) => Err(refuse(
            r,
            format!("not with {s}; write a ramp as a FROM-TO@DURATION segment of {s}"),
            format_args!("{ramp}"),
        )),
        ((s, Some(p)), _) | (_, (s, Some(p))) => Ok(Some((s, p))),
        _ => Ok(None),
    }
}

const MC_ONLY: &str = "only with protocol memcached (this run speaks http)";

impl Given {
    fn of(p: LoadParams) -> Result<Given, ConfigError> {
        let target = p.target.ok_or_else(|| missing("target", "HOST:PORT of the server, e.g. 127.0.0.1:8080"))?;
        let rate_schedule = one_schedule(("rate_steps", p.rate_steps), ("rate_ramp", p.rate_ramp))?;
        let session_rate_schedule =
            one_schedule(("session_rate_steps", p.session_rate_steps), ("session_rate_ramp", p.session_rate_ramp))?;
        let users_schedule = one_schedule(("users_steps", p.users_steps), ("users_ramp", p.users_ramp))?;
        let users_peak = users_schedule.as_ref().filter(|_| p.model == Model::Closed).map(|(_, u)| u.peak() as usize);
        let schedule = rate_schedule.as_ref().or(session_rate_schedule.as_ref()).or(users_schedule.as_ref());
        let duration = p.duration.or(schedule.map(|(_, s)| s.duration())).unwrap_or(Duration::from_secs(10));
        let memcached = match p.protocol {
            Protocol::Http => {
                if let (Some(mix), Some(path)) = (&p.mix, &p.path) {
                    return Err(refuse("mix", format!("either path ({path}) or mix, not both"), format_args!("{mix}")));
                }
                let given: [(&'static str, Option<String>); 12] = [
                    ("mc_command", p.mc_command.map(|c| format!("{c:?}").to_lowercase())),
                    ("multi_get", p.multi_get.map(|v| v.to_string())),
                    ("ratio", p.ratio.map(|v| v.to_string())),
                    ("key_pattern", p.key_pattern.map(|v| v.to_string())),
                    ("key_prefix", p.key_prefix.clone()),
                    ("key_min", p.key_min.map(|v| v.to_string())),
                    ("key_max", p.key_max.map(|v| v.to_string())),
                    ("key_median", p.key_median.map(|v| v.to_string())),
                    ("key_stddev", p.key_stddev.map(|v| v.to_string())),
                    ("key_zipf_exp", p.key_zipf_exp.map(|v| v.to_string())),
                    ("data_size", p.data_size.map(|v| v.to_string())),
                    ("verify", p.verify.then(|| "true".to_string())),
                ];
                if let Some((parameter, value)) = given.into_iter().find_map(|(k, v)| v.map(|v| (k, v))) {
                    return Err(ConfigError { parameter, allowed: MC_ONLY.into(), received: value });
                }
                None
            }
            Protocol::Memcached => {
                for (parameter, value) in [("path", &p.path), ("host", &p.host)] {
                    if let Some(v) = value {
                        return Err(refuse(parameter, "only with protocol http (this run speaks memcached)", v));
                    }
                }
                if let Some(mix) = &p.mix {
                    return Err(refuse(
                        "mix",
                        "only with protocol http (this run speaks memcached)",
                        format_args!("{mix}"),
                    ));
                }
                let w = McWorkload::new(
                    p.mc_command.unwrap_or(Retrieval::Get),
                    p.multi_get.unwrap_or(1),
                    p.ratio.unwrap_or(Ratio { sets: 1, gets: 10 }),
                    p.key_pattern.unwrap_or_else(|| "R:R".parse().expect("valid")),
                    p.key_prefix.clone().unwrap_or_else(|| DEFAULT_KEY_PREFIX.into()),
                    p.key_min.unwrap_or(0),
                    p.key_max.unwrap_or(DEFAULT_KEY_MAX),
                    p.key_median,
                    p.key_stddev,
                    p.data_size.unwrap_or(ValueSize::Fixed(32)),
                    p.verify,
                )?;
                Some(match p.key_zipf_exp {
                    Some(s) => w.with_zipf_exponent(s)?,
                    None => w,
                })
            }
        };
        Ok(Given {
            target,
            // memcached sends no path: the default is kept only as a valid placeholder.
            path: p.path.unwrap_or_else(|| "/".into()),
            host: p.host,
            model: p.model,
            connections: p.connections.or(users_peak).unwrap_or(16),
            max_connections: p.max_connections,
            rate: p.rate,
            session_rate: p.session_rate,
            rate_schedule,
            session_rate_schedule,
            users_schedule,
            pipeline: p.pipeline,
            backend: p.backend,
            arrivals: p.arrivals,
            think: p.think,
            requests_per_session: p.requests_per_session,
            session_connection: p.session_connection,
            seed: p.seed,
            late_after: p.late_after,
            busy_poll: p.busy_poll,
            duration,
            warmup: p.warmup,
            threads: p.threads,
            cpus: p.cpus,
            request_timeout: p.request_timeout,
            connect_timeout: p.connect_timeout,
            memcached,
            records: p.records,
            keep_alive: p.keep_alive,
            requests_per_connection: p.requests_per_connection,
            mix: p.mix,
            rcvbuf: p.rcvbuf,
        })
    }
}

/// Validated parameters of a run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    target: SocketAddr,
    host: String,
    /// `host` was given (not the target's text).
    host_given: bool,
    path: String,
    pacing: Pacing,
    seed: u64,
    /// Something is drawn at random, so the seed matters.
    random: bool,
    late_after: Duration,
    busy_poll: bool,
    duration: Duration,
    warmup: Duration,
    threads: usize,
    cpus: Option<CpuList>,
    request_timeout: Duration,
    connect_timeout: Duration,
    memcached: Option<McWorkload>,
    records: Option<std::path::PathBuf>,
    keep_alive: bool,
    requests_per_connection: Option<u32>,
    pipeline: u32,
    backend: Backend,
    /// HTTP request classes, when the run mixes several paths.
    mix: Option<Mix>,
    /// SO_RCVBUF asked for the generator's connections.
    rcvbuf: Option<usize>,
}

/// What a run of `p` would do, every default resolved, as parameters: the canonical form of a
/// run's parameters (`archlab-engine load --params` reads it back to the same run). Refused
/// as [`LoadConfig::new`] refuses; `p` may leave the target out (the control plane checks a
/// spec before any server listens), and then so does the result.
pub fn normalise(mut p: LoadParams) -> Result<LoadParams, ConfigError> {
    let without_target = p.target.is_none();
    if without_target {
        // A stand-in: nothing but the default Host header depends on the target, and a
        // default is not part of the result.
        p.target = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    }
    let mut out = LoadConfig::new(p)?.params();
    if without_target {
        out.target = None;
    }
    Ok(out)
}

/// Deepest pipeline accepted (wrk2's and memtier's users rarely go past a few dozen).
const MAX_PIPELINE: u32 = 1024;

/// What the io_uring backend does not speak yet, in the words of a refusal.
fn io_uring_refusal(memcached: bool, pipeline: u32) -> Option<&'static str> {
    if memcached {
        Some("the io-uring backend speaks HTTP only (memcached runs on epoll)")
    } else if pipeline > 1 {
        Some("the io-uring backend keeps one request in flight per connection (pipelined runs use epoll)")
    } else {
        None
    }
}

/// `backend = "io-uring"` only where that backend works; `auto` falls back instead.
fn check_backend(p: &Given) -> Result<(), ConfigError> {
    match (p.backend, io_uring_refusal(p.memcached.is_some(), p.pipeline)) {
        (Backend::IoUring, Some(why)) => Err(refuse("backend", format!("auto or epoll here: {why}"), "io-uring")),
        _ => Ok(()),
    }
}

/// Pipelining is written for the closed model over HTTP keep-alive: refuse the rest by name.
fn check_pipeline(p: &Given) -> Result<(), ConfigError> {
    let depth = p.pipeline;
    if !(1..=MAX_PIPELINE).contains(&depth) {
        return Err(refuse("pipeline", format!("an integer in 1..={MAX_PIPELINE}"), depth));
    }
    if depth == 1 {
        return Ok(());
    }
    let why = if p.model != Model::Closed {
        Some(format!("1 with the {} model (pipelining is for the closed model: N connections, each keeping D requests in flight)", p.model.name()))
    } else if p.memcached.is_some() {
        Some("1 with memcached (pipelining is written for HTTP only)".to_string())
    } else if !p.keep_alive {
        Some("1 without keep-alive (a pipeline needs a persistent connection)".to_string())
    } else if p.requests_per_connection.is_some() {
        Some("1 with requests_per_connection".to_string())
    } else if !p.think.is_zero() {
        Some("1 with a think time (a pipelined connection sends the next request at each response)".to_string())
    } else if p.users_schedule.is_some() {
        Some("1 with a users schedule".to_string())
    } else {
        None
    };
    match why {
        Some(allowed) => Err(refuse("pipeline", allowed, depth)),
        None => Ok(()),
    }
}

fn refuse(parameter: &'static str, allowed: impl Into<String>, received: impl fmt::Debug) -> ConfigError {
    ConfigError { parameter, allowed: allowed.into(), received: format!("{received:?}") }
}

fn missing(parameter: &'static str, allowed: &str) -> ConfigError {
    ConfigError { parameter, allowed: allowed.into(), received: "nothing".into() }
}

fn check_period(parameter: &'static str, d: Duration, zero_ok: bool) -> Result<(), ConfigError> {
    let ok = (zero_ok || !d.is_zero()) && d <= MAX_PERIOD;
    let lower = if zero_ok { ">= 0" } else { "> 0" };
    ok.then_some(()).ok_or_else(|| refuse(parameter, format!("a duration {lower} and <= 24h"), d))
}

fn check_rate(parameter: &'static str, r: f64) -> Result<f64, ConfigError> {
    (r.is_finite() && r > 0.0 && r <= MAX_RATE)
        .then_some(r)
        .ok_or_else(|| refuse(parameter, format!("a number > 0 and <= {MAX_RATE:e} per second"), r))
}

/// Refuse a parameter that was given but means nothing for `model`.
fn only_for<T: fmt::Display>(
    parameter: &'static str,
    value: Option<T>,
    model: Model,
    meaningful: &[Model],
) -> Result<(), ConfigError> {
    match value {
        Some(v) if !meaningful.contains(&model) => {
            let names: Vec<&str> = meaningful.iter().map(|m| m.name()).collect();
            Err(ConfigError {
                parameter,
                allowed: format!("only with the {} model (this run is {})", names.join(" or "), model.name()),
                received: v.to_string(),
            })
        }
        _ => Ok(()),
    }
}

fn check_think(think: ThinkTime) -> Result<ThinkTime, ConfigError> {
    let ok = match think {
        ThinkTime::Constant(d) => d <= MAX_PERIOD,
        ThinkTime::Exponential { mean } => !mean.is_zero() && mean <= MAX_PERIOD,
        ThinkTime::Uniform { min, max } => min <= max && max <= MAX_PERIOD,
    };
    ok.then_some(think).ok_or_else(|| {
        refuse(
            "think_time",
            "durations <= 24h; for exp:MEAN, MEAN > 0; for uniform:MIN-MAX, MIN <= MAX",
            format_args!("{think}"),
        )
    })
}

/// A request target or Host value must not be able to break the request line or headers.
fn is_header_safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic())
}

/// The rate of the model: a fixed one, or the mean of a schedule (never both).
fn rate_or_schedule(
    (rate_name, rate): (&'static str, Option<f64>),
    schedule: Option<&(&'static str, Profile)>,
    required: &str,
) -> Result<f64, ConfigError> {
    let (schedule_name, schedule) = match schedule {
        Some((key, s)) => (*key, Some(s)),
        None => ("", None),
    };
    match (rate, schedule) {
        (Some(r), None) => check_rate(rate_name, r),
        (None, None) => Err(missing(rate_name, required)),
        (Some(_), Some(s)) => {
            Err(refuse(schedule_name, format!("either {rate_name} or {schedule_name}, not both"), format_args!("{s}")))
        }
        (None, Some(s)) => {
            let window = s.duration().as_secs_f64();
            if s.is_empty() || s.peak() > MAX_RATE || s.integral_to(window) <= 0.0 || s.duration() > MAX_PERIOD {
                return Err(refuse(
                    schedule_name,
                    format!("segments with rates in 0..={MAX_RATE:e}/s, not all 0, lasting <= 24h in all"),
                    format_args!("{s}"),
                ));
            }
            Ok(s.mean_over(0.0, window))
        }
    }
}

fn check_users_schedule(key: &'static str, users: &Profile, connections: usize) -> Result<(), ConfigError> {
    let whole = users.segments().iter().all(|s| s.from.fract() == 0.0 && s.to.fract() == 0.0);
    let peak = users.peak();
    if users.is_empty() || !whole || peak < 1.0 || peak > MAX_CONNECTIONS as f64 || users.duration() > MAX_PERIOD {
        return Err(refuse(
            key,
            format!("segments of whole numbers of users in 0..={MAX_CONNECTIONS}, peak >= 1, lasting <= 24h in all"),
            format_args!("{users}"),
        ));
    }
    if peak as usize != connections {
        return Err(refuse(
            "connections",
            format!("the peak of the users schedule ({peak}): one connection per user (or leave it out)"),
            connections,
        ));
    }
    Ok(())
}

fn pacing_of(p: &Given) -> Result<Pacing, ConfigError> {
    use Model::*;
    let m = p.model;
    only_for("rate", p.rate, m, &[Open])?;
    only_for("session_rate", p.session_rate, m, &[PartlyOpen])?;
    for (schedule, meaningful) in
        [(&p.rate_schedule, Open), (&p.session_rate_schedule, PartlyOpen), (&p.users_schedule, Closed)]
    {
        if let Some((key, s)) = schedule {
            only_for(key, Some(s), m, &[meaningful])?;
        }
    }
    only_for("arrivals", p.arrivals.map(|a| a.name()), m, &[Open, PartlyOpen])?;
    only_for("max_connections", p.max_connections, m, &[Open, PartlyOpen])?;
    only_for("requests_per_session", p.requests_per_session, m, &[PartlyOpen])?;
    only_for("session_connection", p.session_connection.map(|c| c.name()), m, &[PartlyOpen])?;
    only_for("think_time", (!p.think.is_zero()).then_some(p.think), m, &[Closed, PartlyOpen])?;
    let think = check_think(p.think)?;

    let connections_range = |lo: usize| format!("an integer in {lo}..={MAX_CONNECTIONS}");
    let arrivals = |rate: f64| match p.arrivals.unwrap_or(ArrivalKind::Poisson) {
        ArrivalKind::Constant => Arrivals::Constant { rate_per_s: rate },
        ArrivalKind::Poisson => Arrivals::Poisson { rate_per_s: rate },
    };
    let pool = |connections: usize| -> Result<usize, ConfigError> {
        let max = p.max_connections.unwrap_or(connections.max(1));
        if max == 0 || max > MAX_CONNECTIONS || max < connections {
            return Err(refuse(
                "max_connections",
                format!("an integer in max(1, connections ({connections}))..={MAX_CONNECTIONS}"),
                max,
            ));
        }
        Ok(max)
    };
    if p.connections > MAX_CONNECTIONS || (m == Closed && p.connections == 0) {
        return Err(refuse("connections", connections_range(usize::from(m == Closed)), p.connections));
    }
    Ok(match m {
        Closed => {
            if let Some((key, users)) = &p.users_schedule {
                check_users_schedule(key, users, p.connections)?;
            }
            Pacing::Closed { users: p.connections, think, schedule: p.users_schedule.clone().map(|(_, s)| s) }
        }
        Open => {
            let rate = rate_or_schedule(
                ("rate", p.rate),
                p.rate_schedule.as_ref(),
                "requests per second, required by the open model (or rate_steps)",
            )?;
            Pacing::Open {
                arrivals: arrivals(rate),
                connections: p.connections,
                max_connections: pool(p.connections)?,
                schedule: p.rate_schedule.clone().map(|(_, s)| s),
            }
        }
        PartlyOpen => {
            let rate = rate_or_schedule(
                ("session_rate", p.session_rate),
                p.session_rate_schedule.as_ref(),
                "sessions per second, required by the partly-open model (or session_rate_steps)",
            )?;
            let length = p.requests_per_session.unwrap_or(SessionLength::Geometric { mean: 5.0 });
            let ok = match length {
                SessionLength::Fixed(n) => n >= 1,
                SessionLength::Geometric { mean } => (1.0..=1e6).contains(&mean),
            };
            if !ok {
                return Err(ConfigError {
                    parameter: "requests_per_session",
                    allowed: "fixed:N with N >= 1, or geometric:MEAN with 1 <= MEAN <= 1e6".into(),
                    received: length.to_string(),
                });
            }
            Pacing::PartlyOpen {
                sessions: arrivals(rate),
                schedule: p.session_rate_schedule.clone().map(|(_, s)| s),
                length,
                think,
                connection: p.session_connection.unwrap_or(SessionConnection::New),
                connections: p.connections,
                max_connections: pool(p.connections)?,
            }
        }
    })
}

impl LoadConfig {
    pub fn new(p: LoadParams) -> Result<Self, ConfigError> {
        let p = Given::of(p)?;
        let pacing = pacing_of(&p)?;
        let slots = pacing.max_connections();
        let threads = match (p.threads, &p.cpus) {
            (Some(t), _) => t,
            (None, Some(cpus)) => cpus.ids().len().min(slots),
            (None, None) => 1,
        };
        if threads == 0 || threads > slots {
            return Err(refuse(
                "threads",
                format!("an integer in 1..=connections ({slots}): each thread owns at least one connection"),
                threads,
            ));
        }
        let random = pacing.think().is_random()
            || matches!(pacing.arrivals(), Some(Arrivals::Poisson { .. }))
            || matches!(pacing, Pacing::PartlyOpen { length: SessionLength::Geometric { .. }, .. })
            || p.memcached.as_ref().is_some_and(McWorkload::is_random)
            || p.mix.is_some();
        if let (false, Some(seed)) = (random, p.seed) {
            return Err(refuse(
                "seed",
                "only when something is random (Poisson arrivals, a random think time or session length, random or gaussian memcached keys, random value sizes, a mix)",
                seed,
            ));
        }
        check_period("duration", p.duration, false)?;
        if let Some(s) = pacing.rate_schedule().or(pacing.users_schedule()) {
            if s.duration() != p.duration {
                return Err(refuse(
                    "duration",
                    format!("the length of the schedule ({:?}), or nothing", s.duration()),
                    p.duration,
                ));
            }
        }
        check_period("warmup", p.warmup, true)?;
        check_period("timeout", p.request_timeout, false)?;
        check_period("connect_timeout", p.connect_timeout, false)?;
        check_period("late_after", p.late_after, true)?;
        if !p.path.starts_with('/') || !is_header_safe(&p.path) {
            return Err(refuse(
                "path",
                "a request target starting with '/' without spaces or control characters",
                &p.path,
            ));
        }
        check_pipeline(&p)?;
        check_backend(&p)?;
        if p.memcached.is_some() && !p.keep_alive {
            return Err(refuse("keep_alive", "true with memcached (use requests_per_connection)", false));
        }
        match (p.keep_alive, p.requests_per_connection) {
            (_, Some(0)) => return Err(refuse("requests_per_connection", "an integer >= 1", 0)),
            (false, Some(n)) if n != 1 => {
                return Err(refuse("requests_per_connection", "1 (or nothing) without keep-alive", n))
            }
            _ => {}
        }
        if let Some(w) = p.memcached.as_ref().filter(|w| w.is_parallel()) {
            let keys = w.key_max - w.key_min;
            if keys < slots as u64 - 1 {
                return Err(refuse(
                    "key_pattern",
                    format!("P:P only with at least one key per connection ({slots} connections)"),
                    format_args!("P:P over {} keys", keys + 1),
                ));
            }
        }
        if let (Some(_), Some(host)) = (&p.memcached, &p.host) {
            return Err(refuse("host", "only with HTTP (this run speaks memcached)", host));
        }
        let host = p.host.clone().unwrap_or_else(|| p.target.to_string());
        if !is_header_safe(&host) {
            return Err(refuse("host", "a non-empty Host value without spaces or control characters", &host));
        }
        Ok(LoadConfig {
            target: p.target,
            host,
            host_given: p.host.is_some(),
            path: p.path,
            pacing,
            seed: p.seed.unwrap_or(DEFAULT_SEED),
            random,
            late_after: p.late_after,
            busy_poll: p.busy_poll,
            duration: p.duration,
            warmup: p.warmup,
            threads,
            cpus: p.cpus,
            request_timeout: p.request_timeout,
            connect_timeout: p.connect_timeout,
            memcached: p.memcached,
            records: p.records,
            keep_alive: p.keep_alive,
            requests_per_connection: if p.keep_alive { p.requests_per_connection } else { Some(1) },
            pipeline: p.pipeline,
            backend: p.backend,
            mix: p.mix,
            rcvbuf: p.rcvbuf,
        })
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The run as parameters again, every default resolved: `LoadConfig::new` of them is this
    /// configuration. The seed is there only when something is random.
    pub fn params(&self) -> LoadParams {
        let mut p = LoadParams::new(self.target);
        p.model = self.pacing.model();
        let arrival_kind = |a: &Arrivals| match a {
            Arrivals::Constant { .. } => ArrivalKind::Constant,
            Arrivals::Poisson { .. } => ArrivalKind::Poisson,
        };
        match &self.pacing {
            Pacing::Closed { users, think, schedule } => {
                p.connections = Some(*users);
                p.think = *think;
                p.users_steps = schedule.clone();
            }
            Pacing::Open { arrivals, connections, max_connections, schedule } => {
                (p.connections, p.max_connections) = (Some(*connections), Some(*max_connections));
                p.arrivals = Some(arrival_kind(arrivals));
                match schedule {
                    Some(s) => p.rate_steps = Some(s.clone()),
                    None => p.rate = Some(arrivals.rate_per_s()),
                }
            }
            Pacing::PartlyOpen { sessions, length, think, connection, connections, max_connections, schedule } => {
                (p.connections, p.max_connections) = (Some(*connections), Some(*max_connections));
                p.arrivals = Some(arrival_kind(sessions));
                match schedule {
                    Some(s) => p.session_rate_steps = Some(s.clone()),
                    None => p.session_rate = Some(sessions.rate_per_s()),
                }
                (p.requests_per_session, p.session_connection, p.think) = (Some(*length), Some(*connection), *think);
            }
        }
        p.seed = self.random.then_some(self.seed);
        (p.late_after, p.busy_poll, p.duration, p.warmup) =
            (self.late_after, self.busy_poll, Some(self.duration), self.warmup);
        (p.threads, p.cpus) = (Some(self.threads), self.cpus.clone());
        (p.request_timeout, p.connect_timeout) = (self.request_timeout, self.connect_timeout);
        (p.keep_alive, p.requests_per_connection, p.pipeline) =
            (self.keep_alive, self.requests_per_connection, self.pipeline);
        p.records = self.records.clone();
        (p.mix, p.rcvbuf, p.backend) = (self.mix.clone(), self.rcvbuf, self.backend);
        match &self.memcached {
            None => {
                p.path = self.mix.is_none().then(|| self.path.clone());
                p.host = self.host_given.then(|| self.host.clone());
            }
            Some(w) => {
                p.protocol = Protocol::Memcached;
                (p.mc_command, p.multi_get, p.ratio, p.key_pattern) =
                    (Some(w.retrieval), Some(w.multi_get), Some(w.ratio), Some(w.keys));
                (p.key_prefix, p.key_min, p.key_max) = (Some(w.key_prefix.clone()), Some(w.key_min), Some(w.key_max));
                (p.key_median, p.key_stddev) = (Some(w.key_median), Some(w.key_stddev));
                let zipf = [w.keys.set, w.keys.get].contains(&memcached::KeyPattern::Zipf);
                p.key_zipf_exp = zipf.then_some(w.key_zipf_exp);
                (p.data_size, p.verify) = (Some(w.value_size), w.verify);
            }
        }
        p
    }
    pub fn host(&self) -> &str {
        &self.host
    }
    pub fn path(&self) -> &str {
        &self.path
    }
    /// HTTP requests ask for persistent connections.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
    /// Responses after which a connection is closed and reopened (`None`: never).
    pub fn requests_per_connection(&self) -> Option<u32> {
        self.requests_per_connection
    }
    /// HTTP requests kept in flight per connection (1: no pipelining).
    pub fn pipeline(&self) -> u32 {
        self.pipeline
    }
    /// How the load threads wait on their sockets, as asked (`auto` is resolved when the run
    /// starts).
    pub fn backend(&self) -> Backend {
        self.backend
    }
    /// Why the io_uring backend cannot run this configuration (`None`: it can).
    pub fn io_uring_refusal(&self) -> Option<&'static str> {
        io_uring_refusal(self.memcached.is_some(), self.pipeline)
    }
    /// Where raw per-request records go, if anywhere.
    pub fn records(&self) -> Option<&std::path::Path> {
        self.records.as_deref()
    }
    /// What the run loads, as written in a records file: `GET http://HOST/PATH` or
    /// `memcached ADDR`.
    pub fn label(&self) -> String {
        match &self.memcached {
            Some(_) => format!("memcached {}", self.target),
            None => match &self.mix {
                Some(m) => format!("GET http://{} mix {m}", self.host),
                None => format!("GET http://{}{}", self.host, self.path),
            },
        }
    }
    /// The request classes of a mix, if the run has one.
    pub fn mix(&self) -> Option<&Mix> {
        self.mix.as_ref()
    }
    /// The request target of each class: the mix's paths, else the one path.
    pub fn request_paths(&self) -> Vec<&str> {
        match &self.mix {
            Some(m) => m.classes().iter().map(|c| c.path.as_str()).collect(),
            None => vec![self.path.as_str()],
        }
    }
    /// SO_RCVBUF asked for the generator's connections (`None`: the kernel's auto-tuning).
    pub fn rcvbuf(&self) -> Option<usize> {
        self.rcvbuf
    }
    /// The memcached workload, or `None` for HTTP.
    pub fn memcached(&self) -> Option<&McWorkload> {
        self.memcached.as_ref()
    }
    pub fn pacing(&self) -> &Pacing {
        &self.pacing
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn late_after(&self) -> Duration {
        self.late_after
    }
    pub fn busy_poll(&self) -> bool {
        self.busy_poll
    }
    /// Connections opened before the start (closed model: the users).
    pub fn connections(&self) -> usize {
        self.pacing.initial_connections()
    }
    pub fn max_connections(&self) -> usize {
        self.pacing.max_connections()
    }
    pub fn duration(&self) -> Duration {
        self.duration
    }
    pub fn warmup(&self) -> Duration {
        self.warmup
    }
    /// Mean think time (zero for the open model).
    pub fn think_time(&self) -> Duration {
        self.pacing.think().mean()
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
    /// Share of thread `i` when `n` things are spread over the threads: n/T, the first
    /// n mod T threads one more.
    pub fn share_of_thread(&self, n: usize, i: usize) -> usize {
        n / self.threads + usize::from(i < n % self.threads)
    }
    /// Connection slots owned by load thread `i`.
    pub fn slots_of_thread(&self, i: usize) -> usize {
        self.share_of_thread(self.max_connections(), i)
    }
    /// Connections load thread `i` opens before the start.
    pub fn connections_of_thread(&self, i: usize) -> usize {
        self.share_of_thread(self.connections(), i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> LoadParams {
        LoadParams::new("127.0.0.1:8080".parse().unwrap())
    }

    fn refused(p: LoadParams) -> ConfigError {
        LoadConfig::new(p).unwrap_err()
    }

    #[test]
    fn defaults_are_valid_and_threads_follow_cpus() {
        let c = LoadConfig::new(params()).unwrap();
        assert_eq!((c.threads(), c.host(), c.path()), (1, "127.0.0.1:8080", "/"));
        assert_eq!(c.pacing(), &Pacing::Closed { users: 16, think: ThinkTime::default(), schedule: None });
        let mut p = params();
        p.cpus = Some(CpuList::new(vec![0, 1, 2, 3]).unwrap());
        p.connections = Some(3);
        // One thread per CPU, but never more threads than connections.
        assert_eq!(LoadConfig::new(p).unwrap().threads(), 3);
    }

    #[test]
    fn connections_are_spread_evenly() {
        let mut p = params();
        p.connections = Some(10);
        p.threads = Some(4);
        let c = LoadConfig::new(p).unwrap();
        let per: Vec<usize> = (0..4).map(|i| c.connections_of_thread(i)).collect();
        assert_eq!(per, [3, 3, 2, 2]);
    }

    #[test]
    fn open_and_partly_open_models_validate() {
        let mut p = params();
        p.model = Model::Open;
        p.rate = Some(1000.0);
        p.max_connections = Some(32);
        let c = LoadConfig::new(p).unwrap();
        assert!(matches!(
            c.pacing(),
            Pacing::Open { arrivals: Arrivals::Poisson { .. }, connections: 16, max_connections: 32, schedule: None }
        ));
        assert_eq!(c.seed(), DEFAULT_SEED);
        let mut p = params();
        p.model = Model::PartlyOpen;
        p.session_rate = Some(10.0);
        p.connections = Some(0);
        p.max_connections = Some(8);
        p.think = ThinkTime::Exponential { mean: Duration::from_millis(1) };
        let c = LoadConfig::new(p).unwrap();
        assert_eq!(c.connections(), 0);
        assert!(matches!(c.pacing(), Pacing::PartlyOpen { connection: SessionConnection::New, .. }));
    }

    #[test]
    fn the_io_uring_backend_is_refused_where_it_does_not_run() {
        let mut p = params();
        p.backend = Backend::IoUring;
        p.pipeline = 4;
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("backend", "\"io-uring\""));
        assert!(e.allowed.contains("auto or epoll") && e.allowed.contains("pipelined"), "{}", e.allowed);
        let mut p = params();
        p.backend = Backend::IoUring;
        p.protocol = Protocol::Memcached;
        assert!(refused(p).allowed.contains("HTTP only"));
        // auto takes the same runs, and says why it will use epoll; io-uring alone is kept.
        let mut p = params();
        p.pipeline = 4;
        let c = LoadConfig::new(p).unwrap();
        assert_eq!((c.backend(), c.io_uring_refusal().is_some()), (Backend::Auto, true));
        let mut p = params();
        p.backend = Backend::IoUring;
        let c = LoadConfig::new(p).unwrap();
        assert_eq!((c.backend(), c.io_uring_refusal()), (Backend::IoUring, None));
        assert_eq!(c.params().backend, Backend::IoUring);
    }

    #[test]
    fn meaningless_combinations_are_refused() {
        let mut p = params();
        p.rate = Some(100.0);
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("rate", "100"));
        assert!(e.allowed.contains("only with the open model (this run is closed)"), "{e}");

        let mut p = params();
        p.model = Model::Open;
        let e = refused(p);
        assert_eq!(e.parameter, "rate");
        assert!(e.allowed.contains("required"), "{e}");
        assert_eq!(e.received, "nothing");

        let mut p = params();
        p.model = Model::Open;
        p.rate = Some(10.0);
        p.think = ThinkTime::Constant(Duration::from_millis(1));
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("think_time", "1ms"));

        let mut p = params();
        p.requests_per_session = Some(SessionLength::Fixed(3));
        assert_eq!(refused(p).parameter, "requests_per_session");

        let mut p = params();
        p.max_connections = Some(3);
        assert_eq!(refused(p).parameter, "max_connections");

        let mut p = params();
        p.seed = Some(3);
        let e = refused(p);
        assert_eq!(e.parameter, "seed");
        assert!(e.allowed.contains("random"), "{e}");

        let mut p = params();
        p.model = Model::Open;
        p.rate = Some(f64::NAN);
        assert_eq!(refused(p).parameter, "rate");

        let mut p = params();
        p.model = Model::Open;
        p.rate = Some(10.0);
        p.max_connections = Some(4);
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("max_connections", "4"));

        let mut p = params();
        p.model = Model::PartlyOpen;
        p.session_rate = Some(1.0);
        p.requests_per_session = Some(SessionLength::Geometric { mean: 0.5 });
        assert_eq!(refused(p).parameter, "requests_per_session");

        let mut p = params();
        p.think = ThinkTime::Uniform { min: Duration::from_millis(3), max: Duration::from_millis(1) };
        assert_eq!(refused(p).parameter, "think_time");
    }

    #[test]
    fn refusals_name_parameter_allowed_and_received() {
        let mut p = params();
        p.connections = Some(0);
        let e = refused(p);
        assert_eq!(e.parameter, "connections");
        assert_eq!(e.received, "0");
        assert!(e.to_string().contains("invalid connections: 0 (allowed: an integer in 1..="), "{e}");

        let mut p = params();
        p.connections = Some(2);
        p.threads = Some(3);
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("threads", "3"));
        assert!(e.allowed.contains("connections (2)"), "{e}");

        let mut p = params();
        p.threads = Some(0);
        assert_eq!(refused(p).parameter, "threads");

        let mut p = params();
        p.duration = Some(Duration::ZERO);
        let e = refused(p);
        assert_eq!(e.parameter, "duration");
        assert!(e.to_string().contains("> 0"), "{e}");

        let mut p = params();
        p.request_timeout = Duration::ZERO;
        assert_eq!(refused(p).parameter, "timeout");

        let mut p = params();
        p.warmup = Duration::from_secs(100_000);
        assert_eq!(refused(p).parameter, "warmup");

        for bad in ["prime", "/a b", "/x\r\nEvil: 1", ""] {
            let mut p = params();
            p.path = Some(bad.into());
            assert_eq!(refused(p).parameter, "path", "{bad:?}");
        }
        let mut p = params();
        p.host = Some("a b".into());
        assert_eq!(refused(p).parameter, "host");
    }

    #[test]
    fn normalising_resolves_every_default_and_reads_back_the_same() {
        // No target: the control plane checks before any server listens.
        let p = LoadParams {
            model: Model::PartlyOpen,
            session_rate: Some(10.0),
            think: "exp:5ms".parse().unwrap(),
            ..Default::default()
        };
        let n = normalise(p).unwrap();
        assert_eq!(n.target, None);
        let j = n.to_json();
        assert_eq!(j["seed"], DEFAULT_SEED, "something is random: the default seed is explicit");
        assert_eq!(
            (&j["arrivals"], &j["requests_per_session"], &j["session_connection"]),
            (&"poisson".into(), &"geometric:5".into(), &"new".into())
        );
        assert_eq!((&j["connections"], &j["max_connections"], &j["duration"]), (&16.into(), &16.into(), &"10s".into()));
        assert_eq!(
            (&j["think_time"], &j["timeout"], &j["session_rate"]),
            (&"exp:5ms".into(), &"2s".into(), &10.into())
        );
        let again = normalise(LoadParams::from_json_value(&j).unwrap()).unwrap();
        assert_eq!(again.to_json(), j);
        // Nothing random: no seed at all.
        assert!(normalise(LoadParams::default()).unwrap().to_json().get("seed").is_none());
        // memcached: the workload's resolved defaults, no path.
        let mut p = LoadParams::new("127.0.0.1:1".parse().unwrap());
        p.protocol = Protocol::Memcached;
        let j = normalise(p).unwrap().to_json();
        assert_eq!((&j["ratio"], &j["key_pattern"], &j["data_size"]), (&"1:10".into(), &"R:R".into(), &"32".into()));
        assert!(j.get("path").is_none() && j.get("key_zipf_exp").is_none());
        assert_eq!(normalise(LoadParams::from_json_value(&j).unwrap()).unwrap().to_json(), j);
    }

    #[test]
    fn parameters_of_the_other_protocol_are_refused_by_key() {
        let mut p = params();
        p.ratio = Some("1:1".parse().unwrap());
        let e = refused(p);
        assert_eq!((e.parameter, e.received.as_str()), ("ratio", "1:1"));
        assert!(e.allowed.contains("only with protocol memcached"), "{e}");
        let mut p = params();
        p.protocol = Protocol::Memcached;
        p.path = Some("/x".into());
        assert_eq!(refused(p).parameter, "path");
        let mut p = params();
        p.rate_steps = Some("1@1s".parse().unwrap());
        p.rate_ramp = Some("1-2@1s".parse().unwrap());
        p.model = Model::Open;
        assert_eq!(refused(p).parameter, "rate_ramp");
        assert_eq!(refused(LoadParams::default()).parameter, "target");
    }
}
