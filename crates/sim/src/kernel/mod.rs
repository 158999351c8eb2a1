//! The event-scheduling kernel: one replication of a compiled [`Model`]. State lives in this
//! struct only (no globals), so replications run side by side on threads. Each event advances
//! the clock and moves one job through its program until it blocks (queued, holding, waiting for
//! fork children, finished); jobs that a departure unblocks at the same instant go through a
//! FIFO ready list, drained before the next event, so every step is deterministic.

mod events;
mod jobs;
mod recorder;
mod stations;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use hdrhistogram::Histogram;

use self::events::{Event, EventList};
use self::jobs::{Jobs, NO_PARENT};
pub use self::recorder::{encode, new_histogram, quantile, quantiles, sum_histograms, NANOUNITS};
use self::recorder::{BatchSeries, BinnedLevel, ClassRecorder, Tally, TimeAverage};
use self::stations::{Kind, StationState};
use crate::model::{Arrivals, Model, Op, Pc, RunConfig, SourceKind, StationId, StopLimit, StopRule};
use crate::output::{ClassResult, LittleCheck, Replication, Responses, StationClassResult, StationResult};
use crate::rng::{Purpose, Stream};
use crate::spec::{Policy, StopMetric};

/// Histograms of one replication, kept out of [`Replication`] so that replications can be
/// pooled (merged) before anything is serialised.
pub struct Histograms {
    pub classes: Vec<Histogram<u64>>,
    pub stations: Vec<Histogram<u64>>,
}

/// Random streams of one replication, one per entity and purpose.
struct Streams {
    /// Per source, per client (closed) or one (sessions).
    think: Vec<Vec<Stream>>,
    arrival: Vec<Stream>,
    session: Vec<Stream>,
    service: Vec<Stream>,
    routing: Vec<Stream>,
}

impl Streams {
    fn new(model: &Model, seed: u64, replication: u64) -> Self {
        let s = |purpose, a: usize, b: u64| Stream::new(seed, replication, purpose, a as u64, b);
        let think = model
            .sources
            .iter()
            .enumerate()
            .map(|(i, src)| match &src.kind {
                SourceKind::Closed { clients, .. } => (0..*clients as u64).map(|c| s(Purpose::Think, i, c)).collect(),
                _ => vec![s(Purpose::Think, i, 0)],
            })
            .collect();
        Streams {
            think,
            arrival: (0..model.sources.len()).map(|i| s(Purpose::Arrival, i, 0)).collect(),
            session: (0..model.sources.len()).map(|i| s(Purpose::Session, i, 0)).collect(),
            service: (0..model.stations.len()).map(|i| s(Purpose::Service, i, 0)).collect(),
            routing: (0..model.sites as usize).map(|i| s(Purpose::Routing, i, 0)).collect(),
        }
    }
}

/// One replication in progress.
pub struct Simulator<'m> {
    model: &'m Model,
    /// Set by the caller to stop the run early (Ctrl-C): read every [`CANCEL_EVERY`] events.
    cancel: &'m AtomicBool,
    now: f64,
    events: EventList,
    processed: u64,
    jobs: Jobs,
    ready: VecDeque<u32>,
    stations: Vec<StationState>,
    streams: Streams,
    /// Per site: next replica of a round-robin balancer.
    round_robin: Vec<usize>,
    /// Per source: next trace index (open trace sources) or next session id.
    cursor: Vec<u32>,
    classes: Vec<ClassRecorder>,
    /// Top-level requests in the system.
    in_system: TimeAverage,
    in_system_now: u32,
    /// Little's law: requests finished in the window, and their time inside the window.
    finished: u64,
    finished_stay: f64,
    finished_sojourn: f64,
    window_start: f64,
    horizon: f64,
    confidence: f64,
    /// Batch means per class and over all classes (when `batches` > 0).
    class_batches: Vec<BatchSeries>,
    total_batches: Option<BatchSeries>,
    /// A batch-means stop rule: at the horizon, extend the run until it is met.
    extension: Option<(StopMetric, f64, f64)>,
    /// Requests in system per time bin, for MSER (pilot runs only).
    series: Option<BinnedLevel>,
}

