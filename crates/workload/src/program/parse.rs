//! Program files: TOML text -> checked [`Program`]s, or one error naming the file, the field
//! (program, step path, key), the allowed values and the value received.
//!
//! ```toml
//! # Each program is a table under `programs`; its `steps` run in order.
//! [programs.db_2]
//! steps = [{ step = "db", id = 1 }, { step = "db", id = 2 }]
//!
//! [programs.http_loop_grpc]
//! steps = [
//!   { step = "prime", n = 10007 },                                 # CPU: trial division
//!   { step = "repeat", times = 3, steps = [{ step = "call", ms = 5 }] },   # a loop of calls
//!   { step = "fanout", ms = [5, 5, 10] },                          # non-blocking calls
//!   { step = "sleep", ms = 1 },
//! ]
//! ```
//!
//! Steps and their keys: `prime` (`n`), `sort` (`n`), `db` (`id`), `call` (`ms`), `fanout`
//! (`ms`, a list), `sleep` (`ms`), `repeat` (`times`, `steps`). The ranges are those of the URL
//! workloads of the same names; everything else is refused rather than ignored, because a
//! silently skipped step would make a whole sweep measure another program.

use super::{executed_steps, Program, ProgramName, Step};
use super::{FANOUT_MAX_CALLS, NAME_FORM, NESTING_MAX, REPEAT_MAX_TIMES, STEPS_PER_REQUEST_MAX};
use crate::call::DELAY_MAX_MS;
use crate::db::DB_MAX_ID;
use crate::query::{PRIME_MAX_N, SORT_MAX_N};
use std::collections::BTreeMap;
use std::fmt;
use toml::{Table, Value};

/// What a program file is, for messages and `--help`.
pub const PROGRAM_FILE_FORM: &str = "a TOML program file of [programs.NAME] tables, each with steps = [...]";

const STEP_KINDS: &str = "one of prime, sort, db, call, fanout, sleep, repeat";

/// A refused program file: `FILE: FIELD: got RECEIVED, allowed ALLOWED`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramError {
    /// The file as it was named.
    pub source: String,
    /// Where in the file: `programs.NAME.steps[2].ms`, or `line L, column C` for bad TOML.
    pub field: String,
    pub allowed: String,
    pub received: String,
}

impl ProgramError {
    pub(crate) fn unreadable(source: &str, e: &std::io::Error) -> ProgramError {
        ProgramError {
            source: source.to_owned(),
            field: "(file)".into(),
            allowed: "a readable UTF-8 text file".into(),
            received: e.to_string(),
        }
    }
}

impl fmt::Display for ProgramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: got {}, allowed {}", self.source, self.field, self.received, self.allowed)
    }
}

impl std::error::Error for ProgramError {}

struct Ctx<'a> {
    source: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &str, allowed: impl Into<String>, received: impl Into<String>) -> ProgramError {
        ProgramError {
            source: self.source.to_owned(),
            field: field.to_owned(),
            allowed: allowed.into(),
            received: received.into(),
        }
    }
}

