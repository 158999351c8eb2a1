//! The future event list: a binary heap totally ordered by (time, priority, sequence). The
//! sequence number is a counter incremented on every schedule, so events with equal time and
//! priority run in the order they were scheduled (FIFO), exactly SimPy's tie rule; with no
//! wall clock and no hash-ordered containers anywhere, a seed fixes the whole trajectory.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
    time: f64,
    priority: u8,
    seq: u64,
    event: Event,
}

impl Ord for Entry {
    /// Reversed, because `BinaryHeap` is a max-heap and the earliest entry must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.total_cmp(&self.time).then(other.priority.cmp(&self.priority)).then(other.seq.cmp(&self.seq))
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
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventList {
    pub fn schedule(&mut self, time: f64, event: Event) {
        self.seq += 1;
        self.heap.push(Entry { time, priority: event.priority(), seq: self.seq, event });
    }

    /// The earliest event, removed from the list.
    pub fn pop(&mut self) -> Option<(f64, Event)> {
        self.heap.pop().map(|e| (e.time, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
