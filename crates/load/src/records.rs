//! Raw per-request records, streamed to disk while the run goes on, and their export to
//! JMeter's JTL CSV. A run with a records file writes one fixed-size little-endian record per
//! request that ended inside the measurement window (completed, or failed with the request in
//! flight), so the full distribution, any time slice and any per-connection view can be
//! recomputed afterwards; the summary's histograms stay the primary result.
//!
//! Memory stays flat however long the run: each load thread fills a 64 KiB buffer and appends
//! it with one `write` on a file opened `O_APPEND`, which the kernel appends whole, so threads
//! share one file without a lock and records of a thread stay in order (threads interleave by
//! buffer, so the file is not globally sorted by time).
//!
//! File layout (all little-endian): a header of `header_len` bytes — magic `ALRECv1\0`,
//! version u32 (1), header_len u32, record_len u32 (48), connections u32, t0 monotonic ns
//! u64, t0 wall-clock ns since the Unix epoch u64, then the UTF-8 label (what was loaded,
//! e.g. `GET http://127.0.0.1:8080/`) up to header_len — then records of [`RECORD_LEN`]
//! bytes: planned, sent, first byte, done (ns since t0, u64 each; first byte u64::MAX when no
//! byte arrived), bytes received u32, bytes sent u32, connection u32 (global slot number),
//! status u16 (HTTP status; 0 for memcached), error class u8 (0 none, else 1 +
//! [`ErrorClass`] index), mix class u8 (the request's index in the run's mix; 0 without a mix,
//! and in files written before mixes, whose byte was reserved and written 0).

use crate::stats::ErrorClass;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

pub const MAGIC: &[u8; 8] = b"ALRECv1\0";
pub const RECORD_LEN: usize = 48;
/// Fixed part of the header, before the label.
const HEADER_FIXED: usize = 40;
/// A thread's buffer: whole records, appended with one write.
const BUFFER_RECORDS: usize = 64 * 1024 / RECORD_LEN;
const NO_FIRST_BYTE: u64 = u64::MAX;

/// One request, as stored (times in ns since t0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub planned_ns: u64,
    pub sent_ns: u64,
    /// `None` when no byte of the response arrived.
    pub first_byte_ns: Option<u64>,
    pub done_ns: u64,
    pub bytes_received: u32,
    pub bytes_sent: u32,
    pub connection: u32,
    pub status: u16,
    pub error: Option<ErrorClass>,
    /// Index of the request's class in the run's mix (0 without a mix).
    pub class: u8,
}

impl Record {
    fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.planned_ns, self.sent_ns, self.first_byte_ns.unwrap_or(NO_FIRST_BYTE), self.done_ns] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.bytes_received, self.bytes_sent, self.connection] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.status.to_le_bytes());
        out.push(self.error.map_or(0, |c| c as u8 + 1));
        out.push(self.class);
    }

    fn decode(b: &[u8; RECORD_LEN]) -> io::Result<Record> {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let error = match b[46] {
            0 => None,
            n => Some(
                *ErrorClass::ALL
                    .get(usize::from(n) - 1)
                    .ok_or_else(|| invalid(format!("unknown error class {}", n - 1)))?,
            ),
        };
        let first = u64_at(16);
        Ok(Record {
            planned_ns: u64_at(0),
            sent_ns: u64_at(8),
            first_byte_ns: (first != NO_FIRST_BYTE).then_some(first),
            done_ns: u64_at(24),
            bytes_received: u32_at(32),
            bytes_sent: u32_at(36),
            connection: u32_at(40),
            status: u16::from_le_bytes([b[44], b[45]]),
            error,
            class: b[47],
        })
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// What the header says about the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordsHeader {
    pub connections: u32,
    pub t0_mono_ns: u64,
    pub t0_wall_unix_ns: u64,
    pub label: String,
}

impl RecordsHeader {
    pub(crate) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let header_len = (HEADER_FIXED + self.label.len()) as u32;
        let mut h = Vec::with_capacity(header_len as usize);
        h.extend_from_slice(MAGIC);
        for v in [1u32, header_len, RECORD_LEN as u32, self.connections] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.extend_from_slice(&self.t0_mono_ns.to_le_bytes());
        h.extend_from_slice(&self.t0_wall_unix_ns.to_le_bytes());
        h.extend_from_slice(self.label.as_bytes());
        out.write_all(&h)
    }

    fn read(r: &mut impl Read) -> io::Result<RecordsHeader> {
        let mut fixed = [0u8; HEADER_FIXED];
        r.read_exact(&mut fixed)?;
        if &fixed[..8] != MAGIC {
            return Err(invalid("not an archlab records file (bad magic)".into()));
        }
        let u32_at = |i: usize| u32::from_le_bytes(fixed[i..i + 4].try_into().expect("4 bytes"));
        let (version, header_len, record_len) = (u32_at(8), u32_at(12) as usize, u32_at(16) as usize);
        if version != 1 || record_len != RECORD_LEN || !(HEADER_FIXED..=HEADER_FIXED + 4096).contains(&header_len) {
            return Err(invalid(format!(
                "unsupported records file (version {version}, record length {record_len}, header {header_len})"
            )));
        }
        let mut label = vec![0u8; header_len - HEADER_FIXED];
        r.read_exact(&mut label)?;
        Ok(RecordsHeader {
            connections: u32_at(20),
            t0_mono_ns: u64::from_le_bytes(fixed[24..32].try_into().expect("8 bytes")),
            t0_wall_unix_ns: u64::from_le_bytes(fixed[32..40].try_into().expect("8 bytes")),
            label: String::from_utf8(label).map_err(|_| invalid("label is not UTF-8".into()))?,
        })
    }
}