/// Observations per MSER batch: MSER-5 (Franklin & White 2008 recommend 5).
pub const MSER_BATCH: usize = 5;
/// Time bins of a pilot run: MSER-5 then sees 200 batches.
pub const MSER_BINS: usize = 1000;
/// Events between two reads of the cancel flag: a relaxed load per 65536 events costs nothing
/// measurable, and a run of about 10^7 events per second notices the flag within ~10 ms.
const CANCEL_EVERY: u64 = 1 << 16;

impl<'m> Simulator<'m> {
    /// A replication whose statistics window starts at `warmup`; `pilot` records the response
    /// series MSER reads instead of obeying a stop rule.
    /// The run stops early, its results meaningless, once `cancel` is set.
    pub fn new(
        model: &'m Model,
        config: &RunConfig,
        replication: u32,
        warmup: f64,
        pilot: bool,
        cancel: &'m AtomicBool,
    ) -> Self {
        let classes = model.sources.len();
        let extension = match config.stop {
            Some(StopRule { metric, relative_half_width, method: StopLimit::BatchMeans { max_horizon } }) if !pilot => {
                Some((metric, relative_half_width, max_horizon))
            }
            _ => None,
        };
        let batches = |hist| BatchSeries::new(warmup, config.horizon, config.batches, hist);
        let p99_batches = matches!(extension, Some((StopMetric::P99, _, _)));
        Simulator {
            model,
            cancel,
            now: 0.0,
            events: EventList::default(),
            processed: 0,
            jobs: Jobs::default(),
            ready: VecDeque::new(),
            stations: model.stations.iter().map(|s| StationState::new(s, classes)).collect(),
            streams: Streams::new(model, config.seed, replication as u64),
            round_robin: vec![0; model.sites as usize],
            cursor: vec![0; model.sources.len()],
            classes: vec![ClassRecorder::default(); classes],
            in_system: TimeAverage::default(),
            in_system_now: 0,
            finished: 0,
            finished_stay: 0.0,
            finished_sojourn: 0.0,
            window_start: warmup,
            horizon: config.horizon,
            confidence: config.confidence,
            class_batches: if config.batches > 0 { (0..classes).map(|_| batches(false)).collect() } else { Vec::new() },
            total_batches: (config.batches > 0).then(|| batches(p99_batches)),
            extension,
            series: pilot.then(|| BinnedLevel::new(config.horizon, MSER_BINS)),
        }
    }

    /// At the horizon: whether to stop, or (under a batch-means stop rule not yet met, with
    /// room before its cap) extend the run by one batch.
    fn stop_here(&mut self) -> bool {
        let Some((metric, target, max_horizon)) = self.extension else { return true };
        let total = self.total_batches.as_ref().expect("a batch-means stop rule keeps batches");
        let achieved = total.estimate(metric, self.confidence).relative_half_width();
        if achieved <= target || total.next_end() > max_horizon {
            return true;
        }
        for b in self.class_batches.iter_mut().chain(self.total_batches.as_mut()) {
            b.extend();
        }
        self.horizon = self.total_batches.as_ref().map(BatchSeries::end).expect("kept above");
        self.events.schedule(self.horizon, Event::End);
        false
    }

    /// A pilot run: simulate to the horizon and return the bin width and the time-average
    /// requests in system per bin.
    pub fn pilot(mut self) -> (f64, Vec<f64>) {
        self.simulate();
        let now = self.now;
        self.series.take().expect("a pilot records its series").finish(now)
    }

    /// Run to the horizon and report.
    pub fn run(mut self, index: u32) -> (Replication, Histograms) {
        self.simulate();
        self.report(index)
    }

    /// Run to the horizon (extended under a batch-means stop rule).
    pub fn simulate(&mut self) {
        self.start_sources();
        if self.window_start > 0.0 {
            self.events.schedule(self.window_start, Event::WarmupEnd);
        }
        self.events.schedule(self.horizon, Event::End);
        while let Some((time, event)) = self.events.pop() {
            self.now = time;
            self.processed += 1;
            if self.processed.is_multiple_of(CANCEL_EVERY) && self.cancel.load(Ordering::Relaxed) {
                break;
            }
            match event {
                Event::End => {
                    if self.stop_here() {
                        break;
                    }
                }
                Event::WarmupEnd => self.restart_statistics(),
                Event::Issue { source, client } => self.issue(source, client),
                Event::Arrival { source } => self.arrival(source),
                Event::HoldEnd { job } => self.hold_end(job),
                Event::PsDone { station, generation } => self.ps_done(station, generation),
            }
            while let Some(job) = self.ready.pop_front() {
                self.advance(job);
            }
        }
    }

