//! Naming the field of a malformed model or run configuration. serde says what failed but
//! loses the path inside internally tagged enums, and the model format has one at every level
//! (`kind`, `step`, `dist`): an unknown discipline deep in a route came out as "unknown variant
//! `fifo` ... at line 1 column 50" of a JSON text the user never wrote. So a parse error is
//! located again: [`Shape`] describes the format as a tree of fields (written next to the types,
//! in [`crate::spec`] and [`crate::dist`]), and [`explain`] walks it from the root, checking each
//! sub-value against its own type, down to the deepest one that fails. Each check is serde's
//! own, so the walk can only be less precise than the types (a field missing from a shape is
//! reported at its parent), never wrong. Only input that fails to parse pays for the walk.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::SimError;

/// Whether a value deserializes as one type of the format.
pub type Check = fn(&Value) -> Result<(), serde_json::Error>;

/// [`Check`] of the type `T`.
pub fn check<T: DeserializeOwned>(value: &Value) -> Result<(), serde_json::Error> {
    T::deserialize(value).map(|_| ())
}

/// One node of the format: what type it is, and which fields it holds.
pub enum Shape {
    /// A value checked as a whole; `expected` words what it takes when serde's own words would
    /// name a Rust type (an untagged enum).
    Leaf { check: Check, expected: Option<&'static str> },
    /// A list of items of one shape.
    List { check: Check, item: &'static Shape },
    /// A table of named fields.
    Table { check: Check, fields: &'static [(&'static str, &'static Shape)] },
    /// A table whose `tag` field names its variant, each variant with its own fields.
    Tagged {
        check: Check,
        tag: &'static str,
        variants: &'static [(&'static str, &'static [(&'static str, &'static Shape)])],
    },
}

impl Shape {
    fn check(&self, value: &Value) -> Result<(), serde_json::Error> {
        match self {
            Shape::Leaf { check, .. }
            | Shape::List { check, .. }
            | Shape::Table { check, .. }
            | Shape::Tagged { check, .. } => check(value),
        }
    }
}

/// Deserialize `json` as `T` whose format is `shape`; a failure names the field by its dotted
/// path below `root` ("" for a model, whose fields are the file's top-level tables).
pub fn parse<T: DeserializeOwned>(json: &str, shape: &'static Shape, root: &str) -> Result<T, SimError> {
    let value: Value = serde_json::from_str(json).map_err(|e| SimError::parse(&e))?;
    T::deserialize(&value).map_err(|e| explain(shape, &value, root, e))
}

/// The invalid field of `value` (which failed as `shape` with `error`), with what it accepts
/// and what it received.
pub fn explain(shape: &'static Shape, value: &Value, root: &str, error: serde_json::Error) -> SimError {
    match locate(shape, value, root.to_string()) {
        Some(Found::Value(path, shape, value, error)) => describe(&path, shape, value, &error.to_string()),
        Some(Found::Tag(path, variants, value)) => {
            let names: Vec<&str> = variants.iter().map(|(name, _)| *name).collect();
            invalid(path, format!("one of {}", names.join(", ")), render(value.unwrap_or(&Value::Null)))
        }
        None => describe(root, shape, value, &error.to_string()),
    }
}

type Variants = &'static [(&'static str, &'static [(&'static str, &'static Shape)])];

enum Found<'v> {
    /// A value that fails its shape while none of its fields does.
    Value(String, &'static Shape, &'v Value, serde_json::Error),
    /// A tag field naming no variant (or missing: None).
    Tag(String, Variants, Option<&'v Value>),
}

/// The deepest sub-value of `value` that fails its own shape, or None when `value` parses.
fn locate<'v>(shape: &'static Shape, value: &'v Value, path: String) -> Option<Found<'v>> {
    let error = shape.check(value).err()?;
    let inner = match shape {
        Shape::Leaf { .. } => None,
        Shape::List { item, .. } => value
            .as_array()
            .and_then(|items| items.iter().enumerate().find_map(|(i, v)| locate(item, v, format!("{path}[{i}]")))),
        Shape::Table { fields, .. } => value.as_object().and_then(|table| in_fields(fields, table, &path)),
        Shape::Tagged { tag, variants, .. } => value.as_object().and_then(|table| {
            let name = table.get(*tag);
            match variants.iter().find(|(v, _)| name.and_then(Value::as_str) == Some(*v)) {
                Some((_, fields)) => in_fields(fields, table, &path),
                None => Some(Found::Tag(join(&path, tag), variants, name)),
            }
        }),
    };
    Some(inner.unwrap_or(Found::Value(path, shape, value, error)))
}

fn in_fields<'v>(
    fields: &'static [(&'static str, &'static Shape)],
    table: &'v serde_json::Map<String, Value>,
    path: &str,
) -> Option<Found<'v>> {
    fields.iter().find_map(|(name, shape)| locate(shape, table.get(*name)?, join(path, name)))
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// serde's message as (field, allowed, received) in the words of the model format.
fn describe(path: &str, shape: &Shape, value: &Value, message: &str) -> SimError {
    let node = if path.is_empty() { "model" } else { path };
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or(rest);
        return invalid(join(path, field), "a value (the field is required)", "nothing".to_string());
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, known) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed = match names(known) {
            Some(names) => format!("only the keys {names}"),
            None => "no keys".to_string(),
        };
        return invalid(node.to_string(), allowed, quoted(field));
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (_, known) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed = names(known).map(|n| format!("one of {n}")).unwrap_or_else(|| known.to_string());
        return invalid(node.to_string(), allowed, render(value));
    }
    let expected = match shape {
        Shape::Leaf { expected: Some(words), .. } => words.to_string(),
        _ => message.rsplit_once(", expected ").map(|(_, e)| in_words(e)).unwrap_or_else(|| message.to_string()),
    };
    invalid(node.to_string(), expected, render(value))
}

