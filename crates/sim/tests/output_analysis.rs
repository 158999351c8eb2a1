//! Output analysis in the core: per-class station metrics adding up to the station totals,
//! MSER choosing a window per replication that a second run reproduces exactly, and the
//! batch-means stop rule extending one run until its interval is narrow enough (or its cap).
//! Statistical checks against closed forms live in the Python suite (tests/sim).

mod common;

use serde_json::json;

fn exp(mean: f64) -> serde_json::Value {
    json!({"dist": "exponential", "mean": mean})
}

/// Two closed classes sharing an FCFS pool (one calling a PS database) and a delay hop.
fn two_classes() -> serde_json::Value {
    json!({
        "stations": [{"name": "pool", "servers": 2}, {"name": "db", "discipline": "ps", "servers": 2},
                     {"name": "net", "discipline": "delay"}],
        "sources": [
            {"kind": "closed", "name": "a", "clients": 6, "think": exp(0.5),
             "route": [{"step": "serve", "station": "net", "service": exp(0.01)},
                       {"step": "call", "station": "pool", "before": exp(0.05),
                        "callee": [{"step": "serve", "station": "db", "service": exp(0.08)}]}]},
            {"kind": "open", "name": "b", "interarrival": exp(0.2),
             "route": [{"step": "serve", "station": "pool", "service": exp(0.1)},
                       {"step": "serve", "station": "db", "service": exp(0.05)}]}]
    })
}

#[test]
fn class_shares_add_up_to_the_station_totals() {
    let out = common::run(two_classes(), json!({"horizon": 2000.0, "warmup": 100.0, "replications": 2, "seed": 3}));
    for r in &out.replications {
        for s in &r.stations {
            let sum =
                |f: &dyn Fn(&archlab_sim::output::StationClassResult) -> f64| s.classes.iter().map(f).sum::<f64>();
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            assert!(close(sum(&|c| c.mean_jobs), s.mean_jobs), "{s:?}");
            assert!(close(sum(&|c| c.throughput), s.throughput), "{s:?}");
            let weighted = sum(&|c| if c.throughput > 0.0 { c.throughput * c.mean_residence } else { 0.0 });
            assert!(close(weighted, s.throughput * s.mean_residence), "{s:?}");
            match s.utilisation {
                Some(u) => assert!(close(sum(&|c| c.utilisation.unwrap()), u), "{s:?}"),
                None => assert!(s.classes.iter().all(|c| c.utilisation.is_none())),
            }
        }
        // Class b never visits net, and every class at a station obeys Little's law there
        // up to the jobs straddling the window's ends.
        let net = &r.stations[2];
        assert_eq!(net.classes[1].throughput, 0.0);
        assert!(net.classes[1].mean_residence.is_nan());
        for s in &r.stations {
            for c in s.classes.iter().filter(|c| c.throughput > 0.0) {
                let little = c.throughput * c.mean_residence;
                assert!((c.mean_jobs - little).abs() < 0.02 * c.mean_jobs.max(0.05), "{}/{}: {c:?}", s.name, c.name);
            }
        }
    }
    let summary = &out.summary.stations[1].classes;
    assert_eq!((summary[0].name.as_str(), summary[1].name.as_str()), ("a", "b"));
}

#[test]
fn mser_windows_are_reproduced_exactly_by_a_fixed_warmup() {
    // M/M/1 at rho = 0.9 started empty: MSER cuts at a multiple of 5 bins of horizon / 1000; a
    // run with that cut as a fixed warm-up is the same set of trajectories, so every number
    // agrees.
    let model = json!({"stations": [{"name": "s"}],
        "sources": [{"kind": "open", "name": "o", "interarrival": exp(1.0), "route": [{"step": "serve", "station": "s", "service": exp(0.9)}]}]});
    let run = |warmup: serde_json::Value| {
        common::run(model.clone(), json!({"horizon": 5000.0, "warmup": warmup, "replications": 4, "seed": 5}))
    };
    let mser = run(json!("mser"));
    let t = mser.summary.mser.expect("warmup = mser reports its choice");
    assert_eq!((t.batch_size, t.batches), (5, 200));
    assert!(t.batches_deleted > 0 && !t.at_limit, "{t:?}");
    assert_eq!(mser.summary.warmup, t.observations_deleted as f64 * 5.0);
    let fixed = run(json!(mser.summary.warmup));
    assert!(fixed.summary.mser.is_none());
    for (a, b) in mser.replications.iter().zip(&fixed.replications) {
        assert_eq!(a.warmup, mser.summary.warmup);
        assert_eq!(serde_json::to_string(a).unwrap(), serde_json::to_string(b).unwrap());
    }
}

