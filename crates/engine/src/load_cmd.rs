//! `archlab-engine load`: drive a closed, open or partly-open load against a target with
//! `archlab-load` and write its JSON summary and HDR interval log. Glue only: parse arguments
//! and let the library validate them (exit 2 with the offending option named, the allowed
//! values and the value received; options that mean nothing for the chosen `--model` are
//! refused, not ignored), pin the process to `--cpus`, print `phase measure` /
//! `phase end` on stdout when the measurement window opens and closes (the orchestrator reads
//! the server's CPU counters at those lines), write the outputs, and print one human line on
//! stderr. SIGTERM/SIGINT/SIGHUP end the run early; what was measured is still written, marked
//! `"interrupted": true`. A run in which no request succeeded writes its outputs too, then
//! exits 1 with one line saying so (responses and errors by class). The parameters are
//! `archlab_load::LoadParams`, as flags or whole as JSON (`--params FILE`, flags beside it win).

use crate::args::read_document;
use crate::signals::{spawn_handler, Signal};
use crate::start_at;
use crate::CliError;
use archlab_load::{run_load_live, ConfigError, LiveSecond, LoadConfig, LoadParams, LoadReport, Phase, StopHandle};
use archlab_options::Given;
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The run's parameters as one JSON object (a file, or - for stdin), keys as the flags
    /// below with _ for -, e.g. {"target": "127.0.0.1:8080", "connections": 8, "duration": "5s"};
    /// flags given beside it override its values.
    #[arg(long = "params", value_name = "FILE")]
    params_file: Option<PathBuf>,
    #[command(flatten)]
    params: Given<LoadParams>,
    /// No live line per second on stderr.
    #[arg(long)]
    quiet: bool,
    /// Where to write the JSON summary (schema archlab/load-summary v2).
    #[arg(long)]
    pub(crate) json: PathBuf,
    /// Where to write the HDR interval log (default: the --json path with .hdr.log instead of .json).
    #[arg(long)]
    hdr_log: Option<PathBuf>,
    /// Open no connection before this wall-clock instant (seconds since the Unix epoch, e.g.
    /// 1764115896.250): set up, then sleep to it and print `phase start NS` on stdout.
    #[arg(long, value_name = "UNIX_TIME")]
    start_at: Option<String>,
}

/// The command-line flag of a parameter, for error messages (`timeout` is `--timeout`,
/// `keep_alive` is `--no-keep-alive`).
fn flag_of(parameter: &str) -> String {
    LoadParams::schema()
        .into_iter()
        .find(|o| o.name == parameter)
        .map_or_else(|| format!("--{}", parameter.replace('_', "-")), |o| o.flag)
}

pub(crate) fn usage_error(e: ConfigError) -> CliError {
    CliError::usage(format!("invalid {}: {} (allowed: {})", flag_of(e.parameter), e.received, e.allowed))
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

/// One line per class of a request mix: its share of the requests sent (against its weight's),
/// its throughput and the quantiles of its 2xx responses on the run's headline basis.
fn class_lines(r: &LoadReport) -> Vec<String> {
    let Some(mix) = r.config.mix() else { return Vec::new() };
    let corrected = r.config.pacing().corrects_coordinated_omission();
    let sent: u64 = r.classes.iter().map(|c| c.sent).sum();
    mix.classes()
        .iter()
        .zip(&r.classes)
        .enumerate()
        .map(|(i, (class, t))| {
            let h = if corrected { &t.response_time } else { &t.service_time };
            let ms = |q: f64| {
                if h.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.3} ms", h.value_at_quantile(q) as f64 / 1e6)
                }
            };
            format!(
                "load:   class {i} {}: {:.2}% of requests sent (weight {:.2}%), {} requests = {:.1} req/s; p50 {} p99 {}; errors {}",
                class.path,
                100.0 * t.sent as f64 / sent.max(1) as f64,
                100.0 * mix.share(i),
                t.requests,
                t.requests as f64 / r.window_s().max(1e-9),
                ms(0.5),
                ms(0.99),
                t.errors.total(),
            )
        })
        .collect()
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
        "load: {} requests in {:.2} s = {:.1} req/s; latency p50 {} p99 {} max {}; errors {}{schedule}; {} model, {} connections, {} thread(s) on {}{}, coordinated omission {}{}{}",
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
        r.backend.name(),
        r.backend_fallback.as_ref().map(|why| format!(" (not io-uring: {why})")).unwrap_or_default(),
        if corrected { "corrected (from planned send times)" } else { "not corrected" },
        if bound.is_empty() { String::new() } else { format!("; GENERATOR-BOUND: {}", bound.join("; ")) },
        if r.interrupted { " [interrupted]" } else { "" }
    )
}

/// The library's raw parameters: the `--params` file (if any) with the flags over it
/// (validated later by `LoadConfig`).
pub(crate) fn params_of(a: &LoadArgs) -> Result<LoadParams, CliError> {
    let base = match &a.params_file {
        None => LoadParams::default(),
        Some(path) => {
            let text = read_document("params", path)?;
            LoadParams::from_json(&text)
                .map_err(|e| CliError::usage(format!("invalid --params {}: {e}", path.display())))?
        }
    };
    let p = a.params.over(base);
    if let Some(r) = &p.records {
        check_directory("records", r)?;
    }
    Ok(p)
}

pub fn run(a: LoadArgs) -> Result<(), CliError> {
    let cfg = LoadConfig::new(params_of(&a)?).map_err(usage_error)?;
    let hdr_log = a.hdr_log.unwrap_or_else(|| default_hdr_log(&a.json));
    check_directory("json", &a.json)?;
    check_directory("hdr-log", &hdr_log)?;
    // Checked with the other arguments, before any set-up: one line, exit 2.
    let start_instant = match &a.start_at {
        Some(text) => Some(start_at::parse_unix_time(text).map_err(CliError::usage)?),
        None => None,
    };
    if let Some(at) = start_instant {
        start_at::check_ahead(at)?;
    }

    // The coordinator and the signal thread stay on the generator's CPUs too.
    if let Some(cpus) = cfg.cpus() {
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
    if let Some(at) = start_instant {
        // Last, after every slow step of the set-up: only the load itself follows the instant.
        start_at::wait_until(at, &stop)?;
    }
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
    for line in class_lines(&report) {
        eprintln!("{line}");
    }
    if let Some(e) = &report.records_error {
        return Err(CliError::runtime(e.clone()));
    }
    // The outputs are written (they say what failed), but a run that measured nothing fails.
    match report.nothing_succeeded() {
        Some(why) => Err(CliError::runtime(why)),
        None => Ok(()),
    }
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
        assert_eq!(usage_error(e).to_string(), "invalid --request-timeout: 0ns (allowed: > 0)");
        let e = ConfigError { parameter: "timeout", allowed: "> 0".into(), received: "0ns".into() };
        assert_eq!(usage_error(e).to_string(), "invalid --timeout: 0ns (allowed: > 0)");
        let e = ConfigError { parameter: "keep_alive", allowed: "x".into(), received: "false".into() };
        assert_eq!(usage_error(e).to_string(), "invalid --no-keep-alive: false (allowed: x)");
        let e = ConfigError { parameter: "session_rate", allowed: "x".into(), received: "1.0".into() };
        assert_eq!(usage_error(e).to_string(), "invalid --session-rate: 1.0 (allowed: x)");
    }
}
