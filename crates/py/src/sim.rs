//! Bindings of the simulator (`archlab-sim`): the model and run configuration go in as JSON
//! strings, the outcome comes back as a JSON string, and `SimError` becomes `ValueError` here and
//! nowhere else. The simulation runs on its own thread with the GIL released, so Python threads
//! keep running; the calling thread waits for it and looks at Python's signals every
//! [`SIGNAL_POLL`], so Ctrl-C raises `KeyboardInterrupt` within that time however long the run
//! would have taken (the core stops at its next check of the cancel flag).
//! `mser` exposes the core's warm-up truncation rule for any series (e.g. measured latencies).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use archlab_sim::SimError;

/// How often a waiting `simulate` lets Python handle signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

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

/// Simulate `model_json` under `run_json`; returns the outcome as JSON. A signal handler that
/// raises (Ctrl-C: `KeyboardInterrupt`) stops the run and raises here.
#[pyfunction]
fn simulate(py: Python<'_>, model_json: &str, run_json: &str) -> PyResult<String> {
    let cancel = AtomicBool::new(false);
    let (done, mut outcome) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // The receiver outlives this thread (the scope joins it), so the send succeeds.
            let _ = done.send(archlab_sim::simulate_json(model_json, run_json, &cancel));
        });
        loop {
            // The receiver moves into the GIL-free wait and back (it may not be shared).
            let (received, back) = py.detach(move || (outcome.recv_timeout(SIGNAL_POLL), outcome));
            outcome = back;
            match received {
                Ok(result) => {
                    let json = result.map_err(to_py)?;
                    return Ok(json.expect("only this function cancels, and it has not"));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(raised) = py.check_signals() {
                        cancel.store(true, Ordering::Relaxed);
                        let _ = py.detach(move || outcome.recv());
                        return Err(raised);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the simulation thread ended without a result (it panicked)")
                }
            }
        }
    })
}

/// Validate `model_json` and `run_json` without running them; raises as `simulate` does.
#[pyfunction]
fn check_simulation(model_json: &str, run_json: &str) -> PyResult<()> {
    archlab_sim::check_json(model_json, run_json).map_err(to_py)
}

/// MSER truncation of `series` in batches of `batch_size` (MSER-5 by default): a dict with
/// `batch_size`, `batches`, `batches_deleted`, `observations_deleted`, `statistic`, `at_limit`,
/// or None when the series holds fewer than two batches.
#[pyfunction]
#[pyo3(signature = (series, batch_size = 5))]
fn mser<'py>(py: Python<'py>, series: Vec<f64>, batch_size: usize) -> PyResult<Option<Bound<'py, PyDict>>> {
    if batch_size == 0 {
        return Err(PyValueError::new_err((
            String::from("batch_size"),
            String::from("an integer >= 1"),
            String::from("0"),
        )));
    }
    if let Some(i) = series.iter().position(|x| !x.is_finite()) {
        return Err(PyValueError::new_err((
            format!("series[{i}]"),
            String::from("a finite number"),
            series[i].to_string(),
        )));
    }
    let Some(t) = py.detach(|| archlab_sim::stats::mser(&series, batch_size)) else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("batch_size", t.batch_size)?;
    d.set_item("batches", t.batches)?;
    d.set_item("batches_deleted", t.batches_deleted)?;
    d.set_item("observations_deleted", t.observations_deleted)?;
    d.set_item("statistic", t.statistic)?;
    d.set_item("at_limit", t.at_limit)?;
    Ok(Some(d))
}

/// Add the simulator's functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(check_simulation, m)?)?;
    m.add_function(wrap_pyfunction!(mser, m)?)
}
