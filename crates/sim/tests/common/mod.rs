//! Helpers shared by the integration tests: build models from JSON literals and run them.

#![allow(dead_code)]

use archlab_sim::{simulate, Model, Outcome, RunConfig};

#[track_caller]
pub fn model(json: serde_json::Value) -> Model {
    Model::from_json(&json.to_string()).unwrap_or_else(|e| panic!("invalid test model: {e}"))
}

#[track_caller]
pub fn config(json: serde_json::Value) -> RunConfig {
    RunConfig::from_json(&json.to_string()).unwrap_or_else(|e| panic!("invalid test config: {e}"))
}

pub fn run(model_json: serde_json::Value, run_json: serde_json::Value) -> Outcome {
    simulate(&model(model_json), &config(run_json))
}

/// The seed's closed model (Fig. 8.2): `clients` clients, no think time, `cores` exponential servers.
pub fn closed(clients: u32, cores: u32, mean_service: f64) -> serde_json::Value {
    serde_json::json!({
        "stations": [{"name": "server", "servers": cores}],
        "sources": [{"kind": "closed", "name": "clients", "clients": clients,
                     "route": [{"step": "serve", "station": "server",
                                "service": {"dist": "exponential", "mean": mean_service}}]}]
    })
}
