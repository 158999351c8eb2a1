//! The server's pool-size controller ([`archlab_server::pool_control::HillClimber`]) for the
//! control plane: the state machine the adaptive pool runs, driven from Python so that a test
//! can feed it and its Python mirror (`archlab.tuning.HillClimber`) the same measurements and
//! check that they decide alike. No clock and no pool here: only the decisions.

use archlab_server::pool_control::{ClimberSettings, HillClimber};
use pyo3::prelude::*;

/// `PoolClimber(initial, minimum, maximum, step, min_step, max_step, threshold, change_band)`:
/// the server's hill climber; `observe(throughput)` returns the next size.
#[pyclass(module = "archlab._native")]
struct PoolClimber {
    inner: HillClimber,
}

#[pymethods]
impl PoolClimber {
    #[new]
    #[pyo3(signature = (initial, minimum, maximum, step, min_step, max_step, threshold, change_band))]
    #[allow(clippy::too_many_arguments)] // the settings' fields, by name, as Python passes them
    fn new(
        initial: usize,
        minimum: usize,
        maximum: usize,
        step: usize,
        min_step: usize,
        max_step: usize,
        threshold: f64,
        change_band: f64,
    ) -> Self {
        let settings = ClimberSettings { initial, minimum, maximum, step, min_step, max_step, threshold, change_band };
        PoolClimber { inner: HillClimber::new(settings) }
    }

    /// The size to run the next control interval with.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The adopted size (not a probe).
    #[getter]
    fn current(&self) -> usize {
        self.inner.current()
    }

    #[getter]
    fn changes_detected(&self) -> u64 {
        self.inner.changes_detected()
    }

    /// Report one interval's throughput; returns the next size.
    fn observe(&mut self, throughput: f64) -> usize {
        self.inner.observe(throughput)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PoolClimber>()
}
