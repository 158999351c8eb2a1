//! Accumulators for one replication: time averages (areas under a step function), tallies of
//! times with an HDR histogram, per-batch sums for batch means, and the binned series of requests in
//! system MSER reads. Everything restarts at the end of the warm-up; the current levels (jobs present)
//! carry over, only their areas restart.

use std::borrow::Cow;

use hdrhistogram::Histogram;

use crate::output::BatchMeans;
use crate::spec::StopMetric;
use crate::stats::Estimate;

/// Histogram values are model time times this: integer "nano-units". With the model's time unit
/// taken as one second they are nanoseconds, the unit of the lab's measured histograms.
pub const NANOUNITS: f64 = 1e9;

/// A time as a histogram value: `(x * NANOUNITS).round().max(1.0) as u64`, bit for bit, without
/// the call to `round` (a library function on baseline x86-64, paid twice per request). Below
/// 2^53 the truncation `i` and the fraction `y - i` are exact, so comparing the fraction with
/// 0.5 rounds half away from zero as `round` does; from 2^53 on every f64 is an integer. The
/// truncation goes through `i64`, one instruction each way (`u64` conversions take several).
#[inline]
pub fn nanounits(x: f64) -> u64 {
    let y = x * NANOUNITS;
    // NaN, negatives and everything below 1 (which rounds to 0 or 1) give 1.
    if y.is_nan() || y < 1.0 {
        return 1;
    }
    if y >= (1u64 << 53) as f64 {
        return y as u64;
    }
    let i = y as i64;
    (if y - i as f64 >= 0.5 { i + 1 } else { i }) as u64
}

/// The time average of a piecewise-constant level (jobs present, busy servers).
#[derive(Clone, Debug, Default)]
pub struct TimeAverage {
    last: f64,
    level: f64,
    area: f64,
}

impl TimeAverage {
    #[inline]
    pub fn set(&mut self, now: f64, level: f64) {
        self.area += self.level * (now - self.last);
        self.last = now;
        self.level = level;
    }

    pub fn restart(&mut self, now: f64) {
        self.area = 0.0;
        self.last = now;
    }

    /// The area up to `now`.
    pub fn area(&self, now: f64) -> f64 {
        self.area + self.level * (now - self.last)
    }
}

/// An HDR histogram that auto-resizes (never drops or clamps a sample).
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid HDR bounds");
    h.auto(true);
    h
}

/// Count, sum, maximum and histogram of a time (response or residence).
#[derive(Clone, Debug)]
pub struct Tally {
    pub count: u64,
    pub sum: f64,
    pub max: f64,
    pub hist: Histogram<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { count: 0, sum: 0.0, max: 0.0, hist: new_histogram() }
    }
}

impl Tally {
    #[inline]
    pub fn record(&mut self, x: f64) {
        self.count += 1;
        self.sum += x;
        self.max = self.max.max(x);
        let v = nanounits(x);
        if self.hist.record(v).is_err() {
            self.hist.saturating_record(v);
        }
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum / self.count as f64
        }
    }

    /// The q-quantile in model units (the middle of its HDR bucket; relative error < 0.1 %).
    pub fn quantile(&self, q: f64) -> f64 {
        quantile(&self.hist, q)
    }
}

/// The histograms added up; a single one passes through as it is (borrowed where it is): one
/// class, one replication is the common case, and a copy of a histogram spanning seconds in
/// nano-units moves a few hundred KiB of fresh memory. The counts are the same either way; the
/// encoding's header then gives the highest trackable value the recording reached.
pub fn sum_histograms<'h>(mut hists: impl Iterator<Item = Cow<'h, Histogram<u64>>>) -> Cow<'h, Histogram<u64>> {
    let Some(first) = hists.next() else { return Cow::Owned(new_histogram()) };
    let Some(second) = hists.next() else { return first };
    let mut all = new_histogram();
    for h in [first, second].into_iter().chain(hists) {
        all.add(&*h).expect("auto-resizing histograms accept any value");
    }
    Cow::Owned(all)
}

