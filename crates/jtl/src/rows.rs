//! Splitting JMeter CSV rows into fields: comma-separated, `"` quotes around a field that holds
//! commas, quotes (doubled) or line breaks, lines ended by `\n` or `\r\n`. The common row has no
//! quote at all; it is split on its commas found by `memchr` (SIMD) with no per-byte state, and
//! only a row with a quote goes through the quote-aware path. A row is malformed (rejected as a
//! whole, as DuckDB's CSV reader rejects it) when its field count differs from the layout's,
//! a quote is left open, a closing quote is followed by anything but a separator, or its bytes
//! are not UTF-8.

use memchr::{memchr, memchr2, memchr_iter};
use std::borrow::Cow;

/// Where one field lies in its row, and how to read it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    /// Quoted with doubled quotes inside: the bytes need unescaping.
    pub escaped: bool,
    /// Unquoted and empty: SQL's NULL, as DuckDB reads it.
    pub null: bool,
}

/// Why a row was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Fields found, against the layout's count.
    FieldCount(usize),
    UnclosedQuote,
    TextAfterQuote,
    NotUtf8,
}

impl Rejection {
    pub fn describe(self, expected: usize) -> String {
        match self {
            Rejection::FieldCount(found) => format!("expected {expected} fields, got {found}"),
            Rejection::UnclosedQuote => String::from("a quoted field is never closed"),
            Rejection::TextAfterQuote => String::from("text follows a closing quote"),
            Rejection::NotUtf8 => String::from("bytes that are not UTF-8"),
        }
    }
}

/// One row cut from the buffer: the bytes it spans (its line end included), how many line
/// breaks it holds, and either its fields or why it was rejected.
pub struct Cut {
    pub len: usize,
    pub lines: usize,
    pub outcome: Result<(), Rejection>,
}

/// A splitter for rows of `columns` fields that records the spans of the first `wanted` fields.
pub struct Splitter {
    columns: usize,
    pub spans: Vec<Span>,
}

impl Splitter {
    pub fn new(columns: usize, wanted: usize) -> Self {
        Splitter { columns, spans: vec![Span::default(); wanted.min(columns)] }
    }

    /// Cut the row at the start of `buf`. None when the row may go on past `buf` and more input
    /// follows (`at_end` false); at the end of the input the row ends with the buffer.
    pub fn cut(&mut self, buf: &[u8], at_end: bool) -> Option<Cut> {
        let newline = memchr(b'\n', buf);
        let line_end = match newline {
            Some(i) => i,
            None if at_end => buf.len(),
            None => return None,
        };
        let line = &buf[..line_end];
        if memchr(b'"', line).is_none() {
            let len = newline.map_or(buf.len(), |i| i + 1);
            let outcome = self.split_plain(trim_cr(line));
            return Some(Cut { len, lines: 1, outcome });
        }
        self.split_quoted(buf, at_end)
    }

    /// A line without quotes: fields between commas.
    fn split_plain(&mut self, line: &[u8]) -> Result<(), Rejection> {
        let wanted = self.spans.len();
        let mut commas = memchr_iter(b',', line);
        let (mut start, mut field) = (0, 0);
        let mut ended = false; // the last field has been recorded
        while field < wanted {
            let end = match commas.next() {
                Some(end) => end,
                None => {
                    ended = true;
                    line.len()
                }
            };
            self.spans[field] = Span { start, end, escaped: false, null: start == end };
            field += 1;
            start = end + 1;
            if ended {
                break;
            }
        }
        let found = if ended { field } else { field + commas.count() + 1 };
        if found != self.columns {
            return Err(Rejection::FieldCount(found));
        }
        if !line.is_ascii() && std::str::from_utf8(line).is_err() {
            return Err(Rejection::NotUtf8);
        }
        Ok(())
    }

    /// A row with quotes, which may hold line breaks inside quoted fields.
    fn split_quoted(&mut self, buf: &[u8], at_end: bool) -> Option<Cut> {
        let wanted = self.spans.len();
        let mut i = 0;
        let mut field = 0;
        loop {
            let span;
            let after;
            if buf.get(i) == Some(&b'"') {
                let mut j = i + 1;
                let mut escaped = false;
                let close = loop {
                    match memchr(b'"', &buf[j..]) {
                        Some(k) if buf.get(j + k + 1) == Some(&b'"') => {
                            escaped = true;
                            j += k + 2;
                        }
                        Some(k) if j + k + 1 == buf.len() && !at_end => return None,
                        Some(k) => break j + k,
                        None if at_end => {
                            return Some(self.rejected(buf, buf.len(), Rejection::UnclosedQuote));
                        }
                        None => return None,
                    }
                };
                span = Span { start: i + 1, end: close, escaped, null: false };
                after = close + 1;
                match buf.get(after) {
                    None | Some(b',') | Some(b'\n') => {}
                    Some(b'\r') if matches!(buf.get(after + 1), None | Some(b'\n')) => {}
                    Some(_) => {
                        let end = memchr(b'\n', &buf[after..]).map(|k| after + k + 1);
                        return match end {
                            Some(end) => Some(self.rejected(buf, end, Rejection::TextAfterQuote)),
                            None if at_end => Some(self.rejected(buf, buf.len(), Rejection::TextAfterQuote)),
                            None => None,
                        };
                    }
                }
            } else {
                let end = match memchr2(b',', b'\n', &buf[i..]) {
                    Some(k) => i + k,
                    None if at_end => buf.len(),
                    None => return None,
                };
                let text_end = if buf.get(end) != Some(&b',') { i + trim_cr(&buf[i..end]).len() } else { end };
                span = Span { start: i, end: text_end, escaped: false, null: i == text_end };
                after = end;
            }
            if field < wanted {
                self.spans[field] = span;
            }
            field += 1;
            // `after` is at a separator, a line end (`\r\n` or `\n`) or the end of the input.
            match buf.get(after) {
                Some(b',') => i = after + 1,
                Some(b'\r') => return Some(self.finish(buf, after + 2, field)),
                Some(_) => return Some(self.finish(buf, after + 1, field)),
                None => return Some(self.finish(buf, buf.len(), field)),
            }
        }
    }

