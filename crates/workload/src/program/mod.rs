//! Service programs, the `/program?name=P` workload: a request runs a small named program, a
//! sequence of steps -- CPU work (`prime`, `sort`), a PostgreSQL lookup (`db`, the `/db`
//! machinery), a blocking downstream call (`call`, the `/call` machinery), a fan-out of
//! downstream calls (`fanout`), a sleep (`sleep`) -- and bounded loops of steps (`repeat`).
//! This is seed 003's family of service programs (database calls, HTTP connector calls,
//! non-blocking gRPC calls and loops containing them), written as data so that a sweep can vary
//! the program and the pool independently, and so that features are read from the same tree
//! the server executes ([`Program::steps`], exposed to Python by `archlab._native`).
//!
//! Where a request blocks: every step runs on the thread the architecture gave the request, so
//! a program holds that thread (one slot of the pool) from its first step to its last, whether
//! it computes, waits for PostgreSQL (and first for a connection of the process's `/db` pool),
//! or waits for the downstream. A `fanout` step is the thread-pool reading of seed 003's
//! *non-blocking* gRPC calls: in Ballerina the calling strand does not keep a thread while a
//! non-blocking call is outstanding; in a thread-per-request server the closest honest
//! equivalent is to issue the step's calls together (each on its own keep-alive connection)
//! and await them together, so the thread is held once for the slowest call instead of for
//! the sum. A fire-and-forget call (never awaited) would take the call out of the measured
//! latency altogether, and its load out of the closed loop, so it is not offered.
//!
//! Programs are declared in a TOML program file ([`ProgramSet::load`], format in
//! [`parse`]) that `archlab-engine serve --programs FILE` reads once at start-up; every bound
//! is checked there (unknown steps and keys, loops without a bound or over
//! [`REPEAT_MAX_TIMES`], more than [`STEPS_PER_REQUEST_MAX`] steps per request), with errors
//! naming the file, program, step path and key, so a running server never meets a bad program.

mod parse;
mod run;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub use parse::{ProgramError, PROGRAM_FILE_FORM};

/// Largest `times` of a `repeat` step.
pub const REPEAT_MAX_TIMES: u64 = 1000;
/// Deepest nesting of `repeat` steps.
pub const NESTING_MAX: usize = 8;
/// Most calls of one `fanout` step (each needs a connection of its own per server thread).
pub const FANOUT_MAX_CALLS: usize = 64;
/// Most steps one request may execute, loops unrolled: bounds a request's cost.
pub const STEPS_PER_REQUEST_MAX: u64 = 100_000;
/// Longest program name, in bytes (`[A-Za-z0-9_.-]`).
pub const NAME_MAX_LEN: usize = 64;

/// One step of a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// CPU: trial-division primality test of `n` (as `/prime?n=`), O(n).
    Prime { n: u64 },
    /// CPU and memory: merge sort of `n` integers (as `/sort?n=`).
    Sort { n: usize },
    /// Blocking I/O: the row `id` of table `emp` (as `/db?id=`), through the process's pool.
    Db { id: u32 },
    /// Blocking I/O: one downstream call answered after `ms` (as `/call?ms=`).
    Call { ms: u64 },
    /// Non-blocking calls: issued together, awaited together (the thread waits for the slowest).
    FanOut { ms: Vec<u64> },
    /// The thread sleeps `ms`.
    Sleep { ms: u64 },
    /// `steps`, `times` times.
    Repeat { times: u64, steps: Vec<Step> },
}

impl Step {
    /// The step's name in program files.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Prime { .. } => "prime",
            Step::Sort { .. } => "sort",
            Step::Db { .. } => "db",
            Step::Call { .. } => "call",
            Step::FanOut { .. } => "fanout",
            Step::Sleep { .. } => "sleep",
            Step::Repeat { .. } => "repeat",
        }
    }

    /// Steps executed by one run of this step, loops unrolled (a `repeat` counts its body only).
    pub fn executed_steps(&self) -> u64 {
        match self {
            Step::Repeat { times, steps } => times.saturating_mul(executed_steps(steps)),
            _ => 1,
        }
    }
}