    fn start_sources(&mut self) {
        for (i, src) in self.model.sources.iter().enumerate() {
            let source = i as u16;
            match &src.kind {
                SourceKind::Closed { clients, think } => {
                    // Every client starts with a think time (none when it is zero): all clients
                    // of a zero-think source send at t = 0, as in the seed's SimPy model.
                    for client in 0..*clients {
                        let t = think.sample(&mut self.streams.think[i][client as usize]);
                        self.events.schedule(t, Event::Issue { source, client });
                    }
                }
                SourceKind::Open { arrivals: Arrivals::Trace(times) } => {
                    self.events.schedule(times[0], Event::Arrival { source });
                }
                SourceKind::Open { arrivals: Arrivals::Renewal(d) } | SourceKind::Sessions { interarrival: d, .. } => {
                    let t = d.sample(&mut self.streams.arrival[i]);
                    self.events.schedule(t, Event::Arrival { source });
                }
            }
        }
    }

    fn restart_statistics(&mut self) {
        let now = self.now;
        for c in &mut self.classes {
            *c = ClassRecorder::default();
        }
        for s in &mut self.stations {
            s.rec.restart(now);
        }
        self.in_system.restart(now);
        self.finished = 0;
        self.finished_stay = 0.0;
        self.finished_sojourn = 0.0;
    }

    /// A new top-level request of `source` from `client`.
    fn issue(&mut self, source: u16, client: u32) {
        let entry = self.model.sources[source as usize].entry;
        let job = self.jobs.alloc(entry, source, client, self.now, NO_PARENT);
        self.in_system_now += 1;
        self.in_system.set(self.now, self.in_system_now as f64);
        if let Some(series) = &mut self.series {
            series.set(self.now, self.in_system_now as f64);
        }
        self.resume(job);
    }

    fn arrival(&mut self, source: u16) {
        let i = source as usize;
        let next = match &self.model.sources[i].kind {
            SourceKind::Open { arrivals: Arrivals::Trace(times) } => {
                self.cursor[i] += 1;
                times.get(self.cursor[i] as usize).copied()
            }
            SourceKind::Open { arrivals: Arrivals::Renewal(d) } | SourceKind::Sessions { interarrival: d, .. } => {
                Some(self.now + d.sample(&mut self.streams.arrival[i]))
            }
            SourceKind::Closed { .. } => unreachable!("closed sources have no arrival events"),
        };
        if let Some(t) = next {
            self.events.schedule(t, Event::Arrival { source });
        }
        // A session gets a fresh id; an open request carries none.
        let client = self.cursor[i];
        if matches!(self.model.sources[i].kind, SourceKind::Sessions { .. }) {
            self.cursor[i] = self.cursor[i].wrapping_add(1);
        }
        self.issue(source, client);
    }

    fn hold_end(&mut self, job: u32) {
        let pc = self.jobs.get(job).pc;
        if let Op::Visit { station, .. } = self.model.ops[pc as usize] {
            self.leave(job, station);
        }
        self.jobs.get_mut(job).pc += 1;
        self.resume(job);
    }

    fn ps_done(&mut self, station: StationId, generation: u32) {
        let now = self.now;
        let Kind::Ps(ps) = &mut self.stations[station as usize].kind else {
            unreachable!("PsDone events come from PS stations")
        };
        let Some((job, next)) = ps.depart(now, generation) else { return };
        if let Some((t, g)) = next {
            self.events.schedule(t, Event::PsDone { station, generation: g });
        }
        self.leave(job, station);
        self.jobs.get_mut(job).pc += 1;
        self.resume(job);
    }

    /// An event lets `job` go on: it runs at once when no other job is ready, as it would
    /// first thing from the ready list (which saves a trip through the list on the common
    /// path), else it joins the list's end. Only for event handlers: inside `advance` another
    /// job is mid-way and must finish its step first.
    fn resume(&mut self, job: u32) {
        if self.ready.is_empty() {
            self.advance(job);
        } else {
            self.ready.push_back(job);
        }
    }

