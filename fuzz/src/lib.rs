//! Pieces shared by the fuzz targets in `fuzz_targets/`: where to split an input when checking
//! that a parser fed in pieces agrees with the same parser fed everything at once.
//!
//! Checking every split point costs one parse per byte, each over up to the whole input, so it
//! is quadratic; above [`EVERY_CUT_UP_TO`] bytes the targets check a stride of cut points plus
//! the points around the boundaries the parser itself reported (where off-by-one errors live).

/// Inputs up to this many bytes are split at every point.
pub const EVERY_CUT_UP_TO: usize = 512;

/// About this many evenly spaced cut points for longer inputs.
const STRIDED_CUTS: usize = 128;

/// The cut points `0..=len` to check: every one for short inputs, else a stride plus each of
/// `marks` and its two neighbours (those within `0..=len`), in increasing order, without repeats.
pub fn cut_points(len: usize, marks: &[usize]) -> Vec<usize> {
    if len <= EVERY_CUT_UP_TO {
        return (0..=len).collect();
    }
    let stride = len.div_ceil(STRIDED_CUTS);
    let mut cuts: Vec<usize> = (0..=len).step_by(stride).collect();
    cuts.push(len);
    for &m in marks {
        cuts.extend([m.saturating_sub(1), m, m.saturating_add(1)].into_iter().filter(|&c| c <= len));
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Whether `inner` lies wholly inside `outer` (a parsed field borrows the input).
pub fn borrows(outer: &[u8], inner: &[u8]) -> bool {
    let o = outer.as_ptr_range();
    let start = inner.as_ptr();
    inner.is_empty() || (o.start <= start && start as usize + inner.len() <= o.end as usize)
}
