//! A fixed-size pool of connections shared by every thread of a server process (the `/db`
//! workload's connections to PostgreSQL), in the manner of a JDBC pool such as HikariCP.
//!
//! All connections are opened when the pool is made, so that a measured request never pays a
//! handshake; a request leases one, uses it and gives it back (most recently returned first,
//! so a lightly loaded server keeps using the same warm backends). A slot whose connection
//! failed is given back empty and the next lease reopens it: a restarted database costs one
//! failed request per connection, never a restarted server. A lease waits at most the pool's
//! `wait` for a free slot and then fails: with more server threads than connections, requests
//! queue here (as servlet threads queue on a JDBC pool), but a request never hangs. The pool is
//! generic over the connection type so that its waiting and reopening are tested on their own.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub struct Pool<C> {
    size: usize,
    wait: Duration,
    /// Free slots; `None` is a slot whose connection was closed after a failure.
    idle: Mutex<Vec<Option<C>>>,
    returned: Condvar,
}

impl<C> Pool<C> {
    /// A pool of `size` connections made by `open` (all of them now); the first error stops.
    pub fn open<E>(size: usize, wait: Duration, mut open: impl FnMut() -> Result<C, E>) -> Result<Pool<C>, E> {
        let mut idle = Vec::with_capacity(size);
        for _ in 0..size {
            idle.push(Some(open()?));
        }
        Ok(Pool { size, wait, idle: Mutex::new(idle), returned: Condvar::new() })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Option<C>>> {
        // A panicking request cannot leave the list half-changed (push and pop are atomic here).
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free slot, waiting at most the pool's `wait`; `None` when none came free in time.
    pub fn lease(&self) -> Option<Lease<'_, C>> {
        let deadline = Instant::now() + self.wait;
        let mut idle = self.lock();
        loop {
            if let Some(slot) = idle.pop() {
                return Some(Lease { pool: self, conn: slot });
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            idle = self.returned.wait_timeout(idle, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Connections open now among the free slots (for tests and diagnostics).
    #[cfg(test)]
    pub fn idle_open(&self) -> usize {
        self.lock().iter().filter(|s| s.is_some()).count()
    }
}

/// A leased slot; dropping it gives the slot (open or emptied) back and wakes one waiter.
pub struct Lease<'a, C> {
    pool: &'a Pool<C>,
    /// The connection, or `None` when it must be (re)opened before use.
    pub conn: Option<C>,
}

impl<C> Drop for Lease<'_, C> {
    fn drop(&mut self) {
        self.pool.lock().push(self.conn.take());
        self.pool.returned.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn opens_every_connection_up_front() {
        let mut made = 0;
        let pool = Pool::open(3, Duration::from_millis(10), || -> Result<u32, ()> {
            made += 1;
            Ok(made)
        })
        .unwrap();
        assert_eq!((made, pool.size(), pool.idle_open()), (3, 3, 3));
        // Most recently returned first.
        let a = pool.lease().unwrap();
        assert_eq!(a.conn, Some(3));
    }

    #[test]
    fn the_first_open_error_is_returned() {
        let mut n = 0;
        let r = Pool::open(3, Duration::ZERO, || {
            n += 1;
            if n == 2 {
                Err(format!("refused {n}"))
            } else {
                Ok(n)
            }
        });
        assert_eq!(r.err().as_deref(), Some("refused 2"));
    }

    #[test]
    fn an_exhausted_pool_fails_after_its_wait_instead_of_hanging() {
        let pool = Pool::open(1, Duration::from_millis(50), || Ok::<_, ()>(7)).unwrap();
        let held = pool.lease().unwrap();
        let start = Instant::now();
        assert!(pool.lease().is_none());
        // The wait really happened (a lower bound only: an upper bound would be timing-flaky).
        assert!(start.elapsed() >= Duration::from_millis(50));
        drop(held);
        assert_eq!(pool.lease().unwrap().conn, Some(7));
    }

    #[test]
    fn a_returned_slot_wakes_a_waiter() {
        let pool = Arc::new(Pool::open(1, Duration::from_secs(30), || Ok::<_, ()>(1)).unwrap());
        let held = pool.lease().unwrap();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || pool.lease().map(|l| l.conn))
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert_eq!(waiter.join().unwrap(), Some(Some(1)));
    }

    #[test]
    fn an_emptied_slot_comes_back_empty_to_be_reopened() {
        let pool = Pool::open(2, Duration::from_millis(10), || Ok::<_, ()>(1)).unwrap();
        {
            let mut lease = pool.lease().unwrap();
            lease.conn = None; // the connection failed
        }
        assert_eq!(pool.idle_open(), 1);
        assert_eq!(pool.lease().unwrap().conn, None);
    }
}
