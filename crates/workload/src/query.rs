//! Query-string parameters of the workloads. Each workload takes exactly one integer
//! parameter; parsing walks the query once, borrowing slices of it, and allocates only to
//! build an error (whose message names the parameter, the allowed values and what was sent).

use crate::WorkError;

/// Largest `/prime?n=`: the test divides by every integer below n (about 3 ns each), so 10^9
/// already costs a few seconds per request; larger values would hold a server thread for
/// hours and are almost certainly a typo.
pub const PRIME_MAX_N: u64 = 1_000_000_000;
/// Largest `/sort?n=`: 10 million integers is 40 MB of data plus 40 MB of scratch per request.
pub const SORT_MAX_N: u64 = 10_000_000;
/// Largest `/echo?size=` in bytes (64 MiB): the body is built in memory per request.
pub const ECHO_MAX_SIZE: u64 = 64 * 1024 * 1024;
/// Largest `/response?size=` in bytes (16 MiB: 167,773 insertion sorts, about a second).
pub const RESPONSE_MAX_SIZE: u64 = 16 * 1024 * 1024;

/// One integer parameter: its key, inclusive range, and the texts errors show. The texts are
/// `&'static str` because [`WorkError::BadParameter`] carries them; a unit test checks they
/// agree with `min`/`max`.
pub(crate) struct Param {
    pub(crate) name: &'static str,
    pub(crate) min: u64,
    pub(crate) max: u64,
    /// The range, for a missing, malformed or out-of-range value.
    pub(crate) allowed: &'static str,
    /// For a query that repeats the key.
    pub(crate) allowed_once: &'static str,
    /// For a query with any other key; reported with `name` = [`QUERY`].
    pub(crate) allowed_keys: &'static str,
}

/// The `name` reported for a query key that is not a parameter of the workload.
pub(crate) const QUERY: &str = "query";
/// The `value` reported for a parameter that is absent.
pub(crate) const MISSING: &str = "(missing)";

pub(crate) const PRIME_N: Param = Param {
    name: "n",
    min: 0,
    max: PRIME_MAX_N,
    allowed: "an integer in 0..=1000000000",
    allowed_once: "n exactly once, an integer in 0..=1000000000",
    allowed_keys: "only the key n (/prime?n=N)",
};

pub(crate) const SORT_N: Param = Param {
    name: "n",
    min: 1,
    max: SORT_MAX_N,
    allowed: "an integer in 1..=10000000",
    allowed_once: "n exactly once, an integer in 1..=10000000",
    allowed_keys: "only the key n (/sort?n=N)",
};

pub(crate) const ECHO_SIZE: Param = Param {
    name: "size",
    min: 0,
    max: ECHO_MAX_SIZE,
    allowed: "an integer in 0..=67108864 (bytes)",
    allowed_once: "size exactly once, an integer in 0..=67108864 (bytes)",
    allowed_keys: "only the key size (/echo?size=N)",
};

pub(crate) const RESPONSE_SIZE: Param = Param {
    name: "size",
    min: 0,
    max: RESPONSE_MAX_SIZE,
    allowed: "an integer in 0..=16777216 (bytes)",
    allowed_once: "size exactly once, an integer in 0..=16777216 (bytes)",
    allowed_keys: "only the key size (/response?size=N)",
};

pub(crate) const FILE_SIZE: Param = Param {
    name: "size",
    min: 0,
    max: crate::file::FILE_MAX_SIZE,
    allowed: "an integer in 0..=16777216 (bytes)",
    allowed_once: "size exactly once, an integer in 0..=16777216 (bytes)",
    allowed_keys: "only the key size (/file?size=N)",
};

pub(crate) const CALL_MS: Param = Param {
    name: "ms",
    min: 0,
    max: crate::call::DELAY_MAX_MS,
    allowed: "an integer in 0..=60000 (milliseconds)",
    allowed_once: "ms exactly once, an integer in 0..=60000 (milliseconds)",
    allowed_keys: "only the key ms (/call?ms=M)",
};