/// A histogram as the lab stores one: HdrHistogram V2-deflate, base64. The bytes are
/// `V2DeflateSerializer`'s (cookie, compressed length, zlib stream of the V2 encoding at the
/// default level), but the compressor is kept per thread and reset between histograms: the
/// serializer builds a fresh one for each, whose tables (a few hundred KiB, zeroed) cost a short
/// run more than its events.
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    ENCODER.with_borrow_mut(|e| base64::engine::general_purpose::STANDARD.encode(e.encode(h)))
}

/// The V2-deflate cookie of the HdrHistogram encoding specification (its base, 0x1c849304,
/// with the word size 0x10 of V2).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

thread_local! {
    static ENCODER: std::cell::RefCell<Encoder> = std::cell::RefCell::new(Encoder::default());
}

/// Buffers and compressor of [`encode`], reused from one histogram to the next.
struct Encoder {
    v2: hdrhistogram::serialization::V2Serializer,
    plain: Vec<u8>,
    out: Vec<u8>,
    zlib: flate2::Compress,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            v2: hdrhistogram::serialization::V2Serializer::new(),
            plain: Vec::new(),
            out: Vec::new(),
            zlib: flate2::Compress::new(flate2::Compression::default(), true),
        }
    }
}

impl Encoder {
    fn encode(&mut self, h: &Histogram<u64>) -> &[u8] {
        use hdrhistogram::serialization::Serializer as _;
        self.plain.clear();
        self.v2.serialize(h, &mut self.plain).expect("serialising into a Vec cannot fail");
        self.out.clear();
        self.out.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]); // the compressed length, filled in below
        self.zlib.reset();
        loop {
            // compress_vec writes only into spare capacity: grow it until the stream ends.
            self.out.reserve(self.plain.len() / 2 + 64);
            let read = self.zlib.total_in() as usize;
            let status = self
                .zlib
                .compress_vec(&self.plain[read..], &mut self.out, flate2::FlushCompress::Finish)
                .expect("deflating into a Vec cannot fail");
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        let length = (self.out.len() - 8) as u32;
        self.out[4..8].copy_from_slice(&length.to_be_bytes());
        &self.out
    }
}

/// The q-quantile of a histogram of nano-units, in model units; NaN when empty.
pub fn quantile(h: &Histogram<u64>, q: f64) -> f64 {
    quantiles(h, [q])[0]
}

/// The quantiles of a histogram of nano-units at `qs` (in increasing order), in model units;
/// NaN when empty. Each is `value_at_quantile`'s answer, bit for bit, found in one walk over
/// the bins from the lowest recorded to the highest. `value_at_quantile` walks the whole
/// counts array from zero for every quantile, and a histogram spanning seconds in nano-units
/// holds tens of thousands of bins, nearly all of them empty below the responses: that walk
/// cost a short run more than its events.
pub fn quantiles<const N: usize>(h: &Histogram<u64>, qs: [f64; N]) -> [f64; N] {
    let mut out = [f64::NAN; N];
    if h.is_empty() {
        return out;
    }
    debug_assert!(qs.windows(2).all(|w| w[0] <= w[1]), "quantiles are asked in increasing order");
    // `value_at_quantile`'s rank: ceil(q * count), at least 1. Its answer is the highest value
    // of the first bin whose cumulative count reaches the rank; q = 0 asks for the lowest value
    // of that bin instead, which the walk below does not give.
    let rank = |q: f64| ((q.min(1.0) * h.len() as f64).ceil() as u64).max(1);
    let mut next = 0;
    while next < N && qs[next] <= 0.0 {
        out[next] = h.median_equivalent(h.value_at_quantile(qs[next])) as f64 / NANOUNITS;
        next += 1;
    }
    let (mut bin, top) = (if h.min() == 0 { 0 } else { h.min_nz() }, h.max());
    let mut below = 0u64;
    while next < N && bin <= top {
        below += h.count_at(bin);
        while next < N && below >= rank(qs[next]) {
            out[next] = h.median_equivalent(bin) as f64 / NANOUNITS;
            next += 1;
        }
        bin = h.next_non_equivalent(bin);
    }
    out
}

