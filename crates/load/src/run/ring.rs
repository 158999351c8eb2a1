//! A load thread's io_uring (the `io-uring` backend): the operations the connection machinery
//! (`worker.rs`) asks of the kernel, queued and handed over together in one `io_uring_enter`
//! per turn, and the completions that come back.
//!
//! Mechanism. Each load thread owns one ring (single issuer) and one buffer group of provided
//! buffers carved out of the thread's receive memory. An established connection's socket is a
//! registered file in the slot of its connection index (no descriptor lookup per operation) and
//! has one multishot `recv` posted for its whole life: every arrival of bytes is a completion
//! naming the buffer the kernel filled, handed back as soon as its bytes are parsed. A request
//! is one `send` of the bytes the run built once (a short send is resubmitted for the rest). A
//! connect in progress is a one-shot poll for writability; the thread's timerfd and waker are
//! multishot polls. Sends, polls and re-armed receives queued while completions are handled go
//! to the kernel with the next wait: one system call per turn instead of one per operation.
//! Requests queue in socket buffers and the completion queue; the thread blocks only in
//! `io_uring_enter` (with the timeout of the next timer, roll or timeout scan).

use archlab_netio::uring::{new_ring, BufRing};
use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Submission queue entries (a fuller queue is submitted early, see [`Ring::push`]).
const SQ_ENTRIES: u32 = 1024;
/// Completion queue entries; the kernel keeps overflowing completions (IORING_FEAT_NODROP).
const CQ_ENTRIES: u32 = 8 * 1024;
/// Completions taken per batch: each queues at most two entries (a send and a re-armed
/// receive), so a batch never overfills the submission queue.
pub(super) const BATCH: usize = SQ_ENTRIES as usize / 2;
/// Bytes of one provided buffer: an HTTP response head and a small body fit in one.
pub(super) const BUFFER_BYTES: usize = 16 * 1024;
/// The buffer group of the thread's receives (one group per ring).
const GROUP: u16 = 0;

/// Provided buffers for `slots` connections: two per connection (a completion in the queue
/// and one being filled), a power of two between 64 and 1024 (16 MiB at most per thread).
pub(super) fn buffer_count(slots: usize) -> u16 {
    (slots * 2).next_power_of_two().clamp(64, 1024) as u16
}

/// Whether this process can run the io-uring backend: a ring, a provided-buffer ring (Linux
/// 5.19+) and multishot receive (Linux 6.0+). `Err` says why not.
pub(super) fn probe() -> io::Result<()> {
    let ring = new_ring(8, 16)?;
    let mut memory = vec![0u8; 64];
    // SAFETY: the memory outlives the ring, which is dropped first below.
    let bufs = unsafe { BufRing::register(&ring, GROUP, memory.as_mut_ptr(), 64, 1) }.map_err(|e| {
        io::Error::new(e.kind(), format!("this kernel has no provided-buffer rings (Linux 5.19+): {e}"))
    })?;
    drop(ring);
    drop(bufs);
    let release = kernel_release();
    if release < (6, 0) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("multishot receive needs Linux 6.0 or later (this kernel is {}.{})", release.0, release.1),
        ));
    }
    Ok(())
}

/// (major, minor) of the running kernel, (0, 0) when unreadable.
fn kernel_release() -> (u32, u32) {
    let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = text.trim().split(|c: char| !c.is_ascii_digit());
    let mut next = || parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (next(), next())
}

/// One load thread's ring, its registered files and its buffer group.
pub(super) struct Ring {
    ring: IoUring,
    bufs: BufRing,
}

