//! Random streams. Every entity draws from its own stream (a client's think times, a station's
//! service times, a routing site's choices), so a run's randomness does not depend on the order
//! in which events happen to interleave, and two configurations that share an entity share its
//! draws (common random numbers). A stream is the lab's generator (`archlab-prng`,
//! xoshiro256++) keyed by (seed, replication, purpose, index).

use archlab_prng::Xoshiro256pp;
use std::ops::{Deref, DerefMut};

/// What a stream is used for; part of the key that selects the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    /// Think times of one client (index = source, client).
    Think = 1,
    /// Inter-arrival times of an open source or session source.
    Arrival = 2,
    /// Service times drawn at one station.
    Service = 3,
    /// Choices of one routing, repeat or balancing site.
    Routing = 4,
    /// Session lengths of a partly-open source.
    Session = 5,
}

/// One entity's random stream: the lab's generator, selected by a key.
#[derive(Clone, Debug)]
pub struct Stream(Xoshiro256pp);

impl Stream {
    /// The stream selected by `(seed, replication, purpose, a, b)`; distinct keys give
    /// statistically independent streams.
    pub fn new(seed: u64, replication: u64, purpose: Purpose, a: u64, b: u64) -> Self {
        Stream(Xoshiro256pp::keyed(seed, &[replication, purpose as u64, a, b]))
    }
}

impl Deref for Stream {
    type Target = Xoshiro256pp;
    fn deref(&self) -> &Xoshiro256pp {
        &self.0
    }
}

impl DerefMut for Stream {
    fn deref_mut(&mut self) -> &mut Xoshiro256pp {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_numbers_and_different_keys_differ() {
        let mut a = Stream::new(42, 0, Purpose::Service, 3, 0);
        let mut b = Stream::new(42, 0, Purpose::Service, 3, 0);
        let mut c = Stream::new(42, 1, Purpose::Service, 3, 0);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }
}
