//! HdrHistogram interval logs: one compressed histogram per interval (the load generator
//! writes one per second of the measurement window), in the text format of the Java
//! `HistogramLogWriter`, so that Python's `hdrh.log.HistogramLogReader`, the Java tools and
//! the Rust `IntervalLogIterator` all read it.
//!
//! Layout: comment lines (one states the value unit, nanoseconds, because the format itself
//! carries no unit), `StartTime` and `BaseTime` equal to the wall-clock start of the first
//! interval, the CSV legend, then one line per interval: offset from BaseTime in seconds,
//! length in seconds, max value (ns), base64 of the V2 deflate encoding. Intervals are
//! appended as they complete ([`IntervalLog::append`]), so a long run never keeps more than one
//! interval histogram per recorder in memory.

use crate::hdr::{self, LatencyHistogram};
use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, IntervalLogWriterBuilder, LogEntry};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use std::fmt;
use std::io::{self, Write};
use std::time::{Duration, SystemTime};

/// The comment that states the unit of every value in the log.
pub const UNIT_COMMENT: &str = "[Latency values and Interval_Max in nanoseconds (ns)]";

const LEGEND: &str = "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";

#[derive(Debug)]
pub enum IntervalLogError {
    Io(io::Error),
    Encode(String),
    /// The text is not an interval log, or a histogram in it does not decode.
    Decode(String),
}

impl fmt::Display for IntervalLogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntervalLogError::Io(e) => write!(f, "interval log I/O error: {e}"),
            IntervalLogError::Encode(e) => write!(f, "cannot encode histogram: {e}"),
            IntervalLogError::Decode(e) => write!(f, "invalid interval log: {e}"),
        }
    }
}

impl std::error::Error for IntervalLogError {}

impl From<io::Error> for IntervalLogError {
    fn from(e: io::Error) -> Self {
        IntervalLogError::Io(e)
    }
}

/// A log being written to `out`, one interval at a time.
pub struct IntervalLog<W: Write> {
    out: W,
    serializer: V2DeflateSerializer,
    intervals: usize,
}

impl<W: Write> IntervalLog<W> {
    /// Write the header: `comments` (one line each), the unit comment, StartTime = BaseTime =
    /// `start` (interval timestamps are then offsets from `start`), and the legend.
    pub fn begin(mut out: W, start: SystemTime, comments: &[&str]) -> Result<Self, IntervalLogError> {
        let mut serializer = V2DeflateSerializer::new();
        let mut builder = IntervalLogWriterBuilder::new();
        for c in comments {
            builder.add_comment(c);
        }
        builder.add_comment(UNIT_COMMENT).add_comment("[Histogram log format version 1.3]");
        builder.with_start_time(start).with_base_time(start);
        builder.begin_log_with(&mut out, &mut serializer)?;
        out.write_all(LEGEND.as_bytes())?;
        Ok(IntervalLog { out, serializer, intervals: 0 })
    }

    /// Append the histogram of the interval starting `offset` after the log's start.
    pub fn append(&mut self, h: &LatencyHistogram, offset: Duration, length: Duration) -> Result<(), IntervalLogError> {
        // A writer built without headers writes nothing on creation, so one can be made per
        // interval while the log itself stays owned by `self`.
        IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)?
            .write_histogram(h, offset, length, None)
            .map_err(|e| IntervalLogError::Encode(e.to_string()))?;
        self.intervals += 1;
        Ok(())
    }

    /// Push what was appended to the output (a log read while it is being written is then
    /// complete up to the last interval).
    pub fn flush(&mut self) -> Result<(), IntervalLogError> {
        self.out.flush()?;
        Ok(())
    }

    pub fn intervals(&self) -> usize {
        self.intervals
    }

    /// Flush and hand back the output.
    pub fn finish(mut self) -> Result<W, IntervalLogError> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One interval read back from a log.
#[derive(Debug)]
pub struct LoggedInterval {
    /// Offset of the interval's start from the log's BaseTime (or from the epoch without one).
    pub start: Duration,
    pub length: Duration,
    pub histogram: LatencyHistogram,
}

/// The content of a log read back.
#[derive(Debug, Default)]
pub struct ParsedLog {
    /// Seconds since the epoch, when the log states them.
    pub start_time: Option<Duration>,
    pub base_time: Option<Duration>,
    pub intervals: Vec<LoggedInterval>,
}

/// Parse a whole interval log and decode every histogram in it.
pub fn read_interval_log(text: &[u8]) -> Result<ParsedLog, IntervalLogError> {
    let mut log = ParsedLog::default();
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(text) {
        match entry.map_err(|e| IntervalLogError::Decode(format!("{e:?}")))? {
            LogEntry::StartTime(t) => log.start_time = Some(t),
            LogEntry::BaseTime(t) => log.base_time = Some(t),
            LogEntry::Interval(i) => {
                let histogram = decode_with(&mut deserializer, i.encoded_histogram())?;
                log.intervals.push(LoggedInterval { start: i.start_timestamp(), length: i.duration(), histogram });
            }
        }
    }
    Ok(log)
}

