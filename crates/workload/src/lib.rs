//! What a request costs: the workloads of the seeds, selected by a request's path and query and
//! executed by whichever server architecture is being measured.
//!
//! Each workload stresses one resource, with a cost fixed by its parameter, so that a
//! comparison of architectures measures how they schedule the same work: `/prime?n=N` is
//! CPU-bound (trial division by every integer below N, O(N), as seed 000's service does),
//! `/sort?n=N` is memory-bound (merge sort of N pseudo-random integers, the same N integers for
//! every request), `/echo?size=N` is I/O-bound (an N-byte response, or the request body echoed
//! back), `/response?size=N` is seed 001's response of N bytes whose computation grows with N
//! (one insertion sort of 100 integers per started 100 bytes), `/file?size=N` reads N bytes of
//! a file through the page cache, `/call?ms=M` blocks on a downstream HTTP service that answers
//! after M ms, `/delay?ms=M` is that downstream's side (sleep M ms), `/db?id=N` looks one
//! row up in PostgreSQL over the process's connection pool, and `/program?name=P` runs the
//! service program P (a sequence and loops of those steps, [`program`]) of the process's
//! program file. Selection ([`Workload::from_target`]) is strict and allocation-free on success:
//! unknown paths, missing, malformed, out-of-range, repeated or unknown parameters are errors
//! that name the parameter, the allowed values and the value received, because a silently
//! ignored typo would make a whole experiment measure the wrong thing. Execution
//! ([`Workload::execute`]) runs on the calling thread with that thread's [`Context`] (the
//! downstream address and connections of `/call`, the database pool of `/db`, the programs of
//! `/program`) and appends the
//! response body; the body always depends on the full computation so the compiler cannot skip
//! it. Only `/file`, `/call`, `/db` and `/program` can fail at run time (the file cannot be
//! created, the downstream or database is absent, broken or busy); the server answers those
//! with 503, and a `/db` id without a row or an unknown program with 404.

use std::fmt;

mod call;
mod db;
mod echo;
mod file;
mod pool;
mod prime;
pub mod program;
mod query;
pub mod response;
mod sort;
mod stream;
pub mod text_file;

