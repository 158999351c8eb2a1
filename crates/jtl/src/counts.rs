//! Exact counts of the kept values. JMeter writes whole milliseconds, so a value that is an
//! integer below [`DENSE_LIMIT`] counts in a dense array (one add, no hashing); anything else
//! (fractions, huge values) in a map keyed by its bits. Memory depends on the distinct values,
//! never on the number of rows.

use std::collections::HashMap;

/// Integers below this count densely: 2^20 ms is over 17 minutes, 8 MiB of counters at most.
pub const DENSE_LIMIT: f64 = (1u64 << 20) as f64;

#[derive(Default)]
pub struct ValueCounts {
    dense: Vec<u64>,
    sparse: HashMap<u64, u64>,
}

impl ValueCounts {
    /// Count one value (finite, >= 0).
    #[inline]
    pub fn add(&mut self, v: f64) {
        if v < DENSE_LIMIT && v.fract() == 0.0 {
            let i = v as usize;
            if i >= self.dense.len() {
                self.dense.resize((i + 1).next_power_of_two().max(1024), 0);
            }
            self.dense[i] += 1;
        } else {
            *self.sparse.entry(v.to_bits()).or_insert(0) += 1;
        }
    }

    /// Distinct values in increasing order with their counts.
    pub fn into_sorted(self) -> (Vec<f64>, Vec<u64>) {
        let mut pairs: Vec<(f64, u64)> =
            self.dense.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| (i as f64, c)).collect();
        pairs.extend(self.sparse.into_iter().map(|(bits, c)| (f64::from_bits(bits), c)));
        pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        pairs.into_iter().unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_fractions_and_large_values_count_exactly_in_order() {
        let mut c = ValueCounts::default();
        for v in [5.0, 2.5, 5.0, 3e9, 0.0, 2.5, 5.0, 1048576.0] {
            c.add(v);
        }
        let (values, counts) = c.into_sorted();
        assert_eq!(values, vec![0.0, 2.5, 5.0, 1048576.0, 3e9]);
        assert_eq!(counts, vec![1, 2, 3, 1, 1]);
    }
}
