//! Bindings of the service programs (`archlab_workload::program`): a program file goes in (by path
//! or as text), the checked programs come back as the JSON tree the server executes, so that
//! Python's feature extraction walks the very structure the parser built and the program
//! format exists once. A refused file raises `ValueError(source, field, allowed, received)`,
//! which `archlab.tuning.programs` re-raises as `archlab.errors.InvalidValue`.

use archlab_workload::{ProgramError, ProgramSet};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn to_py(e: ProgramError) -> PyErr {
    PyValueError::new_err((e.source, e.field, e.allowed, e.received))
}

/// Read and check the program file at `path`; returns the programs as JSON.
#[pyfunction]
fn load_programs(path: &str) -> PyResult<String> {
    ProgramSet::load(std::path::Path::new(path)).map(|s| s.to_json()).map_err(to_py)
}

/// Check the programs of `text` (a program file's contents, named `source` in errors); returns
/// them as JSON.
#[pyfunction]
fn parse_programs(source: &str, text: &str) -> PyResult<String> {
    ProgramSet::parse(source, text).map(|s| s.to_json()).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(load_programs, m)?)?;
    m.add_function(wrap_pyfunction!(parse_programs, m)?)?;
    Ok(())
}
