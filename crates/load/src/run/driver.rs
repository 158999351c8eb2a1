//! The three load models as decisions over the shared connection machinery of `worker.rs`:
//! which request goes on which connection when. The worker calls the hooks of its [`Model`]
//! trait and [`Driver`] answers them per [`Pacing`]; nothing here touches a socket directly.
//!
//! - Closed: slot i is user i. After each response the user thinks (constant, exponential or
//!   uniform) and its next request is planned at completion + think; nothing queues inside
//!   the generator, so latency is the service time and coordinated omission is not corrected,
//!   except when the connection has to be replaced (closed by the server, a failure, or
//!   `requests_per_connection`): the request then waits for the connect, and its latency runs
//!   from its planned time (see `recorder.rs`). After a failure the user goes on at once.
//!   With a users schedule, slots at or above the thread's active count park after their
//!   request in flight; a timer entry applies each change. With pipelining, an idle call
//!   fills the connection up to the depth instead of sending one request.
//! - Open: this thread's shard of the global arrival schedule (fixed rate, or a varying one
//!   through `schedule.rs`) drives a timerfd entry. A due
//!   arrival takes an idle connection, or, when none is idle, joins this thread's FIFO
//!   backlog while a spare slot (below the connection cap) is opened for it. A connection
//!   that becomes idle takes the oldest backlog entry. The planned time travels with the
//!   request, so the wait for a connection counts in the response time.
//! - Partly-open: arrivals are sessions. A session draws its length, is bound to one slot for
//!   its life (a new connection, or an idle one from the pool, or it waits for one), makes
//!   its requests one after the other with think times, then leaves: the slot is closed
//!   (policy `new`) or goes back to the pool. A failure aborts the session.
//!
//! Memory: the backlog holds one u64 per waiting arrival; under a server stall it grows by
//! rate x stall (8 MB per million waiting arrivals) and is bounded by the arrivals of the run.

use super::worker::{Model, State, Worker, ARRIVAL_TIMER, USERS_TIMER};
use super::CycleEdges;
use crate::config::{LoadConfig, Pacing, SessionConnection};
use crate::dist::{self, ArrivalStream, Rng, SessionLength, ThinkTime};
use crate::schedule::{user_changes, users_of_thread, Intensity};
use std::collections::VecDeque;
use std::sync::Arc;

/// Per-thread state of the load model.
pub(super) enum Driver {
    Closed { think: ThinkTime, rng: Rng, users: Option<UserPlan> },
    Open(Schedule),
    PartlyOpen { sched: Schedule, length: SessionLength, think: ThinkTime, policy: SessionConnection, rng: Rng },
}

/// The arrival side shared by the open and partly-open models.
pub(super) struct Schedule {
    stream: ArrivalStream,
    t0: u64,
    /// Planned time of the next arrival not yet taken up.
    next_ns: u64,
    /// Arrivals (requests, or session starts) waiting for a connection, oldest first.
    backlog: VecDeque<u64>,
    /// Idle open connections as (slot, epoch); stale entries are skipped when popped.
    free: Vec<(u32, u32)>,
    /// Closed slots that may be opened on demand.
    spare: Vec<u32>,
}

/// A closed run's varying users on this thread: slots below `active` are users at work; the
/// others finish the request they have in flight, then park until they are started again.
pub(super) struct UserPlan {
    /// (offset from t0 in ns, users of this thread from then on).
    changes: Vec<(u64, usize)>,
    next: usize,
    pub(super) active: usize,
    t0: u64,
}

impl Schedule {
    fn new(stream: ArrivalStream) -> Schedule {
        Schedule { stream, t0: 0, next_ns: u64::MAX, backlog: VecDeque::new(), free: Vec::new(), spare: Vec::new() }
    }
}

