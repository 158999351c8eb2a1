//! The option contracts of the data plane's processes, for the control plane: a spec is
//! checked by the very code that will read it (`archlab-server`'s [`ServerOptions`] and
//! registry), and comes back normalised, as the JSON that `archlab-engine serve --options`
//! reads. Python keeps no copy of an option's name, range or default: it reads them from
//! [`server_options_schema`]. A refusal raises `OptionError` (a `ValueError`) whose `field`,
//! `allowed`, `received` and `hint` say what was wrong, so that the spec can show it against its
//! own TOML key.

use archlab_options::{OptionError as Refusal, OptionInfo};
use archlab_proxy::http::options as proxy_options;
use archlab_proxy::http::ProxyOptions;
use archlab_server::{registry, ServerOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pyo3::create_exception!(
    archlab._native,
    OptionError,
    PyValueError,
    "An option refused by the data plane: `field` (the option's key, empty for the whole set), \
     `allowed`, `received` and `hint` (may be empty) say what and why; `args` holds the same four."
);

/// The one error mapping of the contracts.
fn refused(py: Python<'_>, e: Refusal) -> PyErr {
    let err = OptionError::new_err((e.field.clone(), e.allowed.clone(), e.received.clone(), e.hint.clone()));
    let value = err.value(py);
    for (name, v) in [("field", &e.field), ("allowed", &e.allowed), ("received", &e.received), ("hint", &e.hint)] {
        if let Err(set) = value.setattr(name, v) {
            return set;
        }
    }
    err
}

/// Check architecture `arch` with the options of `options_json` (a JSON object, keys as in
/// [`server_options_schema`]); returns the options normalised (defaults filled in, values in
/// their canonical form) as JSON, or raises `OptionError`.
#[pyfunction]
fn check_server(py: Python<'_>, arch: &str, options_json: &str) -> PyResult<String> {
    let options = ServerOptions::from_json(options_json).map_err(|e| refused(py, e))?;
    registry::check(arch, &options).map_err(|e| refused(py, e.option_error()))?;
    Ok(options.to_json().to_string())
}

/// Check architecture `arch` running the reverse proxy with the options of `options_json` (one
/// JSON object with keys of [`server_options_schema`] and [`proxy_options_schema`], as
/// `archlab-engine proxy --options` reads); returns them normalised as JSON, or raises
/// `OptionError` (field `arch` for an architecture that cannot proxy).
#[pyfunction]
fn check_proxy(py: Python<'_>, arch: &str, options_json: &str) -> PyResult<String> {
    let doc = archlab_options::parse_document(options_json).map_err(|e| refused(py, e))?;
    let (server, proxy) = proxy_options::from_json_value(&doc).map_err(|e| refused(py, e))?;
    proxy_options::check(arch, &server, &proxy).map_err(|e| refused(py, e))?;
    Ok(proxy_options::to_json(&server, &proxy).to_string())
}

/// The options of the reverse proxy (backends, policy, pools, timeouts, health), listed as
/// [`server_options_schema`] lists the server's.
#[pyfunction]
fn proxy_options_schema() -> String {
    schema_json(ProxyOptions::schema())
}

/// The options of a server: a list of dicts with `name`, `flag`, `doc`, `allowed`, `default`
/// (None when the architecture decides).
#[pyfunction]
fn server_options_schema() -> String {
    schema_json(ServerOptions::schema())
}

fn schema_json(schema: Vec<OptionInfo>) -> String {
    serde_json::to_string(&schema).expect("the schema is serialisable")
}

/// Add the contracts' functions and exception to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OptionError", m.py().get_type::<OptionError>())?;
    m.add_function(wrap_pyfunction!(check_server, m)?)?;
    m.add_function(wrap_pyfunction!(check_proxy, m)?)?;
    m.add_function(wrap_pyfunction!(proxy_options_schema, m)?)?;
    m.add_function(wrap_pyfunction!(server_options_schema, m)?)
}