pub use call::{Context, DELAY_MAX_MS};
pub use db::{
    DbConfig, DbPool, DB_MAX_ID, DB_POOL_DEFAULT, DB_POOL_MAX, DB_URL_FORM, DB_WAIT_DEFAULT_MS, DB_WAIT_MAX_MS,
    QUERY as DB_QUERY,
};
pub use file::{prepare as prepare_file, FILE_MAX_SIZE};
pub use program::{Program, ProgramError, ProgramName, ProgramSet, Step, PROGRAM_FILE_FORM};
pub use query::{ECHO_MAX_SIZE, PRIME_MAX_N, RESPONSE_MAX_SIZE, SORT_MAX_N};
pub use stream::BodyStream;

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
    /// `/response?size=N`: seed 001's N-byte response, one insertion sort of 100 integers per
    /// started 100 bytes (0.1 KiB = 102, 10 KiB = 10240, 100 KiB = 102400).
    Response { size: usize },
    /// `/file?size=N`: the first N bytes of the process's data file, buffered `pread`s.
    File { size: usize },
    /// `/call?ms=M`: a blocking `GET /delay?ms=M` to the downstream service.
    Call { ms: u64 },
    /// `/delay?ms=M`: sleep M ms on the calling thread (the downstream service's workload).
    Delay { ms: u64 },
    /// `/db?id=N`: the row with id N of table `emp`, through the process's connection pool.
    Db { id: u32 },
    /// `/program?name=P`: the service program P of the process's program file.
    Program { name: ProgramName },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkError {
    /// No workload lives at this path -> 404.
    UnknownPath { path: String },
    /// A parameter is missing, malformed or out of range -> 400.
    BadParameter { name: &'static str, value: String, allowed: &'static str },
    /// A resource the workload needs failed at run time (file, downstream, database) -> 503.
    Unavailable { workload: &'static str, reason: String },
    /// The request names something that does not exist (a `/db` id without a row) -> 404.
    NotFound { workload: &'static str, reason: String },
}

impl fmt::Display for WorkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::UnknownPath { path } => {
                write!(
                    f,
                    "no workload at {path:?} (known: /prime?n=, /sort?n=, /echo?size=, /response?size=, /file?size=, /call?ms=, /delay?ms=, /db?id=, /program?name=)"
                )
            }
            WorkError::BadParameter { name, value, allowed } => {
                write!(f, "parameter {name}: got {value:?}, allowed {allowed}")
            }
            WorkError::Unavailable { workload, reason } => write!(f, "{workload} unavailable: {reason}"),
            WorkError::NotFound { workload, reason } => write!(f, "{workload}: {reason}"),
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
            "/response" => Ok(Workload::Response { size: query::single(query, &query::RESPONSE_SIZE)? as usize }),
            "/file" => Ok(Workload::File { size: query::single(query, &query::FILE_SIZE)? as usize }),
            "/call" => Ok(Workload::Call { ms: query::single(query, &query::CALL_MS)? }),
            "/delay" => Ok(Workload::Delay { ms: query::single(query, &query::DELAY_MS)? }),
            // The cast cannot truncate: the maximum is i32::MAX.
            "/db" => Ok(Workload::Db { id: query::single(query, &query::DB_ID)? as u32 }),
            "/program" => Ok(Workload::Program { name: query::program_name(query)? }),
            _ => Err(WorkError::UnknownPath { path: path.to_owned() }),
        }
    }

    /// The body of this request as a [`BodyStream`], produced in parts, for the workloads whose
    /// body can be large (`/echo` without a request body, `/response`, `/file`); None for the
    /// others (their bodies are short, or an echoed request body that is already in memory).
    /// The parts make exactly the body [`Workload::execute`] appends.
    pub fn body_stream(&self, request_body: &[u8]) -> Option<BodyStream> {
        match *self {
            Workload::Echo { size } if request_body.is_empty() => Some(BodyStream::pattern(size)),
            Workload::Response { size } => Some(BodyStream::rounds(size)),
            Workload::File { size } => Some(BodyStream::file(size)),
            _ => None,
        }
    }

    /// Do the work and append the response body to `out`. `request_body` is the request's body
    /// (echoed by `Echo` when non-empty); `ctx` is the calling thread's [`Context`].
    ///
    /// Bodies: Prime writes `true` or `false`; Sort writes one line
    /// `n=N min=A median=B max=C checksum=0x...`; Echo
    /// writes the request body if there is one, else `size` bytes of `abc...zabc...`; Response
    /// writes `size` lower-case letters; File writes `size` bytes of `abc...`; Call writes the
    /// downstream's body; Delay writes `slept M ms`; Db writes the row as
    /// `{"id":N,"firstName":"..."}`. On an error `out` is left as it was.
    pub fn execute(&self, ctx: &mut Context, request_body: &[u8], out: &mut Vec<u8>) -> Result<(), WorkError> {
        match *self {
            Workload::Prime { n } => {
                let (is_prime, _divisions) = prime::trial_division(n);
                out.extend_from_slice(if is_prime { b"true" } else { b"false" });
            }
            Workload::Sort { n } => sort::run(n, out),
            Workload::Echo { size } => echo::run(size, request_body, out),
            Workload::Response { size } => response::run(size, out),
            Workload::File { size } => {
                file::run(size, out).map_err(|reason| WorkError::Unavailable { workload: "/file", reason })?
            }
            Workload::Call { ms } => {
                let start = out.len();
                call::call(ms, ctx, out).map_err(|reason| {
                    out.truncate(start);
                    WorkError::Unavailable { workload: "/call", reason }
                })?
            }
            Workload::Delay { ms } => call::delay(ms, out),
            Workload::Db { id } => match ctx.db() {
                Some(pool) => pool.lookup(id, out)?,
                None => {
                    return Err(WorkError::Unavailable {
                        workload: "/db",
                        reason: "no database (start the server with --db postgresql://USER@HOST:PORT/DBNAME)".into(),
                    })
                }
            },
            Workload::Program { name } => {
                // Cloned out of the context (one reference count) so that the run can use the
                // context's connections mutably while it reads the program.
                let Some(programs) = ctx.programs().cloned() else {
                    return Err(WorkError::Unavailable {
                        workload: "/program",
                        reason: "no programs (start the server with --programs FILE)".into(),
                    });
                };
                let Some(program) = programs.get(name.as_str()) else {
                    let known: Vec<&str> = programs.iter().map(|p| p.name.as_str()).take(20).collect();
                    let more = if programs.len() > known.len() { ", ..." } else { "" };
                    return Err(WorkError::NotFound {
                        workload: "/program",
                        reason: format!(
                            "no program named {:?} in {} (known: {}{more})",
                            name.as_str(),
                            programs.source(),
                            known.join(", ")
                        ),
                    });
                };
                program::run(program, ctx, out)?
            }
        }
        Ok(())
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
            Workload::Response { size } => write!(f, "/response?size={size}"),
            Workload::File { size } => write!(f, "/file?size={size}"),
            Workload::Call { ms } => write!(f, "/call?ms={ms}"),
            Workload::Delay { ms } => write!(f, "/delay?ms={ms}"),
            Workload::Db { id } => write!(f, "/db?id={id}"),
            Workload::Program { name } => write!(f, "/program?name={name}"),
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
        Workload::from_target(path, query).unwrap().execute(&mut Context::default(), body, &mut out).unwrap();
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
            Workload::Response { size: 102400 },
            Workload::File { size: 1 },
            Workload::Call { ms: 60_000 },
            Workload::Delay { ms: 0 },
            Workload::Db { id: 1 },
            Workload::Db { id: i32::MAX as u32 },
            Workload::Program { name: ProgramName::new("db_2").unwrap() },
            Workload::Program { name: ProgramName::new(&"a.B-9_".repeat(11)[..64]).unwrap() },
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
        assert_eq!(run("/response?size=102400", b"").len(), 102400);
        assert_eq!(run("/file?size=30", b""), b"abcdefghijklmnopqrstuvwxyzabcd");
        assert_eq!(run("/delay?ms=1", b""), b"slept 1 ms");
    }

    #[test]
    fn call_without_downstream_is_unavailable_and_leaves_out_alone() {
        let mut out = b">".to_vec();
        let e = Workload::Call { ms: 1 }.execute(&mut Context::default(), b"", &mut out).unwrap_err();
        assert!(matches!(e, WorkError::Unavailable { workload: "/call", .. }), "{e}");
        assert!(e.to_string().contains("--downstream HOST:PORT"), "{e}");
        assert_eq!(out, b">");
    }

    #[test]
    fn db_without_a_database_is_unavailable_and_leaves_out_alone() {
        let mut out = b">".to_vec();
        let e = Workload::Db { id: 1 }.execute(&mut Context::default(), b"", &mut out).unwrap_err();
        assert!(matches!(e, WorkError::Unavailable { workload: "/db", .. }), "{e}");
        assert!(e.to_string().contains("--db postgresql://"), "{e}");
        assert_eq!(out, b">");
    }

    #[test]
    fn db_ids_are_postgres_integers() {
        assert_eq!(Workload::from_target("/db", "id=42"), Ok(Workload::Db { id: 42 }));
        let e = Workload::from_target("/db", "id=0").unwrap_err().to_string();
        assert_eq!(e, "parameter id: got \"0\", allowed an integer in 1..=2147483647 (a row id)");
        assert!(Workload::from_target("/db", "id=2147483648").is_err());
        let e = Workload::from_target("/db", "rows=5").unwrap_err().to_string();
        assert_eq!(e, "parameter query: got \"rows=5\", allowed only the key id (/db?id=N)");
    }

    #[test]
    fn new_workloads_refuse_bad_parameters() {
        let e = Workload::from_target("/call", "ms=60001").unwrap_err().to_string();
        assert_eq!(e, "parameter ms: got \"60001\", allowed an integer in 0..=60000 (milliseconds)");
        let e = Workload::from_target("/response", "n=5").unwrap_err().to_string();
        assert_eq!(e, "parameter query: got \"n=5\", allowed only the key size (/response?size=N)");
        assert!(Workload::from_target("/file", "size=16777217").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_valid_workload_round_trips(
            w in proptest::prop_oneof![
                (0..=PRIME_MAX_N).prop_map(|n| Workload::Prime { n }),
                (1..=SORT_MAX_N as usize).prop_map(|n| Workload::Sort { n }),
                (0..=ECHO_MAX_SIZE as usize).prop_map(|size| Workload::Echo { size }),
                (0..=RESPONSE_MAX_SIZE as usize).prop_map(|size| Workload::Response { size }),
                (0..=FILE_MAX_SIZE as usize).prop_map(|size| Workload::File { size }),
                (0..=DELAY_MAX_MS).prop_map(|ms| Workload::Call { ms }),
                (1..=DB_MAX_ID as u32).prop_map(|id| Workload::Db { id }),
            ]
        ) {
            let target = w.to_string();
            let (path, query) = target.split_once('?').unwrap();
            proptest::prop_assert_eq!(Workload::from_target(path, query), Ok(w));
        }

        #[test]
        fn arbitrary_targets_never_panic(path in "\\PC{0,12}", query in "[a-z0-9=&%+-]{0,24}|\\PC{0,24}") {
            let _ = Workload::from_target(&path, &query);
            for p in ["/prime", "/sort", "/echo", "/response", "/file", "/call", "/delay", "/db", "/program"] {
                if let Err(WorkError::BadParameter { value, .. }) = Workload::from_target(p, &query) {
                    // The value reported is what was received (or the whole query, or "(missing)").
                    proptest::prop_assert!(query.contains(value.as_str()) || value == "(missing)");
                }
            }
        }
    }

    #[test]
    fn program_names_are_checked_when_selected() {
        let e = Workload::from_target("/program", "name=a b").unwrap_err().to_string();
        assert_eq!(e, "parameter name: got \"a b\", allowed a program name of 1 to 64 characters of A-Z a-z 0-9 _ . -");
        assert!(Workload::from_target("/program", &format!("name={}", "x".repeat(65))).is_err());
        assert!(Workload::from_target("/program", "").unwrap_err().to_string().contains("(missing)"));
        let e = Workload::from_target("/program", "name=a&name=b").unwrap_err().to_string();
        assert!(e.contains("name exactly once"), "{e}");
        let e = Workload::from_target("/program", "program=a").unwrap_err().to_string();
        assert_eq!(e, "parameter query: got \"program=a\", allowed only the key name (/program?name=P)");
    }

    #[test]
    fn programs_are_found_by_name_or_refused() {
        let w = Workload::from_target("/program", "name=fast").unwrap();
        let mut out = Vec::new();
        let e = w.execute(&mut Context::default(), b"", &mut out).unwrap_err();
        assert!(matches!(e, WorkError::Unavailable { workload: "/program", .. }), "{e}");
        assert!(e.to_string().contains("--programs FILE"), "{e}");
        let set = ProgramSet::parse("p.toml", "programs.slow.steps = [{ step = \"prime\", n = 7 }]").unwrap();
        let mut ctx = Context::default().with_programs(Some(set));
        let e = w.execute(&mut ctx, b"", &mut out).unwrap_err();
        assert_eq!(e.to_string(), "/program: no program named \"fast\" in p.toml (known: slow)");
        assert!(matches!(e, WorkError::NotFound { .. }));
        Workload::from_target("/program", "name=slow").unwrap().execute(&mut ctx, b"", &mut out).unwrap();
        assert!(out.starts_with(br#"{"program":"slow","steps":1,"#), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn execute_appends() {
        let mut out = b">".to_vec();
        Workload::Prime { n: 4 }.execute(&mut Context::default(), b"", &mut out).unwrap();
        assert_eq!(out, b">false");
    }
}
