//! The one error type of the crate: each variant prints as one line saying what failed and,
//! where there is one, what to do about it.

use crate::params::InvalidParam;
use crate::privileges::MissingPrivilege;
use std::fmt;
use std::io;

#[derive(Debug)]
pub enum LinkError {
    /// A parameter was refused before anything was created.
    Invalid(InvalidParam),
    /// The process lacks a capability, a device or a program the link needs.
    Privilege(MissingPrivilege),
    /// Another forwarder holds the link's name.
    InUse { name: String, pid: Option<u32> },
    /// A step of creating or removing the namespaces and devices failed.
    Setup { step: String, source: io::Error },
    /// A forwarding thread stopped on an error.
    Forwarding(String),
}

impl LinkError {
    pub(crate) fn setup(step: impl Into<String>) -> impl FnOnce(io::Error) -> LinkError {
        let step = step.into();
        move |source| LinkError::Setup { step, source }
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Invalid(e) => e.fmt(f),
            LinkError::Privilege(e) => e.fmt(f),
            LinkError::InUse { name, pid } => {
                let by = pid.map_or_else(|| "another forwarder".to_string(), |p| format!("the forwarder with pid {p}"));
                write!(f, "link {name} is in use by {by}: stop it with SIGTERM, or choose another name")
            }
            LinkError::Setup { step, source } => write!(f, "cannot {step}: {source}"),
            LinkError::Forwarding(e) => write!(f, "forwarding stopped: {e}"),
        }
    }
}

impl std::error::Error for LinkError {}

impl From<InvalidParam> for LinkError {
    fn from(e: InvalidParam) -> Self {
        LinkError::Invalid(e)
    }
}

impl From<MissingPrivilege> for LinkError {
    fn from(e: MissingPrivilege) -> Self {
        LinkError::Privilege(e)
    }
}
