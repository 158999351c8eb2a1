//! Kernel behaviour that can be checked exactly: hand-computed trajectories of small traces
//! (FCFS, processor sharing, drops, fork-join with a failed branch), determinism across thread
//! counts, pinned trajectories, Little's accounting identity, and validation errors naming
//! their field.

mod common;

use serde_json::json;

/// One replication of trace `times` through `route`, over [0, 100].
fn trace(stations: serde_json::Value, times: &[f64], route: serde_json::Value) -> archlab_sim::output::Replication {
    let model = json!({"stations": stations, "sources": [{"kind": "open", "name": "t", "arrival_times": times, "route": route}]});
    common::run(model, json!({"horizon": 100.0})).replications.remove(0)
}

fn det(v: f64) -> serde_json::Value {
    json!({"dist": "deterministic", "value": v})
}

#[test]
fn processor_sharing_shares_the_servers() {
    // Two jobs of work 1 from t = 0 at one PS server: each gets rate 1/2, both leave at t = 2.
    // A third of work 1 at t = 2 is alone. With 2 servers, everyone runs at full speed.
    let route = json!([{"step": "serve", "station": "cpu", "service": det(1.0)}]);
    let one = trace(json!([{"name": "cpu", "discipline": "ps"}]), &[0.0, 0.0, 2.0], route.clone());
    assert_eq!(one.total.completed, 3);
    assert!((one.total.mean - 5.0 / 3.0).abs() < 1e-12, "{:?}", one.total);
    assert_eq!(one.total.max, 2.0);
    let two = trace(json!([{"name": "cpu", "discipline": "ps", "servers": 2}]), &[0.0, 0.0, 1.5], route);
    assert!((two.total.mean - 1.0).abs() < 1e-12, "{:?}", two.total);
    // An arrival in the middle of a service: A (work 2) at 0, B (work 1) at 1. A runs alone for
    // 1 unit (1 left), then both at rate 1/2: both finish at 3, so R_A = 3 and R_B = 2.
    let serve = |work: f64| json!([{"step": "serve", "station": "cpu", "service": det(work)}]);
    let model = json!({"stations": [{"name": "cpu", "discipline": "ps"}], "sources": [
        {"kind": "open", "name": "a", "arrival_times": [0.0], "route": serve(2.0)},
        {"kind": "open", "name": "b", "arrival_times": [1.0], "route": serve(1.0)}]});
    let r = common::run(model, json!({"horizon": 10.0})).replications.remove(0);
    assert!((r.classes[0].responses.mean - 3.0).abs() < 1e-12);
    assert!((r.classes[1].responses.mean - 2.0).abs() < 1e-12);
}

#[test]
fn full_stations_drop_and_release_what_the_request_held() {
    // capacity 1: the second arrival (t = 0.5) finds the first in service and is dropped; the
    // third (t = 1.5) is served. A dropped request holding a caller's thread gives it back.
    let route = json!([{"step": "call", "station": "pool", "callee": [{"step": "serve", "station": "db", "service": det(1.0)}]}]);
    let r = trace(json!([{"name": "pool", "servers": 4}, {"name": "db", "capacity": 1}]), &[0.0, 0.5, 1.5], route);
    assert_eq!((r.total.completed, r.total.dropped), (2, 1));
    assert_eq!(r.stations[1].dropped, 1);
    assert!((r.stations[0].mean_jobs - 2.0 / 100.0 - 0.0).abs() < 1e-12, "{:?}", r.stations[0]);
}

#[test]
fn fork_join_waits_for_all_and_fails_if_one_branch_fails() {
    let route = json!([{"step": "fork", "branches": [
        [{"step": "serve", "station": "a", "service": det(1.0)}],
        [{"step": "serve", "station": "b", "service": det(3.0)}]]}]);
    let ok = trace(json!([{"name": "a"}, {"name": "b", "servers": 2}]), &[0.0, 0.0], route.clone());
    // a serves 0-1 and 1-2, b serves both 0-3: both requests end at 3.
    assert_eq!(ok.total.completed, 2);
    assert_eq!(ok.total.mean, 3.0);
    let failing = trace(json!([{"name": "a"}, {"name": "b", "capacity": 1}]), &[0.0, 0.0], route);
    assert_eq!((failing.total.completed, failing.total.dropped), (1, 1));
    assert!(failing.little.identity_error < 1e-12);
}

/// A model using every kind of step, station and source: repeat, a JSQ balancer, fork-join,
/// processor sharing, lognormal and gamma services, a closed and a partly-open source.
fn every_feature() -> serde_json::Value {
    json!({
        "stations": [{"name": "cpu", "servers": 2}, {"name": "db", "discipline": "ps"}, {"name": "r1"}, {"name": "r2"}],
        "sources": [
            {"kind": "closed", "name": "users", "clients": 30, "think": {"dist": "exponential", "mean": 1.0},
             "route": [{"step": "serve", "station": "cpu", "service": {"dist": "lognormal", "mean": 0.05, "cv": 2.0}},
                       {"step": "repeat", "again": 0.5, "route": [{"step": "serve", "station": "db", "service": {"dist": "gamma", "mean": 0.02, "cv": 0.5}}]},
                       {"step": "balance", "policy": "jsq", "stations": ["r1", "r2"], "service": {"dist": "exponential", "mean": 0.03}}]},
            {"kind": "sessions", "name": "web", "interarrival": {"dist": "exponential", "mean": 1.0}, "again": 0.8,
             "route": [{"step": "fork", "branches": [[{"step": "serve", "station": "r1", "service": det(0.01)}],
                                                     [{"step": "serve", "station": "db", "service": det(0.01)}]]}]}]
    })
}

