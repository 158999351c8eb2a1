//! The adaptive pool: a controller inside the server that resizes a worker pool while it serves,
//! by hill climbing on measured throughput, as the .NET thread pool does (Hellerstein,
//! Morrison and Eilebrecht, "Optimizing concurrency levels in the .NET ThreadPool: a case study
//! of controller design and implementation", FeBID 2008). `pool_control = "hill-climb"`
//! (architectures `blocking` and `seda-queue`) turns it on.
//!
//! Mechanism: the pool starts its full size (`threads`, or `handlers` for SEDA), and a [`Gate`]
//! decides how many of those threads may handle a request at once: a thread takes a permit
//! before it runs a request's workload and gives it back after, so the pool's *effective* size
//! is the gate's limit and the threads beyond it block in [`Gate::enter`] (with their request
//! already read: requests queue there, and in the pool's hand-off as before). A controller
//! thread ([`start`]) wakes every `pool_interval_ms`, reads the requests completed since the last
//! interval and hands that throughput to [`HillClimber::observe`], a pure state machine that
//! returns the next limit; the limits chosen over time (with the milliseconds since the
//! controller started) are kept in [`size_history`], which the `rusage` line reports as
//! `pool_sizes`.
//!
//! The climber is the probe-and-compare form the .NET paper starts from (not its later signal
//! injection): one interval measures the adopted size, the next probes `size ± step`. A probe
//! that beats the adopted size's throughput by more than `threshold` is adopted and is followed
//! at once by the next probe in the same direction, compared with the probe's own fresh
//! measurement (a climb costs one interval per step, not two); two wins in a row double the
//! step (up to `max_step`); a probe that does not win reverses the direction, and failures on
//! both sides halve the step, down to `min_step`. Following a change of the plant (the request mix) is the
//! regime detector: every measurement of the adopted size is compared with the previous one,
//! and a shift beyond `change_band` (relative, far above one interval's sampling error) means
//! the throughput curve itself moved -- the climber resets its step to `max_step` and probes
//! towards the larger side of its range. This is the .NET controller's answer to the same
//! problem (its change-point detection restarts the climb when throughput at a fixed
//! concurrency moves); without it a climber whose step shrank to its minimum on a flat curve
//! needs many cycles to cross the range after the change. It is the same algorithm as the
//! Python `archlab.tuning.HillClimber` (tested there on simulated plants and against this one
//! through `archlab._native.PoolClimber`) and tested here on synthetic plants.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How the pool is sized while serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolControl {
    /// Hill climbing on throughput (see the module documentation).
    HillClimb,
}

impl PoolControl {
    pub const ALL: [PoolControl; 1] = [PoolControl::HillClimb];

    pub fn as_str(self) -> &'static str {
        match self {
            PoolControl::HillClimb => "hill-climb",
        }
    }
}

/// Default control interval: long enough for a few hundred completions at the rates the lab's
/// workloads reach, so that one interval's throughput has a sampling error of a few percent.
pub const POOL_INTERVAL_DEFAULT_MS: u64 = 500;
/// A probe must beat the current size by this fraction to be adopted: above the sampling error
/// of one interval (a renewal count of n completions has a relative standard error near
/// 1/sqrt(n): 4.5% at 500 completions, and a difference of two intervals sqrt(2) times that).
pub const THRESHOLD: f64 = 0.05;

/// A throughput that moves by more than this fraction of the larger of two measurements of the
/// same size means the plant changed. 40% is over six standard errors of the difference of two
/// intervals of 500 completions (sqrt(2) x 1/sqrt(500) = 6.3%) and above the swings between
/// intervals of a machine shared with other work (with 25%, a settled pool on a 2-core machine
/// at load 15-20 showed restarts every few seconds, each a probe half the range away), while a change of the program that matters moves throughput by more: a pool of 3
/// threads serving 370 requests/s of a CPU-bound program served 107/s once the program became
/// three HTTP calls in a loop (-71%).
pub const CHANGE_BAND: f64 = 0.4;

