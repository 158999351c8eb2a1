//! Value parsers shared by the subcommands: durations ("2s", "500ms", "1m", "1.5") and the JSON
//! documents of `--options` and `--params`.

/// Parse a duration: a number with an optional unit `ns`, `us`, `ms`, `s`, `m` (default `s`).
/// The load library owns the syntax, so that spec files and flags read durations alike.
pub use archlab_load::parse_duration;

/// The text of a JSON document given to `--options`/`--params`: a file, or `-` for stdin.
pub fn read_document(option: &str, path: &std::path::Path) -> Result<String, crate::CliError> {
    let read =
        if path.as_os_str() == "-" { std::io::read_to_string(std::io::stdin()) } else { std::fs::read_to_string(path) };
    read.map_err(|e| crate::CliError::usage(format!("invalid --{option} {}: cannot read it ({e})", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
