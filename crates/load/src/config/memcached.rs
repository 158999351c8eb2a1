//! The memcached workload of a run, memtier-compatible where memtier defines something
//! (notes/load-generators.md §4.3): the `set`:`get` cycle of a connection ([`Ratio`]), the key
//! range and patterns (R/S/G/P/Z, drawn in `keys.rs`), multi-get of k keys, value sizes
//! ([`ValueSize`]) and verification. Validated here, once; `protocol/memcached.rs` speaks it.

use crate::error::ConfigError;
pub use crate::keys::{KeyPattern, KeyPatterns};
use archlab_wire::memcached::{is_valid_key, Retrieval};
use std::fmt;
use std::str::FromStr;

/// memtier's defaults: `--key-prefix memtier-`, keys 0..=10 000 000, `--ratio 1:10`.
pub const DEFAULT_KEY_PREFIX: &str = "memtier-";
pub const DEFAULT_KEY_MAX: u64 = 10_000_000;
/// Largest value the generator writes (memcached's default item limit is 1 MiB).
pub const MAX_VALUE_SIZE: usize = 1 << 20;

/// `--ratio S:G`: a deterministic cycle of S sets then G gets per connection (memtier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub sets: u32,
    pub gets: u32,
}

impl FromStr for Ratio {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected SETS:GETS with integers, not both 0, e.g. 1:10, got {s:?}");
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let r = Ratio { sets: a.trim().parse().map_err(|_| bad())?, gets: b.trim().parse().map_err(|_| bad())? };
        if r.sets == 0 && r.gets == 0 {
            return Err(bad());
        }
        Ok(r)
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.sets, self.gets)
    }
}

/// Size of the value of each key: `32` (fixed) or `uniform:MIN-MAX` (memtier `-d` and
/// `--data-size-range`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueSize {
    Fixed(usize),
    Uniform { min: usize, max: usize },
}

impl FromStr for ValueSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected N or uniform:MIN-MAX (bytes, <= {MAX_VALUE_SIZE}), got {s:?}");
        let size = |t: &str| t.trim().parse::<usize>().ok().filter(|&n| n <= MAX_VALUE_SIZE).ok_or_else(bad);
        match s.strip_prefix("uniform:") {
            Some(range) => {
                let (a, b) = range.split_once('-').ok_or_else(bad)?;
                let (min, max) = (size(a)?, size(b)?);
                if min > max {
                    return Err(bad());
                }
                Ok(ValueSize::Uniform { min, max })
            }
            None => Ok(ValueSize::Fixed(size(s)?)),
        }
    }
}

impl fmt::Display for ValueSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSize::Fixed(n) => write!(f, "{n}"),
            ValueSize::Uniform { min, max } => write!(f, "uniform:{min}-{max}"),
        }
    }
}

/// The memcached workload, validated by [`McWorkload::new`].
#[derive(Clone, Debug, PartialEq)]
pub struct McWorkload {
    pub retrieval: Retrieval,
    /// Keys per retrieval request (memtier `--multi-key-get`), at least 1.
    pub multi_get: u32,
    pub ratio: Ratio,
    pub keys: KeyPatterns,
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    pub key_median: f64,
    pub key_stddev: f64,
    /// Exponent s of the Z pattern (memtier `--key-zipf-exp`, in (0, 5), default 1).
    pub key_zipf_exp: f64,
    pub value_size: ValueSize,
    /// Check every value read back (length and bytes) and the order of multi-get replies.
    pub verify: bool,
}

impl McWorkload {
    /// memtier's defaults except the key range (`key_max`) and the ratio, which callers give.
    /// Gaussian median and stddev default to the centre and range/6 (memtier).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        retrieval: Retrieval,
        multi_get: u32,
        ratio: Ratio,
        keys: KeyPatterns,
        key_prefix: String,
        key_min: u64,
        key_max: u64,
        key_median: Option<f64>,
        key_stddev: Option<f64>,
        value_size: ValueSize,
        verify: bool,
    ) -> Result<McWorkload, ConfigError> {
        let err =
            |parameter, allowed: &str, received: String| ConfigError { parameter, allowed: allowed.into(), received };
        if !(1..=1000).contains(&multi_get) {
            return Err(err("multi_get", "an integer in 1..=1000", multi_get.to_string()));
        }
        if key_min > key_max {
            return Err(err("key_max", "an integer >= key_min", format!("{key_max} (key_min {key_min})")));
        }
        // The longest key: prefix and 20 digits.
        let longest = format!("{key_prefix}{}", u64::MAX);
        if !is_valid_key(longest.as_bytes()) {
            return Err(err(
                "key_prefix",
                "at most 230 bytes without spaces or control characters",
                format!("{key_prefix:?}"),
            ));
        }
        let range = (key_max - key_min) as f64;
        // memtier's defaults (obj_gen.cpp): median len/2 + min + 0.5, then floored draws.
        let key_median = key_median.unwrap_or(key_min as f64 + range / 2.0 + 0.5);
        let key_stddev = key_stddev.unwrap_or(range / 6.0);
        if !key_stddev.is_finite() || key_stddev < 0.0 || !key_median.is_finite() {
            return Err(err("key_stddev", "a finite number >= 0", key_stddev.to_string()));
        }
        Ok(McWorkload {
            retrieval,
            multi_get,
            ratio,
            keys,
            key_prefix,
            key_min,
            key_max,
            key_median,
            key_stddev,
            key_zipf_exp: 1.0,
            value_size,
            verify,
        })
    }

    /// Set the exponent of the Z pattern (memtier `--key-zipf-exp`: 0 < s < 5).
    pub fn with_zipf_exponent(mut self, s: f64) -> Result<McWorkload, ConfigError> {
        if !(s > 0.0 && s < 5.0) {
            return Err(ConfigError {
                parameter: "key_zipf_exp",
                allowed: "a number in (0, 5), as memtier".into(),
                received: s.to_string(),
            });
        }
        if ![self.keys.set, self.keys.get].contains(&KeyPattern::Zipf) {
            return Err(ConfigError {
                parameter: "key_zipf_exp",
                allowed: "only with a Z key pattern".into(),
                received: s.to_string(),
            });
        }
        self.key_zipf_exp = s;
        Ok(self)
    }

    /// Uses the P pattern: the range is split between the connections.
    pub fn is_parallel(&self) -> bool {
        self.keys.set == KeyPattern::Parallel
    }

    /// Whether any draw is random (so that a seed means something).
    pub fn is_random(&self) -> bool {
        (self.ratio.sets > 0 && self.keys.set.is_random())
            || (self.ratio.gets > 0 && self.keys.get.is_random())
            || matches!(self.value_size, ValueSize::Uniform { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_and_sizes_parse_and_refuse() {
        assert_eq!("R:G".parse::<KeyPatterns>().unwrap().to_string(), "R:G");
        assert!("P:R".parse::<KeyPatterns>().unwrap_err().contains("P:P"));
        assert!("R".parse::<KeyPatterns>().is_err());
        assert!("0:0".parse::<Ratio>().is_err());
        assert_eq!("uniform:10-20".parse::<ValueSize>(), Ok(ValueSize::Uniform { min: 10, max: 20 }));
        assert!("uniform:20-10".parse::<ValueSize>().is_err());
        assert!("2000000".parse::<ValueSize>().is_err());
    }
}
