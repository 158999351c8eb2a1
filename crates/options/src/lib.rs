//! Option sets of the data plane, each defined once.
//!
//! A process of the data plane (`archlab-engine serve`, `archlab-engine load`) takes many
//! options. Each set is declared once with [`option_set!`]: one line per option names its field,
//! its type, its default, its [`Kind`] (how a value is read, checked and written back) and its
//! documentation. From that one declaration come the struct the libraries use, the command-line
//! flags (`--ring-size 1024`, through `clap`), the JSON form (`{"ring_size": 1024}`, for
//! `serve --options FILE` and for the control plane), the checks of values built in code, and a
//! [`OptionInfo`] schema that the Python side reads instead of keeping its own copy of names,
//! ranges or defaults. A refused value is an [`OptionError`] naming the option, the allowed
//! values and the value received, whichever way it came in.
//!
//! Nothing here blocks or queues: it is parsing and checking, run once at start-up.

mod kinds;
mod macros;

pub use kinds::{Choice, Flag, Int, Kind, NoFlag, Number, PowerOfTwo, Text, Unsigned};
// The generated code names them through this crate, so that users need no dependency of their own.
pub use clap;
pub use serde_json;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches};
use serde::Serialize;
use serde_json::Value;
use std::fmt;

/// A value that was refused: the option (its JSON key, `ring_size`), what is allowed, what was
/// received, and optionally why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionError {
    /// The option's name as a JSON key and in specs (`ring_size`); empty for the whole set.
    pub field: String,
    pub allowed: String,
    pub received: String,
    /// More detail on the refusal, or empty.
    pub hint: String,
}

impl OptionError {
    pub fn new(field: impl Into<String>, allowed: impl Into<String>, received: impl Into<String>) -> Self {
        OptionError { field: field.into(), allowed: allowed.into(), received: received.into(), hint: String::new() }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = hint.into();
        self
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "expected {}, got {}", self.allowed, self.received)?;
        if !self.hint.is_empty() {
            write!(f, " ({})", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for OptionError {}

/// One option as the schema describes it to the control plane and to `--help`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OptionInfo {
    /// JSON key and spec key, e.g. `ring_size`.
    pub name: &'static str,
    /// The command-line flag, e.g. `--ring-size` (`--no-nodelay` for a switch that turns off).
    pub flag: String,
    /// The documentation, one paragraph.
    pub doc: String,
    /// The allowed values, e.g. `a power of two in 2..=16777216`.
    pub allowed: String,
    /// The value when the option is not given, if the set fixes one.
    pub default: Option<Value>,
}

/// How a field of a set holds the value of its kind: `Option<V>` (unset until given) or `V`
/// itself (always set, starting from its default).
pub trait Holds<V>: Sized {
    fn value(&self) -> Option<&V>;
    fn hold(value: V) -> Self;
    /// The field after a JSON `null`: unset for an `Option`, refused (`None`) otherwise.
    fn unset() -> Option<Self>;
}

impl<V> Holds<V> for Option<V> {
    fn value(&self) -> Option<&V> {
        self.as_ref()
    }
    fn hold(value: V) -> Self {
        Some(value)
    }
    fn unset() -> Option<Self> {
        Some(None)
    }
}

impl<V> Holds<V> for V {
    fn value(&self) -> Option<&V> {
        Some(self)
    }
    fn hold(value: V) -> Self {
        value
    }
    fn unset() -> Option<Self> {
        None
    }
}

/// The flags of option set `T` as given on a command line, kept so that they can be applied
/// over a base read from JSON (`--options FILE` and flags beside it: the flags win). Flatten it
/// into a `clap` command (`#[command(flatten)]`).
#[derive(Clone, Debug)]
pub struct Given<T> {
    matches: ArgMatches,
    set: std::marker::PhantomData<fn() -> T>,
}

impl<T: clap::Args> clap::Args for Given<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        T::augment_args(cmd)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        T::augment_args_for_update(cmd)
    }
}

impl<T> clap::FromArgMatches for Given<T> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Given { matches: m.clone(), set: std::marker::PhantomData })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.matches = m.clone();
        Ok(())
    }
}

impl<T: clap::FromArgMatches> Given<T> {
    /// `base` with every option given on the command line set to the flag's value.
    pub fn over(&self, mut base: T) -> T {
        base.update_from_arg_matches(&self.matches).expect("the flags were checked as they were parsed");
        base
    }
}

