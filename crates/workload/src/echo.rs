//! `/echo?size=N`, the I/O-bound workload: a response whose size is the experiment's factor
//! (seed 000's 10 B / 1 KB, seed 001's 0.1 / 10 / 100 KB), or the request body sent back.
//! The CPU cost is one memcpy per byte, so the cost of a request is dominated by moving bytes
//! through sockets, which is what the architectures differ in.

/// 2520 x 26 = 65520 bytes of `abc...z`: just under 64 KiB and a whole number of alphabets,
/// so consecutive copies continue the pattern seamlessly (byte i of any body is
/// `b'a' + i % 26`, easy to verify on the client side).
const BLOCK_LEN: usize = 26 * 2520;

static BLOCK: [u8; BLOCK_LEN] = {
    let mut block = [0u8; BLOCK_LEN];
    let mut i = 0;
    while i < BLOCK_LEN {
        block[i] = b'a' + (i % 26) as u8;
        i += 1;
    }
    block
};

/// Append the request body if there is one, else `size` pattern bytes.
pub(crate) fn run(size: usize, request_body: &[u8], out: &mut Vec<u8>) {
    if !request_body.is_empty() {
        out.extend_from_slice(request_body);
        return;
    }
    pattern(0, size, out);
}

/// Append `len` pattern bytes starting at byte `offset` of the pattern (byte i is
/// `b'a' + i % 26`), so that a body produced in parts is the body produced at once.
pub(crate) fn pattern(offset: usize, len: usize, out: &mut Vec<u8>) {
    // One reservation, then block-sized copies: no per-byte loop, no reallocation.
    out.reserve(len);
    let mut at = offset % 26;
    let mut remaining = len;
    while remaining > 0 {
        let n = remaining.min(BLOCK_LEN - at);
        out.extend_from_slice(&BLOCK[at..at + n]);
        remaining -= n;
        // BLOCK_LEN is a whole number of alphabets: the next copy starts where this one left off.
        at = (at + n) % BLOCK_LEN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        run(size, b"", &mut out);
        out
    }

    #[test]
    fn sizes_are_exact() {
        for size in
            [0, 1, 10, 100, 1024, 10 * 1024, 100 * 1024, BLOCK_LEN - 1, BLOCK_LEN, BLOCK_LEN + 1, 3 * BLOCK_LEN + 7]
        {
            assert_eq!(body(size).len(), size);
        }
    }

    #[test]
    fn pattern_is_seamless_across_blocks() {
        let b = body(3 * BLOCK_LEN + 100);
        for (i, &byte) in b.iter().enumerate() {
            assert_eq!(byte, b'a' + (i % 26) as u8, "byte {i}");
        }
    }

    #[test]
    fn request_body_is_echoed_and_size_ignored() {
        let mut out = Vec::new();
        run(5, b"hello world", &mut out);
        assert_eq!(out, b"hello world");
    }

    #[test]
    fn parts_make_the_whole_body() {
        let whole = body(3 * BLOCK_LEN + 100);
        let mut parts = Vec::new();
        let mut offset = 0;
        for len in [1, 25, 26, 27, BLOCK_LEN, BLOCK_LEN - 3, 1000, 2 * BLOCK_LEN] {
            let len = len.min(whole.len() - offset);
            pattern(offset, len, &mut parts);
            offset += len;
        }
        assert_eq!(parts, whole[..offset]);
    }

    #[test]
    fn largest_size() {
        assert_eq!(body(crate::ECHO_MAX_SIZE as usize).len(), 64 << 20);
    }
}
