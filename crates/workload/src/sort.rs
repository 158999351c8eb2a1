//! `/sort?n=N`, the memory-bound workload: merge sort of N pseudo-random 32-bit integers
//! (seed 000's "merge-sort(10)" / "merge-sort(1000)", seed 003's "1000 random numbers are
//! sorted"). Each request allocates its input and one scratch buffer (8N bytes in total),
//! fills the input from a fixed-seed xorshift generator (so every request sorts the same
//! numbers and costs the same: the work is "constant per request"), and sorts with a top-down
//! merge sort written here rather than `slice::sort`, whose adaptive algorithm could change
//! between Rust versions and would make results incomparable across toolchains. The body
//! summarises the sorted data (min, median, max, an order-sensitive checksum), so the sort is
//! observable and cannot be optimised away.

use std::io::Write;

/// Seed of the input generator: fixed, so every request (and every run) sorts the same data.
const SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// xorshift64 (Marsaglia 2003): cheap, so generating the input does not dominate the sort.
pub(crate) struct XorShift64(u64);

impl XorShift64 {
    pub(crate) fn new(seed: u64) -> Self {
        // The all-zero state is a fixed point of xorshift.
        XorShift64(if seed == 0 { SEED } else { seed })
    }

    pub(crate) fn next_i32(&mut self) -> i32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        // The high half has the better statistical quality.
        (x >> 32) as i32
    }
}

/// The N integers every `/sort?n=N` request sorts.
pub(crate) fn input(n: usize) -> Vec<i32> {
    let mut rng = XorShift64::new(SEED);
    (0..n).map(|_| rng.next_i32()).collect()
}

/// Sort `data` ascending with `scratch` (same length) as the only extra memory.
///
/// Top-down merge sort that alternates the roles of the two buffers at each level instead of
/// copying merged runs back (the "ping-pong" form): one initial copy, then every level merges
/// from one buffer into the other.
pub(crate) fn merge_sort(data: &mut [i32], scratch: &mut [i32]) {
    assert_eq!(data.len(), scratch.len(), "scratch must be as long as data");
    scratch.copy_from_slice(data);
    sort_into(scratch, data);
}

/// Sort the elements of `src` into `dst`. Precondition: both hold the same elements in the
/// same order (so a run of one element is already "sorted into" `dst`); `src` is clobbered.
fn sort_into(src: &mut [i32], dst: &mut [i32]) {
    let n = dst.len();
    if n < 2 {
        return;
    }
    let mid = n / 2;
    let (src_lo, src_hi) = src.split_at_mut(mid);
    let (dst_lo, dst_hi) = dst.split_at_mut(mid);
    // Sort each half into `src` (roles swapped), then merge the halves from `src` into `dst`.
    sort_into(dst_lo, src_lo);
    sort_into(dst_hi, src_hi);
    merge(src_lo, src_hi, dst);
}

/// Merge two sorted runs into `out` (len = lo.len() + hi.len()); ties take `lo` first (stable).
fn merge(lo: &[i32], hi: &[i32], out: &mut [i32]) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < lo.len() && j < hi.len() {
        if hi[j] < lo[i] {
            out[k] = hi[j];
            j += 1;
        } else {
            out[k] = lo[i];
            i += 1;
        }
        k += 1;
    }
    let rest = if i < lo.len() { &lo[i..] } else { &hi[j..] };
    out[k..].copy_from_slice(rest);
}

/// Order-sensitive checksum (FNV-1a over the values), so a wrongly ordered result differs.
pub(crate) fn checksum(sorted: &[i32]) -> u64 {
    sorted.iter().fold(0xcbf2_9ce4_8422_2325, |h, &v| (h ^ u64::from(v as u32)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Generate, sort, and append `n=N min=A median=B max=C checksum=0x...\n` to `out`.
/// The median is the lower median, element (N-1)/2. `n` >= 1 (checked by `from_target`).
pub(crate) fn run(n: usize, out: &mut Vec<u8>) {
    let mut data = input(n);
    let mut scratch = vec![0; n];
    merge_sort(&mut data, &mut scratch);
    let (Some(min), Some(max)) = (data.first(), data.last()) else {
        out.extend_from_slice(b"n=0\n");
        return;
    };
    let median = data[(n - 1) / 2];
    // Writing into a Vec cannot fail.
    let _ = writeln!(out, "n={n} min={min} median={median} max={max} checksum={:#018x}", checksum(&data));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted_by_us(mut v: Vec<i32>) -> Vec<i32> {
        let mut scratch = vec![0; v.len()];
        merge_sort(&mut v, &mut scratch);
        v
    }

    proptest! {
        #[test]
        fn matches_slice_sort(v in proptest::collection::vec(any::<i32>(), 0..2000)) {
            let mut expected = v.clone();
            expected.sort();
            prop_assert_eq!(sorted_by_us(v), expected);
        }

        #[test]
        fn matches_slice_sort_with_many_ties(v in proptest::collection::vec(-5i32..5, 0..500)) {
            let mut expected = v.clone();
            expected.sort();
            prop_assert_eq!(sorted_by_us(v), expected);
        }
    }

    #[test]
    fn edge_sizes() {
        for n in [0, 1, 2, 3, 4, 5, 7, 8, 9, 1000, 1023, 1024, 1025] {
            let v = input(n);
            let mut expected = v.clone();
            expected.sort();
            assert_eq!(sorted_by_us(v), expected, "n={n}");
        }
        assert_eq!(sorted_by_us(vec![3, 2, 1]), [1, 2, 3]);
        assert_eq!(sorted_by_us(vec![i32::MAX, i32::MIN, 0]), [i32::MIN, 0, i32::MAX]);
    }

    #[test]
    fn input_is_constant_per_request() {
        assert_eq!(input(1000), input(1000));
        // A prefix of a longer input: N sets the amount of work, not the data distribution.
        assert_eq!(input(10)[..], input(1000)[..10]);
        // And it is not degenerate.
        let v = input(1000);
        assert!(v.iter().any(|&x| x < 0) && v.iter().any(|&x| x > 0));
        assert!(v.windows(2).any(|w| w[0] > w[1]));
    }

    #[test]
    fn body_summarises_the_sorted_input() {
        let n = 1001;
        let mut sorted = input(n);
        sorted.sort();
        let mut out = Vec::new();
        run(n, &mut out);
        let expected = format!(
            "n={n} min={} median={} max={} checksum={:#018x}\n",
            sorted[0],
            sorted[500],
            sorted[n - 1],
            checksum(&sorted)
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn body_is_identical_for_every_request() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        run(10, &mut a);
        run(10, &mut b);
        assert_eq!(a, b);
        let mut one = Vec::new();
        run(1, &mut one);
        let x = input(1)[0];
        assert!(String::from_utf8(one).unwrap().starts_with(&format!("n=1 min={x} median={x} max={x} ")));
    }

    #[test]
    fn checksum_is_order_sensitive() {
        assert_ne!(checksum(&[1, 2]), checksum(&[2, 1]));
    }
}