/// The parameters of a [`HillClimber`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClimberSettings {
    /// The size to start at.
    pub initial: usize,
    /// Sizes stay in `minimum..=maximum` (both >= 1).
    pub minimum: usize,
    pub maximum: usize,
    /// The first step, then within `min_step..=max_step`.
    pub step: usize,
    pub min_step: usize,
    pub max_step: usize,
    /// The relative gain a probe needs to be adopted.
    pub threshold: f64,
    /// The relative shift of the adopted size's throughput that restarts the climb.
    pub change_band: f64,
}

impl ClimberSettings {
    /// The live controller's settings for a pool of `minimum..=maximum` threads, starting at
    /// `minimum`: a first step of an eighth of the range, doubling up to half of it, so that the
    /// range is crossed in a few intervals; a minimum step of a sixteenth (rounded up) so that a
    /// flat curve does not leave the climber probing one thread at a time.
    pub fn for_range(minimum: usize, maximum: usize) -> Self {
        let span = maximum.saturating_sub(minimum).max(1);
        let min_step = span.div_ceil(16).max(1);
        ClimberSettings {
            initial: minimum,
            minimum,
            maximum,
            step: (span / 8).max(min_step),
            min_step,
            max_step: (span / 2).max(min_step),
            threshold: THRESHOLD,
            change_band: CHANGE_BAND,
        }
    }
}

/// Hill climbing on throughput as a pure state machine: O(1) state, no clock, no I/O.
#[derive(Clone, Debug)]
pub struct HillClimber {
    current: usize,
    minimum: usize,
    maximum: usize,
    step: usize,
    min_step: usize,
    max_step: usize,
    threshold: f64,
    change_band: f64,
    up: bool,
    probe: Option<usize>,
    /// The adopted size's last measured throughput (None before the first interval).
    current_rate: Option<f64>,
    wins: u32,
    failed_sides: u32,
    changes: u64,
}

impl HillClimber {
    /// A climber with `settings` (sizes and steps clamped to be >= 1 and consistent).
    pub fn new(settings: ClimberSettings) -> Self {
        let minimum = settings.minimum.max(1);
        let maximum = settings.maximum.max(minimum);
        let max_step = settings.max_step.max(1);
        let min_step = settings.min_step.clamp(1, max_step);
        HillClimber {
            current: settings.initial.clamp(minimum, maximum),
            minimum,
            maximum,
            step: settings.step.clamp(min_step, max_step),
            min_step,
            max_step,
            threshold: settings.threshold,
            change_band: settings.change_band,
            up: true,
            probe: None,
            current_rate: None,
            wins: 0,
            failed_sides: 0,
            changes: 0,
        }
    }

    /// The size to run the next control interval with.
    pub fn size(&self) -> usize {
        self.probe.unwrap_or(self.current)
    }

    /// The size the climber has adopted (not a probe).
    pub fn current(&self) -> usize {
        self.current
    }

    /// How many changes of the plant the climber has detected (and restarted its climb for).
    pub fn changes_detected(&self) -> u64 {
        self.changes
    }

    /// Report the throughput of the interval just run at [`HillClimber::size`]; returns the
    /// size for the next interval. A throughput that is not a number counts as 0.
    pub fn observe(&mut self, throughput: f64) -> usize {
        let x = if throughput.is_finite() { throughput.max(0.0) } else { 0.0 };
        match self.probe.take() {
            None => {
                if let Some(previous) = self.current_rate {
                    if (x - previous).abs() > self.change_band * x.max(previous) {
                        self.restart();
                    }
                }
                self.current_rate = Some(x);
                self.probe_next();
            }
            Some(probe) => {
                if x > self.current_rate.unwrap_or(0.0) * (1.0 + self.threshold) {
                    self.current = probe;
                    self.current_rate = Some(x);
                    self.failed_sides = 0;
                    self.wins += 1;
                    if self.wins >= 2 {
                        self.step = (self.step * 2).min(self.max_step);
                        self.wins = 0;
                    }
                    // Chain: the probe was just measured, so the next probe compares with it.
                    let target = self.target();
                    self.probe = (target != self.current).then_some(target);
                } else {
                    self.lost();
                }
            }
        }
        self.size()
    }

