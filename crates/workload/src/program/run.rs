//! Executing a program on the calling thread: each step does the work of the URL workload of
//! the same name (the same code), in order, loops unrolled. The body is one JSON line naming
//! the program, the steps executed and an FNV-1a checksum over every step's output, so every
//! computation, row and downstream answer is observable and none can be skipped.

use super::{Program, Step};
use crate::{call, prime, sort, Context, WorkError};
use std::time::Duration;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

struct Run<'a> {
    program: &'a Program,
    /// Output of the current step, folded into `checksum` after it.
    scratch: Vec<u8>,
    checksum: u64,
    executed: u64,
    /// Indices of the step being run, outermost first (for error messages).
    path: Vec<usize>,
}

/// Run `program`, appending its body to `out` (left as it was on an error).
pub(crate) fn run(program: &Program, ctx: &mut Context, out: &mut Vec<u8>) -> Result<(), WorkError> {
    let mut r = Run { program, scratch: Vec::with_capacity(256), checksum: FNV_OFFSET, executed: 0, path: Vec::new() };
    r.steps(&program.steps, ctx)?;
    out.extend_from_slice(
        format!("{{\"program\":\"{}\",\"steps\":{},\"checksum\":\"0x{:016x}\"}}", program.name, r.executed, r.checksum)
            .as_bytes(),
    );
    Ok(())
}

impl Run<'_> {
    fn steps(&mut self, steps: &[Step], ctx: &mut Context) -> Result<(), WorkError> {
        for (i, step) in steps.iter().enumerate() {
            self.path.push(i);
            self.step(step, ctx)?;
            self.path.pop();
        }
        Ok(())
    }

    fn step(&mut self, step: &Step, ctx: &mut Context) -> Result<(), WorkError> {
        self.scratch.clear();
        match step {
            Step::Prime { n } => {
                let (is_prime, _) = prime::trial_division(*n);
                self.scratch.push(u8::from(is_prime));
            }
            Step::Sort { n } => sort::run(*n, &mut self.scratch),
            Step::Db { id } => match ctx.db() {
                Some(pool) => pool.lookup(*id, &mut self.scratch).map_err(|e| self.failed(step, e))?,
                None => {
                    let reason = "no database (start the server with --db postgresql://USER@HOST:PORT/DBNAME)";
                    return Err(self.unavailable(step, reason.into()));
                }
            },
            Step::Call { ms } => call::call(*ms, ctx, &mut self.scratch).map_err(|e| self.unavailable(step, e))?,
            Step::FanOut { ms } => call::fan_out(ms, ctx, &mut self.scratch).map_err(|e| self.unavailable(step, e))?,
            Step::Sleep { ms } => std::thread::sleep(Duration::from_millis(*ms)),
            Step::Repeat { times, steps } => {
                for _ in 0..*times {
                    self.steps(steps, ctx)?;
                }
                return Ok(());
            }
        }
        self.executed += 1;
        for &b in &self.scratch {
            self.checksum = (self.checksum ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        // A step without output (a sleep) still changes the checksum: its position counts.
        self.checksum = (self.checksum ^ 0xff).wrapping_mul(FNV_PRIME);
        Ok(())
    }

    /// `steps[2].steps[0]`: where the failing step is.
    fn where_(&self) -> String {
        self.path.iter().map(|i| format!("steps[{i}]")).collect::<Vec<_>>().join(".")
    }

    fn unavailable(&self, step: &Step, reason: String) -> WorkError {
        WorkError::Unavailable {
            workload: "/program",
            reason: format!("program {}, {} ({}): {reason}", self.program.name, self.where_(), step.kind()),
        }
    }

    /// A step's own error, with the program and step in front.
    fn failed(&self, step: &Step, e: WorkError) -> WorkError {
        let prefix = format!("program {}, {} ({})", self.program.name, self.where_(), step.kind());
        match e {
            WorkError::NotFound { reason, .. } => {
                WorkError::NotFound { workload: "/program", reason: format!("{prefix}: {reason}") }
            }
            WorkError::Unavailable { reason, .. } => self.unavailable(step, reason),
            other => WorkError::Unavailable { workload: "/program", reason: format!("{prefix}: {other}") },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ProgramSet;
    use super::*;

    fn program(text: &str) -> ProgramSet {
        ProgramSet::parse("t.toml", text).unwrap()
    }

    fn body(set: &ProgramSet, name: &str, ctx: &mut Context) -> Result<String, WorkError> {
        let mut out = b">".to_vec();
        let r = run(set.get(name).unwrap(), ctx, &mut out);
        let text = String::from_utf8(out).unwrap();
        r.map(|()| text[1..].to_owned()).inspect_err(|_| {
            assert_eq!(text, ">", "out is left alone on an error");
        })
    }

    #[test]
    fn cpu_steps_run_in_loops_and_the_checksum_sees_every_result() {
        let set = program(
            r#"
            [programs.a]
            steps = [{ step = "repeat", times = 3, steps = [{ step = "prime", n = 27059 }, { step = "sort", n = 10 }] }]
            [programs.b]
            steps = [{ step = "repeat", times = 3, steps = [{ step = "prime", n = 27057 }, { step = "sort", n = 10 }] }]
            "#,
        );
        let mut ctx = Context::default();
        let a = body(&set, "a", &mut ctx).unwrap();
        assert!(a.starts_with(r#"{"program":"a","steps":6,"checksum":"0x"#), "{a}");
        // Same work, same body; a prime that is not prime changes the checksum.
        assert_eq!(a, body(&set, "a", &mut ctx).unwrap());
        let b = body(&set, "b", &mut ctx).unwrap();
        assert_ne!(a[a.find("checksum").unwrap()..], b[b.find("checksum").unwrap()..]);
    }

    #[test]
    fn steps_that_need_a_service_name_the_step_when_it_is_missing() {
        let set = program(
            r#"programs.p.steps = [{ step = "sleep", ms = 0 }, { step = "repeat", times = 2, steps = [{ step = "call", ms = 1 }] }]
            programs.q.steps = [{ step = "db", id = 1 }]
            programs.f.steps = [{ step = "fanout", ms = [1, 1] }]"#,
        );
        let mut ctx = Context::default();
        let e = body(&set, "p", &mut ctx).unwrap_err();
        assert!(matches!(e, WorkError::Unavailable { workload: "/program", .. }), "{e}");
        assert!(
            e.to_string().starts_with("/program unavailable: program p, steps[1].steps[0] (call): no downstream"),
            "{e}"
        );
        let e = body(&set, "q", &mut ctx).unwrap_err().to_string();
        assert!(e.contains("program q, steps[0] (db): no database (start the server with --db"), "{e}");
        let e = body(&set, "f", &mut ctx).unwrap_err().to_string();
        assert!(e.contains("program f, steps[0] (fanout): no downstream"), "{e}");
    }
}
