//! The simulator's one error type. A model is checked completely before a single event runs, so
//! every error is a specification error: it names the field (a dotted path into the model), the
//! values allowed and the value received, the same shape as `archlab.errors.SpecError` on the
//! Python side, to which the bindings map it.

use std::fmt;

/// An invalid model or run configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// The input is not well-formed (not JSON, a missing field, a field of the wrong type).
    Parse {
        /// The parser's message, which carries the position of the problem.
        message: String,
    },
    /// A field has a value outside its allowed set.
    Invalid {
        /// Dotted path of the field, e.g. `sources[0].route[1].station`.
        field: String,
        /// What the field accepts.
        allowed: String,
        /// What it received, as written.
        received: String,
    },
}

impl SimError {
    /// A JSON error, on one line: serde quotes an unknown key or tag as written, and a key may
    /// hold a line break or another control character, so those are escaped.
    pub(crate) fn parse(e: &serde_json::Error) -> Self {
        let message = e.to_string();
        let message = if message.chars().any(char::is_control) {
            message
                .chars()
                .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
                .collect()
        } else {
            message
        };
        SimError::Parse { message }
    }

    pub(crate) fn invalid(field: impl Into<String>, allowed: impl Into<String>, received: impl fmt::Debug) -> Self {
        SimError::Invalid { field: field.into(), allowed: allowed.into(), received: format!("{received:?}") }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Parse { message } => write!(f, "model: {message}"),
            SimError::Invalid { field, allowed, received } => write!(f, "{field}: expected {allowed}, got {received}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Check that `value` is finite and > 0.
pub(crate) fn positive(field: &str, value: f64) -> Result<f64, SimError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(SimError::invalid(field, "a finite number > 0", value))
    }
}

/// Check that `value` is finite and >= 0.
pub(crate) fn non_negative(field: &str, value: f64) -> Result<f64, SimError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(SimError::invalid(field, "a finite number >= 0", value))
    }
}

/// Check that `value` is a probability in [0, 1] (or [0, 1) when `below_one`).
pub(crate) fn probability(field: &str, value: f64, below_one: bool) -> Result<f64, SimError> {
    let ok = value.is_finite() && value >= 0.0 && (if below_one { value < 1.0 } else { value <= 1.0 });
    if ok {
        Ok(value)
    } else {
        Err(SimError::invalid(
            field,
            if below_one { "a probability in [0, 1)" } else { "a probability in [0, 1]" },
            value,
        ))
    }
}
