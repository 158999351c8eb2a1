//! The simulation model parser (`archlab_sim::Model::from_json` and `RunConfig::from_json`, what
//! `archlab simulate` hands a model file and its `[simulation]` section to, as JSON), fed any
//! text.
//!
//! Invariants checked, beyond "no panic" (an endless compilation shows up as a timeout, an
//! unbounded one as running out of memory):
//! - a refusal is one line that names a field path of the model or the run (`stations...`,
//!   `sources...`, `simulation...`), or is a parse error;
//! - a model that builds is a closed program: every station, distribution and code address an
//!   instruction names exists, every source enters its own code, branch probabilities are
//!   cumulative and end at infinity, each routing site is numbered once;
//! - every distribution of a built model has finite parameters and a finite mean (the engine
//!   turns times into integers and orders events by them), and each inter-arrival mean is > 0;
//! - building is deterministic: the same text gives the same program.
#![no_main]

use archlab_sim::dist::Dist;
use archlab_sim::model::{Arrivals, Op, SourceKind};
use archlab_sim::{Model, RunConfig, SimError};
use libfuzzer_sys::fuzz_target;

fn check_error(e: &SimError, roots: &[&str]) {
    let line = e.to_string();
    assert!(!line.is_empty() && !line.contains('\n'), "not one line: {line:?}");
    if let SimError::Invalid { field, allowed, .. } = e {
        // A root names a table (`simulation.`): a field inside it, or the table itself (an
        // unknown key at its top level is refused as `simulation`).
        let inside = |r: &&str| field.starts_with(r) || field == r.trim_end_matches('.');
        assert!(roots.iter().any(inside), "field {field:?} outside {roots:?}");
        assert!(!allowed.is_empty(), "{line}");
    }
}

fn check_dist(d: &Dist) {
    let finite = match d {
        Dist::Deterministic(v) => v.is_finite() && *v >= 0.0,
        Dist::Exponential { mean } => mean.is_finite() && *mean > 0.0,
        Dist::LogNormal { mu, sigma } => mu.is_finite() && sigma.is_finite() && *sigma > 0.0,
        Dist::Gamma { shape, scale } => shape.is_finite() && scale.is_finite() && *shape > 0.0 && *scale > 0.0,
        Dist::Uniform { low, width } => low.is_finite() && width.is_finite() && *low >= 0.0 && *width >= 0.0,
        Dist::Empirical(samples) => !samples.is_empty() && samples.iter().all(|x| x.is_finite() && *x >= 0.0),
    };
    assert!(finite, "a distribution with parameters outside its domain: {d:?}");
    assert!(d.mean().is_finite() && d.mean() >= 0.0, "mean {} of {d:?}", d.mean());
}

fn check_model(m: &Model) {
    let (stations, ops, dists) = (m.stations.len(), m.ops.len(), m.dists.len());
    let station = |s: u16| assert!(usize::from(s) < stations, "station {s} of {stations}");
    let pc = |p: u32| assert!((p as usize) < ops, "address {p} of {ops} instructions");
    let dist = |d: u32| assert!((d as usize) < dists, "distribution {d} of {dists}");
    let mut sites = Vec::new();
    for op in &m.ops {
        match op {
            Op::Acquire { station: s } | Op::Release { station: s } => station(*s),
            Op::Hold { station: s, dist: d } | Op::Visit { station: s, dist: d } => {
                station(*s);
                dist(*d);
            }
            Op::Branch { site, targets } => {
                sites.push(*site);
                assert!(!targets.is_empty(), "a branch without targets");
                assert!(targets.windows(2).all(|w| w[0].0 <= w[1].0), "probabilities not cumulative: {targets:?}");
                assert_eq!(targets.last().map(|t| t.0), Some(f64::INFINITY), "the last target is not certain");
                targets.iter().for_each(|t| pc(t.1));
            }
            Op::Jump { to } => pc(*to),
            Op::Fork { branches, join } => {
                assert!(!branches.is_empty(), "a fork without branches");
                branches.iter().for_each(|b| pc(*b));
                pc(*join);
            }
            Op::Balance { site, targets, .. } => {
                sites.push(*site);
                assert!(!targets.is_empty(), "a balance without replicas");
                for (s, p) in targets {
                    station(*s);
                    pc(*p);
                }
            }
            Op::EndBranch | Op::Exit => {}
        }
    }
    sites.sort_unstable();
    assert!(sites.iter().copied().eq(0..m.sites), "routing sites {sites:?} of {}", m.sites);
    assert!(m.dists.iter().all(|d| !matches!(d, Dist::Empirical(s) if s.is_empty())));
    m.dists.iter().for_each(check_dist);
    for s in &m.sources {
        pc(s.entry);
        match &s.kind {
            SourceKind::Closed { clients, think } => {
                assert!(*clients > 0);
                check_dist(think);
            }
            SourceKind::Open { arrivals: Arrivals::Renewal(d) } => {
                check_dist(d);
                assert!(d.mean() > 0.0, "inter-arrival mean {}", d.mean());
            }
            SourceKind::Open { arrivals: Arrivals::Trace(times) } => {
                assert!(!times.is_empty() && times.windows(2).all(|w| w[0] <= w[1]));
                assert!(times.iter().all(|t| t.is_finite() && *t >= 0.0));
            }
            SourceKind::Sessions { interarrival, think, again } => {
                check_dist(interarrival);
                check_dist(think);
                assert!(interarrival.mean() > 0.0, "inter-arrival mean {}", interarrival.mean());
                assert!((0.0..1.0).contains(again));
            }
        }
    }
    for (i, s) in m.stations.iter().enumerate() {
        assert!(s.capacity > 0, "station {i} with capacity 0");
    }
}

fn check_run(r: &RunConfig) {
    assert!(r.horizon.is_finite() && r.horizon > 0.0);
    assert!(r.replications > 0 && r.threads > 0 && r.batches != 1);
    assert!(r.confidence > 0.0 && r.confidence < 1.0);
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Model::from_json(text) {
        Ok(m) => {
            check_model(&m);
            let again = Model::from_json(text).expect("the same text builds again");
            assert_eq!(again.ops, m.ops, "building is not deterministic");
        }
        // `model` is the document itself (e.g. a run configuration given as a model).
        Err(e) => check_error(&e, &["stations", "sources", "model."]),
    }
    match RunConfig::from_json(text) {
        Ok(r) => check_run(&r),
        Err(e) => check_error(&e, &["simulation."]),
    }
});