/// One class's responses.
#[derive(Clone, Debug, Default)]
pub struct ClassRecorder {
    pub responses: Tally,
    pub dropped: u64,
}

/// One class's share of a station: jobs present, servers busy, residence times.
#[derive(Clone, Debug, Default)]
pub struct StationClassRecorder {
    pub present: TimeAverage,
    pub busy: TimeAverage,
    pub departures: u64,
    pub residence_sum: f64,
}

/// One station's levels and residence times, in total and per class.
#[derive(Clone, Debug, Default)]
pub struct StationRecorder {
    pub present: TimeAverage,
    pub busy: TimeAverage,
    pub residence: Tally,
    pub dropped: u64,
    pub classes: Vec<StationClassRecorder>,
}

impl StationRecorder {
    pub fn new(classes: usize) -> Self {
        StationRecorder { classes: vec![StationClassRecorder::default(); classes], ..Default::default() }
    }

    pub fn restart(&mut self, now: f64) {
        self.present.restart(now);
        self.busy.restart(now);
        self.residence = Tally::default();
        self.dropped = 0;
        for c in &mut self.classes {
            c.present.restart(now);
            c.busy.restart(now);
            c.departures = 0;
            c.residence_sum = 0.0;
        }
    }
}

/// Completions and response times in consecutive batches of equal width from `start`. A run
/// extended by a stop rule adds batches one at a time; when their number reaches twice the
/// minimum, adjacent pairs merge (the width doubles), so there are always between `min` and
/// `2 min` batches and the batch length grows with the run, which keeps batch means nearly
/// independent as the run lengthens (batch sizes that double as the run grows, in the manner of
/// Fishman and Yarberry 1997, INFORMS J. Computing 9(3)).
#[derive(Clone, Debug)]
pub struct BatchSeries {
    start: f64,
    width: f64,
    min: usize,
    counts: Vec<u64>,
    sums: Vec<f64>,
    /// Per-batch histograms, kept only when a batch quantile is needed.
    hists: Option<Vec<Histogram<u64>>>,
}

impl BatchSeries {
    pub fn new(start: f64, end: f64, batches: u32, with_histograms: bool) -> Self {
        let k = batches as usize;
        BatchSeries {
            start,
            width: (end - start) / k as f64,
            min: k,
            counts: vec![0; k],
            sums: vec![0.0; k],
            hists: with_histograms.then(|| vec![new_histogram(); k]),
        }
    }

    #[inline]
    pub fn record(&mut self, now: f64, response: f64) {
        let i = (((now - self.start) / self.width) as usize).min(self.counts.len() - 1);
        self.counts[i] += 1;
        self.sums[i] += response;
        if let Some(h) = &mut self.hists {
            let v = nanounits(response);
            if h[i].record(v).is_err() {
                h[i].saturating_record(v);
            }
        }
    }

    /// The end of the last batch.
    pub fn end(&self) -> f64 {
        self.start + self.width * self.counts.len() as f64
    }

    /// Where [`BatchSeries::extend`] would move the end.
    pub fn next_end(&self) -> f64 {
        if self.counts.len() >= 2 * self.min {
            self.start + self.width * 2.0 * (self.min + 1) as f64
        } else {
            self.end() + self.width
        }
    }

    /// Add one batch, after merging pairs if there are already twice the minimum.
    pub fn extend(&mut self) {
        if self.counts.len() >= 2 * self.min {
            self.counts = self.counts.chunks(2).map(|p| p.iter().sum()).collect();
            self.sums = self.sums.chunks(2).map(|p| p.iter().sum()).collect();
            if let Some(h) = &mut self.hists {
                *h = h
                    .chunks(2)
                    .map(|p| {
                        let mut m = p[0].clone();
                        m.add(&p[1]).expect("auto-resizing histograms accept any value");
                        m
                    })
                    .collect();
            }
            self.width *= 2.0;
        }
        self.counts.push(0);
        self.sums.push(0.0);
        if let Some(h) = &mut self.hists {
            h.push(new_histogram());
        }
    }

