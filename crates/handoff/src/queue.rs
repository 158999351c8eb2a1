//! The queue hand-off: a FIFO under one mutex with two condition variables, in front of K
//! handler threads (a `ThreadPoolExecutor` with a `LinkedBlockingQueue`, or one SEDA stage).
//!
//! Mechanism: producers append under the lock (waiting on `not_full` when a bounded queue is
//! full) and wake one handler; a handler takes up to `batch` items per lock acquisition (SEDA's
//! batching factor) and runs them in order. Items queue in the FIFO; idle handlers block on
//! `not_empty`. Expected bottleneck: the one lock, and a wake-up (a context switch) per item
//! when handlers are idle.

use crate::{check, spawn, Channel, ConfigError};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// None: unbounded; Some(n): producers block while n items wait.
    pub capacity: Option<usize>,
    pub handlers: usize,
    /// Items a handler takes per dequeue.
    pub batch: usize,
}

impl QueueConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("handlers", self.handlers, (1..=4096).contains(&self.handlers), "an integer in 1..=4096")?;
        check("batch", self.batch, (1..=65_536).contains(&self.batch), "an integer in 1..=65536")?;
        if let Some(c) = self.capacity {
            check("queue_capacity", c, (1..=1 << 24).contains(&c), "an integer in 1..=16777216")?;
        }
        Ok(())
    }
}

/// A blocking FIFO, bounded or not.
pub struct Queue<T> {
    items: Mutex<VecDeque<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: Option<usize>,
}

impl<T> Queue<T> {
    pub fn new(capacity: Option<usize>) -> Self {
        Queue { items: Mutex::new(VecDeque::new()), not_empty: Condvar::new(), not_full: Condvar::new(), capacity }
    }

    /// Append, waiting while a bounded queue is full.
    pub fn push(&self, item: T) {
        let mut q = self.items.lock().unwrap();
        if let Some(cap) = self.capacity {
            while q.len() >= cap {
                q = self.not_full.wait(q).unwrap();
            }
        }
        q.push_back(item);
        drop(q);
        self.not_empty.notify_one();
    }

    /// Take between 1 and `max` items into `out` (cleared first), waiting while empty.
    pub fn pop_batch(&self, max: usize, out: &mut Vec<T>) {
        out.clear();
        let mut q = self.items.lock().unwrap();
        while q.is_empty() {
            q = self.not_empty.wait(q).unwrap();
        }
        let n = max.max(1).min(q.len());
        out.extend(q.drain(..n));
        let more = !q.is_empty();
        drop(q);
        if self.capacity.is_some() {
            self.not_full.notify_all();
        }
        if more {
            // Others may be idle while items remain (we took only a batch).
            self.not_empty.notify_one();
        }
    }

    pub fn pop(&self) -> T {
        let mut out = Vec::with_capacity(1);
        self.pop_batch(1, &mut out);
        out.pop().expect("pop_batch returns at least one item")
    }

    pub fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Send> Channel<T> for Queue<T> {
    fn push(&self, item: T) {
        Queue::push(self, item)
    }
}

pub(crate) fn start<T, H>(c: &QueueConfig, name: &str, make: impl Fn(usize) -> H) -> io::Result<Arc<dyn Channel<T>>>
where
    T: Send + 'static,
    H: FnMut(T) + Send + 'static,
{
    let queue = Arc::new(Queue::new(c.capacity));
    for i in 0..c.handlers {
        let (queue, mut handler, batch) = (queue.clone(), make(i), c.batch);
        spawn(format!("{name}-{i}"), move || {
            let mut items = Vec::with_capacity(batch);
            loop {
                queue.pop_batch(batch, &mut items);
                for item in items.drain(..) {
                    handler(item);
                }
            }
        })?;
    }
    Ok(queue)
}

#[cfg(test)]
mod tests {
    use super::*;
    // That a full bounded queue blocks its producer is tested in tests/handoff.rs, which can
    // watch the producer thread go to sleep.

    #[test]
    fn batches_are_at_most_max_and_fifo() {
        let q = Queue::new(None);
        for i in 0..10 {
            q.push(i);
        }
        let mut out = Vec::new();
        q.pop_batch(4, &mut out);
        assert_eq!(out, vec![0, 1, 2, 3]);
        q.pop_batch(100, &mut out);
        assert_eq!(out, (4..10).collect::<Vec<_>>());
    }

    #[test]
    fn validation_names_the_parameter() {
        let e = QueueConfig { capacity: Some(0), handlers: 4, batch: 1 }.validate().unwrap_err();
        assert_eq!(e.to_string(), "queue_capacity: expected an integer in 1..=16777216, got 0");
    }
}
