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
//! Two containers hold the entries: a FIFO lane and a binary heap. An event goes to the lane
//! when it sorts after the lane's last entry, else (and always for the horizon and the end of
//! the warm-up, which lie far ahead) to the heap; the lane therefore stays sorted,
//! and the earliest event is the earlier of the lane's front and the heap's top, so the order
//! is exactly the one a single heap gives. Most events of a server model are scheduled in time
//! order (a client's next request at the instant its response ends, the next service of a
//! single server, the next arrival of an open source), so they pass through the lane in O(1)
//! and the heap holds only the events that overtake others (services of several servers
//! running in parallel).

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
#[derive(Default)]
pub struct EventList {
    /// Entries in increasing order (each one scheduled after the previous and sorting after it).
    lane: VecDeque<Entry>,
    /// Every other entry.
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventList {
    #[inline]
    pub fn schedule(&mut self, time: f64, event: Event) {
        self.seq += 1;
        debug_assert!(self.seq < 1 << SEQ_BITS);
        let tie = (event.priority() as u64) << SEQ_BITS | self.seq;
        let entry = Entry { time: time_key(time), tie, event };
        match self.lane.back() {
            // Control events lie far ahead of the others (the horizon, the end of the warm-up):
            // at the lane's back, one would send every later event to the heap.
            _ if matches!(event, Event::End | Event::WarmupEnd) => self.heap.push(entry),
            Some(last) if entry.key() < last.key() => self.heap.push(entry),
            _ => self.lane.push_back(entry),
        }
    }

    /// The earliest event, removed from the list.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, Event)> {
        let from_lane = match (self.lane.front(), self.heap.peek()) {
            (Some(l), Some(h)) => l.key() < h.key(),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let e = if from_lane { self.lane.pop_front() } else { self.heap.pop() };
        e.map(|e| (time_of(e.time), e.event))
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

    /// The lane and the heap together give exactly the order of one heap: events scheduled
    /// in a seeded random mix of in-order and out-of-order times, interleaved with pops, come
    /// out sorted by (time, priority, sequence).
    #[test]
    fn lane_and_heap_pop_in_one_total_order() {
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