    /// The plant changed: probe widely again, towards the side of the range with more room.
    fn restart(&mut self) {
        self.changes += 1;
        self.step = self.max_step;
        self.wins = 0;
        self.failed_sides = 0;
        self.up = self.maximum - self.current >= self.current - self.minimum;
    }

    fn probe_next(&mut self) {
        let mut target = self.target();
        if target == self.current {
            self.lost();
            target = self.target();
        }
        self.probe = (target != self.current).then_some(target);
    }

    fn target(&self) -> usize {
        let m = if self.up { self.current.saturating_add(self.step) } else { self.current.saturating_sub(self.step) };
        m.clamp(self.minimum, self.maximum)
    }

    fn lost(&mut self) {
        self.wins = 0;
        self.up = !self.up;
        self.failed_sides += 1;
        if self.failed_sides >= 2 {
            self.step = (self.step / 2).max(self.min_step);
            self.failed_sides = 0;
        }
    }
}

/// How many of a pool's threads may handle a request at once (see the module documentation).
pub struct Gate {
    state: Mutex<GateState>,
    freed: Condvar,
    completed: AtomicU64,
}

struct GateState {
    limit: usize,
    active: usize,
}

impl Gate {
    pub fn new(limit: usize) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(GateState { limit: limit.max(1), active: 0 }),
            freed: Condvar::new(),
            completed: AtomicU64::new(0),
        })
    }

    /// Wait until fewer than `limit` threads hold a permit, then take one.
    pub fn enter(&self) -> Permit<'_> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.active >= s.limit {
            s = self.freed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.active += 1;
        Permit { gate: self }
    }

    pub fn set_limit(&self, limit: usize) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.limit = limit.max(1);
        drop(s);
        self.freed.notify_all();
    }

    pub fn limit(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).limit
    }

    /// Requests completed through the gate since it was made.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }
}

/// A thread's right to handle one request; given back when dropped.
pub struct Permit<'a> {
    gate: &'a Gate,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.gate.completed.fetch_add(1, Ordering::Relaxed);
        let mut s = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        s.active -= 1;
        drop(s);
        self.gate.freed.notify_one();
    }
}

/// The sizes the process's controller chose: (milliseconds since it started, size), one entry
/// per change (the first is the starting size), at most [`HISTORY_MAX`] (then the oldest go).
pub fn size_history() -> Vec<(u64, usize)> {
    history().lock().unwrap_or_else(|e| e.into_inner()).clone()
}

pub const HISTORY_MAX: usize = 4096;

/// The size the process's controller has adopted (its probes aside); 0 before it starts.
pub fn adopted_size() -> usize {
    ADOPTED.load(Ordering::Relaxed)
}

static ADOPTED: AtomicUsize = AtomicUsize::new(0);

fn history() -> &'static Mutex<Vec<(u64, usize)>> {
    static SIZES: OnceLock<Mutex<Vec<(u64, usize)>>> = OnceLock::new();
    SIZES.get_or_init(|| Mutex::new(Vec::new()))
}

fn record(started: Instant, size: usize) {
    let mut h = history().lock().unwrap_or_else(|e| e.into_inner());
    if h.last().map(|&(_, s)| s) != Some(size) {
        if h.len() >= HISTORY_MAX {
            h.remove(0);
        }
        h.push((started.elapsed().as_millis() as u64, size));
    }
}

/// What the controller needs from the server's options.
#[derive(Clone, Copy, Debug)]
pub struct ControlSettings {
    pub control: PoolControl,
    /// Smallest size, and the size it starts at.
    pub minimum: usize,
    /// Largest size: the pool's threads.
    pub maximum: usize,
    pub interval: Duration,
}

