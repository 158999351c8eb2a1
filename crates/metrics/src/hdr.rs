//! Latency histograms the HDR way: integer nanoseconds, 3 significant digits, auto-resizing so
//! that no sample is ever dropped or clamped, one recorder per thread merged at the end.
//!
//! Recording is a few arithmetic operations and one increment, cheap enough for every request.
//! Summaries ([`LatencySummaryUs`]) are read from the histogram, never from running averages,
//! and converted to microseconds only at the edge (JSON) — the stored unit stays nanoseconds.

use hdrhistogram::Histogram;
use serde::Serialize;

/// A latency histogram whose values are nanoseconds.
pub type LatencyHistogram = Histogram<u64>;

/// Significant decimal digits kept for every value: relative error below 0.1 %.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// An empty latency histogram (1 ns resolution, 3 significant digits, grows as needed).
pub fn new_latency_histogram() -> LatencyHistogram {
    // Starts tiny (range 1..2 ns) and auto-resizes to the largest value recorded, so a run
    // whose latencies stay below 10 ms does not pay for buckets up to an hour.
    let mut h = Histogram::new_with_bounds(1, 2, SIGNIFICANT_DIGITS).expect("valid HDR bounds");
    h.auto(true);
    h
}

/// Record one latency in nanoseconds. Never fails: the histogram grows as needed.
#[inline]
pub fn record_ns(h: &mut LatencyHistogram, ns: u64) {
    // Auto-resize refuses only values beyond what a usize-indexed count array can cover
    // (centuries); clamping those keeps the hot path free of a Result. (`saturating_record`
    // alone would clamp instead of resizing.)
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

/// Add `from` into `into` (merging per-thread or per-interval recorders).
pub fn merge(into: &mut LatencyHistogram, from: &LatencyHistogram) {
    into.add(from).expect("auto-resizing histograms accept any value");
}

/// `h` with every value multiplied by `factor` (a change of time unit, e.g. a simulation's
/// model time to seconds). Each bucket moves whole, at its median-equivalent value (the value
/// HdrHistogram itself uses for the mean), rounded to the nearest integer and at least 1:
/// counts stay exact, values keep the histogram's 3 significant digits. `factor` must be
/// finite and > 0 (the caller checks it; anything else is a programming error).
pub fn rescaled(h: &LatencyHistogram, factor: f64) -> LatencyHistogram {
    assert!(factor.is_finite() && factor > 0.0, "rescale factor must be finite and > 0, got {factor}");
    let mut out = new_latency_histogram();
    for bucket in h.iter_recorded() {
        let value = (h.median_equivalent(bucket.value_iterated_to()) as f64 * factor).round().max(1.0);
        // A value beyond u64 is clamped by the cast; an auto-resizing histogram takes the rest.
        if out.record_n(value as u64, bucket.count_at_value()).is_err() {
            out.saturating_record_n(value as u64, bucket.count_at_value());
        }
    }
    out
}

/// The histogram in the V2 deflate encoding, base64: one interval of an interval log, and what
/// Python's `hdrh.histogram.HdrHistogram.decode` reads.
pub fn to_base64(h: &LatencyHistogram) -> String {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("encoding into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The value at quantile `q` (0..=1) in microseconds; `None` for an empty histogram.
pub fn quantile_us(h: &LatencyHistogram, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| ns_to_us(h.value_at_quantile(q)))
}

fn ns_to_us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// The latency statistics every report carries, in microseconds. Fields are `None` when the
/// histogram is empty, so that "no sample" never reads as "zero latency".
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummaryUs {
    pub min: Option<f64>,
    pub mean: Option<f64>,
    pub stdev: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    #[serde(rename = "p99.9")]
    pub p99_9: Option<f64>,
    pub max: Option<f64>,
}

impl LatencySummaryUs {
    pub fn of(h: &LatencyHistogram) -> Self {
        if h.is_empty() {
            return LatencySummaryUs::default();
        }
        LatencySummaryUs {
            min: Some(ns_to_us(h.min())),
            mean: Some(h.mean() / 1_000.0),
            stdev: Some(h.stdev() / 1_000.0),
            p50: quantile_us(h, 0.50),
            p90: quantile_us(h, 0.90),
            p99: quantile_us(h, 0.99),
            p99_9: quantile_us(h, 0.999),
            max: Some(ns_to_us(h.max())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_in_microseconds_within_three_digits() {
        let mut h = new_latency_histogram();
        for us in 1..=1000u64 {
            record_ns(&mut h, us * 1_000);
        }
        let s = LatencySummaryUs::of(&h);
        let close = |got: Option<f64>, want: f64| (got.unwrap() - want).abs() <= want * 1e-3 + 1e-3;
        assert!(close(s.min, 1.0), "{s:?}");
        assert!(close(s.p50, 500.0), "{s:?}");
        assert!(close(s.p90, 900.0), "{s:?}");
        assert!(close(s.p99, 990.0), "{s:?}");
        assert!(close(s.p99_9, 999.0), "{s:?}");
        assert!(close(s.max, 1000.0), "{s:?}");
        assert!(close(s.mean, 500.5), "{s:?}");
    }

    #[test]
    fn grows_to_large_values_and_merges() {
        let mut a = new_latency_histogram();
        let mut b = new_latency_histogram();
        record_ns(&mut a, 150);
        record_ns(&mut b, 3_600 * 1_000_000_000); // one hour
        merge(&mut a, &b);
        assert_eq!(a.len(), 2);
        assert_eq!(a.min(), 150);
        assert!(a.equivalent(a.max(), 3_600 * 1_000_000_000));
    }

    #[test]
    fn rescaling_moves_buckets_whole_and_keeps_counts() {
        let mut h = new_latency_histogram();
        for (ns, n) in [(1_000u64, 3u64), (250_000, 5), (7_000_000_000, 2)] {
            h.record_n(ns, n).unwrap();
        }
        let scaled = rescaled(&h, 1e-3);
        assert_eq!(scaled.len(), h.len());
        // Each bucket lands at its median-equivalent value x 1e-3, within 3 significant digits.
        for (ns, n) in [(1_000u64, 3u64), (250_000, 5), (7_000_000_000, 2)] {
            let want = h.median_equivalent(ns) as f64 * 1e-3;
            assert_eq!(scaled.count_at(want.round() as u64), n, "{ns}");
            assert!((want - (ns as f64 * 1e-3)).abs() <= ns as f64 * 1e-3 * 1e-3, "{ns}");
        }
        // Values below 1 after scaling become 1 (the histogram's lowest value), counts kept.
        let tiny = rescaled(&h, 1e-9);
        assert_eq!(tiny.count_at(1), 8);
        assert_eq!(tiny.len(), 10);
        assert_eq!(rescaled(&h, 1.0).mean(), h.mean());
    }

    #[test]
    fn base64_encoding_decodes_to_the_same_counts() {
        use base64::Engine as _;
        use hdrhistogram::serialization::Deserializer;
        let mut h = new_latency_histogram();
        for ns in [1_000, 2_000, 2_000, 5_000_000] {
            record_ns(&mut h, ns);
        }
        let bytes = base64::engine::general_purpose::STANDARD.decode(to_base64(&h)).unwrap();
        let back: LatencyHistogram = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.count_at(2_000), 2);
        assert!(back.equivalent(back.max(), 5_000_000));
    }

    #[test]
    fn empty_summary_has_no_values() {
        let s = LatencySummaryUs::of(&new_latency_histogram());
        assert_eq!(s, LatencySummaryUs::default());
        let json = serde_json::to_value(s).unwrap();
        assert!(json["p99.9"].is_null());
    }
}
