//! What a request costs: the workloads of the seeds, selected by a request's path and query and
//! executed by whichever server architecture is being measured.
//!
//! Each workload stresses one resource, with a cost fixed by its parameter, so that a
//! comparison of architectures measures how they schedule the same work: `/prime?n=N` is
//! CPU-bound (trial division by every integer below N, O(N), as seed 000's service does),
//! `/sort?n=N` is memory-bound (merge sort of N pseudo-random integers, the same N integers for
//! every request), `/echo?size=N` is I/O-bound (an N-byte response, or the request body echoed
//! back). Selection ([`Workload::from_target`]) is strict and allocation-free on success:
//! unknown paths, missing, malformed, out-of-range, repeated or unknown parameters are errors
//! that name the parameter, the allowed values and the value received, because a silently
//! ignored typo would make a whole experiment measure the wrong thing. Execution
//! ([`Workload::execute`]) runs on the calling thread and appends the response body; the body
//! always depends on the full computation so the compiler cannot skip it.

use std::fmt;

mod echo;
mod prime;
mod query;
mod sort;

pub use query::{ECHO_MAX_SIZE, PRIME_MAX_N, SORT_MAX_N};

/// The work one request asks for; constant per request, chosen by path and query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `/prime?n=N`: trial-division primality test of N (CPU-bound). Cost is O(N) divisions for
    /// a prime N (and up to the smallest divisor for a composite one): N = 1e9 takes seconds.
    Prime { n: u64 },
    /// `/sort?n=N`: merge sort of N pseudo-random 32-bit integers (memory-bound).
    Sort { n: usize },
    /// `/echo?size=N`: a response body of N bytes (I/O-bound); a POST body is echoed back.
    Echo { size: usize },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkError {
    /// No workload lives at this path -> 404.
    UnknownPath { path: String },
    /// A parameter is missing, malformed or out of range -> 400.
    BadParameter { name: &'static str, value: String, allowed: &'static str },
}

impl fmt::Display for WorkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::UnknownPath { path } => {
                write!(f, "no workload at {path:?} (known: /prime?n=, /sort?n=, /echo?size=)")
            }
            WorkError::BadParameter { name, value, allowed } => {
                write!(f, "parameter {name}: got {value:?}, allowed {allowed}")
            }
        }
    }
}

impl std::error::Error for WorkError {}

impl Workload {
    /// Select the workload from a request's path and query (without '?').
    ///
    /// - `/prime?n=N`, N any u64 (0 and 1 are answered `false`);
    /// - `/sort?n=N`, N in 1..=[`SORT_MAX_N`];
    /// - `/echo?size=N`, N in 0..=[`ECHO_MAX_SIZE`] bytes.
    ///
    /// The one parameter is required, must be plain decimal digits and must appear once; any
    /// other key is refused as a probable typo. Empty segments (`n=5&`) are tolerated.
    pub fn from_target(path: &str, query: &str) -> Result<Workload, WorkError> {
        match path {
            "/prime" => Ok(Workload::Prime { n: query::single(query, &query::PRIME_N)? }),
            // The casts cannot truncate: both maxima fit in 32 bits.
            "/sort" => Ok(Workload::Sort { n: query::single(query, &query::SORT_N)? as usize }),
            "/echo" => Ok(Workload::Echo { size: query::single(query, &query::ECHO_SIZE)? as usize }),
            _ => Err(WorkError::UnknownPath { path: path.to_owned() }),
        }
    }

    /// Do the work and append the response body to `out`. `request_body` is the request's body
    /// (echoed by `Echo` when non-empty).
    ///
    /// Bodies: Prime writes `true` or `false`; Sort writes one line
    /// `n=N min=A median=B max=C checksum=0x...`; Echo
    /// writes the request body if there is one, else `size` bytes of `abc...zabc...`.
    pub fn execute(&self, request_body: &[u8], out: &mut Vec<u8>) {
        match *self {
            Workload::Prime { n } => {
                let (is_prime, _divisions) = prime::trial_division(n);
                out.extend_from_slice(if is_prime { b"true" } else { b"false" });
            }
            Workload::Sort { n } => sort::run(n, out),
            Workload::Echo { size } => echo::run(size, request_body, out),
        }
    }
}