/// Start the controller of a pool of `settings.maximum` threads: returns the gate the pool's
/// threads pass through. The controller thread lives as long as the gate (it holds it weakly).
pub fn start(settings: ControlSettings) -> std::io::Result<Arc<Gate>> {
    let ControlSettings { control: PoolControl::HillClimb, minimum, maximum, interval } = settings;
    let minimum = minimum.clamp(1, maximum.max(1));
    let gate = Gate::new(minimum);
    let weak: Weak<Gate> = Arc::downgrade(&gate);
    let mut climber = HillClimber::new(ClimberSettings::for_range(minimum, maximum));
    std::thread::Builder::new().name("pool-control".into()).spawn(move || {
        let started = Instant::now();
        record(started, minimum);
        ADOPTED.store(minimum, Ordering::Relaxed);
        let mut last = (Instant::now(), 0u64);
        loop {
            std::thread::sleep(interval);
            let Some(gate) = weak.upgrade() else { return };
            let (now, done) = (Instant::now(), gate.completed());
            let rate = (done - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-9);
            last = (now, done);
            let size = climber.observe(rate);
            gate.set_limit(size);
            record(started, size);
            ADOPTED.store(climber.current(), Ordering::Relaxed);
        }
    })?;
    Ok(gate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use archlab_prng::Xoshiro256pp;

    /// The machine-repairman plant of the Python controller's test: one CPU of service time
    /// s (1 + k (m - 1)) per request (k: the cost of each extra thread), a wait z outside the
    /// CPU, n >= m clients: X(m) = (1 - p0(m)) / s(m), p0 from the birth-death chain.
    fn repairman(m: usize, s: f64, z: f64, k: f64) -> f64 {
        let sm = s * (1.0 + k * (m as f64 - 1.0));
        let (mut term, mut total) = (1.0, 1.0);
        for j in 1..=m {
            term *= (m - j + 1) as f64 * sm / z;
            total += term;
        }
        (1.0 - 1.0 / total) / sm
    }

    fn optimum_band(s: f64, z: f64, k: f64, max: usize, tol: f64) -> (usize, Vec<usize>) {
        let xs: Vec<f64> = (1..=max).map(|m| repairman(m, s, z, k)).collect();
        let best = (1..=max).max_by(|&a, &b| xs[a - 1].total_cmp(&xs[b - 1])).unwrap();
        (best, (1..=max).filter(|&m| xs[m - 1] >= (1.0 - tol) * xs[best - 1]).collect())
    }

    /// Throughput of one interval: the plant's value times a noise of relative sd `sd`
    /// (the sampling error of an interval's completion count, see THRESHOLD).
    fn noisy(x: f64, sd: f64, rng: &mut Xoshiro256pp) -> f64 {
        x * (1.0 + sd * rng.normal())
    }

    fn climber(initial: usize, minimum: usize, maximum: usize, step: usize, max_step: usize) -> HillClimber {
        HillClimber::new(ClimberSettings {
            initial,
            minimum,
            maximum,
            step,
            min_step: 1,
            max_step,
            threshold: THRESHOLD,
            change_band: CHANGE_BAND,
        })
    }

    #[test]
    fn climbs_to_the_known_optimum_and_follows_a_change_of_the_plant() {
        // Noise sd 1.5%: an interval of ~4,000 completions. The band accepted is the sizes within
        // 5% (the threshold) of the best, which a probe cannot tell from the best reliably.
        let (k, max) = (0.02, 80);
        let (best1, band1) = optimum_band(1.0, 9.0, k, max, THRESHOLD);
        let (best2, band2) = optimum_band(1.0, 29.0, k, max, THRESHOLD);
        assert_eq!((best1, best2), (13, 26)); // as the Python test computes them
        let mut rng = Xoshiro256pp::new(7);
        let mut c = climber(2, 1, max, 4, 32);
        let mut sizes = Vec::new();
        for i in 0..160 {
            let z = if i < 80 { 9.0 } else { 29.0 };
            c.observe(noisy(repairman(c.size(), 1.0, z, k), 0.015, &mut rng));
            sizes.push(c.current());
        }
        assert!(sizes[50..80].iter().all(|m| band1.contains(m)), "{sizes:?} vs {band1:?}");
        assert!(sizes[130..].iter().all(|m| band2.contains(m)), "{sizes:?} vs {band2:?}");
    }

    #[test]
    fn a_jump_of_the_optimum_from_4_to_31_is_followed_within_six_intervals() {
        // Plant 1 (wait 1 per unit of CPU) is best at 4 threads, plant 2 (wait 39) at 31; the
        // noise is plant 1's interval sampling error, as above. The bound, from the algorithm on
        // this plant: the change is seen at the next measurement of the adopted size (<= 2
        // intervals: a probe interval, then that measurement, which moves by over 80%, beyond
        // CHANGE_BAND); the restart probes at the adopted size + max_step (32), which from any
        // size of band 1 (3..=7) lands in 35..=39, inside band 2 (27..=38) or one past it with
        // a throughput far above the small size's, so it wins (1 interval); the chained probe
        // beyond is lost or clamped (1 interval); 2 more for a probe lost to noise. Without the
        // restart, a climber whose step shrank to 1 at the first optimum needs about 13
        // intervals (two wins per doubling of the step).
        let (k, max) = (0.02, 80);
        let (best1, band1) = optimum_band(1.0, 1.0, k, max, THRESHOLD);
        let (best2, band2) = optimum_band(1.0, 39.0, k, max, THRESHOLD);
        assert_eq!((best1, best2), (4, 31));
        for seed in 0..20 {
            let mut rng = Xoshiro256pp::new(seed);
            let mut c = climber(2, 1, max, 4, 32);
            let mut sizes = Vec::new();
            for i in 0..120 {
                let z = if i < 60 { 1.0 } else { 39.0 };
                c.observe(noisy(repairman(c.size(), 1.0, z, k), 0.015, &mut rng));
                sizes.push(c.current());
            }
            assert!(sizes[30..60].iter().all(|m| band1.contains(m)), "seed {seed}: {sizes:?} vs {band1:?}");
            assert!(sizes[66..].iter().all(|m| band2.contains(m)), "seed {seed}: {sizes:?} vs {band2:?}");
            assert_eq!(c.changes_detected(), 1, "seed {seed}: {sizes:?}");
        }
    }

    #[test]
    fn a_fixed_plant_gives_no_false_change_and_no_oscillation_beyond_the_band() {
        // Over 200 intervals of 1.5% noise the shift between two measurements of one size has an
        // sd of 2.1%: CHANGE_BAND (40%) is 19 sd away, so a detected change is a bug.
        let (k, max) = (0.02, 80);
        let (_, band) = optimum_band(1.0, 9.0, k, max, THRESHOLD);
        let mut rng = Xoshiro256pp::new(11);
        let mut c = HillClimber::new(ClimberSettings::for_range(1, max));
        let mut sizes = Vec::new();
        for _ in 0..200 {
            c.observe(noisy(repairman(c.size(), 1.0, 9.0, k), 0.015, &mut rng));
            sizes.push(c.current());
        }
        assert!(sizes[40..].iter().all(|m| band.contains(m)), "{sizes:?} vs {band:?}");
        assert_eq!(c.changes_detected(), 0);
    }

    #[test]
    fn the_live_settings_keep_a_sensible_minimum_step() {
        let s = ClimberSettings::for_range(1, 32);
        assert_eq!((s.step, s.min_step, s.max_step), (3, 2, 15));
        let s = ClimberSettings::for_range(4, 4);
        assert!(s.min_step >= 1 && s.min_step <= s.step && s.step <= s.max_step);
    }

    #[test]
    fn stays_on_a_flat_plant_and_within_bounds() {
        let mut c = climber(4, 2, 6, 4, 8);
        for _ in 0..40 {
            let m = c.observe(100.0);
            assert!((2..=6).contains(&m));
        }
        assert_eq!(c.current(), 4);
    }

    #[test]
    fn a_saturating_plant_stops_at_its_capacity() {
        // Throughput min(m, 6) * 100: every size from 6 up is equally good, none below is.
        let mut c = climber(1, 1, 64, 8, 32);
        for _ in 0..100 {
            c.observe(c.size().min(6) as f64 * 100.0);
        }
        assert!((6..=14).contains(&c.current()), "{}", c.current());
    }

    #[test]
    fn the_gate_admits_at_most_its_limit_and_counts_completions() {
        let gate = Gate::new(2);
        let peak = Arc::new(AtomicU64::new(0));
        let now = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (gate, peak, now) = (gate.clone(), peak.clone(), now.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _p = gate.enter();
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::yield_now();
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 2);
        assert_eq!(gate.completed(), 400);
        gate.set_limit(0);
        assert_eq!(gate.limit(), 1);
    }
}