impl Driver {
    pub(super) fn new(cfg: &LoadConfig, thread: usize) -> Driver {
        let rng = dist::stream(cfg.seed(), 1 + thread as u64);
        let stream = |a| {
            let s = ArrivalStream::new(a, cfg.seed(), thread, cfg.threads());
            match cfg.pacing().rate_schedule() {
                Some(profile) => s.with_intensity(Arc::new(Intensity::new(cfg.warmup(), profile.clone()))),
                None => s,
            }
        };
        match *cfg.pacing() {
            Pacing::Closed { think, ref schedule, .. } => {
                let users = schedule.as_ref().map(|profile| {
                    let mut changes: Vec<(u64, usize)> = Vec::new();
                    for (t, n) in user_changes(cfg.warmup(), profile) {
                        let mine = users_of_thread(n, thread, cfg.threads());
                        if changes.last().is_none_or(|&(_, m)| m != mine) {
                            changes.push((t, mine));
                        }
                    }
                    UserPlan { active: changes[0].1, changes, next: 1, t0: 0 }
                });
                Driver::Closed { think, rng, users }
            }
            Pacing::Open { arrivals, .. } => Driver::Open(Schedule::new(stream(arrivals))),
            Pacing::PartlyOpen { sessions, length, think, connection, .. } => {
                Driver::PartlyOpen { sched: Schedule::new(stream(sessions)), length, think, policy: connection, rng }
            }
        }
    }

    fn schedule(&mut self) -> Option<&mut Schedule> {
        match self {
            Driver::Closed { .. } => None,
            Driver::Open(s) | Driver::PartlyOpen { sched: s, .. } => Some(s),
        }
    }
}

impl Model for Driver {
    fn new(cfg: &LoadConfig, thread: usize) -> Self {
        Driver::new(cfg, thread)
    }
    fn start_driving(w: &mut Worker<'_, Self>, t0: u64, initial: usize, now: u64) {
        w.start_driving(t0, initial, now)
    }
    fn idle(w: &mut Worker<'_, Self>, idx: usize, now: u64) {
        w.idle(idx, now)
    }
    fn completed(w: &mut Worker<'_, Self>, idx: usize, t: u64, reusable: bool) {
        w.completed(idx, t, reusable)
    }
    fn lost(w: &mut Worker<'_, Self>, idx: usize, now: u64) -> bool {
        w.lost(idx, now)
    }
    fn users_due(w: &mut Worker<'_, Self>, now: u64) {
        w.users_due(now)
    }
    fn arrivals_due(w: &mut Worker<'_, Self>, now: u64) {
        w.arrivals_due(now)
    }
    fn count_never_started(w: &mut Worker<'_, Self>) {
        w.count_never_started()
    }
    fn cycle_edges(w: &Worker<'_, Self>) -> Option<CycleEdges> {
        w.cycle_edges()
    }
}