    fn finish(&self, buf: &[u8], len: usize, found: usize) -> Cut {
        let len = len.min(buf.len());
        let bytes = &buf[..len];
        let lines = memchr_iter(b'\n', bytes).count().max(1);
        let outcome = if found != self.columns {
            Err(Rejection::FieldCount(found))
        } else if !bytes.is_ascii() && std::str::from_utf8(bytes).is_err() {
            Err(Rejection::NotUtf8)
        } else {
            Ok(())
        };
        Cut { len, lines, outcome }
    }

    fn rejected(&self, buf: &[u8], len: usize, why: Rejection) -> Cut {
        let lines = memchr_iter(b'\n', &buf[..len]).count().max(1);
        Cut { len, lines, outcome: Err(why) }
    }

    /// The bytes of field `i` of the row at the start of `buf` (unescaped), None when NULL.
    pub fn field<'b>(&self, buf: &'b [u8], i: usize) -> Option<Cow<'b, [u8]>> {
        let s = self.spans[i];
        if s.null {
            return None;
        }
        let bytes = &buf[s.start..s.end];
        Some(if s.escaped { Cow::Owned(unescape(bytes)) } else { Cow::Borrowed(bytes) })
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn unescape(quoted: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(quoted.len());
    let mut i = 0;
    while i < quoted.len() {
        out.push(quoted[i]);
        i += if quoted[i] == b'"' { 2 } else { 1 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(splitter: &Splitter, buf: &[u8]) -> Vec<Option<String>> {
        (0..splitter.spans.len())
            .map(|i| splitter.field(buf, i).map(|b| String::from_utf8(b.into()).unwrap()))
            .collect()
    }

    #[test]
    fn plain_rows_split_on_commas_with_empty_fields_as_null() {
        let mut s = Splitter::new(4, 4);
        let buf = b"1,,x,true\r\nnext";
        let cut = s.cut(buf, false).unwrap();
        assert_eq!((cut.len, cut.lines, cut.outcome), (11, 1, Ok(())));
        assert_eq!(fields(&s, buf), vec![Some("1".into()), None, Some("x".into()), Some("true".into())]);
    }

    #[test]
    fn quoted_fields_hold_commas_quotes_and_line_breaks() {
        let mut s = Splitter::new(3, 3);
        let buf = b"5,\"GET /, with \"\"comma\"\"\nand a break\",true\n6,a,b\n";
        let cut = s.cut(buf, false).unwrap();
        assert_eq!((cut.lines, cut.outcome), (2, Ok(())));
        assert_eq!(&buf[cut.len..], b"6,a,b\n");
        assert_eq!(fields(&s, buf)[1].as_deref(), Some("GET /, with \"comma\"\nand a break"));
    }

    #[test]
    fn wrong_counts_open_quotes_and_text_after_quotes_are_rejected() {
        let mut s = Splitter::new(3, 2);
        assert_eq!(s.cut(b"1,2\n", false).unwrap().outcome, Err(Rejection::FieldCount(2)));
        assert_eq!(s.cut(b"1,2,3,4\n", false).unwrap().outcome, Err(Rejection::FieldCount(4)));
        assert!(s.cut(b"1,\"open\n", false).is_none(), "more input may close the quote");
        assert_eq!(s.cut(b"1,\"open\n", true).unwrap().outcome, Err(Rejection::UnclosedQuote));
        let cut = s.cut(b"1,\"q\"x,3\n2,3,4\n", false).unwrap();
        assert_eq!((cut.len, cut.outcome), (9, Err(Rejection::TextAfterQuote)));
        assert_eq!(s.cut(b"1,\xff,3\n", false).unwrap().outcome, Err(Rejection::NotUtf8));
    }

    #[test]
    fn a_row_needs_its_line_end_unless_the_input_ends() {
        let mut s = Splitter::new(2, 2);
        assert!(s.cut(b"1,2", false).is_none());
        let cut = s.cut(b"1,2", true).unwrap();
        assert_eq!((cut.len, cut.outcome), (3, Ok(())));
    }
}
