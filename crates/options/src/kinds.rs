//! The kinds of option values: how a value is read from a flag's text or from JSON, checked,
//! written back, and described ("an integer in 1..=65536"). A set's declaration names one kind
//! per option, so that the flag and the JSON path refuse the same values with the same words.

use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// How the values of one option are read, checked and written.
pub trait Kind: Clone + Send + Sync + 'static {
    type Value;
    /// The allowed values, as messages and `--help` say them.
    fn allowed(&self) -> String;
    /// Placeholder of the value in `--help` (`--threads <N>`).
    fn value_name(&self) -> &'static str {
        "VALUE"
    }
    /// A value from its text; the error is a detail for the message (may be empty).
    fn parse(&self, text: &str) -> Result<Self::Value, String>;
    /// A value from JSON; by default a JSON string read by [`Kind::parse`].
    fn parse_json(&self, v: &Value) -> Result<Self::Value, String> {
        match v {
            Value::String(s) => self.parse(s),
            _ => Err(String::new()),
        }
    }
    /// The value as JSON (the inverse of `parse_json`).
    fn to_json(&self, v: &Self::Value) -> Value;
    /// Whether a value built in code is allowed (parsed values always are).
    fn check(&self, _v: &Self::Value) -> bool {
        true
    }
    /// `Some(value)` for a switch: a flag without a value that sets `value` (`--busy-poll`
    /// sets true, `--no-nodelay` sets false); `None` for a flag that takes a value.
    fn switch(&self) -> Option<bool> {
        None
    }
}

/// The unsigned integer types options are counted in.
pub trait Unsigned: Copy + Send + Sync + 'static {
    fn from_u64(v: u64) -> Option<Self>;
    fn to_u64(self) -> u64;
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Unsigned for $t {
            fn from_u64(v: u64) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
            fn to_u64(self) -> u64 {
                self as u64
            }
        }
    )*};
}
unsigned!(u16, u32, u64, usize);

/// An integer in `min..=max`.
pub struct Int<T> {
    pub min: u64,
    pub max: u64,
    of: PhantomData<fn() -> T>,
}

impl<T> Int<T> {
    pub const fn new(min: u64, max: u64) -> Self {
        Int { min, max, of: PhantomData }
    }
}

impl<T> Clone for Int<T> {
    fn clone(&self) -> Self {
        Int::new(self.min, self.max)
    }
}

impl<T: Unsigned> Kind for Int<T> {
    type Value = T;
    fn allowed(&self) -> String {
        if self.max == u64::MAX || T::from_u64(self.max).is_none() {
            format!("an integer >= {}", self.min)
        } else {
            format!("an integer in {}..={}", self.min, self.max)
        }
    }
    fn value_name(&self) -> &'static str {
        "N"
    }
    fn parse(&self, text: &str) -> Result<T, String> {
        let n: u64 = text.trim().parse().map_err(|_| String::new())?;
        self.within(n)
    }
    fn parse_json(&self, v: &Value) -> Result<T, String> {
        self.within(v.as_u64().ok_or_else(String::new)?)
    }
    fn to_json(&self, v: &T) -> Value {
        Value::from(v.to_u64())
    }
    fn check(&self, v: &T) -> bool {
        (self.min..=self.max).contains(&v.to_u64())
    }
}

impl<T: Unsigned> Int<T> {
    fn within(&self, n: u64) -> Result<T, String> {
        if (self.min..=self.max).contains(&n) {
            T::from_u64(n).ok_or_else(String::new)
        } else {
            Err(String::new())
        }
    }
}

/// A power of two in `min..=max` (ring sizes).
#[derive(Clone, Copy)]
pub struct PowerOfTwo {
    pub min: usize,
    pub max: usize,
}

impl Kind for PowerOfTwo {
    type Value = usize;
    fn allowed(&self) -> String {
        format!("a power of two in {}..={}", self.min, self.max)
    }
    fn value_name(&self) -> &'static str {
        "N"
    }
    fn parse(&self, text: &str) -> Result<usize, String> {
        let n: usize = text.trim().parse().map_err(|_| String::new())?;
        self.check(&n).then_some(n).ok_or_else(String::new)
    }
    fn parse_json(&self, v: &Value) -> Result<usize, String> {
        let n = v.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(String::new)?;
        self.check(&n).then_some(n).ok_or_else(String::new)
    }
    fn to_json(&self, v: &usize) -> Value {
        Value::from(*v)
    }
    fn check(&self, v: &usize) -> bool {
        v.is_power_of_two() && (self.min..=self.max).contains(v)
    }
}

