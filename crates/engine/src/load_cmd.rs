//! `archlab-engine load`: drive a closed, open or partly-open load against a target with
//! `archlab-load` and write its JSON summary and HDR interval log. Glue only: parse arguments
//! and let the library validate them (exit 2 with the offending option named, the allowed
//! values and the value received; options that mean nothing for the chosen `--model` are
//! refused, not ignored), pin the process to `--cpus`, print `phase measure` /
//! `phase end` on stdout when the measurement window opens and closes (the orchestrator reads
//! the server's CPU counters at those lines), write the outputs, and print one human line on
//! stderr. SIGTERM/SIGINT/SIGHUP end the run early; what was measured is still written, marked
//! `"interrupted": true`.

use crate::args::{parse_cpus, parse_duration};
use crate::signals::{spawn_handler, Signal};
use crate::CliError;
use archlab_load::{
    run_load_live, ArrivalKind, ConfigError, KeyPatterns, LiveSecond, LoadConfig, LoadParams, LoadReport, McWorkload,
    Model, Phase, Profile, Ratio, Retrieval, SessionConnection, SessionLength, StopHandle, ThinkTime, ValueSize,
    DEFAULT_KEY_MAX, DEFAULT_KEY_PREFIX,
};
use archlab_netio::CpuList;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Server to load, HOST:PORT (a host name is resolved once, first address).
    #[arg(long)]
    target: String,
    /// HTTP request target: path and query, e.g. "/prime?n=27059" [default: /].
    #[arg(long)]
    path: Option<String>,
    /// Host header value (default: the --target text).
    #[arg(long)]
    host: Option<String>,
    /// Load model: closed (N users looping), open (planned send times, --rate) or partly-open
    /// (sessions arriving at --session-rate).
    #[arg(long, value_enum, default_value_t = ModelArg::Closed)]
    model: ModelArg,
    /// Closed: concurrent users N, one keep-alive connection each (with --users-steps or
    /// --users-ramp: their peak, which is the default then). Open and partly-open:
    /// connections opened before the start [default: 16].
    #[arg(long)]
    connections: Option<usize>,
    /// Open and partly-open: most connections at once (default: --connections).
    #[arg(long)]
    max_connections: Option<usize>,
    /// Open model: requests per second.
    #[arg(long)]
    rate: Option<f64>,
    /// Partly-open model: sessions per second.
    #[arg(long)]
    session_rate: Option<f64>,
    /// Open model: a varying rate over the window instead of --rate, comma-separated segments
    /// RATE@DURATION (held) or FROM-TO@DURATION (linear), e.g. "1000@10s,2000@10s" or
    /// "1000@5s,1000-5000@30s". The window lasts the sum of the segments (--duration may be
    /// left out), the warm-up holds the first rate; Poisson or constant spacing as --arrivals.
    #[arg(long, value_parser = parse_profile, value_name = "SEGMENTS")]
    rate_steps: Option<Profile>,
    /// Open model: one linear ramp FROM-TO@DURATION, e.g. "1000-5000@30s" (a one-segment
    /// --rate-steps).
    #[arg(long, value_parser = parse_ramp, value_name = "FROM-TO@DURATION")]
    rate_ramp: Option<Profile>,
    /// Partly-open model: sessions per second varying over the window, as --rate-steps.
    #[arg(long, value_parser = parse_profile, value_name = "SEGMENTS")]
    session_rate_steps: Option<Profile>,
    /// Partly-open model: one linear ramp of sessions per second, as --rate-ramp.
    #[arg(long, value_parser = parse_ramp, value_name = "FROM-TO@DURATION")]
    session_rate_ramp: Option<Profile>,
    /// Closed model: users varying over the window, segments USERS@DURATION or
    /// FROM-TO@DURATION, e.g. "8@5s,16@5s". A ramp spends equal time at each whole count.
    /// Users start at the scheduled times; a stopping user finishes its request in flight.
    /// One connection per user at the peak, opened before the start.
    #[arg(long, value_parser = parse_profile, value_name = "SEGMENTS")]
    users_steps: Option<Profile>,
    /// Closed model: one linear ramp of users FROM-TO@DURATION, e.g. "1-64@30s".
    #[arg(long, value_parser = parse_ramp, value_name = "FROM-TO@DURATION")]
    users_ramp: Option<Profile>,
    /// Open and partly-open: spacing of arrivals [default: poisson].
    #[arg(long, value_enum)]
    arrivals: Option<ArrivalsArg>,
    /// Partly-open: requests per session, "fixed:N" (or "N") or "geometric:MEAN" [default: geometric:5].
    #[arg(long, value_parser = parse_session_length)]
    requests_per_session: Option<SessionLength>,
    /// Partly-open: a new connection per session, or a pool [default: new].
    #[arg(long, value_enum)]
    session_connection: Option<SessionConnectionArg>,
    /// Seed of every random draw (Poisson arrivals, random think times and session lengths).
    #[arg(long)]
    seed: Option<u64>,
    /// A request sent later than this after its planned time counts as late.
    #[arg(long, value_parser = parse_duration, default_value = "1ms")]
    late_after: Duration,
    /// Spin on the sockets instead of sleeping in epoll, so that no response waits for a load
    /// thread to wake up: for latency measurements with --cpus reserved for the generator. The
    /// threads then use their whole CPUs, so CPU use no longer flags a generator-bound run.
    #[arg(long)]
    busy_poll: bool,
    /// Length of the measurement window, e.g. 10s, 500ms [default: 10s, or the length of a
    /// rate or users schedule, which it must equal when given].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Warm-up before the window; its completions are not recorded.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    warmup: Duration,
    /// Think time Z between a response and the next request of the same user or session
    /// (closed and partly-open): "5ms" (constant), "exp:5ms" (exponential, mean 5 ms) or
    /// "uniform:2ms-8ms".
    #[arg(long, value_parser = parse_think_time, default_value = "0")]
    think_time: ThinkTime,
    /// Load threads (default: one per CPU of --cpus, else 1; never more than --connections).
    #[arg(long)]
    threads: Option<usize>,
    /// CPUs for the generator, e.g. "0" or "2-3"; load thread i is pinned to the i-th.
    #[arg(long, value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// Request timeout: a response not complete by then counts `timeout`, the connection is reopened.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    timeout: Duration,
    /// Connect timeout.
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    connect_timeout: Duration,
    /// Protocol: HTTP/1.1, or the memcached text protocol (the --mc-*, --ratio, --key-* and
    /// --data-size options, memtier's notation).
    #[arg(long, value_enum, default_value_t = ProtocolArg::Http)]
    protocol: ProtocolArg,
    /// memcached: retrieval command [default: get].
    #[arg(long, value_enum)]
    mc_command: Option<McCommandArg>,
    /// memcached: keys per retrieval (memtier --multi-key-get) [default: 1].
    #[arg(long)]
    multi_get: Option<u32>,
    /// memcached: SETS:GETS cycle per connection (memtier --ratio) [default: 1:10].
    #[arg(long)]
    ratio: Option<Ratio>,
    /// memcached: key patterns SET:GET (memtier --key-pattern), each R (uniform), S (sequential,
    /// per connection), G (gaussian, --key-median/--key-stddev), Z (Zipf, --key-zipf-exp) or P
    /// (parallel: each connection walks its own slice of the range; P:P only) [default: R:R].
    #[arg(long)]
    key_pattern: Option<KeyPatterns>,
    /// memcached: exponent s of the Z pattern, 0 < s < 5 (memtier --key-zipf-exp) [default: 1].
    #[arg(long)]
    key_zipf_exp: Option<f64>,
    /// memcached: key prefix [default: memtier-].
    #[arg(long)]
    key_prefix: Option<String>,
    /// memcached: smallest key index [default: 0].
    #[arg(long)]
    key_min: Option<u64>,
    /// memcached: largest key index [default: 10000000].
    #[arg(long)]
    key_max: Option<u64>,
    /// memcached: centre of the G pattern [default: middle of the range].
    #[arg(long)]
    key_median: Option<f64>,
    /// memcached: standard deviation of the G pattern [default: range/6].
    #[arg(long)]
    key_stddev: Option<f64>,
    /// memcached: value size in bytes, "N" or "uniform:MIN-MAX" [default: 32].
    #[arg(long)]
    data_size: Option<ValueSize>,
    /// memcached: check every value read back and the order of multi-get replies.
    #[arg(long)]
    verify: bool,
    /// HTTP: send `Connection: close` and use each connection for one request.
    #[arg(long)]
    no_keep_alive: bool,
    /// Close each connection after this many responses and open a new one.
    #[arg(long)]
    requests_per_connection: Option<u32>,
    /// HTTP pipelining depth D: each connection keeps D requests in flight, answered in order
    /// (closed model, keep-alive, no think time; each response sends the next request).
    #[arg(long, default_value_t = 1)]
    pipeline: u32,
    /// No live line per second on stderr.
    #[arg(long)]
    quiet: bool,
    /// Stream one fixed-size binary record per request of the window to this file (memory
    /// stays flat); convert with `archlab-engine records export`.
    #[arg(long)]
    records: Option<PathBuf>,
    /// Where to write the JSON summary (schema archlab/load-summary v2).
    #[arg(long)]
    pub(crate) json: PathBuf,
    /// Where to write the HDR interval log (default: the --json path with .hdr.log instead of .json).
    #[arg(long)]
    hdr_log: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModelArg {
    Closed,
    Open,
    PartlyOpen,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProtocolArg {
    Http,
    Memcached,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum McCommandArg {
    Get,
    Gets,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ArrivalsArg {
    Constant,
    Poisson,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SessionConnectionArg {
    New,
    Pooled,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse()
}

fn parse_ramp(s: &str) -> Result<Profile, String> {
    let p: Profile = s.parse()?;
    match p.segments() {
        [one] if one.from != one.to => Ok(p),
        _ => Err(format!(
            "{s:?}: a ramp is one FROM-TO@DURATION segment with FROM != TO (use the --*-steps option for more)"
        )),
    }
}

/// One schedule from a --*-steps / --*-ramp pair (both given is refused).
fn one_schedule(steps: (&str, &Option<Profile>), ramp: (&str, &Option<Profile>)) -> Result<Option<Profile>, CliError> {
    match (steps.1, ramp.1) {
        (Some(_), Some(r)) => Err(CliError::usage(format!(
            "invalid --{}: {r} (allowed: not with --{}; write a ramp as a FROM-TO@DURATION segment of --{})",
            ramp.0, steps.0, steps.0
        ))),
        (s, r) => Ok(s.clone().or_else(|| r.clone())),
    }
}

fn parse_think_time(s: &str) -> Result<ThinkTime, String> {
    s.parse()
}

fn parse_session_length(s: &str) -> Result<SessionLength, String> {
    s.parse()
}

/// The command-line option behind a configuration parameter, for error messages.
fn option_of(parameter: &str) -> String {
    match parameter {
        "request_timeout" => "timeout".into(),
        "keep_alive" => "no-keep-alive".into(),
        "rate_schedule" => "rate-steps (or --rate-ramp)".into(),
        "session_rate_schedule" => "session-rate-steps (or --session-rate-ramp)".into(),
        "users_schedule" => "users-steps (or --users-ramp)".into(),
        other => other.replace('_', "-"),
    }
}

pub(crate) fn usage_error(e: ConfigError) -> CliError {
    CliError::usage(format!("invalid --{}: {} (allowed: {})", option_of(e.parameter), e.received, e.allowed))
}

fn resolve(target: &str) -> Result<SocketAddr, CliError> {
    let bad = |why: String| {
        CliError::usage(format!("invalid --target {target:?}: {why} (expected HOST:PORT, e.g. 127.0.0.1:8080)"))
    };
    let mut addrs = target.to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    addrs.next().ok_or_else(|| bad("the name has no address".into()))
}

fn default_hdr_log(json: &Path) -> PathBuf {
    let stem = if json.extension().is_some_and(|e| e == "json") { json.with_extension("") } else { json.to_path_buf() };
    let mut name = stem.into_os_string();
    name.push(".hdr.log");
    PathBuf::from(name)
}

/// How the summary refers to the log: relative to the summary's directory when the log is in
/// it (or below it), absolute otherwise.
fn log_reference(json: &Path, log: &Path) -> String {
    let log_abs = std::path::absolute(log).unwrap_or_else(|_| log.to_path_buf());
    match std::path::absolute(directory_of(json)).ok() {
        Some(d) => log_abs.strip_prefix(&d).map(Path::to_path_buf).unwrap_or(log_abs),
        None => log_abs,
    }
    .to_string_lossy()
    .into_owned()
}

/// The directory a file is in ("." for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

pub(crate) fn check_directory(option: &str, path: &Path) -> Result<(), CliError> {
    let dir = directory_of(path);
    if dir.is_dir() {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "invalid --{option} {}: directory {} does not exist",
            path.display(),
            dir.display()
        )))
    }
}

/// Write through a temporary file and rename, so a reader never sees a half-written file.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))
}

