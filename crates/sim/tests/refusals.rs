//! What the core says about models and run configurations it cannot run: each refusal names
//! the field by its path in the model file (also inside the tagged `kind`/`step`/`dist` tables,
//! where serde loses the path), what the field takes and what it got; sizes that would exhaust
//! memory and models whose time cannot pass are refused; a run that would not end stops when
//! cancelled. The field tables behind the paths are checked against serde's own field lists.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;

use archlab_sim::field_path::Shape;
use archlab_sim::{Model, RunConfig};
use serde_json::{json, Value};

fn model_error(model: Value) -> String {
    Model::from_json(&model.to_string()).unwrap_err().to_string()
}

fn run_error(run: Value) -> String {
    RunConfig::from_json(&run.to_string()).unwrap_err().to_string()
}

fn exp(mean: f64) -> Value {
    json!({"dist": "exponential", "mean": mean})
}

/// One closed source of 2 clients through one serve step, with `edit` applied to the model.
fn closed(edit: impl FnOnce(&mut Value)) -> Value {
    let mut model = json!({
        "stations": [{"name": "cpu"}],
        "sources": [{"kind": "closed", "name": "c", "clients": 2, "think": exp(1.0),
                     "route": [{"step": "serve", "station": "cpu", "service": exp(0.1)}]}]
    });
    edit(&mut model);
    model
}

#[test]
fn parse_errors_name_the_field_by_its_path_in_the_model_file() {
    let cases: Vec<(Value, &str)> = vec![
        (
            closed(|m| m["stations"][0]["discipline"] = json!("fifo")),
            r#"stations[0].discipline: expected one of fcfs, ps, delay, got "fifo""#,
        ),
        (closed(|m| m["stations"] = json!(5)), "stations: expected a list, got 5"),
        (
            closed(|m| m["stations"][0]["speed"] = json!(2)),
            r#"stations[0]: expected only the keys name, servers, discipline, capacity, got "speed""#,
        ),
        (
            closed(|m| m["sources"][0]["clients"] = json!(-1)),
            "sources[0].clients: expected an integer in 0..=4294967295, got -1",
        ),
        (
            closed(|m| m["sources"][0]["kind"] = json!("batch")),
            r#"sources[0].kind: expected one of closed, open, sessions, got "batch""#,
        ),
        (
            closed(|m| {
                m["sources"][0].as_object_mut().unwrap().remove("kind");
            }),
            "sources[0].kind: expected one of closed, open, sessions, got nothing",
        ),
        (
            closed(|m| {
                m["sources"][0].as_object_mut().unwrap().remove("route");
            }),
            "sources[0].route: expected a value (the field is required), got nothing",
        ),
        (
            closed(|m| m["sources"][0]["route"][0]["service"] = json!({"dist": "normal", "mean": 1})),
            r#"sources[0].route[0].service.dist: expected one of deterministic, exponential, lognormal, gamma, uniform, empirical, got "normal""#,
        ),
        (
            closed(|m| m["sources"][0]["route"][0]["service"]["mean"] = json!("fast")),
            r#"sources[0].route[0].service.mean: expected a number, got "fast""#,
        ),
        (
            closed(|m| m["sources"][0]["think"] = json!({"dist": "uniform", "low": 0})),
            "sources[0].think.high: expected a value (the field is required), got nothing",
        ),
        (
            // Deep inside a branch of a call's callee.
            closed(|m| {
                m["sources"][0]["route"] = json!([{"step": "call", "station": "cpu", "callee": [
                    {"step": "branch", "options": [
                        {"p": 0.5, "route": [{"step": "serve", "station": "cpu", "service": exp(1.0)}]},
                        {"p": 0.5, "route": [{"step": "serve", "station": "cpu", "service": {"dist": "gamma", "mean": 1, "cv": [1]}}]}]}]}])
            }),
            "sources[0].route[0].callee[0].options[1].route[0].service.cv: expected a number, got a list",
        ),
        (
            closed(|m| {
                m["sources"][0]["route"] =
                    json!([{"step": "balance", "stations": ["cpu"], "policy": "least-loaded", "service": exp(1.0)}])
            }),
            r#"sources[0].route[0].policy: expected one of round-robin, random, jsq, power-of-two, got "least-loaded""#,
        ),
        (
            closed(|m| {
                m["sources"][0]["route"] =
                    json!([{"step": "fork", "branches": [[{"step": "serve", "station": 7, "service": exp(1.0)}]]}])
            }),
            "sources[0].route[0].branches[0][0].station: expected a string, got 7",
        ),
    ];
    for (model, expected) in cases {
        assert_eq!(model_error(model), expected);
    }
}

