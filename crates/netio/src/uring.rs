//! io_uring set-up shared by the server's proactor and the load generator's io_uring backend:
//! building one ring for the calling thread with the flags this kernel accepts, saying in words
//! why a kernel refuses io_uring, and a ring of provided buffers for multishot receives.
//!
//! Mechanism. [`new_ring`] asks for a single-issuer ring with deferred task work (Linux 6.1+:
//! completions are processed when the owning thread enters the kernel to wait, never by
//! interrupting it), and falls back to a plain ring on older kernels; it refuses a kernel
//! without `IORING_FEAT_EXT_ARG` (a timeout on the wait) and `IORING_FEAT_FAST_POLL` (sockets
//! polled inside the kernel), i.e. before Linux 5.11. [`BufRing`] is a buffer group
//! (`IORING_REGISTER_PBUF_RING`, Linux 5.19+) over memory the caller owns: the kernel picks a
//! free buffer for each completion of a multishot `recv`, and the owner hands it back with
//! [`BufRing::recycle`] once the bytes are consumed. Nothing here blocks or spawns threads.

use io_uring::squeue;
use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// A ring for the calling thread (it must be the only thread submitting to it).
pub fn new_ring(sq_entries: u32, cq_entries: u32) -> io::Result<IoUring> {
    let fast =
        IoUring::builder().setup_single_issuer().setup_defer_taskrun().setup_cqsize(cq_entries).build(sq_entries);
    let ring = match fast {
        Ok(ring) => ring,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            IoUring::builder().setup_cqsize(cq_entries).build(sq_entries).map_err(unavailable)?
        }
        Err(e) => return Err(unavailable(e)),
    };
    if !ring.params().is_feature_ext_arg() || !ring.params().is_feature_fast_poll() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring is too old here: it needs IORING_FEAT_EXT_ARG and IORING_FEAT_FAST_POLL (Linux 5.11+)",
        ));
    }
    Ok(ring)
}

/// Hand what is queued to the kernel without waiting; an interrupted call, or a completion
/// queue too full to take more (`EBUSY`: the caller reaps, then submits again), is not an error.
pub fn submit(ring: &IoUring) -> io::Result<()> {
    match ring.submit() {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Queue one operation; a full submission queue is submitted first.
///
/// # Safety
/// Every buffer and descriptor `entry` points to must stay valid until its completion is reaped.
pub unsafe fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    for _ in 0..2 {
        // SAFETY: the caller's promise above.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        submit(ring)?;
    }
    Err(io::Error::other("io-uring: the submission queue stays full (the kernel takes no more operations)"))
}

/// Why io_uring cannot be used here, in words naming the cause and the way out.
pub fn unavailable(e: io::Error) -> io::Error {
    let cause = match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "this kernel has no io_uring (built without CONFIG_IO_URING, or a seccomp filter hides the system call)"
                .to_string()
        }
        Some(libc::EPERM) => format!(
            "io_uring is not permitted: kernel.io_uring_disabled is {} (0 allows it, 1 only for the group \
             kernel.io_uring_group, 2 for nobody), or a seccomp filter (a container's default profile) forbids it",
            disabled_setting()
        ),
        Some(libc::ENOMEM) => {
            "not enough lockable memory for the rings (raise `ulimit -l`: kernels before 5.12 charge rings to \
             RLIMIT_MEMLOCK)"
                .to_string()
        }
        Some(libc::EMFILE | libc::ENFILE) => "out of file descriptors".to_string(),
        _ => "io_uring_setup failed".to_string(),
    };
    io::Error::new(e.kind(), format!("io_uring is unavailable: {cause} (io_uring_setup: {e})"))
}

fn disabled_setting() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        Ok(s) => s.trim().to_string(),
        Err(_) => "not readable".to_string(),
    }
}

/// A ring of provided buffers (one buffer group) over `count` buffers of `buf_len` bytes each,
/// laid end to end in memory the caller owns: buffer `bid` starts at `bid * buf_len`.
pub struct BufRing {
    entries: *mut BufRingEntry,
    /// Bytes mapped for the entries (whole pages).
    mapped: usize,
    base: *mut u8,
    buf_len: usize,
    count: u16,
    /// The tail this side has published (the kernel consumes from its own head).
    tail: u16,
    group: u16,
}