pub(crate) const DELAY_MS: Param = Param {
    name: "ms",
    min: 0,
    max: crate::call::DELAY_MAX_MS,
    allowed: "an integer in 0..=60000 (milliseconds)",
    allowed_once: "ms exactly once, an integer in 0..=60000 (milliseconds)",
    allowed_keys: "only the key ms (/delay?ms=M)",
};

pub(crate) const DB_ID: Param = Param {
    name: "id",
    min: 1,
    max: crate::db::DB_MAX_ID,
    allowed: "an integer in 1..=2147483647 (a row id)",
    allowed_once: "id exactly once, an integer in 1..=2147483647 (a row id)",
    allowed_keys: "only the key id (/db?id=N)",
};

/// `/program?name=P`: the one key `name`, a program name ([`crate::program::NAME_FORM`]).
pub(crate) fn program_name(query: &str) -> Result<crate::ProgramName, WorkError> {
    const ALLOWED: &str = "a program name of 1 to 64 characters of A-Z a-z 0-9 _ . -";
    let mut found: Option<&str> = None;
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "name" {
            return Err(WorkError::BadParameter {
                name: QUERY,
                value: pair.to_owned(),
                allowed: "only the key name (/program?name=P)",
            });
        }
        if found.is_some() {
            return Err(WorkError::BadParameter {
                name: "name",
                value: query.to_owned(),
                allowed: "name exactly once, a program name",
            });
        }
        found = Some(value);
    }
    let value = found.ok_or(WorkError::BadParameter { name: "name", value: MISSING.to_owned(), allowed: ALLOWED })?;
    crate::ProgramName::new(value).ok_or_else(|| WorkError::BadParameter {
        name: "name",
        value: value.to_owned(),
        allowed: ALLOWED,
    })
}

