//! Durations as people write them: a number with an optional unit `ns`, `us`, `ms`, `s` or `m`
//! (`10s`, `500ms`, `1.5`, `2m`; a bare number is seconds). The one parser of that syntax for
//! the load generator's flags and JSON, schedules, think times, and (through `archlab._native`)
//! experiment specs; [`format_duration`] writes a duration back in it, exactly.

use archlab_options::Kind;
use serde_json::Value;
use std::time::Duration;

const UNITS: &str = "ns, us, ms, s, m";

/// Seconds of a duration as written: the number times its unit's scale, in f64 (exactly the
/// product, before any rounding to nanoseconds, so that a spec's seconds never change).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 =
        num.trim().parse().map_err(|_| format!("{s:?} is not a duration (expected e.g. 10s, 500ms, 2m, 1.5)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{s:?}: a duration must be a finite number >= 0"));
    }
    let scale = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "" | "s" => 1.0,
        "m" => 60.0,
        other => return Err(format!("{s:?}: unknown unit {other:?} (allowed: {UNITS})")),
    };
    Ok(value * scale)
}

/// A duration as written, to the nearest nanosecond.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    duration_of(parse_seconds(s)?).ok_or_else(|| format!("{s:?}: a duration too long to represent"))
}

/// `seconds` to the nearest nanosecond; `None` when negative, not finite or too long.
pub fn duration_of(seconds: f64) -> Option<Duration> {
    let ns = seconds * 1e9;
    // Rounded, not truncated: 7 * 1e-9 s is a hair under 7 ns in binary.
    (ns >= 0.0 && ns < u64::MAX as f64).then(|| Duration::from_nanos(ns.round() as u64))
}

/// The allowed form of a duration, for messages.
pub const DURATION_SYNTAX: &str = "a duration such as 10s, 500ms, 2m or a number of seconds";

/// Durations as an option kind: the syntax above in flags and JSON strings, a JSON number as
/// seconds; written back by [`format_duration`].
#[derive(Clone, Copy)]
pub struct Period;

impl Kind for Period {
    type Value = Duration;
    fn allowed(&self) -> String {
        DURATION_SYNTAX.into()
    }
    fn value_name(&self) -> &'static str {
        "DURATION"
    }
    fn parse(&self, text: &str) -> Result<Duration, String> {
        parse_duration(text)
    }
    fn parse_json(&self, v: &Value) -> Result<Duration, String> {
        match v {
            Value::String(s) => parse_duration(s),
            Value::Number(n) => n.as_f64().and_then(duration_of).ok_or_else(String::new),
            _ => Err(String::new()),
        }
    }
    fn to_json(&self, v: &Duration) -> Value {
        Value::from(format_duration(*v))
    }
}

/// `d` in the largest unit that writes it exactly (`1500ms`, `3s`, `250us`, `7ns`), which
/// [`parse_duration`] reads back as `d`.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    match ns {
        0 => "0s".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration(" 250us ").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("3h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("100000000000000000000000s").unwrap_err().contains("too long"));
    }

    #[test]
    fn seconds_are_the_product_of_number_and_unit() {
        // 9 * 0.001 is not 9 / 1000 in binary floating point; specs hash the former.
        assert_eq!(parse_seconds("9ms").unwrap(), 9.0 * 1e-3);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
    }

    #[test]
    fn formatting_reads_back_exactly() {
        for ns in [0, 7, 1_000, 250_000, 1_500_000, 3_000_000_000, 123_456_789, 86_400_000_000_000, 999_999_999] {
            let d = Duration::from_nanos(ns);
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d, "{}", format_duration(d));
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(3)), "3s");
    }
}