#[test]
fn run_configuration_errors_name_the_simulation_table_fields() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"horizon": "long"}), r#"simulation.horizon: expected a number, got "long""#),
        (json!({"horizon": 10, "warmup": "auto"}), r#"simulation.warmup: expected a time >= 0 or "mser", got "auto""#),
        (json!({"horizon": 10, "warmup": true}), r#"simulation.warmup: expected a time >= 0 or "mser", got true"#),
        (
            json!({"horizon": 10, "stop": {"metric": "p99", "relative_half_width": 0.1, "bogus": 1}}),
            r#"simulation.stop: expected only the keys metric, relative_half_width, method, max_replications, max_horizon, got "bogus""#,
        ),
        (
            json!({"horizon": 10, "stop": {"metric": "p50", "relative_half_width": 0.1}}),
            r#"simulation.stop.metric: expected one of throughput, mean_response, p99, got "p50""#,
        ),
        (
            json!({"horizon": 10, "replications": -1}),
            "simulation.replications: expected an integer in 0..=4294967295, got -1",
        ),
        (
            json!({"horizon": 10, "seed": 1.5}),
            "simulation.seed: expected an integer in 0..=18446744073709551615, got 1.5",
        ),
        (json!({}), "simulation.horizon: expected a value (the field is required), got nothing"),
    ];
    for (run, expected) in cases {
        assert_eq!(run_error(run), expected);
    }
}

#[test]
fn sizes_that_would_exhaust_memory_are_refused() {
    // Before: `clients = 4294967295` and `batches = 4294967295` aborted the process on a failed
    // allocation (128 GiB and 32 GiB).
    assert_eq!(
        model_error(closed(|m| m["sources"][0]["clients"] = json!(4294967295u32))),
        "sources[0].clients: expected an integer in 1..=1000000, got 4294967295"
    );
    let two = closed(|m| {
        let second = m["sources"][0].clone();
        m["sources"][0]["clients"] = json!(600_000);
        m["sources"].as_array_mut().unwrap().push(second);
        m["sources"][1]["name"] = json!("d");
        m["sources"][1]["clients"] = json!(500_000);
    });
    assert_eq!(
        model_error(two),
        "sources[1].clients: expected at most 1000000 clients over all closed sources (600000 before this one), got 500000"
    );
    assert_eq!(
        run_error(json!({"horizon": 10, "batches": 4294967295u32})),
        "simulation.batches: expected 0 (no batch means) or an integer in 2..=1000, got 4294967295"
    );
    assert_eq!(
        run_error(json!({"horizon": 10, "replications": 4294967295u32})),
        "simulation.replications: expected an integer in 1..=10000, got 4294967295"
    );
    assert_eq!(
        run_error(json!({"horizon": 10, "threads": 100_000})),
        "simulation.threads: expected 0 (one per core) or an integer in 1..=1024, got 100000"
    );
    assert_eq!(
        run_error(
            json!({"horizon": 10, "stop": {"metric": "p99", "relative_half_width": 0.1, "max_replications": 4294967295u32}})
        ),
        "simulation.stop.max_replications: expected an integer <= 10000, got 4294967295"
    );
    // The bounds themselves are accepted.
    Model::from_json(&closed(|m| m["sources"][0]["clients"] = json!(1_000_000)).to_string()).unwrap();
    RunConfig::from_json(&json!({"horizon": 10, "batches": 1000, "replications": 10_000, "threads": 1024}).to_string())
        .unwrap();
}

#[test]
fn closed_clients_whose_time_cannot_pass_are_refused() {
    // Before: zero think time and a route of zero service times spun at t = 0 for ever.
    let zero = json!({"dist": "deterministic", "value": 0.0});
    let expected = "sources[0].think: expected a think time > 0 when every step of the route takes no time \
                    (the clients would cycle at time 0 for ever), got 0.0";
    let spinning = closed(|m| {
        m["sources"][0]["think"] = zero.clone();
        m["sources"][0]["route"] = json!([
            {"step": "serve", "station": "cpu", "service": {"dist": "uniform", "low": 0, "high": 0}},
            {"step": "fork", "branches": [[{"step": "serve", "station": "cpu", "service": {"dist": "empirical", "samples": [0, 0]}}]]}
        ]);
    });
    assert_eq!(model_error(spinning), expected);
    assert_eq!(
        model_error(closed(|m| {
            m["sources"][0]["think"] = zero.clone();
            m["sources"][0]["route"][0]["service"] = zero.clone();
        })),
        expected
    );
    // Time passes when either the think time or one step takes time.
    Model::from_json(&closed(|m| m["sources"][0]["think"] = zero.clone()).to_string()).unwrap();
    Model::from_json(&closed(|m| m["sources"][0]["route"][0]["service"] = zero.clone()).to_string()).unwrap();
}