#[test]
fn batch_means_stop_extends_one_run_until_the_interval_is_narrow() {
    let model = json!({"stations": [{"name": "s"}],
        "sources": [{"kind": "open", "name": "o", "interarrival": exp(1.0), "route": [{"step": "serve", "station": "s", "service": exp(0.5)}]}]});
    for (metric, target) in [("throughput", 0.01), ("mean_response", 0.02), ("p99", 0.03)] {
        let run = json!({"horizon": 200.0, "warmup": 20.0, "seed": 1, "batches": 10,
                         "stop": {"metric": metric, "method": "batch_means", "relative_half_width": target, "max_horizon": 1e6}});
        let out = common::run(model.clone(), run);
        let stop = out.summary.stop.as_ref().unwrap();
        let r = &out.replications[0];
        assert!(stop.met, "{metric}: {stop:?}");
        assert!(stop.achieved <= target && stop.estimate.half_width / stop.estimate.mean <= target, "{stop:?}");
        assert!(r.horizon > 200.0 && stop.horizon == Some(r.horizon), "{metric}: {stop:?}");
        let b = r.batch_means.as_ref().unwrap();
        assert!((10..=20).contains(&b.batches), "{b:?}");
        // Batches tile the window exactly.
        assert!((b.width * b.batches as f64 - r.window).abs() < 1e-6 * r.window, "{b:?} window {}", r.window);
    }
    // An unreachable target stops at the cap, unmet, never past it.
    let run = json!({"horizon": 200.0, "seed": 1, "batches": 10,
                     "stop": {"metric": "mean_response", "method": "batch_means", "relative_half_width": 1e-6, "max_horizon": 3000.0}});
    let out = common::run(model, run);
    let stop = out.summary.stop.unwrap();
    assert!(!stop.met && stop.horizon.unwrap() <= 3000.0 && stop.horizon.unwrap() > 1500.0, "{stop:?}");
}

#[test]
fn stop_and_warmup_settings_are_validated() {
    let err = |run: serde_json::Value| archlab_sim::RunConfig::from_json(&run.to_string()).unwrap_err().to_string();
    assert_eq!(
        err(json!({"horizon": 10.0, "warmup": "welch"})),
        r#"simulation.warmup: expected a time >= 0 or "mser", got "welch""#
    );
    let bm = |extra: serde_json::Value| {
        let mut stop = json!({"metric": "p99", "method": "batch_means", "relative_half_width": 0.1});
        stop.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        stop
    };
    assert!(err(json!({"horizon": 10.0, "stop": bm(json!({}))}))
        .starts_with("simulation.stop.max_horizon: expected a time > horizon (10)"));
    assert!(err(json!({"horizon": 10.0, "replications": 3, "stop": bm(json!({"max_horizon": 100.0}))}))
        .starts_with("simulation.replications: expected 1 with stop.method"));
    assert!(err(json!({"horizon": 10.0, "stop": bm(json!({"max_horizon": 100.0, "max_replications": 4}))}))
        .starts_with("simulation.stop.max_replications: expected no max_replications"));
    assert!(err(json!({"horizon": 10.0, "stop": {"metric": "p99", "relative_half_width": 0.1}}))
        .starts_with("simulation.stop.max_replications: expected an integer >= replications"));
}
