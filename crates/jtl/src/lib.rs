//! archlab-jtl: JMeter CSV results (JTL) read straight into exact counts of one measure.
//!
//! The file is read front to back in fixed blocks (no mmap, so resident memory stays at the
//! block plus the counters whatever the file's size); each row is split only as far as the
//! columns the query needs ([`rows`]), its measure parsed (whole milliseconds without going
//! through a float parser) and counted ([`counts`]). Every row lands in exactly one category,
//! in the order DuckDB's reader of `archlab.latency` decides them, so the two readers agree
//! row for row: malformed (rejected by the splitter, or its measure -- or its timeStamp when
//! trimming -- not a number >= 0), another label, failed (by the `success` column and
//! [`Failed`]), trimmed (warm-up/cool-down by timeStamp, measured from the first and last
//! timeStamp of the file's well-formed rows: a first pass when trimming), else kept. Layout
//! detection, header naming and the refusal of files that are not JTL stay in Python; this
//! crate gets the layout as column positions.

pub mod counts;
pub mod rows;

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use counts::ValueCounts;
use rows::{Cut, Splitter};

/// Bytes read at a time: large enough that a read call costs nothing per row, small enough to
/// stay in the L2/L3 caches.
const BLOCK_BYTES: usize = 1 << 20;

/// Which samples count, by JMeter's `success` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Successful samples only; failed ones are counted apart.
    Exclude,
    /// Every sample.
    Include,
    /// Failed samples only; successful ones are counted apart.
    Only,
}

/// The layout of the rows and what to count.
#[derive(Clone, Debug)]
pub struct Query {
    /// Fields per row.
    pub columns: usize,
    /// The first row names the columns (it is skipped).
    pub header: bool,
    /// Column of the measure (elapsed, Latency or Connect).
    pub measure: usize,
    /// Column of `success`, required unless `failed` is [`Failed::Include`].
    pub success: Option<usize>,
    pub failed: Failed,
    /// Column of `label` and the labels to keep (None: every label).
    pub labels: Option<(usize, Vec<Vec<u8>>)>,
    /// Column of `timeStamp` (epoch ms) with the warm-up and cool-down to trim, in ms.
    pub trim: Option<(usize, f64, f64)>,
    /// Read only the first `end` bytes (the complete lines of a file cut by a killed JMeter).
    pub end: Option<u64>,
}

/// What a read found: rows by category, the first malformed row in words, the kept values.
#[derive(Debug, Default, PartialEq)]
pub struct Found {
    pub rows: u64,
    pub failed: u64,
    pub other_labels: u64,
    pub trimmed: u64,
    pub malformed: u64,
    /// "line N: why" of the first malformed row.
    pub first_problem: Option<String>,
    pub values: Vec<f64>,
    pub counts: Vec<u64>,
}

/// Count `query`'s measure over the rows of the file at `path`.
pub fn read(path: &Path, query: &Query) -> io::Result<Found> {
    let window = match query.trim {
        Some((column, warmup_ms, cooldown_ms)) => {
            let (first, last) = timestamp_range(path, query, column)?;
            Some((column, first + warmup_ms, last - cooldown_ms))
        }
        None => None,
    };
    let mut found = Found::default();
    let mut values = ValueCounts::default();
    let wanted = wanted_columns(query);
    scan(path, query, wanted, |splitter, row, line, cut| {
        found.rows += 1;
        if let Err(why) = cut.outcome {
            return malformed(&mut found, line, why.describe(query.columns));
        }
        let field = |i: usize| splitter.field(row, i);
        let Some(v) = field(query.measure).as_deref().and_then(parse_number).filter(|v| *v >= 0.0) else {
            let shown = field(query.measure).map(|b| String::from_utf8_lossy(&b).into_owned());
            return malformed(
                &mut found,
                line,
                format!("measure {:?} is not a number >= 0", shown.unwrap_or_default()),
            );
        };
        let t = window.map(|(column, ..)| field(column).as_deref().and_then(parse_number));
        if t == Some(None) {
            return malformed(&mut found, line, String::from("timeStamp is not a number"));
        }
        if let Some((column, labels)) = &query.labels {
            if !field(*column).is_some_and(|l| labels.iter().any(|x| x[..] == l[..])) {
                found.other_labels += 1;
                return;
            }
        }
        if query.failed != Failed::Include {
            let column = query.success.expect("a success column unless every sample counts");
            let succeeded = field(column).is_some_and(|b| b.trim_ascii().eq_ignore_ascii_case(b"true"));
            if succeeded != (query.failed == Failed::Exclude) {
                found.failed += 1;
                return;
            }
        }
        if let (Some((_, from, to)), Some(Some(t))) = (window, t) {
            if t < from || t > to {
                found.trimmed += 1;
                return;
            }
        }
        values.add(v);
    })?;
    (found.values, found.counts) = values.into_sorted();
    Ok(found)
}

