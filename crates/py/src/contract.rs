//! The option contracts of the data plane's processes, for the control plane: a spec is
//! checked by the very code that will read it (`archlab-server`'s [`ServerOptions`] and
//! registry, `archlab-load`'s [`LoadParams`] and its validation), and comes back normalised, as
//! the JSON that `archlab-engine serve --options` and `load --params` read. Python keeps no copy
//! of an option's name, range, default or syntax: it reads them from the schemas and parses
//! durations, think times and CPU lists here. A refusal raises `OptionError` (a `ValueError`)
//! whose `field`, `allowed`, `received` and `hint` say what was wrong, so that the spec can show
//! it against its own TOML key.

use archlab_load::{LoadParams, Mix, DURATION_SYNTAX, MIX_SYNTAX};
use archlab_netio::CpuList;
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
pub(crate) fn refused(py: Python<'_>, e: Refusal) -> PyErr {
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

/// Check the parameters of a load run (`params_json`, a JSON object, keys as in
/// [`load_params_schema`]); the target may be left out. Returns what the run would do, every
/// default resolved (the seed only when something is random), as JSON, or raises `OptionError`.
#[pyfunction]
fn check_load(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let params = LoadParams::from_json(params_json).map_err(|e| refused(py, e))?;
    let normal =
        archlab_load::normalise(params).map_err(|e| refused(py, Refusal::new(e.parameter, e.allowed, e.received)))?;
    Ok(normal.to_json().to_string())
}

/// The parameters of a load run, as [`server_options_schema`] gives a server's options.
#[pyfunction]
fn load_params_schema() -> String {
    schema_json(LoadParams::schema())
}

/// Seconds of a duration (`"500ms"`, or a number of seconds): the exact product of number and
/// unit, as the data plane reads it.
#[pyfunction]
fn parse_duration(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let refusal = |hint: String| refused(py, Refusal::new("", DURATION_SYNTAX, received(value)).with_hint(hint));
    match number(value) {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
        Some(_) => Err(refusal("a duration is a finite number >= 0".into())),
        None => archlab_load::parse_seconds(&value.extract::<String>().map_err(|_| refusal(String::new()))?)
            .map_err(refusal),
    }
}

/// A think time (`"5ms"`, `"exp:5ms"`, `"uniform:2ms-8ms"` or a number of seconds): its
/// distribution (`constant`, `exponential`, `uniform`), its constant, mean or minimum in
/// seconds, and the uniform's maximum (else None).
#[pyfunction]
fn think_time(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<(&'static str, f64, Option<f64>)> {
    let allowed = "a think time: a duration (constant), exp:MEAN (exponential) or uniform:MIN-MAX";
    let refusal = |hint: String| refused(py, Refusal::new("", allowed, received(value)).with_hint(hint));
    match number(value) {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(("constant", x, None)),
        Some(_) => Err(refusal("a duration is a finite number >= 0".into())),
        None => archlab_load::think_time_seconds(&value.extract::<String>().map_err(|_| refusal(String::new()))?)
            .map_err(refusal),
    }
}

/// A request mix (`"/a:2,/b:98"`, or its JSON list of `{path, weight}`, given as JSON text):
/// its canonical text and its classes as (path, weight), in order.
#[pyfunction]
fn mix(py: Python<'_>, value_json: &str) -> PyResult<(String, Vec<(String, f64)>)> {
    let refusal = |hint: String| refused(py, Refusal::new("mix", MIX_SYNTAX, value_json).with_hint(hint));
    let value: serde_json::Value = serde_json::from_str(value_json).map_err(|e| refusal(e.to_string()))?;
    let m = Mix::from_json(&value).map_err(refusal)?;
    Ok((m.to_string(), m.classes().iter().map(|c| (c.path.clone(), c.weight)).collect()))
}

/// The CPUs of a CPU list (`"0,2-3"`), sorted and distinct (whether this machine has them is
/// the spec's question, asked against the CPUs it is checked for).
#[pyfunction]
fn cpu_list(py: Python<'_>, text: &str) -> PyResult<Vec<usize>> {
    let allowed = "a CPU list such as 1, 0-1 or 0,2-3";
    let list = CpuList::parse_ids(text)
        .map_err(|e| refused(py, Refusal::new("", allowed, format!("{text:?}")).with_hint(e.reason)))?;
    Ok(list.ids().to_vec())
}

/// A Python int or float (not a bool) as f64.
fn number(value: &Bound<'_, PyAny>) -> Option<f64> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return None;
    }
    value.extract::<f64>().ok().filter(|_| !value.is_instance_of::<pyo3::types::PyString>())
}

fn received(value: &Bound<'_, PyAny>) -> String {
    value.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into())
}

fn schema_json(schema: Vec<OptionInfo>) -> String {
    serde_json::to_string(&schema).expect("the schema is serialisable")
}

/// Add the contracts' functions and exception to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("OptionError", m.py().get_type::<OptionError>())?;
    m.add_function(wrap_pyfunction!(check_server, m)?)?;
    m.add_function(wrap_pyfunction!(server_options_schema, m)?)?;
    m.add_function(wrap_pyfunction!(check_load, m)?)?;
    m.add_function(wrap_pyfunction!(load_params_schema, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(think_time, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_list, m)?)?;
    m.add_function(wrap_pyfunction!(mix, m)?)?;
    m.add_function(wrap_pyfunction!(check_proxy, m)?)?;
    m.add_function(wrap_pyfunction!(proxy_options_schema, m)?)
}
