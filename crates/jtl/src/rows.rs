//! Splitting JMeter CSV rows into fields: comma-separated, `"` quotes around a field that holds
//! commas, quotes (doubled) or line breaks, lines ended by `\n` or `\r\n`. The splitter visits
//! only the bytes that matter -- commas, quotes, line feeds -- found eight at a time by
//! word-wide comparisons ([`Specials`]), and keeps the quote state between them, so a row costs a
//! few operations per eight bytes plus a few per field, quoted or not. A row is malformed
//! (rejected as a whole, as DuckDB's CSV reader rejects it) when its field count differs from the
//! layout's, a quote is left open, a closing quote is followed by anything but a separator, or
//! its bytes are not UTF-8.

use memchr::{memchr, memchr_iter};
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
        let wanted = self.spans.len();
        let mut specials = Specials { buf, base: 0, mask: 0, started: false, high: false };
        let (mut field, mut start, mut lines) = (0, 0, 1);
        // The current field is quoted: where its closing quote is (once seen), and whether it
        // holds doubled quotes.
        let (mut quoted, mut in_quotes, mut close, mut escaped) = (false, false, 0, false);
        loop {
            let Some(p) = specials.next() else {
                if !at_end {
                    return None;
                }
                if in_quotes {
                    return Some(Cut { len: buf.len(), lines, outcome: Err(Rejection::UnclosedQuote) });
                }
                let end = if quoted { close } else { start + trim_cr(&buf[start..]).len() };
                self.record(field, wanted, start, end, quoted, escaped);
                return Some(self.finish(buf, buf.len(), field + 1, lines, specials.high));
            };
            let b = buf[p];
            if in_quotes {
                if b == b'\n' {
                    lines += 1;
                } else if b == b'"' {
                    match buf.get(p + 1) {
                        Some(b'"') => {
                            escaped = true;
                            specials.next(); // the second quote of the pair
                        }
                        None if !at_end => return None,
                        next => {
                            in_quotes = false;
                            close = p;
                            let fine = match next {
                                None | Some(b',') | Some(b'\n') => true,
                                Some(b'\r') => matches!(buf.get(p + 2), None | Some(b'\n')),
                                Some(_) => false,
                            };
                            if !fine {
                                return self.skip_line(buf, p + 1, lines, at_end, Rejection::TextAfterQuote);
                            }
                        }
                    }
                }
                continue;
            }
            match b {
                b'"' if p == start => (quoted, in_quotes) = (true, true),
                b'"' => {} // a quote inside an unquoted field is text
                b',' => {
                    let end = if quoted { close } else { p };
                    self.record(field, wanted, start, end, quoted, escaped);
                    field += 1;
                    start = p + 1;
                    (quoted, escaped) = (false, false);
                }
                _ => {
                    let end = if quoted { close } else { start + trim_cr(&buf[start..p]).len() };
                    self.record(field, wanted, start, end, quoted, escaped);
                    return Some(self.finish(buf, p + 1, field + 1, lines, specials.high));
                }
            }
        }
    }

    #[inline]
    fn record(&mut self, field: usize, wanted: usize, start: usize, end: usize, quoted: bool, escaped: bool) {
        if field < wanted {
            self.spans[field] = if quoted {
                Span { start: start + 1, end, escaped, null: false }
            } else {
                Span { start, end, escaped: false, null: start == end }
            };
        }
    }

    /// The row's outcome; `high` says whether a byte >= 0x80 was seen (then it must be UTF-8).
    fn finish(&self, buf: &[u8], len: usize, found: usize, lines: usize, high: bool) -> Cut {
        let bytes = &buf[..len];
        let outcome = if found != self.columns {
            Err(Rejection::FieldCount(found))
        } else if high && std::str::from_utf8(bytes).is_err() {
            Err(Rejection::NotUtf8)
        } else {
            Ok(())
        };
        Cut { len, lines, outcome }
    }

    /// A rejected row that ends at the first line end from `from`.
    fn skip_line(&self, buf: &[u8], from: usize, lines: usize, at_end: bool, why: Rejection) -> Option<Cut> {
        let len = match memchr(b'\n', &buf[from..]) {
            Some(k) => from + k + 1,
            None if at_end => buf.len(),
            None => return None,
        };
        let lines = lines + memchr_iter(b'\n', &buf[from..len]).count().saturating_sub(1);
        Some(Cut { len, lines, outcome: Err(why) })
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

/// Positions of the bytes the splitter acts on (`,` `"` `\n`), in order, found a block of
/// [`BLOCK`] bytes at a time: with SSE2 (every x86-64 CPU has it) three byte-wise comparisons and
/// one `movemask` per 16 bytes; elsewhere eight bytes compared at once as one `u64` ([`swar`]).
/// The mask's set bits are the special bytes, `trailing_zeros` their offsets. On the way it
/// notes whether any byte it looked at was >= 0x80 (not ASCII), so that a row of ASCII -- every
/// JMeter row in practice -- needs no separate UTF-8 check.
struct Specials<'a> {
    buf: &'a [u8],
    base: usize,
    mask: u64,
    started: bool,
    high: bool,
}