fn malformed(found: &mut Found, line: u64, why: String) {
    found.malformed += 1;
    if found.first_problem.is_none() {
        found.first_problem = Some(format!("line {line}: {why}"));
    }
}

/// The first and last timeStamp of the well-formed rows (NaN when none has one).
fn timestamp_range(path: &Path, query: &Query, column: usize) -> io::Result<(f64, f64)> {
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    scan(path, query, column + 1, |splitter, row, _, cut| {
        if cut.outcome.is_ok() {
            if let Some(t) = splitter.field(row, column).as_deref().and_then(parse_number) {
                first = first.min(t);
                last = last.max(t);
            }
        }
    })?;
    Ok((first, last))
}

/// Columns the splitter must locate: up to the last one the query reads.
fn wanted_columns(query: &Query) -> usize {
    let mut last = query.measure;
    if query.failed != Failed::Include {
        last = last.max(query.success.unwrap_or(0));
    }
    if let Some((c, _)) = &query.labels {
        last = last.max(*c);
    }
    if let Some((c, ..)) = query.trim {
        last = last.max(c);
    }
    last + 1
}

/// A number as DuckDB's `TRY_CAST(x AS DOUBLE)` reads it: digits only (the JMeter case) without
/// a float parser, else Rust's parser on the trimmed text; None when not a finite number.
#[inline]
fn parse_number(bytes: &[u8]) -> Option<f64> {
    if !bytes.is_empty() && bytes.len() <= 15 && bytes.iter().all(u8::is_ascii_digit) {
        return Some(bytes.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')) as f64);
    }
    let text = std::str::from_utf8(bytes.trim_ascii()).ok()?;
    text.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Call `visit(splitter, row bytes, line number, cut)` for every row after the header.
fn scan(
    path: &Path,
    query: &Query,
    wanted: usize,
    mut visit: impl FnMut(&Splitter, &[u8], u64, &Cut),
) -> io::Result<()> {
    let file = File::open(path)?;
    let mut input = file.take(query.end.unwrap_or(u64::MAX));
    let mut splitter = Splitter::new(query.columns, wanted);
    let mut buf = vec![0u8; BLOCK_BYTES];
    let (mut filled, mut at_end) = (0, false);
    let mut line = 1u64;
    let mut skip_header = query.header;
    let mut first_block = true;
    loop {
        while !at_end && filled < buf.len() {
            let n = input.read(&mut buf[filled..])?;
            at_end = n == 0;
            filled += n;
        }
        let mut start = 0;
        if first_block {
            first_block = false;
            if buf[..filled].starts_with(b"\xef\xbb\xbf") {
                start = 3; // a UTF-8 byte order mark
            }
        }
        while start < filled {
            let rest = &buf[start..filled];
            if rest[0] == b'\n' || rest.starts_with(b"\r\n") {
                // An empty line is no row (DuckDB skips them too).
                start += if rest[0] == b'\n' { 1 } else { 2 };
                line += 1;
                continue;
            }
            let Some(cut) = splitter.cut(rest, at_end) else { break };
            if skip_header {
                skip_header = false;
            } else {
                visit(&splitter, rest, line, &cut);
            }
            line += cut.lines as u64;
            start += cut.len;
        }
        if at_end && start >= filled {
            return Ok(());
        }
        // Keep the unfinished row; grow the block when one row fills it.
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
    }
}
