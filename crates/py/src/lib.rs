//! `archlab._native`: the PyO3 face of the data plane. Conversions and one error mapping
//! only; the work is done by the library crates. The registry of architectures and the
//! workload parser are exposed so that experiment specs are validated against the very code
//! that will run them.

mod contract;
mod jtl;
mod link;
mod metrics;
mod pool_control;
mod programs;
mod sim;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The registered server architectures: a list of dicts with `name`, `description`, `options`
/// (the option names the architecture accepts) and `proxy` (how it runs the reverse proxy:
/// "no", "blocking call" or "same poller").
#[pyfunction]
fn architectures(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    archlab_server::REGISTRY
        .iter()
        .map(|a| {
            let d = PyDict::new(py);
            d.set_item("name", a.name)?;
            d.set_item("description", a.description)?;
            let opts: Vec<&str> = a.accepts.iter().map(|o| o.as_str()).collect();
            d.set_item("options", opts)?;
            d.set_item("proxy", a.proxy.as_str())?;
            Ok(d)
        })
        .collect()
}

/// Validate a request target such as "/prime?n=27059"; raises ValueError naming the
/// parameter, the allowed values and the value received.
#[pyfunction]
fn check_workload(target: &str) -> PyResult<()> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    archlab_workload::Workload::from_target(path, query).map(|_| ()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Version of the data-plane crates this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(architectures, m)?)?;
    m.add_function(wrap_pyfunction!(check_workload, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    sim::register(m)?;
    jtl::register(m)?;
    programs::register(m)?;
    contract::register(m)?;
    metrics::register(m)?;
    link::register(m)?;
    pool_control::register(m)?;
    Ok(())
}