fn invalid(field: String, allowed: impl Into<String>, received: String) -> SimError {
    SimError::Invalid { field, allowed: allowed.into(), received }
}

/// "expected one of `a`, `b`, `c`" or "expected `a` or `b`" -> "a, b, c" / "a, b".
fn names(known: &str) -> Option<String> {
    let listed: Vec<&str> = known.split('`').skip(1).step_by(2).collect();
    (!listed.is_empty()).then(|| listed.join(", "))
}

/// serde's name of an expected type, in the words of a model file.
fn in_words(expected: &str) -> String {
    let words = match expected {
        "u16" => "an integer in 0..=65535",
        "u32" => "an integer in 0..=4294967295",
        "u64" => "an integer in 0..=18446744073709551615",
        "f64" => "a number",
        "a sequence" => "a list",
        "a boolean" => "true or false",
        "a string" => "a string",
        _ if expected.starts_with("struct ") || expected.contains("enum ") || expected == "a map" => "a table",
        _ => expected,
    };
    words.to_string()
}

/// A received value as a model file would spell it, cut short when long.
fn render(value: &Value) -> String {
    let text = match value {
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "a table".to_string(),
        Value::Null => "nothing".to_string(),
        other => other.to_string(),
    };
    if text.chars().count() > 60 {
        format!("{}...", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

fn quoted(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// Leaves and lists every format shares.
pub static NUMBER: Shape = Shape::Leaf { check: check::<f64>, expected: None };
pub static NUMBERS: Shape = Shape::List { check: check::<Vec<f64>>, item: &NUMBER };
pub static U32: Shape = Shape::Leaf { check: check::<u32>, expected: None };
pub static U64: Shape = Shape::Leaf { check: check::<u64>, expected: None };
pub static STRING: Shape = Shape::Leaf { check: check::<String>, expected: None };
pub static STRINGS: Shape = Shape::List { check: check::<Vec<String>>, item: &STRING };
