//! The future event list: a binary heap totally ordered by (time, priority, sequence). The
//! sequence number is a counter incremented on every schedule, so events with equal time and
//! priority run in the order they were scheduled (FIFO), exactly SimPy's tie rule; with no
//! wall clock and no hash-ordered containers anywhere, a seed fixes the whole trajectory.
//!
//! The list is the kernel's hottest structure (one schedule and one pop per event), so an entry
//! carries its order as two integers compared in one step each: the time mapped to a `u64`
//! whose unsigned order is `f64::total_cmp`'s (the same order as before, -0.0 before +0.0
//! included), and the priority above the sequence number in a second `u64`.
//!
//! Three containers hold the entries: two FIFO lanes and a binary heap. An event at the current
//! instant (the time of the last event taken) goes to the instant lane when it sorts after that
//! lane's last entry; any other event goes to the future lane when it sorts after that lane's
//! last entry; everything else (and always the horizon and the end of the warm-up, which lie far
//! ahead) goes to the heap. Each lane therefore stays sorted, and the earliest event is the
//! earliest of the two lanes' fronts and the heap's top, so the order is exactly the one a
//! single heap gives. Most events of a server model are scheduled in time order (the next
//! service of a single server, the next arrival of an open source) or at the current instant (a
//! client with no think time sending its next request as its response ends), so they pass
//! through a lane in O(1), and the heap holds only the events that overtake others (services of
//! several servers running in parallel). Without the instant lane, every such request of a
//! multi-server model went through the heap: it sorts before the services already scheduled.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::model::StationId;

/// What happens at an event's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A client (closed) or session (partly open) sends its next request.
    Issue { source: u16, client: u32 },
    /// The next arrival of an open source, or the next session of a session source.
    Arrival { source: u16 },
    /// A job's `Hold`, or its visit to a delay station, is over.
    HoldEnd { job: u32 },
    /// The first job of a processor-sharing station finishes, if `generation` is still current.
    PsDone { station: StationId, generation: u32 },
    /// End of the warm-up: statistics restart.
    WarmupEnd,
    /// End of the horizon.
    End,
}

impl Event {
    /// Ties at one instant: control first (so the horizon and warm-up cut exactly at their
    /// time, as SimPy's `run(until)` does), then departures, then arrivals (a server freed at
    /// t is free for a request arriving at t).
    fn priority(&self) -> u8 {
        match self {
            Event::WarmupEnd | Event::End => 0,
            Event::HoldEnd { .. } | Event::PsDone { .. } => 1,
            Event::Issue { .. } | Event::Arrival { .. } => 2,
        }
    }
}

struct Entry {
    /// [`time_key`] of the event's time.
    time: u64,
    /// Priority in the top two bits, sequence number below.
    tie: u64,
    event: Event,
}

/// Bits of the sequence number: 2^62 schedules are centuries of events at 10^9 per second.
const SEQ_BITS: u32 = 62;

/// A `u64` whose order is `f64::total_cmp`'s: the same transform `total_cmp` applies (flip the
/// magnitude bits of negative numbers), with the sign bit flipped so that unsigned order is signed
/// order. It is its own inverse up to that last flip ([`time_of`]).
#[inline]
fn time_key(time: f64) -> u64 {
    let bits = time.to_bits() as i64;
    ((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64) ^ (1 << 63)
}

#[inline]
fn time_of(key: u64) -> f64 {
    let bits = (key ^ (1 << 63)) as i64;
    f64::from_bits((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64)
}

impl Entry {
    /// The entry's place in the total order: earlier is smaller.
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.time, self.tie)
    }
}