impl BufRing {
    /// Register buffer group `group` on `ring`: `count` (a power of two, at most 32768)
    /// buffers of `buf_len` bytes starting at `base`, all handed to the kernel.
    ///
    /// # Safety
    /// `base .. base + count * buf_len` must stay valid and unused by anything else until the
    /// ring is dropped (the kernel writes received bytes there whenever a buffer is its own).
    pub unsafe fn register(ring: &IoUring, group: u16, base: *mut u8, buf_len: usize, count: u16) -> io::Result<Self> {
        if !count.is_power_of_two() || count > 1 << 15 || buf_len > u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring: count must be a power of two <= 32768",
            ));
        }
        let page = 4096;
        let mapped = (usize::from(count) * std::mem::size_of::<BufRingEntry>()).div_ceil(page) * page;
        // SAFETY: an anonymous private mapping; the kernel wants the entries page-aligned.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut bufs = BufRing { entries: addr.cast(), mapped, base, buf_len, count, tail: 0, group };
        // SAFETY: the entries live in the mapping until `drop`; the buffers they will point to
        // are the caller's, valid as long as the ring (this function's contract).
        unsafe { ring.submitter().register_buf_ring_with_flags(addr as u64, count, group, 0) }?;
        for bid in 0..count {
            bufs.push(bid);
        }
        bufs.publish();
        Ok(bufs)
    }

    /// The buffer group's id, for `RecvMulti`.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Where buffer `bid` starts in the caller's memory.
    pub fn offset(&self, bid: u16) -> usize {
        usize::from(bid) * self.buf_len
    }

    /// Hand buffer `bid` back to the kernel (its bytes were consumed).
    pub fn recycle(&mut self, bid: u16) {
        self.push(bid);
        self.publish();
    }

    fn push(&mut self, bid: u16) {
        let mask = self.count - 1;
        // SAFETY: the index is inside the mapping of `count` entries; the kernel reads an entry
        // only between the head and the published tail, and this one is past the tail.
        let entry = unsafe { &mut *self.entries.add(usize::from(self.tail & mask)) };
        // SAFETY: bid < count, so the buffer lies inside the caller's memory.
        entry.set_addr(unsafe { self.base.add(self.offset(bid)) } as u64);
        entry.set_len(self.buf_len as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field, inside the mapping;
        // the release store orders the entries written before it.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `register`; the kernel holds its own reference to the pages.
        unsafe { libc::munmap(self.entries.cast(), self.mapped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::{cqueue, opcode, types};
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Bytes written to a socket arrive through a multishot receive in the provided buffers,
    /// one buffer per completion, and a recycled buffer is taken again: with two buffers, three
    /// messages need the first one back.
    #[test]
    fn multishot_receive_fills_provided_buffers_and_takes_recycled_ones() {
        let mut ring = new_ring(8, 16).expect("io_uring must be available to the tests");
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let mut memory = vec![0u8; 2 * 64];
        // SAFETY: `memory` outlives `ring` (dropped first at the end of the test).
        let mut bufs = unsafe { BufRing::register(&ring, 7, memory.as_mut_ptr(), 64, 2) }.unwrap();
        let recv = opcode::RecvMulti::new(types::Fd(rx.as_raw_fd()), bufs.group()).build().user_data(1);
        // SAFETY: the entry points to no memory of ours but the registered buffers.
        unsafe { ring.submission().push(&recv) }.unwrap();
        let mut seen = Vec::new();
        for message in [&b"first"[..], b"second", b"third"] {
            tx.write_all(message).unwrap();
            ring.submit_and_wait(1).unwrap();
            let cqe = ring.completion().next().expect("a completion after the wait");
            assert!(cqueue::more(cqe.flags()), "the receive stays posted");
            let bid = cqueue::buffer_select(cqe.flags()).expect("a provided buffer");
            let at = bufs.offset(bid);
            assert_eq!(&memory[at..at + cqe.result() as usize], message);
            seen.push(bid);
            bufs.recycle(bid);
        }
        assert_eq!(seen[2], seen[0], "the third message reuses the first, recycled buffer: {seen:?}");
        drop(ring);
    }

    #[test]
    fn a_refusal_names_the_cause() {
        let e = unavailable(io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(e.to_string().contains("this kernel has no io_uring"), "{e}");
        let e = unavailable(io::Error::from_raw_os_error(libc::EPERM));
        assert!(e.to_string().contains("kernel.io_uring_disabled"), "{e}");
    }
}
