//! Value parsers shared by the subcommands: durations ("2s", "500ms", "1m", "1.5"), CPU lists, and
//! the JSON documents of `--options` and `--params`.

/// Parse a duration: a number with an optional unit `ns`, `us`, `ms`, `s`, `m` (default `s`).
/// The load library owns the syntax, so that spec files and flags read durations alike.
pub use archlab_load::parse_duration;

/// The text of a JSON document given to `--options`/`--params`: a file, or `-` for stdin.
pub fn read_document(option: &str, path: &std::path::Path) -> Result<String, crate::CliError> {
    use archlab_workload::text_file::{read_bounded, read_text, MAX_TEXT_FILE_BYTES};
    let read =
        if path.as_os_str() == "-" { read_bounded(std::io::stdin(), MAX_TEXT_FILE_BYTES) } else { read_text(path) };
    read.map_err(|e| crate::CliError::usage(format!("invalid --{option} {}: cannot read it ({e})", path.display())))
}

/// A CPU list of this machine (`0,2-3`), for the subcommands whose options are not an option set
/// (`link`, `middleware`).
pub fn parse_cpus(s: &str) -> Result<archlab_netio::CpuList, String> {
    s.parse().map_err(|e: archlab_netio::CpuListError| e.to_string())
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