impl Ring {
    /// A ring for the calling thread with `slots` registered-file slots and its buffers in
    /// `memory` (`buffer_count(slots) * BUFFER_BYTES` bytes).
    ///
    /// # Safety
    /// `memory` must outlive the ring and not be touched except where [`Ring::buffer`] says.
    pub(super) unsafe fn new(slots: usize, memory: &mut [u8]) -> io::Result<Ring> {
        let ring = new_ring(SQ_ENTRIES, CQ_ENTRIES)?;
        ring.submitter().register_files_sparse(slots as u32)?;
        let count = buffer_count(slots);
        assert!(memory.len() >= usize::from(count) * BUFFER_BYTES, "receive memory too small for the buffers");
        // SAFETY: the caller keeps `memory` alive and untouched for the ring's life.
        let bufs = unsafe { BufRing::register(&ring, GROUP, memory.as_mut_ptr(), BUFFER_BYTES, count) }?;
        Ok(Ring { ring, bufs })
    }

    /// Queue one operation; a full submission queue is submitted first.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an entry points to is either the run's shared requests (alive
        // until the threads end) or the provided buffers (alive as long as the ring).
        unsafe { archlab_netio::uring::push(&mut self.ring, &entry) }
    }

    fn submit(&mut self) -> io::Result<()> {
        archlab_netio::uring::submit(&self.ring)
    }

    /// Watch `fd` (the timerfd or the waker) for readability until cancelled.
    pub(super) fn watch_readable(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).multi(true).build();
        self.push(entry.user_data(user_data))
    }

    /// One completion when the connect in progress on `fd` ends (writable, or an error).
    pub(super) fn watch_connect(&mut self, fd: RawFd, user_data: u64) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32).build();
        self.push(entry.user_data(user_data))
    }

    /// Cancel the operation queued with `target` (its completion still comes, with -ECANCELED).
    pub(super) fn cancel(&mut self, target: u64, user_data: u64) -> io::Result<()> {
        self.push(opcode::AsyncCancel::new(target).build().user_data(user_data))
    }

    /// Make the established socket `fd` registered file `slot`.
    pub(super) fn attach(&mut self, slot: usize, fd: RawFd) -> io::Result<()> {
        self.ring.submitter().register_files_update(slot as u32, &[fd]).map(drop)
    }

    /// Empty registered file `slot` (the socket closes once no operation holds it).
    pub(super) fn detach(&mut self, slot: usize) -> io::Result<()> {
        self.ring.submitter().register_files_update(slot as u32, &[-1]).map(drop)
    }

    /// Post the multishot receive of registered file `slot`.
    pub(super) fn recv(&mut self, slot: usize, user_data: u64) -> io::Result<()> {
        let entry = opcode::RecvMulti::new(types::Fixed(slot as u32), self.bufs.group()).build();
        self.push(entry.user_data(user_data))
    }

    /// Send all of `bytes` on registered file `slot`. The kernel retries a short send itself
    /// (`MSG_WAITALL`) and posts a completion only when the send fails or ends short
    /// (`IOSQE_CQE_SKIP_SUCCESS`, Linux 5.17+): a request costs no completion of its own.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until the send is over (the run's shared requests).
    pub(super) unsafe fn send_all(&mut self, slot: usize, bytes: &[u8], user_data: u64) -> io::Result<()> {
        let len = bytes.len().min(u32::MAX as usize) as u32;
        let entry = opcode::Send::new(types::Fixed(slot as u32), bytes.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS);
        self.push(entry.user_data(user_data))
    }

    /// Submit everything queued and wait up to `timeout` for a completion.
    pub(super) fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            // ETIME: the timeout passed; EBUSY: completions must be reaped before submitting.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Move up to [`BATCH`] completions (user_data, result, flags) into `out`.
    pub(super) fn reap(&mut self, out: &mut Vec<(u64, i32, u32)>) {
        out.clear();
        out.extend(self.ring.completion().take(BATCH).map(|c| (c.user_data(), c.result(), c.flags())));
    }

    /// Submit what handling a full batch queued, before taking the next batch.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.submit()
    }

    /// Where the bytes of provided buffer `bid` start in the thread's receive memory.
    pub(super) fn buffer(&self, bid: u16) -> usize {
        self.bufs.offset(bid)
    }

    /// Hand provided buffer `bid` back to the kernel once its bytes are parsed.
    pub(super) fn recycle(&mut self, bid: u16) {
        self.bufs.recycle(bid);
    }
}