/// Decode one histogram in the log's encoding (base64 of the V2 deflate format, as the
/// simulator also emits them) into an auto-resizing latency histogram.
pub fn decode_histogram(base64_text: &str) -> Result<LatencyHistogram, IntervalLogError> {
    decode_with(&mut Deserializer::new(), base64_text)
}

fn decode_with(deserializer: &mut Deserializer, base64_text: &str) -> Result<LatencyHistogram, IntervalLogError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64_text.trim())
        .map_err(|e| IntervalLogError::Decode(e.to_string()))?;
    let decoded: LatencyHistogram =
        deserializer.deserialize(&mut &bytes[..]).map_err(|e| IntervalLogError::Decode(format!("{e:?}")))?;
    // Re-home into an auto-resizing histogram so callers can merge intervals freely.
    let mut histogram = hdr::new_latency_histogram();
    hdr::merge(&mut histogram, &decoded);
    Ok(histogram)
}

/// A whole log of a single interval: `histogram` recorded from `offset` to `offset + length`
/// after `start`, with `comments` in the header. What a run that has one histogram per
/// repetition (a simulated replication) stores, so that it is read like a measured one.
pub fn single_interval_log(
    histogram: &LatencyHistogram,
    start: SystemTime,
    offset: Duration,
    length: Duration,
    comments: &[&str],
) -> Result<Vec<u8>, IntervalLogError> {
    let mut log = IntervalLog::begin(Vec::new(), start, comments)?;
    log.append(histogram, offset, length)?;
    log.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_unit_comment_and_times() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let mut log = IntervalLog::begin(Vec::new(), start, &["archlab test log"]).unwrap();
        let mut expected = Vec::new();
        for second in 0..3u64 {
            let mut h = hdr::new_latency_histogram();
            for i in 0..=second * 10 {
                hdr::record_ns(&mut h, 1_000 + i * 1_000_000);
            }
            let length = if second == 2 { Duration::from_millis(500) } else { Duration::from_secs(1) };
            log.append(&h, Duration::from_secs(second), length).unwrap();
            expected.push(h);
        }
        // An empty interval (a second with no completion) must encode and decode too.
        log.append(&hdr::new_latency_histogram(), Duration::from_millis(2500), Duration::from_millis(10)).unwrap();
        assert_eq!(log.intervals(), 4);
        let text = log.finish().unwrap();
        let s = String::from_utf8(text.clone()).unwrap();
        assert!(s.contains("#archlab test log\n"), "{s}");
        assert!(s.contains(UNIT_COMMENT), "{s}");
        assert!(s.contains("#[StartTime: 1700000000.250"), "{s}");
        assert!(s.contains("\"StartTimestamp\""), "{s}");

        let parsed = read_interval_log(&text).unwrap();
        assert_eq!(parsed.start_time, Some(Duration::from_millis(1_700_000_000_250)));
        assert_eq!(parsed.base_time, parsed.start_time);
        assert_eq!(parsed.intervals.len(), 4);
        for (i, h) in expected.iter().enumerate() {
            let got = &parsed.intervals[i];
            assert_eq!(got.start, Duration::from_secs(i as u64));
            assert_eq!(got.histogram.len(), h.len());
            assert_eq!(got.histogram.max(), h.max());
            assert_eq!(got.histogram.value_at_quantile(0.5), h.value_at_quantile(0.5));
        }
        assert_eq!(parsed.intervals[2].length, Duration::from_millis(500));
        assert!(parsed.intervals[3].histogram.is_empty());
    }

    #[test]
    fn a_single_interval_log_holds_the_histogram_and_its_times() {
        let mut h = hdr::new_latency_histogram();
        for ns in [5_000u64, 70_000, 70_000, 9_000_000] {
            hdr::record_ns(&mut h, ns);
        }
        let text = single_interval_log(
            &h,
            SystemTime::UNIX_EPOCH,
            Duration::from_millis(12_500),
            Duration::from_secs(300),
            &["[simulated]"],
        )
        .unwrap();
        let parsed = read_interval_log(&text).unwrap();
        assert_eq!(parsed.base_time, Some(Duration::ZERO));
        assert_eq!(parsed.intervals.len(), 1);
        let got = &parsed.intervals[0];
        assert_eq!((got.start, got.length), (Duration::from_millis(12_500), Duration::from_secs(300)));
        assert_eq!((got.histogram.len(), got.histogram.max()), (4, h.max()));
        // decode_histogram reads the encoding the log (and the simulator) writes.
        let line = String::from_utf8(text).unwrap().lines().last().unwrap().to_string();
        let encoded = line.rsplit(',').next().unwrap();
        let decoded = decode_histogram(encoded).unwrap();
        assert_eq!((decoded.len(), decoded.value_at_quantile(0.5)), (4, h.value_at_quantile(0.5)));
        assert!(matches!(decode_histogram("not base64!"), Err(IntervalLogError::Decode(_))));
    }

    #[test]
    fn garbage_is_a_decode_error() {
        assert!(matches!(read_interval_log(b"1.0,1.0,3.0,notbase64!!\n"), Err(IntervalLogError::Decode(_))));
    }
}