/// Steps executed by one run of `steps`, loops unrolled.
pub fn executed_steps(steps: &[Step]) -> u64 {
    steps.iter().fold(0u64, |acc, s| acc.saturating_add(s.executed_steps()))
}

/// A named program: what one `/program?name=P` request executes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub steps: Vec<Step>,
}

/// The programs of one program file, by name; cheap to clone (shared by every server thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramSet {
    inner: Arc<Loaded>,
}

#[derive(Debug, PartialEq, Eq)]
struct Loaded {
    /// The file as it was named (for messages and for writing the option back).
    source: String,
    programs: BTreeMap<String, Program>,
}

impl ProgramSet {
    /// Read and check a program file.
    pub fn load(path: &std::path::Path) -> Result<ProgramSet, ProgramError> {
        let source = path.display().to_string();
        let text = crate::text_file::read_text(path).map_err(|e| ProgramError::unreadable(&source, &e))?;
        ProgramSet::parse(&source, &text)
    }

    /// Check the programs of `text`, a program file's contents; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<ProgramSet, ProgramError> {
        let programs = parse::programs(source, text)?;
        Ok(ProgramSet { inner: Arc::new(Loaded { source: source.to_owned(), programs }) })
    }

    /// The file the programs came from, as it was named.
    pub fn source(&self) -> String {
        self.inner.source.clone()
    }

    pub fn get(&self, name: &str) -> Option<&Program> {
        self.inner.programs.get(name)
    }

    /// Programs in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Program> {
        self.inner.programs.values()
    }

    pub fn len(&self) -> usize {
        self.inner.programs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.programs.is_empty()
    }

    /// The programs as JSON, the tree a feature extractor walks: `{"source": FILE, "programs":
    /// [{"name": P, "steps": [{"step": "call", "ms": 5}, {"step": "repeat", "times": 3,
    /// "steps": [...]}, ...]}, ...]}`, the same keys as the file.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        s.push_str("{\"source\":");
        json_string(&mut s, &self.inner.source);
        s.push_str(",\"programs\":[");
        for (i, p) in self.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"name\":");
            json_string(&mut s, &p.name);
            s.push_str(",\"steps\":");
            steps_json(&mut s, &p.steps);
            s.push('}');
        }
        s.push_str("]}");
        s
    }
}

fn steps_json(s: &mut String, steps: &[Step]) {
    s.push('[');
    for (i, step) in steps.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{{\"step\":\"{}\"", step.kind()));
        match step {
            Step::Prime { n } => s.push_str(&format!(",\"n\":{n}")),
            Step::Sort { n } => s.push_str(&format!(",\"n\":{n}")),
            Step::Db { id } => s.push_str(&format!(",\"id\":{id}")),
            Step::Call { ms } | Step::Sleep { ms } => s.push_str(&format!(",\"ms\":{ms}")),
            Step::FanOut { ms } => {
                let list: Vec<String> = ms.iter().map(u64::to_string).collect();
                s.push_str(&format!(",\"ms\":[{}]", list.join(",")));
            }
            Step::Repeat { times, steps } => {
                s.push_str(&format!(",\"times\":{times},\"steps\":"));
                steps_json(s, steps);
            }
        }
        s.push('}');
    }
    s.push(']');
}

fn json_string(s: &mut String, text: &str) {
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
}

/// A program's name as a request carries it: `[A-Za-z0-9_.-]`, 1..=[`NAME_MAX_LEN`] bytes,
/// stored inline so that [`crate::Workload`] stays `Copy` and selection allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ProgramName {
    len: u8,
    bytes: [u8; NAME_MAX_LEN],
}

/// The allowed program names, for messages.
pub const NAME_FORM: &str = "1 to 64 characters of A-Z a-z 0-9 _ . -";

impl ProgramName {
    pub fn new(name: &str) -> Option<ProgramName> {
        let ok = !name.is_empty()
            && name.len() <= NAME_MAX_LEN
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !ok {
            return None;
        }
        let mut bytes = [0u8; NAME_MAX_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Some(ProgramName { len: name.len() as u8, bytes })
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (checked in `new`).
        std::str::from_utf8(&self.bytes[..self.len as usize]).expect("ASCII")
    }
}

impl fmt::Debug for ProgramName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for ProgramName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) use run::run;
