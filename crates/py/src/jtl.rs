//! Bindings of the JTL reader (`archlab-jtl`): the layout comes in as column positions chosen
//! by `archlab.latency.readers.jtl`, which also names every refusal; the counts go back as a
//! dict of plain lists. The scan runs with the GIL released.

use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use archlab_jtl::{Failed, Query};

/// Exact counts of one measure of a JMeter CSV file: a dict with `rows`, `failed`,
/// `other_labels`, `trimmed`, `malformed`, `first_problem` (str or None), `values` and `counts`
/// (the kept values, increasing, and how often each was seen).
#[pyfunction]
#[pyo3(signature = (path, columns, header, measure, success, failed, labels = None, trim = None, end = None))]
#[allow(clippy::too_many_arguments)]
fn jtl_counts<'py>(
    py: Python<'py>,
    path: PathBuf,
    columns: usize,
    header: bool,
    measure: usize,
    success: Option<usize>,
    failed: &str,
    labels: Option<(usize, Vec<String>)>,
    trim: Option<(usize, f64, f64)>,
    end: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let failed = match failed {
        "exclude" => Failed::Exclude,
        "include" => Failed::Include,
        "only" => Failed::Only,
        other => {
            return Err(PyValueError::new_err(format!("failed: expected one of exclude, include, only; got {other:?}")))
        }
    };
    let highest = [Some(measure), success, labels.as_ref().map(|l| l.0), trim.map(|t| t.0)].into_iter().flatten().max();
    if highest.is_some_and(|c| c >= columns) || (failed != Failed::Include && success.is_none()) {
        return Err(PyValueError::new_err(format!(
            "columns: expected every column read below {columns} and a success column unless failed='include', \
             got measure {measure}, success {success:?}"
        )));
    }
    let labels = labels.map(|(c, names)| (c, names.into_iter().map(String::into_bytes).collect()));
    let query = Query { columns, header, measure, success, failed, labels, trim, end };
    let found = py
        .detach(|| archlab_jtl::read(&path, &query))
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    let d = PyDict::new(py);
    d.set_item("rows", found.rows)?;
    d.set_item("failed", found.failed)?;
    d.set_item("other_labels", found.other_labels)?;
    d.set_item("trimmed", found.trimmed)?;
    d.set_item("malformed", found.malformed)?;
    d.set_item("first_problem", found.first_problem)?;
    d.set_item("values", found.values)?;
    d.set_item("counts", found.counts)?;
    Ok(d)
}

/// Add the JTL reader's functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(jtl_counts, m)?)
}