/// The flag of an option: `--name VALUE` checked by its kind as clap parses it, or a switch.
pub fn arg<K: Kind>(kind: &K, id: &'static str, doc: &str, default: Option<Value>) -> Arg {
    let flag = id.replace('_', "-");
    let mut help = one_paragraph(doc);
    // clap's own style: help lines without a final period.
    if help.ends_with('.') {
        help.pop();
    }
    if let Some(d) = default.as_ref().filter(|_| kind.switch().is_none()) {
        help.push_str(&format!(" [default: {}]", plain(d)));
    }
    match kind.switch() {
        Some(sets) => {
            let long = if sets { flag } else { format!("no-{flag}") };
            Arg::new(id).long(long).action(ArgAction::SetTrue).help(help)
        }
        None => {
            let checker = kind.clone();
            Arg::new(id)
                .long(flag)
                .help(help)
                .value_name(kind.value_name())
                .num_args(1)
                .allow_negative_numbers(true)
                .value_parser(move |s: &str| -> Result<String, String> {
                    checker.parse(s).map(|_| s.to_string()).map_err(|hint| refusal(&checker.allowed(), s, &hint))
                })
        }
    }
}

fn refusal(allowed: &str, received: &str, hint: &str) -> String {
    let mut m = format!("expected {allowed}, got {received:?}");
    if !hint.is_empty() {
        m.push_str(&format!(" ({hint})"));
    }
    m
}

/// The value given on the command line for option `id`, if it was given there (defaults and
/// absent flags leave the field as it is, so flags can override a JSON file).
pub fn given<K: Kind, F: Holds<K::Value>>(kind: &K, m: &ArgMatches, id: &str) -> Option<F> {
    if m.value_source(id) != Some(ValueSource::CommandLine) {
        return None;
    }
    let text = match kind.switch() {
        Some(sets) => sets.to_string(),
        None => m.get_one::<String>(id)?.clone(),
    };
    kind.parse(&text).ok().map(F::hold)
}

/// The field's value from JSON.
pub fn read_json<K: Kind, F: Holds<K::Value>>(kind: &K, name: &str, v: &Value) -> Result<F, OptionError> {
    let refused = |hint: String| OptionError::new(name, kind.allowed(), v.to_string()).with_hint(hint);
    if v.is_null() {
        return F::unset().ok_or_else(|| refused("null is not a value of this option".into()));
    }
    kind.parse_json(v).map(F::hold).map_err(refused)
}

/// The field as JSON; `None` when it is unset.
pub fn write_json<K: Kind, F: Holds<K::Value>>(kind: &K, f: &F) -> Option<Value> {
    f.value().map(|v| kind.to_json(v))
}

/// Whether the field's value (possibly built in code) is allowed.
pub fn check_field<K: Kind, F: Holds<K::Value>>(kind: &K, name: &str, f: &F) -> Result<(), OptionError> {
    match f.value() {
        Some(v) if !kind.check(v) => Err(OptionError::new(name, kind.allowed(), plain(&kind.to_json(v)))),
        _ => Ok(()),
    }
}

/// The schema entry of one option.
pub fn info<K: Kind, F: Holds<K::Value>>(kind: &K, name: &'static str, doc: &str, default: &F) -> OptionInfo {
    let flag = match kind.switch() {
        Some(false) => format!("--no-{}", name.replace('_', "-")),
        _ => format!("--{}", name.replace('_', "-")),
    };
    OptionInfo { name, flag, doc: one_paragraph(doc), allowed: kind.allowed(), default: write_json(kind, default) }
}

/// The JSON object of a set, or an error for the whole set.
pub fn object(v: &Value) -> Result<&serde_json::Map<String, Value>, OptionError> {
    v.as_object().ok_or_else(|| OptionError::new("", "a JSON object of options", v.to_string()))
}

/// Parse the text of a JSON document (a file given to `--options`/`--params`).
pub fn parse_document(text: &str) -> Result<Value, OptionError> {
    serde_json::from_str(text)
        .map_err(|e| OptionError::new("", "a JSON object of options", format!("invalid JSON ({e})")))
}

/// An unknown key of a set.
pub fn unknown(key: &str, names: &[&str]) -> OptionError {
    OptionError::new(key, format!("an option of {}", names.join(", ")), format!("{key:?}"))
}

/// A JSON value as a person writes it: strings without quotes.
pub fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Doc comment lines joined into one paragraph.
fn one_paragraph(doc: &str) -> String {
    doc.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