/// A load thread's writer: a buffer of whole records appended to the shared file.
pub(crate) struct RecordSink {
    file: File,
    buf: Vec<u8>,
    /// Start of the run: record times are stored relative to it.
    pub(crate) t0: u64,
    /// The first write error; recording stops there and the run reports it.
    pub(crate) error: Option<io::Error>,
    pub(crate) written: u64,
}

impl RecordSink {
    /// `file` must be opened for appending (`O_APPEND`).
    pub(crate) fn new(file: File, t0: u64) -> RecordSink {
        RecordSink { file, buf: Vec::with_capacity(BUFFER_RECORDS * RECORD_LEN), t0, error: None, written: 0 }
    }

    /// Add a record whose times are monotonic-clock ns (made relative to t0 here).
    #[inline]
    pub(crate) fn push(&mut self, mut r: Record) {
        if self.error.is_some() {
            return;
        }
        r.planned_ns = r.planned_ns.saturating_sub(self.t0);
        r.sent_ns = r.sent_ns.saturating_sub(self.t0);
        r.done_ns = r.done_ns.saturating_sub(self.t0);
        r.first_byte_ns = r.first_byte_ns.map(|t| t.saturating_sub(self.t0));
        r.encode(&mut self.buf);
        self.written += 1;
        if self.buf.len() + RECORD_LEN > self.buf.capacity() {
            self.flush();
        }
    }

