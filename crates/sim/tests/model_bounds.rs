//! Models that build must be simulable: distributions whose derived parameters overflow and
//! nested repeats that unroll without bound are refused, naming the field. Each case was found
//! by the `sim_model` fuzz target's invariants (`fuzz/fuzz_targets/sim_model.rs`).

use archlab_sim::model::MAX_INSTRUCTIONS;
use archlab_sim::{Model, SimError};
use serde_json::json;

/// A closed model of one station whose route is `route`.
fn model(route: serde_json::Value) -> Result<Model, SimError> {
    let m = json!({"stations": [{"name": "s"}], "sources": [{"kind": "closed", "name": "c", "clients": 1, "route": route}]});
    Model::from_json(&m.to_string())
}

fn serve(service: serde_json::Value) -> serde_json::Value {
    json!([{"step": "serve", "station": "s", "service": service}])
}

fn invalid_field(r: Result<Model, SimError>) -> String {
    match r {
        Err(SimError::Invalid { field, .. }) => field,
        other => panic!("expected an invalid field, got {other:?}"),
    }
}

#[test]
fn distributions_whose_parameters_overflow_are_refused() {
    // cv^2 overflows: the log-normal's sigma was infinite and its mean NaN.
    let e = invalid_field(model(serve(json!({"dist": "lognormal", "mean": 1.0, "cv": 1e300}))));
    assert_eq!(e, "sources[0].route[0].service.cv");
    // 1/cv^2 overflows (shape infinite, scale 0), or cv^2 does (shape 0, scale infinite).
    for cv in [1e-200, 1e200] {
        let e = invalid_field(model(serve(json!({"dist": "gamma", "mean": 1.0, "cv": cv}))));
        assert_eq!(e, "sources[0].route[0].service.cv", "cv {cv}");
    }
    // mean * cv^2 overflows while cv^2 alone does not.
    let e = invalid_field(model(serve(json!({"dist": "gamma", "mean": 1e300, "cv": 1e10}))));
    assert_eq!(e, "sources[0].route[0].service.cv");
    // Extreme but representable parameters still build, with finite means.
    for d in [json!({"dist": "lognormal", "mean": 1.0, "cv": 1e150}), json!({"dist": "gamma", "mean": 1.0, "cv": 1e10})]
    {
        let m = model(serve(d.clone())).unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(m.dists[0].mean().is_finite(), "{d}: {:?}", m.dists[0]);
    }
}

#[test]
fn an_empirical_mean_does_not_overflow() {
    let m = model(serve(json!({"dist": "empirical", "samples": [1e308, 1e308, 0.0]}))).unwrap();
    let (mean, want) = (m.dists[0].mean(), 1e308 / 3.0 * 2.0);
    assert!((mean - want).abs() <= 1e-12 * want, "{mean}");
    let m = model(serve(json!({"dist": "empirical", "samples": [1.0, 2.0, 6.0]}))).unwrap();
    assert_eq!(m.dists[0].mean(), 3.0);
}

#[test]
fn nested_repeats_are_bounded() {
    // 1000 x 1000 x 1000 serves would compile to 3 * 10^9 instructions.
    let inner = json!([{"step": "repeat", "times": 1000, "route": serve(json!({"dist": "exponential", "mean": 1.0}))}]);
    let middle = json!([{"step": "repeat", "times": 1000, "route": inner}]);
    let outer = json!([{"step": "repeat", "times": 1000, "route": middle}]);
    match model(outer) {
        Err(SimError::Invalid { field, allowed, received }) => {
            assert!(field.starts_with("sources[0].route[0].route[0]"), "{field}");
            assert!(allowed.contains(&MAX_INSTRUCTIONS.to_string()), "{allowed}");
            assert!(received.contains("instructions"), "{received}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|m| m.ops.len())),
    }
    // Just under the bound still builds: 1000 x 300 serves at an FCFS station, 3 instructions each.
    let under = json!([{"step": "repeat", "times": 1000, "route": [{"step": "repeat", "times": 300, "route": serve(json!({"dist": "exponential", "mean": 1.0}))}]}]);
    let m = model(under).unwrap();
    assert!(m.ops.len() > 900_000 && m.ops.len() <= MAX_INSTRUCTIONS, "{}", m.ops.len());
}