/// The request target selecting this workload, e.g. `/prime?n=27059`; the inverse of
/// [`Workload::from_target`] (what the load generator sends).
impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Prime { n } => write!(f, "/prime?n={n}"),
            Workload::Sort { n } => write!(f, "/sort?n={n}"),
            Workload::Echo { size } => write!(f, "/echo?size={size}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn run(target: &str, body: &[u8]) -> Vec<u8> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut out = Vec::new();
        Workload::from_target(path, query).unwrap().execute(body, &mut out);
        out
    }

    #[test]
    fn selects_by_path() {
        assert_eq!(Workload::from_target("/prime", "n=27059"), Ok(Workload::Prime { n: 27059 }));
        assert_eq!(Workload::from_target("/sort", "n=1000"), Ok(Workload::Sort { n: 1000 }));
        assert_eq!(Workload::from_target("/echo", "size=10"), Ok(Workload::Echo { size: 10 }));
    }

    #[test]
    fn unknown_path() {
        for path in ["/", "/primes", "/Prime", "/prime/", "", "prime"] {
            let e = Workload::from_target(path, "n=1").unwrap_err();
            assert_eq!(e, WorkError::UnknownPath { path: path.to_owned() });
            assert!(e.to_string().contains("/prime?n="), "{e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for w in [
            Workload::Prime { n: 0 },
            Workload::Prime { n: PRIME_MAX_N },
            Workload::Sort { n: 1 },
            Workload::Echo { size: 0 },
        ] {
            let target = w.to_string();
            let (path, query) = target.split_once('?').unwrap();
            assert_eq!(Workload::from_target(path, query), Ok(w));
        }
    }

    #[test]
    fn execute_bodies() {
        assert_eq!(run("/prime?n=27059", b""), b"true");
        assert_eq!(run("/prime?n=27057", b""), b"false");
        assert_eq!(run("/echo?size=3", b""), b"abc");
        assert_eq!(run("/echo?size=3", b"posted"), b"posted");
        let sorted = String::from_utf8(run("/sort?n=5", b"")).unwrap();
        assert!(sorted.starts_with("n=5 min="), "{sorted}");
    }

    proptest::proptest! {
        #[test]
        fn any_valid_workload_round_trips(
            w in proptest::prop_oneof![
                (0..=PRIME_MAX_N).prop_map(|n| Workload::Prime { n }),
                (1..=SORT_MAX_N as usize).prop_map(|n| Workload::Sort { n }),
                (0..=ECHO_MAX_SIZE as usize).prop_map(|size| Workload::Echo { size }),
            ]
        ) {
            let target = w.to_string();
            let (path, query) = target.split_once('?').unwrap();
            proptest::prop_assert_eq!(Workload::from_target(path, query), Ok(w));
        }

        #[test]
        fn arbitrary_targets_never_panic(path in "\\PC{0,12}", query in "[a-z0-9=&%+-]{0,24}|\\PC{0,24}") {
            let _ = Workload::from_target(&path, &query);
            for p in ["/prime", "/sort", "/echo"] {
                if let Err(WorkError::BadParameter { value, .. }) = Workload::from_target(p, &query) {
                    // The value reported is what was received (or the whole query, or "(missing)").
                    proptest::prop_assert!(query.contains(value.as_str()) || value == "(missing)");
                }
            }
        }
    }

    #[test]
    fn execute_appends() {
        let mut out = b">".to_vec();
        Workload::Prime { n: 4 }.execute(b"", &mut out);
        assert_eq!(out, b">false");
    }
}