/// A finite number (rates, key distribution parameters); ranges that depend on other options
/// are checked by the library that validates the whole set.
#[derive(Clone, Copy)]
pub struct Number;

impl Kind for Number {
    type Value = f64;
    fn allowed(&self) -> String {
        "a finite number".into()
    }
    fn value_name(&self) -> &'static str {
        "X"
    }
    fn parse(&self, text: &str) -> Result<f64, String> {
        text.trim().parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(String::new)
    }
    fn parse_json(&self, v: &Value) -> Result<f64, String> {
        v.as_f64().filter(|x| x.is_finite()).ok_or_else(String::new)
    }
    fn to_json(&self, v: &f64) -> Value {
        // A whole number is written as an integer, so that 1000 reads back as it was given.
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            Value::from(*v as i64)
        } else {
            Value::from(*v)
        }
    }
}

/// One of a closed set of names (an enum of the library).
pub struct Choice<T: 'static> {
    pub all: &'static [T],
    pub name: fn(T) -> &'static str,
}

impl<T> Clone for Choice<T> {
    fn clone(&self) -> Self {
        Choice { all: self.all, name: self.name }
    }
}

impl<T: Copy + Send + Sync + 'static> Kind for Choice<T> {
    type Value = T;
    fn allowed(&self) -> String {
        let names: Vec<&str> = self.all.iter().map(|&v| (self.name)(v)).collect();
        format!("one of {}", names.join(", "))
    }
    fn value_name(&self) -> &'static str {
        "NAME"
    }
    fn parse(&self, text: &str) -> Result<T, String> {
        self.all.iter().copied().find(|&v| (self.name)(v) == text).ok_or_else(String::new)
    }
    fn to_json(&self, v: &T) -> Value {
        Value::from((self.name)(*v))
    }
}

/// A value written as text in its own syntax (a CPU list, an address, a URL, a schedule):
/// parsed and printed by the library that owns the syntax.
pub struct Text<T: 'static> {
    pub allowed: &'static str,
    pub value_name: &'static str,
    pub parse: fn(&str) -> Result<T, String>,
    pub show: fn(&T) -> String,
}

impl<T> Clone for Text<T> {
    fn clone(&self) -> Self {
        Text { allowed: self.allowed, value_name: self.value_name, parse: self.parse, show: self.show }
    }
}

impl<T: FromStr + fmt::Display + 'static> Text<T>
where
    T::Err: fmt::Display,
{
    /// Through the type's own `FromStr` and `Display`.
    pub fn of(allowed: &'static str, value_name: &'static str) -> Self {
        Text { allowed, value_name, parse: |s| s.parse::<T>().map_err(|e| e.to_string()), show: |v| v.to_string() }
    }
}

impl<T: 'static> Kind for Text<T> {
    type Value = T;
    fn allowed(&self) -> String {
        self.allowed.to_string()
    }
    fn value_name(&self) -> &'static str {
        self.value_name
    }
    fn parse(&self, text: &str) -> Result<T, String> {
        (self.parse)(text)
    }
    fn to_json(&self, v: &T) -> Value {
        Value::from((self.show)(v))
    }
}

/// A switch that is off unless its flag is given (`--busy-poll`); `true`/`false` in JSON.
#[derive(Clone, Copy)]
pub struct Flag;

/// A switch that is on unless `--no-NAME` is given (`--no-keep-alive`); `true`/`false` in JSON.
#[derive(Clone, Copy)]
pub struct NoFlag;

fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(String::new()),
    }
}

impl Kind for Flag {
    type Value = bool;
    fn allowed(&self) -> String {
        "true or false".into()
    }
    fn parse(&self, text: &str) -> Result<bool, String> {
        parse_bool(text)
    }
    fn parse_json(&self, v: &Value) -> Result<bool, String> {
        v.as_bool().ok_or_else(String::new)
    }
    fn to_json(&self, v: &bool) -> Value {
        Value::from(*v)
    }
    fn switch(&self) -> Option<bool> {
        Some(true)
    }
}

impl Kind for NoFlag {
    type Value = bool;
    fn allowed(&self) -> String {
        "true or false".into()
    }
    fn parse(&self, text: &str) -> Result<bool, String> {
        parse_bool(text)
    }
    fn parse_json(&self, v: &Value) -> Result<bool, String> {
        v.as_bool().ok_or_else(String::new)
    }
    fn to_json(&self, v: &bool) -> Value {
        Value::from(*v)
    }
    fn switch(&self) -> Option<bool> {
        Some(false)
    }
}
