//! Bindings of the simulator (`archlab-sim`): the model and run configuration go in as JSON
//! strings, the outcome comes back as a JSON string, and `SimError` becomes `ValueError` here and
//! nowhere else. The simulation runs with the GIL released, so Python threads keep running.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use archlab_sim::SimError;

/// The one error mapping: an invalid field raises `ValueError(field, allowed, received)` so that
/// `archlab.sim` can re-raise it as `archlab.errors.SpecError`; a parse error carries its message.
fn to_py(e: SimError) -> PyErr {
    match e {
        SimError::Invalid { field, allowed, received } => PyValueError::new_err((field, allowed, received)),
        SimError::Parse { message } => {
            PyValueError::new_err((String::from("model"), String::from("a well-formed model"), message))
        }
    }
}

/// Simulate `model_json` under `run_json`; returns the outcome as JSON.
#[pyfunction]
fn simulate(py: Python<'_>, model_json: &str, run_json: &str) -> PyResult<String> {
    py.detach(|| archlab_sim::simulate_json(model_json, run_json)).map_err(to_py)
}

/// Add the simulator's functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)
}
