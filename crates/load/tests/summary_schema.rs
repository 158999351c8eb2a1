//! The JSON summary of every load model validates against the published JSON Schema
//! (`schema/load-summary.schema.json`, draft 2020-12), and keeps the version-1 fields the
//! Python orchestrator reads (`python/archlab/lab/summary.py`).

mod common;

use archlab_load::{
    run_load, LoadConfig, LoadParams, Model, Protocol, Ratio, Retrieval, SessionLength, ValueSize, JSON_SCHEMA,
    SCHEMA_VERSION,
};
use common::{Behaviour, TestServer};
use serde_json::Value;
use std::time::Duration;

fn validator() -> (boon::Schemas, boon::SchemaIndex) {
    let schema: Value = serde_json::from_str(JSON_SCHEMA).expect("the schema is JSON");
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource("load-summary.schema.json", schema).unwrap();
    let index = compiler.compile("load-summary.schema.json", &mut schemas).expect("the schema compiles");
    (schemas, index)
}

fn summary_of(p: LoadParams) -> Value {
    let r = run_load(&LoadConfig::new(p).unwrap()).unwrap();
    serde_json::to_value(r.summary(Some("run.hdr.log"))).unwrap()
}

#[test]
fn summaries_of_every_model_match_the_published_schema() {
    let server = TestServer::start(Behaviour::default());
    let (schemas, index) = validator();
    let base = || {
        let mut p = LoadParams::new(server.addr);
        p.warmup = Duration::from_millis(50);
        p.duration = Some(Duration::from_millis(300));
        p
    };
    let closed = base();
    let mut open = base();
    open.model = Model::Open;
    open.rate = Some(500.0);
    let mut partly = base();
    partly.model = Model::PartlyOpen;
    partly.session_rate = Some(100.0);
    partly.requests_per_session = Some(SessionLength::Fixed(2));
    partly.connections = Some(0);
    partly.max_connections = Some(8);
    // The same with schedules: a rate ramp and steps, and users steps.
    let mut open_ramp = base();
    open_ramp.model = Model::Open;
    open_ramp.rate_steps = Some("100@100ms,100-900@200ms".parse().unwrap());
    let mut closed_steps = base();
    closed_steps.users_steps = Some("1@100ms,3@200ms".parse().unwrap());
    closed_steps.connections = Some(3);
    let mut closed_pipelined = base();
    closed_pipelined.pipeline = 4;
    let mut partly_steps = base();
    partly_steps.model = Model::PartlyOpen;
    partly_steps.session_rate_steps = Some("50@150ms,150@150ms".parse().unwrap());
    partly_steps.requests_per_session = Some(SessionLength::Fixed(2));
    partly_steps.connections = Some(0);
    partly_steps.max_connections = Some(8);
    // A request mix with the generator's receive buffer set, pipelined.
    let mut closed_mix = base();
    closed_mix.mix = Some("/a:1,/b:3".parse().unwrap());
    closed_mix.rcvbuf = Some(65536);
    closed_mix.pipeline = 2;
    let mut open_mix = base();
    open_mix.model = Model::Open;
    open_mix.rate = Some(500.0);
    open_mix.mix = Some("/a:1,/b:0".parse().unwrap());
    for (model, p) in [
        ("closed", closed_mix),
        ("open", open_mix),
        ("closed", closed),
        ("open", open),
        ("partly-open", partly),
        ("open", open_ramp),
        ("closed", closed_steps),
        ("closed", closed_pipelined),
        ("partly-open", partly_steps),
    ] {
        let v = summary_of(p);
        if let Err(e) = schemas.validate(&v, index) {
            panic!("{model} summary does not match the schema: {e:#}\n{v:#}");
        }
        assert_eq!(v["model"], model);
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        // What the orchestrator reads, present and typed as in version 1.
        assert_eq!(v["schema"], "archlab/load-summary");
        for key in ["requests", "throughput_rps", "duration_s"] {
            assert!(v[key].is_number(), "{model}: {key}");
        }
        for key in ["p50", "p90", "p99", "p99.9", "max", "mean"] {
            assert!(v["latency_us"][key].is_f64(), "{model}: latency_us.{key}");
        }
        assert!(v["errors"]["total"].is_u64() && v["errors"]["by_class"].is_object());
        assert!(v["timeline"].is_array() && v["hdr_log"].is_string());

        // The schema is not vacuous: a missing field or a stray one is refused.
        let mut broken = v.clone();
        broken.as_object_mut().unwrap().remove("requests");
        assert!(schemas.validate(&broken, index).is_err());
        let mut broken = v.clone();
        broken["latency_us"]["p42"] = 1.0.into();
        assert!(schemas.validate(&broken, index).is_err());
    }
}

#[test]
fn memcached_summaries_match_the_published_schema() {
    let server = archlab_wire::memcached_process::require(&[]);
    let (schemas, index) = validator();
    let mut p = LoadParams::new(server.addr);
    p.warmup = Duration::from_millis(50);
    p.duration = Some(Duration::from_millis(300));
    p.protocol = Protocol::Memcached;
    p.mc_command = Some(Retrieval::Get);
    p.multi_get = Some(4);
    p.ratio = Some(Ratio { sets: 1, gets: 10 });
    p.key_pattern = Some("R:Z".parse().unwrap());
    p.key_zipf_exp = Some(0.9);
    p.key_prefix = Some("s-".into());
    (p.key_min, p.key_max) = (Some(0), Some(1000));
    p.data_size = Some(ValueSize::Fixed(100));
    p.verify = true;
    let v = summary_of(p);
    if let Err(e) = schemas.validate(&v, index) {
        panic!("memcached summary does not match the schema: {e:#}\n{v:#}");
    }
    assert_eq!(v["protocol"], "memcached");
    assert!(v["memcached"]["gets"].as_u64().unwrap() > 0);
    assert_eq!(v["memcached"]["key_zipf_exp"], 0.9);
}
