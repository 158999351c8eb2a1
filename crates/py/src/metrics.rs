//! Bindings of `archlab-metrics`: HDR interval logs are written by the Rust crate only, so a
//! log made for Python (a simulated replication's) has exactly the layout of the load
//! generator's and is read by the same readers. Bytes go out; invalid input raises
//! `ValueError((field, allowed, received))`, the convention of the simulator's bindings.

use std::time::{Duration, SystemTime};

use archlab_metrics::hdr;
use archlab_metrics::interval_log::{decode_histogram, single_interval_log};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn invalid(field: &str, allowed: &str, received: String) -> PyErr {
    PyValueError::new_err((field.to_string(), allowed.to_string(), received))
}

fn seconds(field: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| invalid(field, "a finite number of seconds >= 0", value.to_string()))
}

/// An HDR interval log of one interval: `histogram` (base64 of the V2 deflate encoding, values
/// in ns) with every value multiplied by `value_scale`, recorded from `start_s` to
/// `start_s + length_s` seconds after the log's base time (the epoch: for a simulation, time 0
/// of the model), with `comment` as a header line.
#[pyfunction]
#[pyo3(signature = (histogram, start_s, length_s, value_scale = 1.0, comment = None))]
fn interval_log<'py>(
    py: Python<'py>,
    histogram: &str,
    start_s: f64,
    length_s: f64,
    value_scale: f64,
    comment: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let offset = seconds("start_s", start_s)?;
    let length = seconds("length_s", length_s)?;
    if !(value_scale.is_finite() && value_scale > 0.0) {
        return Err(invalid("value_scale", "a finite number > 0", value_scale.to_string()));
    }
    let shown: String = histogram.chars().take(24).collect();
    let decoded = decode_histogram(histogram).map_err(|e| {
        invalid("histogram", "an HdrHistogram, base64 of its V2 deflate encoding", format!("{shown:?}: {e}"))
    })?;
    let scaled = if value_scale == 1.0 { decoded } else { hdr::rescaled(&decoded, value_scale) };
    let comments: Vec<&str> = comment.into_iter().collect();
    let bytes = single_interval_log(&scaled, SystemTime::UNIX_EPOCH, offset, length, &comments)
        .map_err(|e| invalid("histogram", "a histogram the log can encode", e.to_string()))?;
    Ok(PyBytes::new(py, &bytes))
}

/// Add the metrics functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(interval_log, m)?)
}