impl Ord for Entry {
    /// Reversed, because `BinaryHeap` is a max-heap and the earliest entry must come out first.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then(other.tie.cmp(&self.tie))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

/// The future event list.
pub struct EventList {
    /// Entries at the current instant, in increasing order (each one scheduled after the
    /// previous and sorting after it). It is empty whenever the clock moves on, since all its
    /// entries come before any later one.
    instant: VecDeque<Entry>,
    /// Later entries in increasing order, likewise.
    lane: VecDeque<Entry>,
    /// Every other entry.
    heap: BinaryHeap<Entry>,
    /// [`time_key`] of the current instant: the time of the last event taken (0 before any).
    now: u64,
    seq: u64,
}

impl Default for EventList {
    fn default() -> Self {
        EventList {
            instant: VecDeque::new(),
            lane: VecDeque::new(),
            heap: BinaryHeap::new(),
            now: time_key(0.0),
            seq: 0,
        }
    }
}

/// Whether `entry` may join the back of a lane ending in `last`.
#[inline]
fn fits(last: Option<&Entry>, entry: &Entry) -> bool {
    last.is_none_or(|last| entry.key() >= last.key())
}

impl EventList {
    #[inline]
    pub fn schedule(&mut self, time: f64, event: Event) {
        self.seq += 1;
        debug_assert!(self.seq < 1 << SEQ_BITS);
        let tie = (event.priority() as u64) << SEQ_BITS | self.seq;
        let entry = Entry { time: time_key(time), tie, event };
        debug_assert!(entry.time >= self.now, "an event is scheduled before the current instant");
        if matches!(event, Event::End | Event::WarmupEnd) {
            // Control events lie far ahead of the others (the horizon, the end of the warm-up):
            // at the lane's back, one would send every later event to the heap.
            self.heap.push(entry);
        } else if entry.time == self.now && fits(self.instant.back(), &entry) {
            self.instant.push_back(entry);
        } else if entry.time != self.now && fits(self.lane.back(), &entry) {
            self.lane.push_back(entry);
        } else {
            self.heap.push(entry);
        }
    }

    /// The earliest event, removed from the list.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, Event)> {
        // The earliest of the three fronts: 0 the instant lane, 1 the future lane, 2 the heap.
        let mut from = None;
        let mut best = (u64::MAX, u64::MAX);
        for (i, front) in [self.instant.front(), self.lane.front(), self.heap.peek()].into_iter().enumerate() {
            if let Some(e) = front {
                if from.is_none() || e.key() < best {
                    (from, best) = (Some(i), e.key());
                }
            }
        }
        let e = match from? {
            0 => self.instant.pop_front(),
            1 => self.lane.pop_front(),
            _ => self.heap.pop(),
        }
        .expect("the chosen front exists");
        self.now = e.time;
        Some((time_of(e.time), e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_keys_order_as_total_cmp_and_invert_exactly() {
        let times = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1e-300,
            0.025,
            0.1 + 0.2,
            1000.0,
            1e300,
            f64::INFINITY,
        ];
        for a in times {
            assert_eq!(time_of(time_key(a)).to_bits(), a.to_bits(), "{a}");
            for b in times {
                assert_eq!(time_key(a).cmp(&time_key(b)), a.total_cmp(&b), "{a} vs {b}");
            }
        }
    }

    /// The lanes and the heap together give exactly the order of one heap: events scheduled
    /// in a seeded random mix of in-order and out-of-order times and of times at the current
    /// instant, interleaved with pops, come out sorted by (time, priority, sequence).
    #[test]
    fn lanes_and_heap_pop_in_one_total_order() {
        let mut rng = archlab_prng::Xoshiro256pp::new(11);
        let mut list = EventList::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0.0f64;
        let mut popped = Vec::new();
        for step in 0..20_000u32 {
            if rng.below(3) > 0 {
                // Times on a coarse grid, so that equal times (ties) are frequent.
                let time = now + rng.below(4) as f64 * 0.25;
                let event = match rng.below(3) {
                    0 => Event::HoldEnd { job: step },
                    1 => Event::Issue { source: 0, client: step },
                    _ => Event::Arrival { source: step as u16 },
                };
                list.schedule(time, event);
                seq += 1;
                let tie = (event.priority() as u64) << SEQ_BITS | seq;
                reference.push(Entry { time: time_key(time), tie, event });
            } else if let Some((t, e)) = list.pop() {
                let r = reference.pop().expect("both lists hold the same events");
                assert_eq!((t.to_bits(), e), (time_of(r.time).to_bits(), r.event), "at step {step}");
                now = t;
                popped.push(t);
            }
        }
        while let Some((t, e)) = list.pop() {
            let r = reference.pop().expect("both lists hold the same events");
            assert_eq!((t.to_bits(), e), (time_of(r.time).to_bits(), r.event));
        }
        assert!(reference.is_empty());
        assert!(popped.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn order_is_time_then_priority_then_fifo() {
        let mut list = EventList::default();
        list.schedule(2.0, Event::Arrival { source: 0 });
        list.schedule(1.0, Event::Arrival { source: 1 });
        list.schedule(1.0, Event::Arrival { source: 2 });
        list.schedule(1.0, Event::HoldEnd { job: 7 });
        list.schedule(1.0, Event::End);
        let order: Vec<Event> = std::iter::from_fn(|| list.pop().map(|(_, e)| e)).collect();
        assert_eq!(
            order,
            vec![
                Event::End,
                Event::HoldEnd { job: 7 },
                Event::Arrival { source: 1 },
                Event::Arrival { source: 2 },
                Event::Arrival { source: 0 }
            ]
        );
    }
}