    /// The interval over batches of one metric.
    pub fn estimate(&self, metric: StopMetric, confidence: f64) -> Estimate {
        match metric {
            StopMetric::Throughput => {
                Estimate::from_values(self.counts.iter().map(|&c| c as f64 / self.width), confidence)
            }
            StopMetric::MeanResponse => Estimate::from_values(
                self.counts.iter().zip(&self.sums).map(|(&c, &s)| if c == 0 { f64::NAN } else { s / c as f64 }),
                confidence,
            ),
            StopMetric::P99 => {
                Estimate::from_values(self.hists.iter().flatten().map(|h| quantile(h, 0.99)), confidence)
            }
        }
    }

    pub fn report(&self, confidence: f64) -> BatchMeans {
        BatchMeans {
            batches: self.counts.len() as u32,
            width: self.width,
            throughput: self.estimate(StopMetric::Throughput, confidence),
            mean_response: self.estimate(StopMetric::MeanResponse, confidence),
            p99: self.hists.is_some().then(|| self.estimate(StopMetric::P99, confidence)),
        }
    }
}

/// Time averages of a level (requests in system) over equal time bins of [0, horizon]: the
/// series MSER reads. Bins are time-aligned, so the series of several replications average bin
/// by bin.
#[derive(Clone, Debug)]
pub struct BinnedLevel {
    /// Width of one bin.
    width: f64,
    areas: Vec<f64>,
    last: f64,
    level: f64,
}

impl BinnedLevel {
    pub fn new(horizon: f64, bins: usize) -> Self {
        BinnedLevel { width: horizon / bins as f64, areas: vec![0.0; bins], last: 0.0, level: 0.0 }
    }

    /// The level changes to `level` at `now`: the old level's area goes to the bins it covered.
    pub fn set(&mut self, now: f64, level: f64) {
        let n = self.areas.len();
        let mut t = self.last;
        let mut i = ((t / self.width) as usize).min(n - 1);
        while t < now {
            // Bin ends are computed, not accumulated; step past one that rounding put at or
            // before t, so every pass moves time forward.
            let mut bin_end = if i == n - 1 { f64::INFINITY } else { (i + 1) as f64 * self.width };
            while bin_end <= t {
                i += 1;
                bin_end = if i == n - 1 { f64::INFINITY } else { (i + 1) as f64 * self.width };
            }
            let until = now.min(bin_end);
            self.areas[i] += self.level * (until - t);
            t = until;
        }
        self.last = now;
        self.level = level;
    }

