//! The link emulator's parameters for the control plane: a spec's `[network]` is checked by the
//! code `archlab-engine link --params` runs ([`archlab_link::document`]), and the privileges a
//! link needs are checked in this process, whose children the lab starts, before anything is.

use archlab_link::{document, privileges, Scheduling};
use archlab_options::OptionError as Refusal;
use pyo3::prelude::*;

/// Check a link's parameters (`params_json`, keys as `archlab-engine link --params` reads);
/// returns what each direction applies (`mtu`, `up`, `down`, `seed`) as JSON, or raises
/// `OptionError` whose field is the key.
#[pyfunction]
fn check_link(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let config = document::config_from_json("check", params_json, archlab_load::parse_duration)
        .map_err(|e| crate::contract::refused(py, Refusal::new(e.param, e.allowed, e.received)))?;
    Ok(document::config_json(&config).to_string())
}

/// The keys `check_link` accepts.
#[pyfunction]
fn link_keys() -> Vec<&'static str> {
    document::KEYS.iter().copied().chain([document::SEED_KEY]).collect()
}

/// What this process lacks to create a link whose threads are scheduled as `scheduling`
/// (`realtime`, `high`, `normal`), as one line naming it; None when nothing is missing.
#[pyfunction]
fn link_missing_privilege(scheduling: &str) -> PyResult<Option<String>> {
    let s = Scheduling::parse(scheduling).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "scheduling: expected realtime, high or normal, got {scheduling:?}"
        ))
    })?;
    Ok(privileges::check(s).err().map(|m| m.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_link, m)?)?;
    m.add_function(wrap_pyfunction!(link_keys, m)?)?;
    m.add_function(wrap_pyfunction!(link_missing_privilege, m)?)
}
