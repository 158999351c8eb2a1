//! The values the memcached workload stores: a pure function of the key index (length drawn
//! from the size distribution by a keyed hash, bytes from a fixed cycle that contains CR LF), so
//! that a `get` can be verified without remembering what was set, across connections and
//! threads.

use crate::config::memcached::ValueSize;

/// Byte cycle of every value: contains CR LF so that framing by length is exercised.
const VALUE_BYTES: &[u8] = b"0123456789abcdef\r\n";

/// Length of the value of key `index`: a keyed hash, so every connection agrees.
pub(crate) fn value_len(size: ValueSize, seed: u64, index: u64) -> usize {
    match size {
        ValueSize::Fixed(n) => n,
        ValueSize::Uniform { min, max } => {
            let mut state = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let h = archlab_prng::splitmix64(&mut state);
            min + (h % (max - min + 1) as u64) as usize
        }
    }
}

/// Byte `j` of the value of key `index`.
#[inline]
pub(crate) fn value_byte(index: u64, j: usize) -> u8 {
    VALUE_BYTES[((index as usize).wrapping_add(j)) % VALUE_BYTES.len()]
}
