//! Value parsers shared by the subcommands: durations ("2s", "500ms", "1m", "1.5") and CPU lists.

use std::time::Duration;

/// Parse a duration: a number with an optional unit `ns`, `us`, `ms`, `s`, `m` (default `s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
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
        other => return Err(format!("{s:?}: unknown unit {other:?} (allowed: ns, us, ms, s, m)")),
    };
    Ok(Duration::from_secs_f64(value * scale))
}

pub fn parse_cpus(s: &str) -> Result<archlab_netio::CpuList, String> {
    s.parse().map_err(|e: archlab_netio::CpuListError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("3h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("-1").is_err());
    }
}