#[test]
fn a_cancelled_run_stops_however_long_it_would_take() {
    // 10^18 events at 1e-6 apart: without the cancel check this test would never end.
    let model = closed(|m| {
        m["sources"][0]["think"] = json!({"dist": "deterministic", "value": 1e-6});
        m["sources"][0]["route"][0]["service"] = json!({"dist": "deterministic", "value": 1e-6});
    });
    let run = RunConfig::from_json(&json!({"horizon": 1e12, "replications": 2, "threads": 2}).to_string()).unwrap();
    let model = Model::from_json(&model.to_string()).unwrap();
    assert!(archlab_sim::simulate_until(&model, &run, &AtomicBool::new(true)).is_none());
    let mser = RunConfig::from_json(&json!({"horizon": 1e12, "warmup": "mser"}).to_string()).unwrap();
    assert!(archlab_sim::simulate_until(&model, &mser, &AtomicBool::new(true)).is_none());
}

/// A table of the format: its tag and variant (for a tagged one), its fields and its shape.
struct Table {
    tag: Option<(&'static str, &'static str)>,
    fields: Vec<&'static str>,
    shape: &'static Shape,
}

/// Every table of the format, reachable from the model and the run configuration.
fn tables() -> Vec<Table> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<&'static Shape> = vec![&archlab_sim::spec::MODEL, &archlab_sim::spec::RUN];
    while let Some(shape) = stack.pop() {
        if !seen.insert(shape as *const Shape) {
            continue;
        }
        match shape {
            Shape::Leaf { .. } => {}
            Shape::List { item, .. } => stack.push(item),
            Shape::Table { fields, .. } => {
                out.push(Table { tag: None, fields: fields.iter().map(|(n, _)| *n).collect(), shape });
                stack.extend(fields.iter().map(|(_, s)| *s));
            }
            Shape::Tagged { tag, variants, .. } => {
                for (variant, fields) in variants.iter() {
                    out.push(Table {
                        tag: Some((*tag, *variant)),
                        fields: fields.iter().map(|(n, _)| *n).collect(),
                        shape,
                    });
                    stack.extend(fields.iter().map(|(_, s)| *s));
                }
            }
        }
    }
    out
}

#[test]
fn the_field_tables_list_exactly_the_fields_serde_knows() {
    // serde's message for an unknown field lists every field of the type (all of them deny
    // unknown fields), so a field added to a type and forgotten in its shape fails here.
    let found = tables();
    assert!(found.len() >= 20, "{} tables", found.len());
    for Table { tag, fields, shape } in found {
        let mut probe = serde_json::Map::new();
        if let Some((tag, variant)) = tag {
            probe.insert(tag.to_string(), json!(variant));
        }
        probe.insert("__not_a_field__".to_string(), json!(0));
        let check = match shape {
            Shape::Table { check, .. } | Shape::Tagged { check, .. } => check,
            _ => unreachable!(),
        };
        let message = check(&Value::Object(probe)).unwrap_err().to_string();
        let known: Vec<&str> = message.split('`').skip(3).step_by(2).collect();
        assert_eq!(known, fields, "{tag:?}: {message}");
    }
}

/// Found by the `sim_model` fuzz target: an unknown key holding a line break made the message
/// two lines (the messages are built in `error.rs`).
#[test]
fn parse_errors_are_one_line_with_control_characters_escaped() {
    let e = Model::from_json(r#"{"stations": [{"\nname": "cpu"}], "sources": []}"#).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e:?}");
    assert!(e.contains(r#"got "\nname""#), "{e}");
    let e = RunConfig::from_json("{\"horizon\": 1, \"\\t\": 2}").unwrap_err().to_string();
    assert!(!e.contains('\t') && e.contains(r#"got "\t""#), "{e}");
}
