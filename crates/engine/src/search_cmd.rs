//! `archlab-engine search-rate`: the highest open-model rate that meets a latency objective,
//! by bisection over repeated `load` runs (`archlab_load::search_rate` does the search and
//! judges each step). Glue only: the load options are those of `load` (with `--model open`),
//! plus the objective and the range; one line per step on stderr, and a JSON file with the
//! steps, the best rate and the summary of its run.

use crate::args::parse_duration;
use crate::load_cmd::{check_directory, params_of, usage_error, write_atomically, LoadArgs};
use crate::CliError;
use archlab_load::{search_rate, Objective, SearchError, SearchRange};
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Latency objective on the response time (from planned send times), "pQ=DURATION",
    /// e.g. "p99=5ms" or "p99.9=20ms".
    #[arg(long, value_parser = parse_objective)]
    objective: (f64, Duration),
    /// Largest share of failed requests a passing step may have.
    #[arg(long, default_value_t = 0.0)]
    max_error_ratio: f64,
    /// Rates to search, "LOW-HIGH" requests per second.
    #[arg(long, value_parser = parse_range)]
    range: (f64, f64),
    /// Most runs.
    #[arg(long, default_value_t = 8)]
    steps: u32,
    /// Stop when HIGH - LOW <= this share of LOW.
    #[arg(long, default_value_t = 0.05)]
    precision: f64,
}

fn parse_objective(s: &str) -> Result<(f64, Duration), String> {
    let bad = || format!("expected pQ=DURATION, e.g. p99=5ms, got {s:?}");
    let (q, d) = s.strip_prefix('p').and_then(|r| r.split_once('=')).ok_or_else(bad)?;
    let q: f64 = q.parse().map_err(|_| bad())?;
    if !(q > 0.0 && q <= 100.0) {
        return Err(bad());
    }
    Ok((q / 100.0, parse_duration(d)?))
}

fn parse_range(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("expected LOW-HIGH requests per second, e.g. 1000-50000, got {s:?}");
    let (a, b) = s.split_once('-').ok_or_else(bad)?;
    Ok((a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?))
}

pub fn run(a: SearchArgs) -> Result<(), CliError> {
    let mut base = params_of(&a.load)?;
    if base.model != archlab_load::Model::Open {
        return Err(CliError::usage(format!(
            "invalid --model: {} (allowed: open; the search varies the arrival rate)",
            base.model.name()
        )));
    }
    for (flag, schedule) in [("--rate-steps", &base.rate_steps), ("--rate-ramp", &base.rate_ramp)] {
        if let Some(s) = schedule {
            return Err(CliError::usage(format!(
                "invalid {flag}: {s} (allowed: nothing; the search runs each step at one fixed rate)"
            )));
        }
    }
    // Validate the load options once, with a placeholder rate the search replaces.
    if base.rate.is_none() {
        base.rate = Some(a.range.0);
    }
    archlab_load::LoadConfig::new(base.clone()).map_err(usage_error)?;
    check_directory("json", &a.load.json)?;
    let obj = Objective { quantile: a.objective.0, max_latency: a.objective.1, max_error_ratio: a.max_error_ratio };
    let range = SearchRange { low: a.range.0, high: a.range.1, steps: a.steps, precision: a.precision };
    let result = search_rate(&base, &obj, &range, &mut |s| {
        let verdict = if s.passed { "pass".to_string() } else { format!("fail: {}", s.reasons.join("; ")) };
        eprintln!(
            "search: {:.0}/s -> achieved {:.0}/s, latency {:?} us: {verdict}",
            s.rate, s.achieved_rps, s.latency_us
        );
    })
    .map_err(|e| match e {
        SearchError::Config(c) => usage_error(c),
        SearchError::Load(l) => CliError::runtime(l.to_string()),
    })?;
    let steps: Vec<serde_json::Value> = result
        .steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "rate": s.rate, "achieved_rps": s.achieved_rps, "latency_us": s.latency_us,
                "error_ratio": s.error_ratio, "passed": s.passed, "reasons": s.reasons,
            })
        })
        .collect();
    let out = serde_json::json!({
        "schema": "archlab/rate-search",
        "schema_version": 1,
        "objective": { "quantile": obj.quantile, "max_latency_us": obj.max_latency.as_secs_f64() * 1e6,
                       "max_error_ratio": obj.max_error_ratio },
        "range": [range.low, range.high],
        "steps": steps,
        "best_rate": result.best.as_ref().map(|(r, _)| *r),
        "best": result.best.as_ref().map(|(_, rep)| rep.summary(None)),
    });
    let mut json = serde_json::to_vec_pretty(&out).expect("serialisable");
    json.push(b'\n');
    write_atomically(&a.load.json, &json)?;
    match result.best {
        Some((r, _)) => eprintln!("search: highest passing rate {r:.0}/s"),
        None => eprintln!("search: no rate in the range passed"),
    }
    Ok(())
}
