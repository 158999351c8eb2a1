//! Accumulators for one replication: time averages (areas under a step function), tallies of
//! times with an HDR histogram, and per-batch sums for batch means. Everything restarts at the
//! end of the warm-up; the current levels (jobs present) carry over, only their areas restart.

use hdrhistogram::Histogram;

/// Histogram values are model time times this: integer "nano-units". With the model's time unit
/// taken as one second they are nanoseconds, the unit of the lab's measured histograms.
pub const NANOUNITS: f64 = 1e9;

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
        let v = (x * NANOUNITS).round().max(1.0) as u64;
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

/// The q-quantile of a histogram of nano-units, in model units; NaN when empty.
pub fn quantile(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        return f64::NAN;
    }
    h.median_equivalent(h.value_at_quantile(q)) as f64 / NANOUNITS
}

/// One class's responses.
#[derive(Clone, Debug, Default)]
pub struct ClassRecorder {
    pub responses: Tally,
    pub dropped: u64,
    /// (completions, sum of response times) per batch.
    pub batches: Vec<(u64, f64)>,
}

/// One station's levels and residence times.
#[derive(Clone, Debug, Default)]
pub struct StationRecorder {
    pub present: TimeAverage,
    pub busy: TimeAverage,
    pub residence: Tally,
    pub dropped: u64,
}

impl StationRecorder {
    pub fn restart(&mut self, now: f64) {
        self.present.restart(now);
        self.busy.restart(now);
        self.residence = Tally::default();
        self.dropped = 0;
    }
}