    /// Bin widths and time averages per bin, closed at `now`.
    pub fn finish(mut self, now: f64) -> (f64, Vec<f64>) {
        self.set(now, self.level);
        let w = self.width;
        (w, self.areas.into_iter().map(|a| a / w).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nanounits` is the rounding it replaces, on every kind of input: ties at .5, the edges
    /// of exactness (2^52, 2^53), values below 1, zero, negatives, NaN, infinities, and a
    /// seeded sweep of times over 24 orders of magnitude.
    #[test]
    fn nanounits_is_round_max_1() {
        let reference = |x: f64| (x * NANOUNITS).round().max(1.0) as u64;
        let mut xs = vec![
            0.0,
            -0.0,
            -1.0,
            1e-10,
            4.9e-10,
            5e-10,
            1e-9,
            1.5e-9,
            2.5e-9,
            0.025,
            12.419670427577863,
            (1u64 << 52) as f64 / NANOUNITS,
            (1u64 << 53) as f64 / NANOUNITS,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
        ];
        let mut rng = archlab_prng::Xoshiro256pp::new(5);
        for _ in 0..200_000 {
            let x = rng.uniform() * 10f64.powi(rng.below(24) as i32 - 12);
            xs.push(x);
            // Exact halves in nano-units: k + 0.5.
            xs.push((rng.below(1 << 30) as f64 + 0.5) / NANOUNITS);
        }
        for x in xs {
            assert_eq!(nanounits(x), reference(x), "{x:e}");
        }
    }

    #[test]
    fn binned_levels_split_areas_at_bin_ends() {
        // Bins of 0.1 over [0, 1] (0.1 is not exact in binary, so ends are rounded): level 1
        // on [0.05, 0.25), 3 on [0.25, 1]. Each bin's average is its covered fraction x level.
        let mut b = BinnedLevel::new(1.0, 10);
        b.set(0.05, 1.0);
        b.set(0.25, 3.0);
        b.set(0.3, 3.0); // a change landing exactly on a bin end
        let (w, avg) = b.finish(1.0);
        assert!((w - 0.1).abs() < 1e-15);
        let expected = [0.5, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0];
        for (a, e) in avg.iter().zip(expected) {
            assert!((a - e).abs() < 1e-9, "{avg:?}");
        }
    }

    /// Histograms of every shape the kernel records: empty, one value, a value at zero, narrow
    /// far from zero (a closed queue's responses), wide (12 orders of magnitude), heavy counts.
    fn histograms() -> Vec<Histogram<u64>> {
        let mut rng = archlab_prng::Xoshiro256pp::new(11);
        let mut out = vec![new_histogram()];
        let mut one = new_histogram();
        one.record(12_500_000_000).unwrap();
        out.push(one);
        let mut zero = Histogram::new_with_bounds(1, 2, 3).unwrap();
        zero.auto(true);
        zero.record(0).unwrap();
        zero.record(7).unwrap();
        out.push(zero);
        for shape in 0..60 {
            let mut h = new_histogram();
            let n = 1 + rng.below(20_000);
            for _ in 0..n {
                let v = match shape % 3 {
                    0 => 12_000_000_000 + rng.below(1_000_000_000) as u64,
                    1 => 10f64.powf(rng.uniform() * 12.0) as u64 + 1,
                    _ => 1 + rng.below(50) as u64,
                };
                h.record_n(v, 1 + rng.below(3) as u64).unwrap();
            }
            out.push(h);
        }
        out
    }

    /// `quantiles` is `value_at_quantile` (as `quantile` used to call it) at every quantile the
    /// kernel asks, and at the edges 0, 1, above 1, and ranks that land exactly on a count.
    #[test]
    fn quantiles_are_value_at_quantile() {
        let reference = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                f64::NAN
            } else {
                h.median_equivalent(h.value_at_quantile(q)) as f64 / NANOUNITS
            }
        };
        for h in histograms() {
            let qs = [0.0, 1e-9, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0, 1.5];
            let got = quantiles(&h, qs);
            for (q, g) in qs.iter().zip(got) {
                let want = reference(&h, *q);
                assert!(g.to_bits() == want.to_bits(), "q = {q} of {} values: {g} != {want}", h.len());
            }
            for k in 1..=h.len().min(50) {
                let q = k as f64 / h.len() as f64;
                assert_eq!(quantile(&h, q).to_bits(), reference(&h, q).to_bits(), "rank {k} of {}", h.len());
            }
        }
    }

    /// `encode` writes `V2DeflateSerializer`'s bytes exactly, with its compressor reused (the
    /// same thread encodes every histogram here, each after a different one).
    #[test]
    fn encode_is_the_v2_deflate_serializer() {
        use base64::Engine as _;
        use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
        for h in histograms() {
            let mut bytes = Vec::new();
            V2DeflateSerializer::new().serialize(&h, &mut bytes).unwrap();
            let want = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let got = encode(&h);
            assert_eq!(got, want, "{} values", h.len());
            let back: Histogram<u64> = Deserializer::new().deserialize(&mut bytes.as_slice()).unwrap();
            assert_eq!(back, h);
        }
    }
}