impl Worker<'_, Driver> {
    /// The start gate opened at `t0`: put every slot to work (the first `initial` slots were
    /// connected before) and arm the first arrival.
    pub(super) fn start_driving(&mut self, t0: u64, initial: usize, now: u64) {
        let new_per_session = matches!(self.driver, Driver::PartlyOpen { policy: SessionConnection::New, .. });
        let closed = matches!(self.driver, Driver::Closed { .. });
        for idx in 0..self.conns.len() {
            // Every closed-model user's first cycle begins now, whether its slot is connected.
            self.conns[idx].cycle_start_ns = now;
            let keep = closed || (idx < initial && !new_per_session);
            match (self.conns[idx].state, keep) {
                (State::Open, true) => {
                    self.conns[idx].planned_ns = now;
                    self.idle(idx, now);
                }
                (State::Closed, true) => self.connect(idx, now),
                (_, false) => {
                    self.close(idx);
                    self.spare_slot(idx);
                }
                _ => {}
            }
        }
        if let Driver::Closed { users: Some(plan), .. } = &mut self.driver {
            plan.t0 = t0;
            if let Some(&(t, _)) = plan.changes.get(plan.next) {
                self.timers.push(t0 + t, USERS_TIMER, 0);
            }
        }
        if let Some(s) = self.driver.schedule() {
            s.t0 = t0;
            s.next_ns = t0.saturating_add(s.stream.next_offset_ns());
            self.timers.push(s.next_ns, ARRIVAL_TIMER, 0);
        }
    }

    fn spare_slot(&mut self, idx: usize) {
        if let Some(s) = self.driver.schedule() {
            s.spare.push(idx as u32);
        }
    }

    /// Connection `idx` is open with nothing in flight: give it work or park it.
    pub(super) fn idle(&mut self, idx: usize, now: u64) {
        if now >= self.rec.end {
            return;
        }
        let c = &self.conns[idx];
        let (epoch, planned, in_session) = (c.epoch, c.planned_ns, c.session_left > 0);
        let own_next = match &self.driver {
            // A stopped user stays parked (its connection open) until it is started again.
            Driver::Closed { users: Some(plan), .. } if idx >= plan.active => return,
            Driver::Closed { .. } => Some(planned),
            Driver::PartlyOpen { .. } if in_session => Some(planned),
            _ => None,
        };
        if let (Some(p), true) = (own_next, self.depth > 1) {
            // A pipelined connection: fill it up to the depth, one write for all.
            let c = &self.conns[idx];
            if c.queued < self.depth && !matches!(c.state, State::Closed | State::Connecting { .. }) {
                for _ in c.queued..self.depth {
                    self.queue_pipelined(idx, p, now);
                }
                self.write_pipelined(idx, now);
            }
            return;
        }
        if let Some(p) = own_next {
            // The user (or session) has its next request planned: send now or at that time.
            if p <= now {
                self.send(idx, p, now);
            } else {
                self.timers.push(p, idx as u32, epoch);
            }
            return;
        }
        let Some(s) = self.driver.schedule() else { return };
        match s.backlog.pop_front() {
            Some(p) => self.begin(idx, p, now),
            None => s.free.push((idx as u32, epoch)),
        }
    }

    /// Start arrival `p` (planned time) on the idle open connection `idx`.
    fn begin(&mut self, idx: usize, p: u64, now: u64) {
        if matches!(self.driver, Driver::PartlyOpen { .. }) {
            self.bind_session(idx, p, now);
        }
        self.send(idx, p, now);
    }

    fn bind_session(&mut self, idx: usize, p: u64, now: u64) {
        let Driver::PartlyOpen { length, rng, .. } = &mut self.driver else { return };
        let c = &mut self.conns[idx];
        c.session_left = length.sample(rng).max(1);
        c.session_len = c.session_left;
        c.planned_ns = p;
        self.rec.session_started(now);
    }

    /// The response on `idx` completed at `t`; `reusable` says whether the connection can
    /// carry another request.
    pub(super) fn completed(&mut self, idx: usize, t: u64, reusable: bool) {
        let mut release = false;
        match &mut self.driver {
            Driver::Closed { think, rng, .. } => {
                self.conns[idx].planned_ns = t + think.sample_ns(rng);
                self.begin_cycle(idx, t);
            }
            Driver::Open(_) => {}
            Driver::PartlyOpen { think, rng, policy, .. } => {
                let c = &mut self.conns[idx];
                c.session_left -= 1;
                if c.session_left > 0 {
                    c.planned_ns = t + think.sample_ns(rng);
                } else {
                    release = *policy == SessionConnection::New;
                    self.rec.session_completed(t, c.session_len);
                }
            }
        }
        if release {
            // The session is over and so is its connection: the client closes it.
            self.close(idx);
            self.release(idx, t);
        } else if reusable {
            self.idle(idx, t);
        } else {
            self.reopen(idx, t);
        }
    }

    /// Closed model: user `idx` ended a cycle at `t` (a completion or a failure) and begins the
    /// next. The first cycle to end in the window is remembered for the window's boundary term;
    /// nothing after the window's end counts.
    fn begin_cycle(&mut self, idx: usize, t: u64) {
        if t >= self.rec.end {
            return;
        }
        let c = &mut self.conns[idx];
        if t >= self.rec.warmup_end && c.window_cycle_start_ns.is_none() {
            c.window_cycle_start_ns = Some(c.cycle_start_ns);
        }
        c.cycle_start_ns = t;
    }

    /// The window ended: the users' cycle edges, for a closed model with a fixed population and
    /// one request per user in flight (the only one where every user is always in one cycle).
    pub(super) fn cycle_edges(&self) -> Option<CycleEdges> {
        if !matches!(self.driver, Driver::Closed { users: None, .. }) || self.depth > 1 {
            return None;
        }
        let first_minus_last_ns = self
            .conns
            .iter()
            .map(|c| i128::from(c.window_cycle_start_ns.unwrap_or(c.cycle_start_ns)) - i128::from(c.cycle_start_ns))
            .sum();
        Some(CycleEdges { users: self.conns.len(), first_minus_last_ns })
    }

    /// Slot `idx` was closed by a failure (its request, if any, already counted as an error).
    /// Returns whether the slot should connect again (at once, or after a back-off for a
    /// failed connect).
    pub(super) fn lost(&mut self, idx: usize, now: u64) -> bool {
        if matches!(self.driver, Driver::Closed { .. }) {
            // The user's next request is planned now: it waits for the new connection.
            self.conns[idx].planned_ns = now;
            self.begin_cycle(idx, now);
        }
        let Driver::PartlyOpen { policy, .. } = self.driver else { return true };
        if self.conns[idx].session_left > 0 {
            self.conns[idx].session_left = 0;
            self.rec.session_aborted(now);
        }
        if policy == SessionConnection::New {
            self.release(idx, now);
            return false;
        }
        true
    }

    /// Slot `idx` is closed and free: start a waiting session on it, or keep it spare.
    fn release(&mut self, idx: usize, now: u64) {
        let Some(s) = self.driver.schedule() else { return };
        match s.backlog.pop_front() {
            Some(p) if now < self.rec.end => {
                self.bind_session(idx, p, now);
                self.connect(idx, now);
            }
            Some(p) => s.backlog.push_front(p),
            None => s.spare.push(idx as u32),
        }
    }

    /// The users timer fired: apply the changes due by `now`. Started users send their first
    /// request planned at the change time; stopped ones finish what they have in flight
    /// (see `idle`).
    pub(super) fn users_due(&mut self, now: u64) {
        let Driver::Closed { users: Some(plan), .. } = &mut self.driver else { return };
        let before = plan.active;
        let mut started_at = now;
        while let Some(&(t, n)) = plan.changes.get(plan.next) {
            if plan.t0 + t > now {
                self.timers.push(plan.t0 + t, USERS_TIMER, 0);
                break;
            }
            plan.active = n;
            plan.next += 1;
            started_at = plan.t0 + t;
        }
        let after = plan.active;
        for idx in before..after {
            let c = &mut self.conns[idx];
            match c.state {
                State::Open => {
                    c.planned_ns = started_at;
                    self.idle(idx, now);
                }
                State::Closed if now < self.rec.end => {
                    c.planned_ns = started_at;
                    self.connect(idx, now);
                }
                // Connecting: `idle` runs once connected. In flight: a user stopped and
                // started again before its response came; it goes on after it.
                _ => c.planned_ns = started_at,
            }
        }
    }

    /// The arrival timer fired: take up every arrival due by `now`, then re-arm.
    pub(super) fn arrivals_due(&mut self, now: u64) {
        let end = self.rec.end;
        loop {
            let Some(s) = self.driver.schedule() else { return };
            let p = s.next_ns;
            if p > now || p >= end {
                if p < end {
                    self.timers.push(p, ARRIVAL_TIMER, 0);
                }
                return;
            }
            s.next_ns = s.t0.saturating_add(s.stream.next_offset_ns());
            self.rec.arrival(p, now);
            self.dispatch_arrival(p, now);
        }
    }

    fn dispatch_arrival(&mut self, p: u64, now: u64) {
        let new_per_session = matches!(self.driver, Driver::PartlyOpen { policy: SessionConnection::New, .. });
        let conns = &self.conns;
        let Some(s) = self.driver.schedule() else { return };
        if new_per_session {
            match s.spare.pop() {
                Some(idx) => {
                    let idx = idx as usize;
                    self.bind_session(idx, p, now);
                    self.connect(idx, now);
                }
                None => s.backlog.push_back(p),
            }
            return;
        }
        // An idle connection, skipping entries made stale by a close since they were parked.
        while let Some((idx, epoch)) = s.free.pop() {
            let c = &conns[idx as usize];
            if c.epoch == epoch && c.state == State::Open && c.session_left == 0 {
                return self.begin(idx as usize, p, now);
            }
        }
        s.backlog.push_back(p);
        if let Some(idx) = s.spare.pop() {
            // It takes the oldest waiting arrival once connected (see `idle`).
            self.connect(idx as usize, now);
        }
    }

    /// At the end of the window: arrivals planned inside it that never started (waiting for a
    /// connection, or not even taken up by the generator).
    pub(super) fn count_never_started(&mut self) {
        let end = self.rec.end;
        let Some(s) = self.driver.schedule() else { return };
        for p in s.backlog.drain(..) {
            self.rec.never_started(p, true);
        }
        while s.next_ns < end {
            self.rec.never_started(s.next_ns, false);
            s.next_ns = s.t0.saturating_add(s.stream.next_offset_ns());
        }
    }
}