    pub(crate) fn flush(&mut self) {
        if !self.buf.is_empty() && self.error.is_none() {
            // One write of whole records: O_APPEND keeps it contiguous in the file.
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }
}

/// Reads a records file one record at a time (flat memory).
pub struct RecordReader<R> {
    input: R,
    pub header: RecordsHeader,
}

impl RecordReader<BufReader<File>> {
    pub fn open(path: &Path) -> io::Result<Self> {
        RecordReader::new(BufReader::with_capacity(1 << 16, File::open(path)?))
    }
}

impl<R: BufRead> RecordReader<R> {
    pub fn new(mut input: R) -> io::Result<Self> {
        let header = RecordsHeader::read(&mut input)?;
        Ok(RecordReader { input, header })
    }
}

impl<R: BufRead> Iterator for RecordReader<R> {
    type Item = io::Result<Record>;
    fn next(&mut self) -> Option<io::Result<Record>> {
        let mut b = [0u8; RECORD_LEN];
        match self.input.fill_buf() {
            Ok([]) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(match self.input.read_exact(&mut b) {
            Ok(()) => Record::decode(&b),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(invalid("truncated last record".into())),
            Err(e) => Err(e),
        })
    }
}

/// JMeter's default JTL CSV header (notes/load-generators.md §5.1, `CSVSaveService`).
pub const JTL_HEADER: &str = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,\
failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect";

/// Quote a CSV field when it needs it (RFC 4180, as JMeter does).
fn csv(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Write every record of `reader` as a JTL CSV row, in file order; returns the row count.
/// Mapping: timeStamp = wall-clock ms of the send (JMeter's start time); elapsed = done - sent
/// and Latency = first byte - sent, in whole ms as JMeter writes them (the service time: the
/// response time from the planned time has no JTL column); responseCode = HTTP status (or the
/// error class when the request failed without one, "OK" for memcached); threadName =
/// `conn-N`; grpThreads and allThreads = the run's connections; URL = the label's target;
/// IdleTime and Connect = 0 (connections are opened before the requests that use them). A run
/// with a request mix (label `GET http://HOST mix PATH:W,...`) gets one label and URL per
/// class, `GET http://HOST/PATH`, as JMeter names each sampler of a throughput controller.
pub fn export_jtl<R: BufRead, W: Write>(reader: RecordReader<R>, out: W) -> io::Result<u64> {
    let mut out = BufWriter::new(out);
    writeln!(out, "{JTL_HEADER}")?;
    let h = reader.header.clone();
    let labels: Vec<String> = match h.label.split_once(" mix ").map(|(base, mix)| (base, mix.parse::<crate::Mix>())) {
        Some((base, Ok(mix))) => mix.classes().iter().map(|c| format!("{base}{}", c.path)).collect(),
        _ => vec![h.label.clone()],
    };
    let columns: Vec<(String, String)> = labels
        .iter()
        .map(|l| (csv(l).into_owned(), csv(l.split_once(' ').map_or(l.as_str(), |(_, u)| u)).into_owned()))
        .collect();
    let ms = |ns: u64| ns / 1_000_000;
    let mut rows = 0;
    for r in reader {
        let r = r?;
        let (label, url) = columns.get(usize::from(r.class)).unwrap_or(&columns[0]);
        let success = r.error.is_none();
        let (code, message) = match (r.status, r.error) {
            (0, Some(c)) => (c.name().to_string(), c.name()),
            (0, None) => ("OK".into(), "OK"),
            (s, Some(c)) => (s.to_string(), c.name()),
            (s, None) => (s.to_string(), "OK"),
        };
        let failure = r.error.map_or("", ErrorClass::name);
        let latency = r.first_byte_ns.map_or(0, |f| ms(f.saturating_sub(r.sent_ns)));
        writeln!(
            out,
            "{},{},{label},{code},{message},conn-{},text,{success},{failure},{},{},{},{},{url},{latency},0,0",
            (h.t0_wall_unix_ns + r.sent_ns) / 1_000_000,
            ms(r.done_ns.saturating_sub(r.sent_ns)),
            r.connection,
            r.bytes_received,
            r.bytes_sent,
            h.connections,
            h.connections,
        )?;
        rows += 1;
    }
    out.flush()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> RecordsHeader {
        RecordsHeader {
            connections: 4,
            t0_mono_ns: 5,
            t0_wall_unix_ns: 1_700_000_000_000_000_000,
            label: "GET http://h:1/a,b".into(),
        }
    }

    #[test]
    fn records_round_trip_and_export_as_jmeter_does() {
        let mut file = Vec::new();
        header().write(&mut file).unwrap();
        let recs = [
            Record {
                planned_ns: 1_000_000,
                sent_ns: 2_000_000,
                first_byte_ns: Some(5_500_000),
                done_ns: 9_900_000,
                bytes_received: 120,
                bytes_sent: 40,
                connection: 3,
                status: 200,
                error: None,
                class: 0,
            },
            Record {
                planned_ns: 0,
                sent_ns: 10,
                first_byte_ns: None,
                done_ns: 2_000_000_010,
                bytes_received: 0,
                bytes_sent: 40,
                connection: 0,
                status: 0,
                error: Some(ErrorClass::Timeout),
                class: 0,
            },
        ];
        for r in &recs {
            r.encode(&mut file);
        }
        assert_eq!(file.len(), 40 + header().label.len() + 2 * RECORD_LEN);
        let reader = RecordReader::new(&file[..]).unwrap();
        assert_eq!(reader.header, header());
        let back: Vec<Record> = reader.map(Result::unwrap).collect();
        assert_eq!(back, recs);

        let mut csv_out = Vec::new();
        assert_eq!(export_jtl(RecordReader::new(&file[..]).unwrap(), &mut csv_out).unwrap(), 2);
        let text = String::from_utf8(csv_out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], JTL_HEADER);
        assert_eq!(lines[0].split(',').count(), 17);
        assert_eq!(
            lines[1],
            "1700000000002,7,\"GET http://h:1/a,b\",200,OK,conn-3,text,true,,120,40,4,4,\"http://h:1/a,b\",3,0,0"
        );
        assert_eq!(
            lines[2],
            "1700000000000,2000,\"GET http://h:1/a,b\",timeout,timeout,conn-0,text,false,timeout,0,40,4,4,\"http://h:1/a,b\",0,0,0"
        );
        // A mixed run: one label and URL per class, from the class byte.
        let mut mixed = Vec::new();
        let h = RecordsHeader { label: "GET http://h:1 mix /big:1,/small:3".into(), ..header() };
        h.write(&mut mixed).unwrap();
        for class in [1, 0] {
            Record { class, ..recs[0] }.encode(&mut mixed);
        }
        let mut csv_out = Vec::new();
        export_jtl(RecordReader::new(&mixed[..]).unwrap(), &mut csv_out).unwrap();
        let text = String::from_utf8(csv_out).unwrap();
        let labels: Vec<(&str, &str)> =
            text.lines().skip(1).map(|l| (l.split(',').nth(2).unwrap(), l.split(',').nth(13).unwrap())).collect();
        assert_eq!(labels, [("GET http://h:1/small", "http://h:1/small"), ("GET http://h:1/big", "http://h:1/big")]);
        // A truncated file is an error, not a silent short read.
        let cut = &file[..file.len() - 1];
        assert!(RecordReader::new(cut).unwrap().any(|r| r.is_err()));
        assert!(RecordReader::new(&b"garbage-garbage-garbage-garbage-garbage-garbage"[..]).is_err());
    }
}