/// Let the process open one descriptor per connection (plus a margin) if the hard limit allows.
fn raise_fd_limit(connections: usize) {
    let wanted = connections as u64 + 64;
    // SAFETY: rlimit is plain data filled in by the kernel.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < wanted {
        lim.rlim_cur = wanted.min(lim.rlim_max);
        // SAFETY: lim is a valid rlimit; failure only leaves the old limit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

fn print_phase(p: Phase) {
    let line: &[u8] = match p {
        Phase::Measure => b"phase measure\n",
        Phase::End => b"phase end\n",
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line);
    let _ = out.flush();
}

/// The live line of one second: the planned rate and the arrivals taken up (`offered`) for
/// models with a schedule, the planned users for the closed one.
fn live_line(s: &LiveSecond, open: bool) -> String {
    let ms = |us: Option<f64>| us.map_or("-".to_string(), |u| format!("{:.3}ms", u / 1e3));
    let planned = match (s.planned_rps, s.planned_users) {
        (Some(r), _) => format!("planned {r:.0}/s "),
        (None, Some(u)) if u.fract() == 0.0 => format!("users {u:.0} "),
        (None, Some(u)) => format!("users {u:.1} "),
        (None, None) => String::new(),
    };
    let offered = if open { format!("{planned}offered {:.0}/s ", s.offered_rps) } else { planned };
    format!(
        "[{:>4}s] {offered}achieved {:.0}/s p50 {} p99 {} errors {} lag p99 {}",
        s.second + 1,
        s.throughput_rps,
        ms(s.p50_us),
        ms(s.p99_us),
        s.errors,
        ms(s.lag_p99_us)
    )
}

fn human_line(r: &LoadReport) -> String {
    let ms = |q: f64| {
        if r.latency.is_empty() {
            "-".to_string()
        } else {
            format!("{:.3} ms", r.latency.value_at_quantile(q) as f64 / 1e6)
        }
    };
    let c = &r.config;
    let corrected = c.pacing().corrects_coordinated_omission();
    let f = &r.totals.flow;
    let schedule = if corrected {
        format!(
            "; offered {:.1}/s, schedule lag p99 {}, {} late, {} never started",
            f.arrivals as f64 / r.window_s().max(1e-9),
            if r.schedule_lag.is_empty() {
                "-".to_string()
            } else {
                format!("{:.3} ms", r.schedule_lag.value_at_quantile(0.99) as f64 / 1e6)
            },
            f.sent_late,
            f.never_started
        )
    } else {
        String::new()
    };
    let bound = r.generator_bound_reasons();
    format!(
        "load: {} requests in {:.2} s = {:.1} req/s; latency p50 {} p99 {} max {}; errors {}{schedule}; {} model, {} connections, {} thread(s), coordinated omission {}{}{}",
        r.totals.requests,
        r.window_s(),
        r.throughput_rps(),
        ms(0.5),
        ms(0.99),
        ms(1.0),
        r.totals.errors.total(),
        c.pacing().model().name(),
        c.connections(),
        c.threads(),
        if corrected { "corrected (from planned send times)" } else { "not corrected" },
        if bound.is_empty() { String::new() } else { format!("; GENERATOR-BOUND: {}", bound.join("; ")) },
        if r.interrupted { " [interrupted]" } else { "" }
    )
}

/// The memcached workload of the command line, or `None` for HTTP; options of the other
/// protocol are refused, not ignored.
fn memcached_workload(a: &LoadArgs) -> Result<Option<McWorkload>, CliError> {
    let given = |name: &str, is: bool| is.then(|| name.to_string());
    let mc_options = [
        given("mc-command", a.mc_command.is_some()),
        given("multi-get", a.multi_get.is_some()),
        given("ratio", a.ratio.is_some()),
        given("key-pattern", a.key_pattern.is_some()),
        given("key-prefix", a.key_prefix.is_some()),
        given("key-min", a.key_min.is_some()),
        given("key-max", a.key_max.is_some()),
        given("key-median", a.key_median.is_some()),
        given("key-stddev", a.key_stddev.is_some()),
        given("key-zipf-exp", a.key_zipf_exp.is_some()),
        given("data-size", a.data_size.is_some()),
        given("verify", a.verify),
    ];
    if a.protocol == ProtocolArg::Http {
        if let Some(o) = mc_options.into_iter().flatten().next() {
            return Err(CliError::usage(format!("invalid --{o}: given (allowed: only with --protocol memcached)")));
        }
        return Ok(None);
    }
    for (o, is) in [("path", a.path.is_some()), ("host", a.host.is_some())] {
        if is {
            return Err(CliError::usage(format!("invalid --{o}: given (allowed: only with --protocol http)")));
        }
    }
    let w = McWorkload::new(
        match a.mc_command {
            None | Some(McCommandArg::Get) => Retrieval::Get,
            Some(McCommandArg::Gets) => Retrieval::Gets,
        },
        a.multi_get.unwrap_or(1),
        a.ratio.unwrap_or(Ratio { sets: 1, gets: 10 }),
        a.key_pattern.unwrap_or_else(|| "R:R".parse().expect("valid")),
        a.key_prefix.clone().unwrap_or_else(|| DEFAULT_KEY_PREFIX.into()),
        a.key_min.unwrap_or(0),
        a.key_max.unwrap_or(DEFAULT_KEY_MAX),
        a.key_median,
        a.key_stddev,
        a.data_size.unwrap_or(ValueSize::Fixed(32)),
        a.verify,
    )
    .map_err(usage_error)?;
    let w = match a.key_zipf_exp {
        Some(s) => w.with_zipf_exponent(s).map_err(usage_error)?,
        None => w,
    };
    Ok(Some(w))
}

/// The library's raw parameters from the command line (validated later by `LoadConfig`).
pub(crate) fn params_of(a: &LoadArgs) -> Result<LoadParams, CliError> {
    let mut p = LoadParams::new(resolve(&a.target)?);
    p.memcached = memcached_workload(a)?;
    if p.memcached.is_none() {
        p.host = Some(a.host.clone().unwrap_or_else(|| a.target.clone()));
        p.path = a.path.clone().unwrap_or_else(|| "/".into());
    }
    p.model = match a.model {
        ModelArg::Closed => Model::Closed,
        ModelArg::Open => Model::Open,
        ModelArg::PartlyOpen => Model::PartlyOpen,
    };
    p.rate = a.rate;
    p.session_rate = a.session_rate;
    p.rate_schedule = one_schedule(("rate-steps", &a.rate_steps), ("rate-ramp", &a.rate_ramp))?;
    p.session_rate_schedule =
        one_schedule(("session-rate-steps", &a.session_rate_steps), ("session-rate-ramp", &a.session_rate_ramp))?;
    p.users_schedule = one_schedule(("users-steps", &a.users_steps), ("users-ramp", &a.users_ramp))?;
    let users_peak = p.users_schedule.as_ref().filter(|_| p.model == Model::Closed).map(|u| u.peak() as usize);
    p.connections = a.connections.or(users_peak).unwrap_or(16);
    p.max_connections = a.max_connections;
    p.arrivals = a.arrivals.map(|k| match k {
        ArrivalsArg::Constant => ArrivalKind::Constant,
        ArrivalsArg::Poisson => ArrivalKind::Poisson,
    });
    p.requests_per_session = a.requests_per_session;
    p.session_connection = a.session_connection.map(|k| match k {
        SessionConnectionArg::New => SessionConnection::New,
        SessionConnectionArg::Pooled => SessionConnection::Pooled,
    });
    p.seed = a.seed;
    p.late_after = a.late_after;
    p.busy_poll = a.busy_poll;
    let schedule = p.rate_schedule.as_ref().or(p.session_rate_schedule.as_ref()).or(p.users_schedule.as_ref());
    p.duration = a.duration.or(schedule.map(Profile::duration)).unwrap_or(Duration::from_secs(10));
    p.warmup = a.warmup;
    p.think = a.think_time;
    p.threads = a.threads;
    p.cpus = a.cpus.clone();
    p.request_timeout = a.timeout;
    p.connect_timeout = a.connect_timeout;
    if let Some(r) = &a.records {
        check_directory("records", r)?;
    }
    p.records = a.records.clone();
    p.pipeline = a.pipeline;
    p.keep_alive = !a.no_keep_alive;
    p.requests_per_connection = a.requests_per_connection;
    Ok(p)
}

pub fn run(a: LoadArgs) -> Result<(), CliError> {
    let cfg = LoadConfig::new(params_of(&a)?).map_err(usage_error)?;
    let hdr_log = a.hdr_log.unwrap_or_else(|| default_hdr_log(&a.json));
    check_directory("json", &a.json)?;
    check_directory("hdr-log", &hdr_log)?;

    // The coordinator and the signal thread stay on the generator's CPUs too.
    if let Some(cpus) = &a.cpus {
        cpus.pin_current_thread().map_err(|e| CliError::runtime(format!("cannot pin to CPUs {cpus}: {e}")))?;
    }
    raise_fd_limit(cfg.max_connections());
    let stop = StopHandle::new();
    let on_signal = stop.clone();
    // Before any load thread starts, so that all of them inherit the blocked signal mask.
    spawn_handler(move |s| {
        if s == Signal::Terminate {
            on_signal.stop();
        }
    })
    .map_err(|e| CliError::runtime(format!("cannot install signal handling: {e}")))?;

    let open = cfg.pacing().arrivals().is_some();
    let mut live = |s: &LiveSecond| {
        if !a.quiet {
            eprintln!("{}", live_line(s, open));
        }
    };
    let report =
        run_load_live(&cfg, &stop, &mut print_phase, &mut live).map_err(|e| CliError::runtime(e.to_string()))?;
    write_atomically(&hdr_log, &report.interval_log)?;
    let summary = report.summary(Some(&log_reference(&a.json, &hdr_log)));
    let mut json = serde_json::to_vec_pretty(&summary).expect("the summary is serialisable");
    json.push(b'\n');
    write_atomically(&a.json, &json)?;
    eprintln!("{}", human_line(&report));
    if let Some(e) = &report.records_error {
        return Err(CliError::runtime(e.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_line_shows_planned_rate_or_users() {
        let s = LiveSecond {
            second: 2,
            planned_rps: Some(1000.0),
            planned_users: None,
            offered_rps: 1000.0,
            throughput_rps: 998.0,
            p50_us: Some(120.0),
            p99_us: Some(450.6),
            errors: 1,
            lag_p99_us: None,
        };
        assert_eq!(
            live_line(&s, true),
            "[   3s] planned 1000/s offered 1000/s achieved 998/s p50 0.120ms p99 0.451ms errors 1 lag p99 -"
        );
        let closed = LiveSecond { planned_rps: None, planned_users: Some(16.0), ..s };
        assert!(live_line(&closed, false).starts_with("[   3s] users 16 achieved 998/s"));
        assert!(!live_line(&closed, false).contains("offered"));
    }

    #[test]
    fn default_log_sits_beside_the_summary() {
        assert_eq!(default_hdr_log(Path::new("runs/x/summary.json")), Path::new("runs/x/summary.hdr.log"));
        assert_eq!(default_hdr_log(Path::new("out")), Path::new("out.hdr.log"));
    }

    #[test]
    fn log_reference_is_relative_beside_the_summary() {
        assert_eq!(log_reference(Path::new("runs/x/s.json"), Path::new("runs/x/s.hdr.log")), "s.hdr.log");
        assert_eq!(log_reference(Path::new("s.json"), Path::new("hdr/s.hdr.log")), "hdr/s.hdr.log");
        assert_eq!(log_reference(Path::new("runs/s.json"), Path::new("/tmp/s.hdr.log")), "/tmp/s.hdr.log");
    }

    #[test]
    fn config_errors_name_the_command_line_option() {
        let e = ConfigError { parameter: "request_timeout", allowed: "> 0".into(), received: "0ns".into() };
        assert_eq!(usage_error(e).to_string(), "invalid --timeout: 0ns (allowed: > 0)");
        let e = ConfigError { parameter: "session_rate", allowed: "x".into(), received: "1.0".into() };
        assert_eq!(usage_error(e).to_string(), "invalid --session-rate: 1.0 (allowed: x)");
        assert!(resolve("nonsense").is_err());
        assert_eq!(resolve("127.0.0.1:80").unwrap().port(), 80);
    }
}