#[test]
fn results_do_not_depend_on_threads() {
    let model = every_feature();
    let run = |threads: u32| {
        let out = common::run(
            model.clone(),
            json!({"horizon": 500.0, "warmup": 50.0, "replications": 5, "seed": 9, "threads": threads}),
        );
        for r in &out.replications {
            assert!(r.little.identity_error < 1e-9, "{:?}", r.little);
        }
        serde_json::to_string(&out).unwrap()
    };
    assert_eq!(run(1), run(2));
    let other_seed =
        common::run(model.clone(), json!({"horizon": 500.0, "warmup": 50.0, "replications": 5, "seed": 10}));
    assert_ne!(run(1), serde_json::to_string(&other_seed).unwrap());
}

#[test]
fn invalid_models_name_the_field_and_the_allowed_values() {
    let err = |model: serde_json::Value| archlab_sim::Model::from_json(&model.to_string()).unwrap_err().to_string();
    let src = |route: serde_json::Value| {
        json!({"stations": [{"name": "cpu", "discipline": "ps"}],
        "sources": [{"kind": "closed", "name": "u", "clients": 1, "route": route}]})
    };
    assert_eq!(
        err(src(json!([{"step": "serve", "station": "disk", "service": det(1.0)}]))),
        r#"sources[0].route[0].station: expected one of the stations ["cpu"], got "disk""#
    );
    assert!(err(src(json!([{"step": "call", "station": "cpu", "callee": []}])))
        .starts_with("sources[0].route[0].station: expected an FCFS station"));
    assert!(err(src(json!([{"step": "branch", "options": [{"p": 0.5, "route": []}]}])))
        .starts_with("sources[0].route[0].options: expected probabilities p summing to 1"));
    assert_eq!(
        err(src(json!([{"step": "teleport"}]))),
        r#"sources[0].route[0].step: expected one of serve, call, branch, repeat, fork, balance, got "teleport""#
    );
}

/// Every number of a run, without the encoded histograms (their counts are pinned by the
/// quantiles; their header may change with how histograms are summed), as compact JSON hashed
/// with FNV-1a (64 bits).
fn fingerprint(out: &archlab_sim::Outcome) -> u64 {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("histogram");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(out).unwrap();
    strip(&mut v);
    v.to_string().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// A seed fixes the whole trajectory, and speeding the kernel up must not move it: these runs'
/// numbers are pinned bit for bit (a digest of every field). The digests were taken before the
/// kernel's fast paths (the instant lane, a job resumed without the ready list, one class's
/// levels kept once) and the quantile walk, and must not change when such work is done. A change
/// of the model's meaning (a new tie rule, another random stream) changes them on purpose: then
/// say so in the change log and take the new digests from this test's message.
#[test]
fn trajectories_are_pinned() {
    let cases = [
        (
            "Table 8.1, N = 50, k = 4",
            common::closed(50, 4, 0.025),
            json!({"horizon": 200.0, "seed": 42}),
            0xcaf9_caf3_de32_62a3,
        ),
        (
            "every feature",
            every_feature(),
            json!({"horizon": 300.0, "warmup": 30.0, "replications": 3, "seed": 9}),
            0xa70c_ba54_6d29_3486,
        ),
        (
            "PS, delay and FCFS stations, one class",
            json!({"stations": [{"name": "cpu", "servers": 2, "discipline": "ps"}, {"name": "net", "discipline": "delay"},
                                {"name": "disk", "servers": 1}],
                   "sources": [{"kind": "closed", "name": "a", "clients": 30, "think": {"dist": "exponential", "mean": 0.2},
                                "route": [{"step": "serve", "station": "cpu", "service": {"dist": "exponential", "mean": 0.01}},
                                          {"step": "serve", "station": "net", "service": {"dist": "exponential", "mean": 0.005}},
                                          {"step": "serve", "station": "disk", "service": {"dist": "exponential", "mean": 0.004}}]}]}),
            json!({"horizon": 300.0, "warmup": 10.0, "replications": 2, "seed": 3}),
            0xcd4a_0ea8_f40a_d753,
        ),
    ];
    let got: Vec<(&str, u64, u64)> = cases
        .iter()
        .map(|(name, m, r, want)| (*name, fingerprint(&common::run(m.clone(), r.clone())), *want))
        .collect();
    let moved: Vec<String> =
        got.iter().filter(|(_, g, w)| g != w).map(|(n, g, w)| format!("{n}: {g:#018x} (pinned {w:#018x})")).collect();
    assert!(moved.is_empty(), "trajectories moved:\n{}", moved.join("\n"));
}
