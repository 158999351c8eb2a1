//! `/prime?n=N`, the CPU-bound workload: primality by trial division by every integer in
//! [2, N), stopping at the first divisor. Deliberately O(N), not O(sqrt N): it reproduces the
//! service of seed 000, whose §9.3 says the prime check's "computational complexity is
//! proportional to the prime number provided", and whose Table A numbers (isPrime(27059) about
//! 0.16 ms slower per request than isPrime(11)) fit a linear loop of ~27 000 divisions, not a
//! square-root one of ~160. The cost of a request is therefore set by N alone, and a prime N
//! costs N - 2 divisions.

use std::hint::black_box;

/// Whether `n` is prime, and how many divisions were made (the cost the tests check).
///
/// `black_box(n)` hides the value from the optimiser, so a request for a constant N cannot be
/// folded at compile time; the loop itself cannot be removed because its result is the
/// response. The division counter costs nothing in `execute`, which ignores it (dead code
/// after inlining), and lets the tests count exactly the work that the server does.
pub(crate) fn trial_division(n: u64) -> (bool, u64) {
    let n = black_box(n);
    if n < 2 {
        return (false, 0);
    }
    let mut divisions = 0;
    let mut d = 2;
    while d < n {
        divisions += 1;
        if n % d == 0 {
            return (false, divisions);
        }
        d += 1;
    }
    (true, divisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_primes() {
        // 11, 541, 27059, 66601, 1303031: seed 000 (§5.6, §9.3); 521, 7919, 1000003: seed 003.
        for p in [2, 3, 5, 7, 11, 521, 541, 7919, 27059, 27061, 66601, 1_000_003, 1_303_031] {
            assert!(trial_division(p).0, "{p}");
        }
    }

    #[test]
    fn known_composites() {
        // 27057 = 3 x 9019, 27063 = 3 x 9021, 27065 = 5 x 5413, 27221 = 163 x 167, 26569 = 163^2.
        for c in [4, 6, 9, 25, 27057, 27063, 27065, 27221, 26569, u64::MAX] {
            assert!(!trial_division(c).0, "{c}");
        }
    }

    #[test]
    fn zero_and_one_are_not_prime() {
        assert_eq!(trial_division(0), (false, 0));
        assert_eq!(trial_division(1), (false, 0));
    }

    #[test]
    fn matches_a_reference_sieve() {
        let limit = 5000usize;
        let mut composite = vec![false; limit];
        for i in 2..limit {
            if !composite[i] {
                (i * i..limit).step_by(i).for_each(|j| composite[j] = true);
            }
        }
        for (n, &is_composite) in composite.iter().enumerate().skip(2) {
            assert_eq!(trial_division(n as u64).0, !is_composite, "{n}");
        }
    }

    #[test]
    fn cost_is_linear_in_n_for_primes() {
        // Every integer in [2, p) is tried: p - 2 divisions.
        assert_eq!(trial_division(2).1, 0);
        assert_eq!(trial_division(11).1, 9);
        assert_eq!(trial_division(27059).1, 27057);
        // Not square-root: sqrt(27059) is about 164.
        assert!(trial_division(27059).1 > 1000 * trial_division(11).1);
        let mut last = 0;
        for p in [11, 541, 27059, 66601, 1_303_031] {
            let (_, d) = trial_division(p);
            assert!(d > last, "cost must grow with n: {p} took {d}");
            last = d;
        }
    }

    #[test]
    fn composites_stop_at_first_divisor() {
        assert_eq!(trial_division(27057).1, 2); // tried 2, then 3 divides
        assert_eq!(trial_division(27221).1, 162); // 2..=163
        assert_eq!(trial_division(1 << 40).1, 1);
    }
}
