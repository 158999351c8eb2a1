//! `/response?size=N`, seed 001's workload: a response of N bytes generated on the fly whose
//! computation is proportional to its size ("the Tomcat server will generate a corresponding
//! response (e.g., a 0.1KB/10KB/100KB random string) on-the-fly during runtime, such
//! generation process (or computation) of each request is proportional to the response size",
//! §3.1). The seed's code (`Count.java` in `sgzhang/AsynMessaging`) runs the CPU kernel
//! `insertionSort(randomizeArray(100))` once per request; here it runs once per started 100
//! bytes of response, and each run yields the next 100 bytes, derived from the sorted array so
//! that the body depends on the whole computation.
//!
//! Mapping (documented in `docs/architecture.md`): 0.1 KiB = `/response?size=102` -> 2 rounds,
//! the seed's 100 B = `size=100` -> 1 round, 10 KiB = `size=10240` -> 103 rounds, 100 KiB =
//! `size=102400` -> 1024 rounds. The pseudo-random arrays come from a fixed seed advanced per
//! round, so every request of a given size does the same work and returns the same bytes.

/// Bytes produced per round, and the length of the array each round sorts (seed 001's 100).
pub const ROUND_BYTES: usize = 100;

/// Rounds of the CPU kernel for a response of `size` bytes: one per started 100 bytes.
pub fn rounds(size: usize) -> usize {
    size.div_ceil(ROUND_BYTES)
}

/// xorshift64*: a fixed, fast generator (the values only need to defeat a sorted input).
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn insertion_sort(a: &mut [u32]) {
    for i in 1..a.len() {
        let v = a[i];
        let mut j = i;
        while j > 0 && a[j - 1] > v {
            a[j] = a[j - 1];
            j -= 1;
        }
        a[j] = v;
    }
}

/// The generator's state before the first round of every response.
pub(crate) const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Append `size` bytes, running [`rounds`]`(size)` insertion sorts of 100 random integers.
pub(crate) fn run(size: usize, out: &mut Vec<u8>) {
    rounds_into(&mut SEED.clone(), size, out);
}

/// Append `len` bytes from the rounds that follow `state` (advanced past them): a body
/// produced in parts of whole rounds ([`ROUND_BYTES`]; only the last part may end inside a
/// round) is the body produced at once, at the same cost.
pub(crate) fn rounds_into(state: &mut u64, len: usize, out: &mut Vec<u8>) {
    out.reserve(len);
    let mut array = [0u32; ROUND_BYTES];
    let mut remaining = len;
    while remaining > 0 {
        for v in array.iter_mut() {
            *v = (next(state) >> 32) as u32;
        }
        insertion_sort(&mut array);
        let n = remaining.min(ROUND_BYTES);
        // Lower-case letters from the sorted values: a printable "random string".
        out.extend(array[..n].iter().map(|v| b'a' + (v % 26) as u8));
        remaining -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rounds() {
        assert_eq!(rounds(0), 0);
        assert_eq!(rounds(100), 1);
        assert_eq!(rounds(102), 2);
        assert_eq!(rounds(10 * 1024), 103);
        assert_eq!(rounds(100 * 1024), 1024);
        for size in [0, 1, 100, 101, 10240, 102400] {
            let mut out = Vec::new();
            run(size, &mut out);
            assert_eq!(out.len(), size);
            assert!(out.iter().all(u8::is_ascii_lowercase));
        }
    }

    #[test]
    fn deterministic_and_sorted_kernel() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        run(1000, &mut a);
        run(1000, &mut b);
        assert_eq!(a, b);
        let mut v = [5u32, 3, 9, 1, 1, 0];
        insertion_sort(&mut v);
        assert_eq!(v, [0, 1, 1, 3, 5, 9]);
    }
}