    /// A job arrives at a station: dropped if it is full, else counted present.
    fn enter(&mut self, job: u32, station: StationId) -> bool {
        let st = &mut self.stations[station as usize];
        if st.is_full() {
            st.rec.dropped += 1;
            return false;
        }
        self.jobs.get_mut(job).held.push((station, self.now));
        true
    }

    /// A job leaves the station at the top of its `held` stack.
    fn leave(&mut self, job: u32, station: StationId) {
        let (top, since) = self.jobs.get_mut(job).held.pop().expect("a job leaving a station holds it");
        debug_assert_eq!(top, station);
        let now = self.now;
        let class = self.jobs.get(job).source as usize;
        let st = &mut self.stations[station as usize];
        st.rec.residence.record(now - since);
        let by_class = &mut st.rec.classes[class];
        by_class.departures += 1;
        by_class.residence_sum += now - since;
        let mut next_class = None;
        if let Kind::Fcfs(f) = &mut st.kind {
            st.busy_by_class[class] -= 1;
            match f.queue.pop_front() {
                // The server passes straight to the next job: busy stays the same.
                Some(next) => {
                    let j = self.jobs.get_mut(next);
                    j.pc += 1;
                    st.busy_by_class[j.source as usize] += 1;
                    next_class = Some(j.source as usize);
                    self.ready.push_back(next);
                }
                None => f.busy -= 1,
            }
        }
        st.change_present(now, -1, class);
        if let Some(c) = next_class.filter(|&c| c != class) {
            st.refresh_class_busy(now, c);
        }
    }

    /// Execute `job`'s instructions until it blocks or ends.
    fn advance(&mut self, job: u32) {
        // Copy the model reference out of `self` so the instructions stay borrowed while the
        // job's state is mutated.
        let model = self.model;
        let ops = &model.ops;
        loop {
            let pc = self.jobs.get(job).pc;
            match &ops[pc as usize] {
                Op::Acquire { station } => {
                    let s = *station;
                    if !self.enter(job, s) {
                        return self.drop_job(job);
                    }
                    let class = self.jobs.get(job).source as usize;
                    let st = &mut self.stations[s as usize];
                    let Kind::Fcfs(f) = &mut st.kind else {
                        unreachable!("Acquire is compiled for FCFS stations only")
                    };
                    if f.busy < st.servers {
                        f.busy += 1;
                        st.busy_by_class[class] += 1;
                        st.change_present(self.now, 1, class);
                        self.jobs.get_mut(job).pc += 1;
                    } else {
                        f.queue.push_back(job);
                        st.change_present(self.now, 1, class);
                        return;
                    }
                }
                Op::Hold { station, dist } => {
                    let t = self.model.dists[*dist as usize].sample(&mut self.streams.service[*station as usize]);
                    self.events.schedule(self.now + t, Event::HoldEnd { job });
                    return;
                }
                Op::Release { station } => {
                    self.leave(job, *station);
                    self.jobs.get_mut(job).pc += 1;
                }
                Op::Visit { station, dist } => {
                    let s = *station;
                    if !self.enter(job, s) {
                        return self.drop_job(job);
                    }
                    let work = self.model.dists[*dist as usize].sample(&mut self.streams.service[s as usize]);
                    let class = self.jobs.get(job).source as usize;
                    let now = self.now;
                    let st = &mut self.stations[s as usize];
                    match &mut st.kind {
                        Kind::Ps(ps) => {
                            let (t, generation) = ps.join(now, job, work);
                            self.events.schedule(t, Event::PsDone { station: s, generation });
                        }
                        Kind::Delay => self.events.schedule(now + work, Event::HoldEnd { job }),
                        Kind::Fcfs(_) => unreachable!("Visit is compiled for PS and delay stations only"),
                    }
                    st.change_present(now, 1, class);
                    return;
                }
                Op::Branch { site, targets } => {
                    let u = self.streams.routing[*site as usize].uniform();
                    let to =
                        targets.iter().find(|(c, _)| u < *c).expect("the last cumulative probability is infinite").1;
                    self.jobs.get_mut(job).pc = to;
                }
                Op::Jump { to } => self.jobs.get_mut(job).pc = *to,
                Op::Fork { branches, join } => {
                    let parent = self.jobs.get_mut(job);
                    parent.pc = *join;
                    parent.pending = branches.len() as u32;
                    let (source, client) = (parent.source, parent.client);
                    for &b in branches {
                        let child = self.jobs.alloc(b, source, client, self.now, job);
                        self.ready.push_back(child);
                    }
                    return;
                }
                Op::EndBranch => return self.end_branch(job),
                Op::Balance { site, policy, targets } => {
                    let i = self.pick(*site, *policy, targets);
                    self.jobs.get_mut(job).pc = targets[i].1;
                }
                Op::Exit => return self.finish(job),
            }
        }
    }