/// Decimal digits only (no sign, no spaces, no hex); `None` when malformed or over u64.
fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.bytes().try_fold(0u64, |acc, b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The value of the one parameter `p` in `query` (`k=v` pairs joined by '&').
pub(crate) fn single(query: &str, p: &Param) -> Result<u64, WorkError> {
    let bad =
        |value: &str, allowed: &'static str| WorkError::BadParameter { name: p.name, value: value.to_owned(), allowed };
    let mut found: Option<&str> = None;
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        // A bare key (`n`) has an empty value, reported as malformed below.
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != p.name {
            return Err(WorkError::BadParameter { name: QUERY, value: pair.to_owned(), allowed: p.allowed_keys });
        }
        if found.is_some() {
            return Err(bad(query, p.allowed_once));
        }
        found = Some(value);
    }
    let value = found.ok_or_else(|| bad(MISSING, p.allowed))?;
    match parse_decimal(value) {
        Some(n) if (p.min..=p.max).contains(&n) => Ok(n),
        _ => Err(bad(value, p.allowed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workload;

    fn err(path: &str, query: &str) -> (&'static str, String, &'static str) {
        match Workload::from_target(path, query) {
            Err(WorkError::BadParameter { name, value, allowed }) => (name, value, allowed),
            other => panic!("expected BadParameter for {path}?{query}, got {other:?}"),
        }
    }

    #[test]
    fn allowed_texts_match_ranges() {
        for p in [&PRIME_N, &SORT_N, &ECHO_SIZE, &RESPONSE_SIZE, &FILE_SIZE, &CALL_MS, &DELAY_MS, &DB_ID] {
            let range = format!("{}..={}", p.min, p.max);
            assert!(p.allowed.contains(&range), "{}", p.allowed);
            assert!(p.allowed_once.contains(&range) && p.allowed_once.starts_with(p.name), "{}", p.allowed_once);
            assert!(p.allowed_keys.contains(&format!("key {}", p.name)), "{}", p.allowed_keys);
        }
    }

    #[test]
    fn decimal_parsing() {
        assert_eq!(parse_decimal("0"), Some(0));
        assert_eq!(parse_decimal("007"), Some(7));
        assert_eq!(parse_decimal("18446744073709551615"), Some(u64::MAX));
        for bad in ["", "18446744073709551616", "-1", "+1", " 1", "1 ", "1e3", "0x10", "1.0", "١"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn valid_values_and_bounds() {
        assert_eq!(Workload::from_target("/prime", "n=0"), Ok(Workload::Prime { n: 0 }));
        assert_eq!(Workload::from_target("/prime", "n=1000000000"), Ok(Workload::Prime { n: crate::PRIME_MAX_N }));
        assert!(Workload::from_target("/prime", "n=1000000001").is_err());
        assert_eq!(Workload::from_target("/sort", "n=1"), Ok(Workload::Sort { n: 1 }));
        assert_eq!(Workload::from_target("/sort", "n=10000000"), Ok(Workload::Sort { n: 10_000_000 }));
        assert_eq!(Workload::from_target("/echo", "size=0"), Ok(Workload::Echo { size: 0 }));
        assert_eq!(Workload::from_target("/echo", "size=67108864"), Ok(Workload::Echo { size: 64 << 20 }));
        // Empty segments are tolerated.
        assert_eq!(Workload::from_target("/echo", "&size=5&"), Ok(Workload::Echo { size: 5 }));
    }

    #[test]
    fn out_of_range() {
        assert_eq!(err("/sort", "n=0"), ("n", "0".into(), SORT_N.allowed));
        assert_eq!(err("/sort", "n=10000001"), ("n", "10000001".into(), SORT_N.allowed));
        assert_eq!(err("/echo", "size=67108865"), ("size", "67108865".into(), ECHO_SIZE.allowed));
        assert_eq!(err("/prime", "n=18446744073709551616"), ("n", "18446744073709551616".into(), PRIME_N.allowed));
    }

    #[test]
    fn malformed_values() {
        for v in ["", "abc", "-5", "+5", "1.5", "5%20", "0x1f"] {
            assert_eq!(err("/prime", &format!("n={v}")), ("n", v.to_owned(), PRIME_N.allowed), "{v:?}");
        }
        assert_eq!(err("/echo", "size"), ("size", "".into(), ECHO_SIZE.allowed));
    }

    #[test]
    fn missing_parameter() {
        assert_eq!(err("/prime", ""), ("n", MISSING.into(), PRIME_N.allowed));
        assert_eq!(err("/echo", "&&"), ("size", MISSING.into(), ECHO_SIZE.allowed));
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert_eq!(err("/prime", "n=5&verbose=1"), (QUERY, "verbose=1".into(), PRIME_N.allowed_keys));
        // The classic typo: the workload would otherwise silently run with a default.
        assert_eq!(err("/echo", "sise=100"), (QUERY, "sise=100".into(), ECHO_SIZE.allowed_keys));
        assert_eq!(err("/sort", "N=5"), (QUERY, "N=5".into(), SORT_N.allowed_keys));
    }

    #[test]
    fn repeated_key_is_refused() {
        assert_eq!(err("/sort", "n=5&n=6"), ("n", "n=5&n=6".into(), SORT_N.allowed_once));
        assert_eq!(err("/sort", "n=5&n=5"), ("n", "n=5&n=5".into(), SORT_N.allowed_once));
    }

    #[test]
    fn messages_name_parameter_allowed_and_value() {
        let msg = Workload::from_target("/sort", "n=99999999").unwrap_err().to_string();
        assert_eq!(msg, "parameter n: got \"99999999\", allowed an integer in 1..=10000000");
        let msg = Workload::from_target("/echo", "").unwrap_err().to_string();
        assert_eq!(msg, "parameter size: got \"(missing)\", allowed an integer in 0..=67108864 (bytes)");
        let msg = Workload::from_target("/prime", "m=3").unwrap_err().to_string();
        assert_eq!(msg, "parameter query: got \"m=3\", allowed only the key n (/prime?n=N)");
    }
}