#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 16;
#[cfg(not(target_arch = "x86_64"))]
const BLOCK: usize = 8;

impl Specials<'_> {
    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            if self.started {
                self.base += BLOCK;
            }
            self.started = true;
            if self.base >= self.buf.len() {
                return None;
            }
            let mut block = [0u8; BLOCK];
            let bytes = match self.buf.get(self.base..self.base + BLOCK) {
                Some(bytes) => bytes,
                None => {
                    // The tail, padded with zero bytes (which are not special).
                    block[..self.buf.len() - self.base].copy_from_slice(&self.buf[self.base..]);
                    &block
                }
            };
            let (mask, high) = special_mask(bytes.try_into().expect("a whole block"));
            self.mask = mask;
            self.high |= high;
        }
        let offset = self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(self.base + offset)
    }
}

/// Bit i set when byte i of the block is `,` `"` or `\n`; and whether a byte is >= 0x80.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn special_mask(block: &[u8; BLOCK]) -> (u64, bool) {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
    // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every CPU this
    // code is compiled for; the load reads exactly the 16 bytes of `block`, unaligned loads allowed.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast());
        let hits = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(b',' as i8)), _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8))),
            _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8)),
        );
        (u64::from(_mm_movemask_epi8(hits) as u16), _mm_movemask_epi8(v) != 0)
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn special_mask(block: &[u8; BLOCK]) -> (u64, bool) {
    let word = u64::from_le_bytes(*block);
    (swar(word), word & (LOW << 7) != 0)
}

const LOW: u64 = 0x0101_0101_0101_0101;
const SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Bit i set when byte i of the eight in `word` is `,` `"` or `\n`: a byte equal to `c` is a zero
/// byte of `word ^ c * LOW`, and [`zero_bytes`] marks exactly those (no false positives).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn swar(word: u64) -> u64 {
    let high = zero_bytes(word ^ (LOW * u64::from(b',')))
        | zero_bytes(word ^ (LOW * u64::from(b'"')))
        | zero_bytes(word ^ (LOW * u64::from(b'\n')));
    // One bit per byte: the high bit of byte i moved to bit i.
    (0..8).filter(|i| high & (0x80 << (8 * i)) != 0).fold(0, |m, i| m | 1 << i)
}

/// The high bit of every zero byte of `v`, and no other bit.
fn zero_bytes(v: u64) -> u64 {
    !(((v & SEVEN).wrapping_add(SEVEN)) | v | SEVEN)
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
    fn zero_bytes_marks_exactly_the_zero_bytes() {
        // Every byte value next to a zero and next to a 0x01 (where borrow-based tricks err).
        for b in 0..=255u8 {
            let word = u64::from_le_bytes([b, 0, 1, b, 0x80, 0, b, 0xff]);
            let expected: u64 = [b, 0, 1, b, 0x80, 0, b, 0xff]
                .iter()
                .enumerate()
                .filter(|(_, &x)| x == 0)
                .map(|(i, _)| 0x80u64 << (8 * i))
                .sum();
            assert_eq!(zero_bytes(word), expected, "byte {b:#x}");
        }
    }

    #[test]
    fn both_ways_of_finding_special_bytes_agree_on_every_byte_value() {
        for b in 0..=255u8 {
            let mut block = [b'x'; BLOCK];
            block[0] = b;
            block[BLOCK - 1] = b;
            let expected = if matches!(b, b',' | b'"' | b'\n') { 1 | 1 << (BLOCK - 1) } else { 0 };
            assert_eq!(special_mask(&block), (expected, b >= 0x80), "byte {b:#x}");
            let word = u64::from_le_bytes([b, b'x', b'x', b'x', b'x', b'x', b'x', b]);
            assert_eq!(swar(word), if expected == 0 { 0 } else { 0x81 }, "byte {b:#x}");
        }
    }

    #[test]
    fn a_quote_inside_an_unquoted_field_is_text() {
        let mut s = Splitter::new(3, 3);
        let buf = b"1,ab\"c,3\n";
        assert_eq!(s.cut(buf, false).unwrap().outcome, Ok(()));
        assert_eq!(fields(&s, buf)[1].as_deref(), Some("ab\"c"));
    }

    #[test]
    fn a_row_needs_its_line_end_unless_the_input_ends() {
        let mut s = Splitter::new(2, 2);
        assert!(s.cut(b"1,2", false).is_none());
        let cut = s.cut(b"1,2", true).unwrap();
        assert_eq!((cut.len, cut.outcome), (3, Ok(())));
    }
}