    /// The replica a balancer sends the job to.
    fn pick(&mut self, site: u32, policy: Policy, targets: &[(StationId, Pc)]) -> usize {
        let n = targets.len();
        let present = |i: usize| self.stations[targets[i].0 as usize].present;
        let rng = &mut self.streams.routing[site as usize];
        match policy {
            Policy::RoundRobin => {
                let i = self.round_robin[site as usize];
                self.round_robin[site as usize] = (i + 1) % n;
                i
            }
            Policy::Random => rng.below(n),
            Policy::Jsq => {
                let least = (0..n).map(present).min().expect("a balancer has replicas");
                // Ties at random: always taking the first would load replica 0 at low load.
                let ties = (0..n).filter(|&i| present(i) == least).count();
                let k = rng.below(ties);
                (0..n).filter(|&i| present(i) == least).nth(k).expect("k < ties")
            }
            Policy::PowerOfTwo => {
                if n == 1 {
                    return 0;
                }
                let a = rng.below(n);
                let b = (a + 1 + rng.below(n - 1)) % n;
                if present(b) < present(a) {
                    b
                } else {
                    a
                }
            }
        }
    }

    /// A station on the job's route is full: it gives back everything it holds and ends in error.
    fn drop_job(&mut self, job: u32) {
        while let Some(&(station, _)) = self.jobs.get(job).held.last() {
            self.leave(job, station);
        }
        self.jobs.get_mut(job).failed = true;
        if self.jobs.get(job).is_top_level() {
            self.finish(job);
        } else {
            self.end_branch(job);
        }
    }

    fn end_branch(&mut self, child: u32) {
        let (parent, failed) = {
            let c = self.jobs.get(child);
            (c.parent, c.failed)
        };
        self.jobs.free(child);
        let p = self.jobs.get_mut(parent);
        p.failed |= failed;
        p.pending -= 1;
        if p.pending == 0 {
            if p.failed {
                self.drop_job(parent);
            } else {
                self.ready.push_back(parent);
            }
        }
    }

    /// A top-level request ends (completed, or dropped when `failed`).
    fn finish(&mut self, job: u32) {
        let now = self.now;
        let j = self.jobs.get(job);
        let (source, client, born, failed) = (j.source as usize, j.client, j.born, j.failed);
        self.jobs.free(job);
        self.in_system_now -= 1;
        self.in_system.set(now, self.in_system_now as f64);
        if let Some(series) = &mut self.series {
            series.set(now, self.in_system_now as f64);
        }
        if now >= self.window_start {
            self.finished += 1;
            self.finished_stay += now - born.max(self.window_start);
            self.finished_sojourn += now - born;
            let class = &mut self.classes[source];
            if failed {
                class.dropped += 1;
            } else {
                let r = now - born;
                class.responses.record(r);
                if let Some(total) = &mut self.total_batches {
                    self.class_batches[source].record(now, r);
                    total.record(now, r);
                }
            }
        }
        let src = &self.model.sources[source];
        let next_think = match &src.kind {
            SourceKind::Closed { think, .. } => Some(think.sample(&mut self.streams.think[source][client as usize])),
            SourceKind::Sessions { think, again, .. } => {
                let more = self.streams.session[source].uniform() < *again;
                more.then(|| think.sample(&mut self.streams.think[source][0]))
            }
            SourceKind::Open { .. } => None,
        };
        if let Some(z) = next_think {
            self.events.schedule(now + z, Event::Issue { source: source as u16, client });
        }
    }