/// How a TOML value is shown in an error: short, on one line.
fn shown(v: &Value) -> String {
    let text = match v {
        Value::String(s) => format!("{s:?}"),
        Value::Table(_) => "a table".into(),
        Value::Array(a) if a.len() > 8 => format!("a list of {} values", a.len()),
        Value::Array(a) => format!("[{}]", a.iter().map(shown).collect::<Vec<_>>().join(", ")),
        Value::Integer(n) => n.to_string(),
        Value::Float(x) => format!("{x:?}"),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
    };
    let text = text.replace('\n', " ");
    if text.len() > 80 {
        format!(
            "{}...",
            &text[..text.char_indices().take_while(|(i, _)| *i < 77).last().map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        text
    }
}

pub(super) fn programs(source: &str, text: &str) -> Result<BTreeMap<String, Program>, ProgramError> {
    let cx = Ctx { source };
    let doc: Table = text.parse().map_err(|e: toml::de::Error| {
        let field = match e.span() {
            Some(span) => {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!("line {line}, column {column}")
            }
            None => "(document)".into(),
        };
        cx.err(&field, "a TOML document", e.message().replace('\n', " "))
    })?;
    for key in doc.keys() {
        if key != "programs" {
            return Err(cx.err(key, "only the table programs at the top level", format!("{key:?}")));
        }
    }
    let Some(table) = doc.get("programs") else {
        return Err(cx.err("programs", "a table of programs ([programs.NAME] with steps = [...])", "(missing)"));
    };
    let Value::Table(table) = table else {
        return Err(cx.err("programs", "a table of programs ([programs.NAME])", shown(table)));
    };
    if table.is_empty() {
        return Err(cx.err("programs", "at least one program", "an empty table"));
    }
    let mut out = BTreeMap::new();
    for (name, value) in table {
        let field = format!("programs.{name}");
        if ProgramName::new(name).is_none() {
            return Err(cx.err(&field, format!("a program name of {NAME_FORM}"), format!("{name:?}")));
        }
        let Value::Table(p) = value else {
            return Err(cx.err(&field, "a table with steps = [...]", shown(value)));
        };
        for key in p.keys() {
            if key != "steps" {
                return Err(cx.err(&format!("{field}.{key}"), "only the key steps", format!("{key:?}")));
            }
        }
        let steps_field = format!("{field}.steps");
        let steps = match p.get("steps") {
            None => return Err(cx.err(&steps_field, "a list of steps", "(missing)")),
            Some(v) => steps(&cx, &steps_field, v, 0)?,
        };
        let executed = executed_steps(&steps);
        if executed > STEPS_PER_REQUEST_MAX {
            return Err(cx.err(
                &steps_field,
                format!("at most {STEPS_PER_REQUEST_MAX} steps per request, loops unrolled"),
                format!("{executed} steps"),
            ));
        }
        out.insert(name.clone(), Program { name: name.clone(), steps });
    }
    Ok(out)
}

fn steps(cx: &Ctx<'_>, field: &str, v: &Value, depth: usize) -> Result<Vec<Step>, ProgramError> {
    let Value::Array(list) = v else {
        return Err(cx.err(field, "a list of steps", shown(v)));
    };
    if list.is_empty() {
        return Err(cx.err(field, "at least one step", "an empty list"));
    }
    list.iter().enumerate().map(|(i, s)| step(cx, &format!("{field}[{i}]"), s, depth)).collect()
}

fn step(cx: &Ctx<'_>, field: &str, v: &Value, depth: usize) -> Result<Step, ProgramError> {
    let Value::Table(t) = v else {
        return Err(cx.err(field, "a step table such as { step = \"call\", ms = 5 }", shown(v)));
    };
    let kind = match t.get("step") {
        None => return Err(cx.err(&format!("{field}.step"), STEP_KINDS, "(missing)")),
        Some(Value::String(s)) => s.as_str(),
        Some(other) => return Err(cx.err(&format!("{field}.step"), STEP_KINDS, shown(other))),
    };
    let keys: &[&str] = match kind {
        "prime" | "sort" => &["n"],
        "db" => &["id"],
        "call" | "fanout" | "sleep" => &["ms"],
        "repeat" => &["times", "steps"],
        other => return Err(cx.err(&format!("{field}.step"), STEP_KINDS, format!("{other:?}"))),
    };
    for key in t.keys().filter(|k| *k != "step") {
        if !keys.contains(&key.as_str()) {
            let allowed = format!("only the keys step, {} of a {kind} step", keys.join(", "));
            return Err(cx.err(&format!("{field}.{key}"), allowed, format!("{key:?}")));
        }
    }
    let int = |key: &str, min: u64, max: u64, unit: &str| -> Result<u64, ProgramError> {
        let f = format!("{field}.{key}");
        let allowed = format!("an integer in {min}..={max}{unit}");
        match t.get(key) {
            None => Err(cx.err(&f, allowed, "(missing)")),
            Some(Value::Integer(n)) if (min as i128..=max as i128).contains(&(*n as i128)) => Ok(*n as u64),
            Some(other) => Err(cx.err(&f, allowed, shown(other))),
        }
    };
    Ok(match kind {
        "prime" => Step::Prime { n: int("n", 0, PRIME_MAX_N, "")? },
        // The cast cannot truncate: SORT_MAX_N fits in 32 bits.
        "sort" => Step::Sort { n: int("n", 1, SORT_MAX_N, "")? as usize },
        // The cast cannot truncate: DB_MAX_ID is i32::MAX.
        "db" => Step::Db { id: int("id", 1, DB_MAX_ID, " (a row id)")? as u32 },
        "call" => Step::Call { ms: int("ms", 0, DELAY_MAX_MS, " (milliseconds)")? },
        "sleep" => Step::Sleep { ms: int("ms", 0, DELAY_MAX_MS, " (milliseconds)")? },
        "fanout" => {
            let f = format!("{field}.ms");
            let allowed = format!("a list of 1 to {FANOUT_MAX_CALLS} integers in 0..={DELAY_MAX_MS} (milliseconds)");
            let list = match t.get("ms") {
                None => return Err(cx.err(&f, allowed, "(missing)")),
                Some(Value::Array(a)) if !a.is_empty() && a.len() <= FANOUT_MAX_CALLS => a,
                Some(other) => return Err(cx.err(&f, allowed, shown(other))),
            };
            let mut ms = Vec::with_capacity(list.len());
            for (i, x) in list.iter().enumerate() {
                match x {
                    Value::Integer(n) if (0..=DELAY_MAX_MS as i64).contains(n) => ms.push(*n as u64),
                    other => {
                        let allowed = format!("an integer in 0..={DELAY_MAX_MS} (milliseconds)");
                        return Err(cx.err(&format!("{f}[{i}]"), allowed, shown(other)));
                    }
                }
            }
            Step::FanOut { ms }
        }
        "repeat" => {
            let times = int("times", 1, REPEAT_MAX_TIMES, " (a loop needs a bound)")?;
            if depth + 1 > NESTING_MAX {
                return Err(cx.err(
                    &format!("{field}.steps"),
                    format!("repeat steps nested at most {NESTING_MAX} deep"),
                    format!("depth {}", depth + 1),
                ));
            }
            let f = format!("{field}.steps");
            let body = match t.get("steps") {
                None => return Err(cx.err(&f, "a list of steps", "(missing)")),
                Some(v) => steps(cx, &f, v, depth + 1)?,
            };
            Step::Repeat { times, steps: body }
        }
        _ => unreachable!("kinds are matched above"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::ProgramSet;
    use super::*;

    fn load(text: &str) -> Result<ProgramSet, ProgramError> {
        ProgramSet::parse("p.toml", text)
    }

    fn refusal(text: &str) -> String {
        load(text).unwrap_err().to_string()
    }

    #[test]
    fn a_program_with_every_step_parses_in_order() {
        let set = load(
            r#"
            [programs.all]
            steps = [
              { step = "prime", n = 10007 },
              { step = "sort", n = 1000 },
              { step = "db", id = 42 },
              { step = "call", ms = 5 },
              { step = "fanout", ms = [5, 10] },
              { step = "sleep", ms = 0 },
              { step = "repeat", times = 3, steps = [{ step = "call", ms = 1 }, { step = "db", id = 1 }] },
            ]
            [programs.b]
            steps = [{ step = "sleep", ms = 1 }]
            "#,
        )
        .unwrap();
        assert_eq!(set.len(), 2);
        let p = set.get("all").unwrap();
        assert_eq!(
            p.steps,
            vec![
                Step::Prime { n: 10007 },
                Step::Sort { n: 1000 },
                Step::Db { id: 42 },
                Step::Call { ms: 5 },
                Step::FanOut { ms: vec![5, 10] },
                Step::Sleep { ms: 0 },
                Step::Repeat { times: 3, steps: vec![Step::Call { ms: 1 }, Step::Db { id: 1 }] },
            ]
        );
        // 6 plain steps + 3 x 2 in the loop.
        assert_eq!(executed_steps(&p.steps), 12);
        assert_eq!(set.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["all", "b"]);
    }

    #[test]
    fn the_json_tree_has_the_file_keys() {
        let set = load(
            r#"[programs.x]
            steps = [{ step = "fanout", ms = [1, 2] }, { step = "repeat", times = 2, steps = [{ step = "db", id = 3 }] }]"#,
        )
        .unwrap();
        assert_eq!(
            set.to_json(),
            r#"{"source":"p.toml","programs":[{"name":"x","steps":[{"step":"fanout","ms":[1,2]},{"step":"repeat","times":2,"steps":[{"step":"db","id":3}]}]}]}"#
        );
    }

    #[test]
    fn unknown_steps_and_keys_are_refused_by_name() {
        assert_eq!(
            refusal(r#"programs.p.steps = [{ step = "sleep", ms = 1 }, { step = "cal", ms = 5 }]"#),
            "p.toml: programs.p.steps[1].step: got \"cal\", allowed one of prime, sort, db, call, fanout, sleep, repeat"
        );
        assert_eq!(
            refusal(r#"programs.p.steps = [{ step = "call", msec = 5 }]"#),
            "p.toml: programs.p.steps[0].msec: got \"msec\", allowed only the keys step, ms of a call step"
        );
        assert_eq!(
            refusal(r#"programs.p.steps = [{ ms = 5 }]"#),
            "p.toml: programs.p.steps[0].step: got (missing), allowed one of prime, sort, db, call, fanout, sleep, repeat"
        );
        assert_eq!(
            refusal("[programs.p]\nsteps = [{ step = \"db\", id = 1 }]\nthreads = 4"),
            "p.toml: programs.p.threads: got \"threads\", allowed only the key steps"
        );
        assert!(refusal("[program.p]\nsteps = []")
            .starts_with("p.toml: program: got \"program\", allowed only the table programs"));
    }

    #[test]
    fn loops_need_a_bound_within_the_limit() {
        let nested = r#"programs.p.steps = [{ step = "repeat", times = 2, steps = [{ step = "repeat", steps = [{ step = "db", id = 1 }] }] }]"#;
        assert_eq!(
            refusal(nested),
            "p.toml: programs.p.steps[0].steps[0].times: got (missing), allowed an integer in 1..=1000 (a loop needs a bound)"
        );
        let over = r#"programs.p.steps = [{ step = "repeat", times = 1001, steps = [{ step = "db", id = 1 }] }]"#;
        assert!(refusal(over).ends_with("times: got 1001, allowed an integer in 1..=1000 (a loop needs a bound)"));
        let zero = r#"programs.p.steps = [{ step = "repeat", times = 0, steps = [{ step = "db", id = 1 }] }]"#;
        assert!(refusal(zero).contains("times: got 0"));
        // 1000 x 1000 = 10^6 steps per request: each loop is within its bound, the product is not.
        let product = r#"programs.p.steps = [{ step = "repeat", times = 1000, steps = [{ step = "repeat", times = 1000, steps = [{ step = "sleep", ms = 0 }] }] }]"#;
        assert_eq!(
            refusal(product),
            "p.toml: programs.p.steps: got 1000000 steps, allowed at most 100000 steps per request, loops unrolled"
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let mut inner = r#"{ step = "sleep", ms = 0 }"#.to_string();
        for _ in 0..=NESTING_MAX {
            inner = format!(r#"{{ step = "repeat", times = 1, steps = [{inner}] }}"#);
        }
        let e = refusal(&format!("programs.p.steps = [{inner}]"));
        assert!(e.contains("allowed repeat steps nested at most 8 deep"), "{e}");
    }

    #[test]
    fn values_out_of_range_name_the_key() {
        assert_eq!(
            refusal(r#"programs.p.steps = [{ step = "call", ms = 60001 }]"#),
            "p.toml: programs.p.steps[0].ms: got 60001, allowed an integer in 0..=60000 (milliseconds)"
        );
        assert_eq!(
            refusal(r#"programs.p.steps = [{ step = "db", id = 0 }]"#),
            "p.toml: programs.p.steps[0].id: got 0, allowed an integer in 1..=2147483647 (a row id)"
        );
        assert!(refusal(r#"programs.p.steps = [{ step = "sort", n = "10" }]"#).contains("steps[0].n: got \"10\""));
        assert!(refusal(r#"programs.p.steps = [{ step = "prime", n = -1 }]"#).contains("steps[0].n: got -1"));
        assert!(refusal(r#"programs.p.steps = [{ step = "fanout", ms = [] }]"#).contains("steps[0].ms: got []"));
        assert_eq!(
            refusal(r#"programs.p.steps = [{ step = "fanout", ms = [1, 1.5] }]"#),
            "p.toml: programs.p.steps[0].ms[1]: got 1.5, allowed an integer in 0..=60000 (milliseconds)"
        );
        let wide = format!("programs.p.steps = [{{ step = \"fanout\", ms = [{}] }}]", vec!["1"; 65].join(","));
        assert!(refusal(&wide).contains("got a list of 65 values, allowed a list of 1 to 64 integers"));
    }

    #[test]
    fn names_and_shapes_are_checked() {
        assert!(refusal(r#"programs."a b".steps = [{ step = "db", id = 1 }]"#)
            .starts_with("p.toml: programs.a b: got \"a b\", allowed a program name of 1 to 64"));
        assert_eq!(
            refusal("programs.p.steps = []"),
            "p.toml: programs.p.steps: got an empty list, allowed at least one step"
        );
        assert_eq!(refusal("[programs]"), "p.toml: programs: got an empty table, allowed at least one program");
        assert!(refusal("").starts_with("p.toml: programs: got (missing)"));
        assert!(refusal("programs = 3").starts_with("p.toml: programs: got 3,"));
        assert!(refusal("[programs.p]").starts_with("p.toml: programs.p.steps: got (missing)"));
    }

    #[test]
    fn toml_syntax_errors_say_where_on_one_line() {
        let e = refusal("[programs.p]\nsteps = [{ step = \"db\", id = 1 }\n");
        assert!(e.starts_with("p.toml: line "), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("allowed a TOML document"), "{e}");
    }
}