    fn report(self, index: u32) -> (Replication, Histograms) {
        let now = self.now;
        let window = now - self.window_start;
        let (mut count, mut sum, mut max) = (0, 0.0, 0.0f64);
        let mut dropped = 0;
        let classes: Vec<ClassResult> = self
            .classes
            .iter()
            .zip(&self.model.sources)
            .map(|(c, src)| {
                count += c.responses.count;
                sum += c.responses.sum;
                max = max.max(c.responses.max);
                dropped += c.dropped;
                ClassResult {
                    name: src.name.clone(),
                    responses: responses(&c.responses, c.dropped, window),
                    batch_means: None,
                }
            })
            .collect();
        let mut classes = classes;
        for (c, b) in classes.iter_mut().zip(&self.class_batches) {
            c.batch_means = Some(b.report(self.confidence));
        }
        let stations = self
            .stations
            .iter()
            .zip(&self.model.stations)
            .map(|(s, m)| {
                let mean_jobs = s.rec.present.area(now) / window;
                let busy = s.rec.busy.area(now) / window;
                let delay = matches!(s.kind, Kind::Delay);
                let classes = s
                    .rec
                    .classes
                    .iter()
                    .zip(&self.model.sources)
                    .enumerate()
                    .map(|(i, (c, src))| {
                        let (present, busy) = s.class_levels(i);
                        StationClassResult {
                            name: src.name.clone(),
                            utilisation: (!delay).then(|| busy.area(now) / window / m.servers as f64),
                            mean_jobs: present.area(now) / window,
                            throughput: c.departures as f64 / window,
                            mean_residence: if c.departures == 0 {
                                f64::NAN
                            } else {
                                c.residence_sum / c.departures as f64
                            },
                        }
                    })
                    .collect();
                StationResult {
                    name: m.name.clone(),
                    utilisation: (!matches!(s.kind, Kind::Delay)).then(|| busy / m.servers as f64),
                    mean_jobs,
                    mean_queue: mean_jobs - busy,
                    throughput: s.rec.residence.count as f64 / window,
                    mean_residence: s.rec.residence.mean(),
                    p99_residence: s.rec.residence.quantile(0.99),
                    dropped: s.rec.dropped,
                    classes,
                }
            })
            .collect();
        let area = self.in_system.area(now);
        let present_stay: f64 =
            self.jobs.live().filter(|j| j.is_top_level()).map(|j| now - j.born.max(self.window_start)).sum();
        let stay = self.finished_stay + present_stay;
        let little = LittleCheck {
            mean_in_system: area / window,
            throughput: self.finished as f64 / window,
            mean_response: self.finished_sojourn / self.finished as f64,
            identity_error: if area > 0.0 { (area - stay).abs() / area } else { stay.abs() },
        };
        let total = sum_histograms(self.classes.iter().map(|c| Cow::Borrowed(&c.responses.hist)));
        let replication = Replication {
            index,
            warmup: self.window_start,
            horizon: now,
            window,
            batch_means: self.total_batches.as_ref().map(|b| b.report(self.confidence)),
            histogram: encode(&total),
            events: self.processed,
            total: responses_of(count, sum, max, &total, dropped, window),
            classes,
            stations,
            little,
        };
        // The recorders are done with: their histograms move out rather than being copied.
        let histograms = Histograms {
            classes: self.classes.into_iter().map(|c| c.responses.hist).collect(),
            stations: self.stations.into_iter().map(|s| s.rec.residence.hist).collect(),
        };
        (replication, histograms)
    }
}

fn responses(t: &Tally, dropped: u64, window: f64) -> Responses {
    responses_of(t.count, t.sum, t.max, &t.hist, dropped, window)
}

/// The responses of a tally given by its parts (the total's histogram is the classes' summed,
/// or the one class's own).
fn responses_of(count: u64, sum: f64, max: f64, hist: &Histogram<u64>, dropped: u64, window: f64) -> Responses {
    let [p50, p90, p99, p999] = quantiles(hist, [0.5, 0.9, 0.99, 0.999]);
    Responses {
        completed: count,
        dropped,
        throughput: count as f64 / window,
        mean: if count == 0 { f64::NAN } else { sum / count as f64 },
        p50,
        p90,
        p99,
        p999,
        max: if count == 0 { f64::NAN } else { max },
    }
}
