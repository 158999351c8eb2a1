//! `io-uring`: a kernel proactor on io_uring, one ring per thread (thread-per-core).
//!
//! Mechanism: N threads (`loops`, default one per CPU), each owning one ring and the
//! connections it accepted. Every ring keeps one multishot accept on the shared listener, so the
//! kernel hands each new connection to one ring and no thread ever passes anything to another
//! (0 hand-offs per request and per connection). The kernel performs the I/O and posts a
//! completion: per connection at most one `recv` (into the connection's own [`InBuf`]) and one
//! `send` (from its [`OutBuf`]) are in flight. A completion is handled inline on the ring's
//! thread through the shared [`serve_buffered`] (parse, run the workload, append responses),
//! and the operations it queues go to the kernel together with everything else queued in that
//! turn in one `io_uring_enter`, which also waits for the next completions. A send the kernel
//! completes short is resubmitted for the rest; the kernel itself waits for writability, so there
//! is no write-spin. Input completed while a send is in flight waits until the send is done, so
//! neither buffer moves or changes while the kernel holds it, and no allocation happens per
//! request. Requests queue in socket buffers and in the completion queue; a thread blocks only
//! in `io_uring_enter`. Expected bottleneck: the rings' cores, with fewer system calls per
//! request than epoll + `read` + `write` (one enter covers many operations under load), and
//! head-of-line blocking behind a CPU-heavy request, as in every inline loop. Every `recv` and
//! `send` completion counts one socket read or write in `archlab_metrics::counters`, so
//! structural metrics compare operations across front-ends (the `io_uring_enter` calls that
//! carry them are not counted). A connection closed after a refused request lingers like
//! `reactor`'s (`conn::LINGER`); an abandoned connection's operations are cancelled before its
//! descriptor is closed. The request and idle timeouts (`crate::timeouts`) are swept per ring:
//! the ring's wait for completions ends at the next sweep (the timeout argument of
//! `io_uring_enter`), a request that did not arrive whole is answered 408 (one non-blocking
//! `send`: nothing else is unsent then) and lingers, an idle connection is closed. Under
//! `max_connections`, rings post one accept at a time, each holding a place under the cap
//! ([`Admission`]); a ring at the cap posts its next accept when one of its connections closes
//! (the rings share the listener, so any ring that accepts serves the backlog). If io_uring is
//! unavailable (kernel.io_uring_disabled, seccomp, an old kernel), `serve` fails with the cause
//! before accepting anything.

use crate::acceptor::{self, Admission, Admitted};
use crate::conn::{InBuf, OutBuf, LINGER, LINGER_MAX_BYTES};
use crate::http_service::{serve_buffered, Flow, KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::timeouts::{Expiry, Sweep, Timeouts, Watch};
use crate::Server;
use archlab_metrics::counters::{self, count_limit, LimitEvent};
use archlab_wire::http::request_timeout_response;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// Submission queue entries per ring (chosen here: a turn rarely queues more; a fuller queue is
/// submitted early, see [`Proactor::push`]).
pub const SQ_ENTRIES: u32 = 1024;
/// Completion queue entries: room for a recv, a send and a cancel of several thousand
/// connections per ring (the kernel keeps overflowing completions anyway, IORING_FEAT_NODROP).
const CQ_ENTRIES: u32 = 16 * 1024;
/// Completions handled before the operations they queued are submitted: each handled
/// completion queues at most two entries, so a batch never overfills the submission queue.
const BATCH: usize = SQ_ENTRIES as usize / 2;

/// What an operation was, in the low bits of its `user_data`; the connection's slot above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Accept = 0,
    Recv = 1,
    Send = 2,
    Cancel = 3,
}

const OP_BITS: u32 = 2;

fn token(slot: usize, op: Op) -> u64 {
    ((slot as u64) << OP_BITS) | op as u64
}

fn decode(user_data: u64) -> (usize, Op) {
    let op = match user_data & ((1 << OP_BITS) - 1) {
        0 => Op::Accept,
        1 => Op::Recv,
        2 => Op::Send,
        _ => Op::Cancel,
    };
    ((user_data >> OP_BITS) as usize, op)
}

/// A length the kernel takes (`u32`); a longer buffer is sent or filled in several operations.
fn len_u32(n: usize) -> u32 {
    n.min(u32::MAX as usize) as u32
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Open,
    /// Write side shut down after a refused request: input is discarded until the deadline.
    Lingering {
        deadline: Instant,
        discarded: usize,
    },
    /// Abandoned: waiting for its operations (and their cancels) to complete before closing.
    Closing,
}

struct Conn {
    stream: TcpStream,
    input: InBuf,
    output: OutBuf,
    phase: Phase,
    recv_inflight: bool,
    send_inflight: bool,
    cancels_inflight: u8,
    /// Input completed while a send was in flight: served when the send is done.
    unserved: bool,
    /// The request answered last ends the connection (Connection: close, HTTP/1.0, refused).
    last_response: bool,
    refused: bool,
    /// The client closed its side (recv returned 0).
    peer_closed: bool,
    /// Complete requests wait behind output over `max_output_bytes`: answered once it is sent.
    waiting: bool,
    /// Which timeout runs for the connection, since when.
    watch: Watch,
    /// The connection's place under `max_connections`, given back when it is dropped.
    _place: Admitted,
}

impl Conn {
    fn new(stream: TcpStream, place: Admitted, options: &ServerOptions) -> Conn {
        Conn {
            stream,
            input: InBuf::new(options.limits.max_header_bytes + options.limits.max_body_bytes),
            output: OutBuf::default(),
            phase: Phase::Open,
            recv_inflight: false,
            send_inflight: false,
            cancels_inflight: 0,
            unserved: false,
            last_response: false,
            refused: false,
            peer_closed: false,
            waiting: false,
            watch: Watch::new(),
            _place: place,
        }
    }

    fn idle(&self) -> bool {
        !self.recv_inflight && !self.send_inflight && self.cancels_inflight == 0
    }
}

/// What to do when this process cannot run the front-end, after the shared set-up's cause.
const ANOTHER_ARCHITECTURE: &str = "serve another architecture, e.g. single-thread or netty";

/// Whether this process can run the front-end: builds and drops one ring, so that `serve` can
/// refuse with the cause before it prints `listening` (the serving threads build their own).
pub fn probe() -> io::Result<()> {
    new_ring().map(drop)
}

/// A ring for the calling thread (it must run it: the ring is single-issuer), from the set-up
/// the load generator shares (`archlab_netio::uring`), its refusal ending with the way out.
fn new_ring() -> io::Result<IoUring> {
    archlab_netio::uring::new_ring(SQ_ENTRIES, CQ_ENTRIES)
        .map_err(|e| io::Error::new(e.kind(), format!("{e}; {ANOTHER_ARCHITECTURE}")))
}

/// One ring, its thread's connections and the shared listener.
struct Proactor {
    ring: IoUring,
    listener: Arc<TcpListener>,
    conns: Vec<Option<Box<Conn>>>,
    free: Vec<usize>,
    options: ServerOptions,
    scratch: Scratch,
    /// (deadline, slot) of lingering connections, in deadline order (LINGER is constant).
    lingering: VecDeque<(Instant, usize)>,
    /// Multishot accept (Linux 5.19+); single accepts re-posted one by one otherwise.
    multishot_accept: bool,
    /// Completions copied out of the queue, reused every turn (user_data, result, flags).
    cqes: Vec<(u64, i32, u32)>,
    /// The cap on connections, shared by the rings.
    admission: Arc<Admission>,
    /// An accept is in flight (false while the ring is stopped at the cap).
    accepting: bool,
    /// The place the single accept in flight holds under the cap.
    next_place: Option<Admitted>,
    timeouts: Timeouts,
    sweep: Sweep,
}

impl Proactor {
    fn new(listener: Arc<TcpListener>, admission: Arc<Admission>, options: &ServerOptions) -> io::Result<Proactor> {
        let timeouts = options.timeouts();
        Ok(Proactor {
            ring: new_ring()?,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            options: options.clone(),
            scratch: Scratch::new(options),
            lingering: VecDeque::new(),
            multishot_accept: true,
            cqes: Vec::with_capacity(BATCH),
            admission,
            accepting: false,
            next_place: None,
            timeouts,
            sweep: Sweep::new(&timeouts),
        })
    }

    /// Run forever (returns only on a fatal ring or listener error).
    fn run(mut self) -> io::Result<()> {
        self.post_accept()?;
        loop {
            self.wait()?;
            self.expire_lingering()?;
            self.reap()?;
            self.sweep_timeouts()?;
        }
    }

    /// Submit everything queued and wait for a completion (or the next lingering deadline or
    /// sweep).
    fn wait(&mut self) -> io::Result<()> {
        let next = [self.lingering.front().map(|&(t, _)| t), self.sweep.wake_at()].into_iter().flatten().min();
        let result = match next {
            None => self.ring.submit_and_wait(1),
            Some(deadline) => {
                let left = types::Timespec::from(deadline.saturating_duration_since(Instant::now()));
                let args = types::SubmitArgs::new().timespec(&left);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match result {
            Ok(_) => Ok(()),
            // ETIME: the deadline passed; EBUSY: completions must be reaped before submitting.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Handle every completion, in batches whose operations are submitted in between.
    fn reap(&mut self) -> io::Result<()> {
        let mut cqes = std::mem::take(&mut self.cqes);
        let result = loop {
            cqes.clear();
            cqes.extend(self.ring.completion().take(BATCH).map(|c| (c.user_data(), c.result(), c.flags())));
            if cqes.is_empty() {
                break Ok(());
            }
            if let Err(e) = cqes.iter().try_for_each(|&(data, result, flags)| self.complete(data, result, flags)) {
                break Err(e);
            }
            if cqes.len() < BATCH {
                break Ok(());
            }
            // More completions wait: hand the operations queued so far to the kernel first.
            if let Err(e) = self.submit() {
                break Err(e);
            }
        };
        self.cqes = cqes;
        result
    }

    fn submit(&mut self) -> io::Result<()> {
        archlab_netio::uring::submit(&self.ring)
    }

    /// Queue one operation; a full submission queue is submitted first.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an entry points to belongs to a boxed connection that stays in
        // its slot, untouched, until the entry's completion was handled (`release_if_idle`);
        // the listener outlives the ring.
        unsafe { archlab_netio::uring::push(&mut self.ring, &entry) }
    }

    fn complete(&mut self, user_data: u64, result: i32, flags: u32) -> io::Result<()> {
        let (slot, op) = decode(user_data);
        match op {
            Op::Accept => self.on_accept(result, flags),
            Op::Recv => {
                counters::count_read();
                self.on_recv(slot, result)
            }
            Op::Send => {
                counters::count_write();
                self.on_send(slot, result)
            }
            Op::Cancel => {
                if let Some(conn) = self.conn(slot) {
                    conn.cancels_inflight -= 1;
                }
                self.release_if_idle(slot)
            }
        }
    }

    fn conn(&mut self, slot: usize) -> Option<&mut Conn> {
        self.conns.get_mut(slot).and_then(|c| c.as_deref_mut())
    }

    /// Post the ring's accept: multishot without a cap; under a cap one accept at a time, each
    /// holding a place (none free: the ring stops accepting until one of its connections closes).
    fn post_accept(&mut self) -> io::Result<()> {
        let fd = types::Fd(self.listener.as_raw_fd());
        let entry = if self.multishot_accept && !self.admission.capped() {
            opcode::AcceptMulti::new(fd).flags(libc::SOCK_CLOEXEC).build()
        } else {
            if self.admission.capped() {
                match self.admission.try_admit() {
                    Some(place) => self.next_place = Some(place),
                    None => {
                        count_limit(LimitEvent::AcceptCapped);
                        self.accepting = false;
                        return Ok(());
                    }
                }
            }
            opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut()).flags(libc::SOCK_CLOEXEC).build()
        };
        self.accepting = true;
        self.push(entry.user_data(token(0, Op::Accept)))
    }

    fn on_accept(&mut self, result: i32, flags: u32) -> io::Result<()> {
        // Under a cap, the place this accept held; without one, a place that counts nothing.
        let place = self.next_place.take();
        if result >= 0 {
            // SAFETY: the kernel gave us this new descriptor; nothing else owns it.
            let stream = unsafe { TcpStream::from_raw_fd(result) };
            acceptor::accepted(&stream, &self.options);
            let place = place.or_else(|| self.admission.try_admit()).expect("no cap, or a place was taken");
            let slot = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            self.conns[slot] = Some(Box::new(Conn::new(stream, place, &self.options)));
            self.watch(slot);
            self.post_recv(slot)?;
        } else if result == -libc::EINVAL && self.multishot_accept {
            // Kernels before 5.19 refuse multishot accept: accept one connection at a time.
            self.multishot_accept = false;
        } else {
            drop(place);
            acceptor::accept_failed(io::Error::from_raw_os_error(-result), &self.listener)?;
        }
        if !cqueue::more(flags) {
            self.accepting = false;
            self.post_accept()?;
        }
        Ok(())
    }

    fn post_recv(&mut self, slot: usize) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        let fd = types::Fd(conn.stream.as_raw_fd());
        let Some(spare) = conn.input.spare() else {
            // Full at its maximum: no valid request fits (the parser has refused it already).
            return self.close(slot);
        };
        let entry = opcode::Recv::new(fd, spare.as_mut_ptr(), len_u32(spare.len())).build();
        conn.recv_inflight = true;
        self.push(entry.user_data(token(slot, Op::Recv)))
    }

    fn post_send(&mut self, slot: usize) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        let fd = types::Fd(conn.stream.as_raw_fd());
        let unsent = conn.output.unsent();
        let entry = opcode::Send::new(fd, unsent.as_ptr(), len_u32(unsent.len())).flags(libc::MSG_NOSIGNAL).build();
        conn.send_inflight = true;
        self.push(entry.user_data(token(slot, Op::Send)))
    }

    fn on_recv(&mut self, slot: usize, result: i32) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        conn.recv_inflight = false;
        match conn.phase {
            Phase::Closing => self.release_if_idle(slot),
            Phase::Lingering { deadline, discarded } => {
                if result == -libc::EINTR || result == -libc::EAGAIN {
                    return self.post_recv(slot);
                }
                let discarded = discarded + result.max(0) as usize;
                if result <= 0 || discarded >= LINGER_MAX_BYTES {
                    return self.close(slot);
                }
                conn.phase = Phase::Lingering { deadline, discarded };
                conn.input.clear();
                self.post_recv(slot)
            }
            Phase::Open if result > 0 => {
                conn.input.commit(result as usize);
                if conn.send_inflight {
                    conn.unserved = true;
                    Ok(())
                } else {
                    self.serve(slot)
                }
            }
            Phase::Open if result == 0 => {
                conn.peer_closed = true;
                if conn.send_inflight {
                    Ok(()) // the response in flight still goes out; closed when it is done
                } else {
                    self.close(slot)
                }
            }
            Phase::Open if result == -libc::EINTR || result == -libc::EAGAIN => self.post_recv(slot),
            Phase::Open => self.close(slot), // reset by the client, or another socket error
        }
    }

    fn on_send(&mut self, slot: usize, result: i32) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        conn.send_inflight = false;
        if conn.phase == Phase::Closing {
            return self.release_if_idle(slot);
        }
        if result == -libc::EINTR || result == -libc::EAGAIN {
            return self.post_send(slot);
        }
        if result <= 0 {
            return self.close(slot); // EPIPE, ECONNRESET; 0 bytes taken of a non-empty buffer
        }
        if conn.output.advance(result as usize).is_err() {
            return self.close(slot); // the next part of a streamed body could not be made
        }
        if conn.output.pending() > 0 {
            return self.post_send(slot); // short send, or the next part: the rest
        }
        if conn.last_response {
            return self.finish(slot);
        }
        if std::mem::take(&mut conn.waiting) {
            return self.serve(slot); // the requests that waited behind the output
        }
        if conn.peer_closed {
            return self.close(slot);
        }
        if std::mem::take(&mut conn.unserved) {
            return self.serve(slot);
        }
        self.watch(slot);
        Ok(())
    }

    /// Answer the complete requests received (no operation of this connection is in flight),
    /// then send the responses and read on, both at once.
    fn serve(&mut self, slot: usize) -> io::Result<()> {
        let Some(Some(conn)) = self.conns.get_mut(slot) else { return Ok(()) };
        let flow = serve_buffered(
            &mut conn.input,
            &mut conn.output,
            &self.options.limits,
            &mut self.scratch,
            KeepAlive::AsRequested,
        );
        match flow {
            Flow::KeepOpen => {}
            Flow::Drain => conn.waiting = true,
            Flow::Close | Flow::Refused => {
                conn.last_response = true;
                conn.refused = flow == Flow::Refused;
            }
        }
        let sending = conn.output.pending() > 0;
        // No reading while requests wait behind the output: they are answered first.
        let reading = !conn.last_response && !conn.peer_closed && !conn.waiting;
        if sending {
            self.post_send(slot)?;
        }
        if reading {
            self.post_recv(slot)?;
        }
        if !sending && !reading {
            return self.finish(slot);
        }
        self.watch(slot);
        Ok(())
    }

    /// Note which timeout runs for an open connection, after it was served.
    fn watch(&mut self, slot: usize) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else { return };
        if conn.phase != Phase::Open {
            return;
        }
        conn.watch.observe(&conn.input, conn.output.pending(), false);
        if let Some((deadline, _)) = conn.watch.deadline(&self.timeouts) {
            self.sweep.schedule(deadline);
        }
    }

    /// Time out the open connections whose deadline has passed, when a sweep is due.
    fn sweep_timeouts(&mut self) -> io::Result<()> {
        let now = Instant::now();
        if !self.sweep.begin(now) {
            return Ok(());
        }
        for slot in 0..self.conns.len() {
            let Some(Some(conn)) = self.conns.get(slot) else { continue };
            if conn.phase != Phase::Open {
                continue;
            }
            match conn.watch.deadline(&self.timeouts) {
                Some((deadline, why)) if deadline <= now => self.expire(slot, why)?,
                Some((deadline, _)) => self.sweep.schedule(deadline),
                None => {}
            }
        }
        Ok(())
    }

    /// A connection's timeout ran out: close it when idle; answer 408 to a request in progress
    /// and linger (its recv stays in flight and discards what still comes).
    fn expire(&mut self, slot: usize, why: Expiry) -> io::Result<()> {
        if why == Expiry::Idle {
            count_limit(LimitEvent::IdleClosed);
            return self.close(slot);
        }
        count_limit(LimitEvent::RequestTimedOut);
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        let response = request_timeout_response();
        // Nothing else is unsent while a request is in progress: the few bytes fit in the send
        // buffer, so one non-blocking send does (a client that is gone fails it, fine).
        counters::count_write();
        // SAFETY: a plain system call on a descriptor the connection owns, with a valid buffer.
        unsafe {
            libc::send(
                conn.stream.as_raw_fd(),
                response.as_ptr().cast(),
                response.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let _ = conn.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        conn.phase = Phase::Lingering { deadline, discarded: 0 };
        let recv_inflight = conn.recv_inflight;
        self.lingering.push_back((deadline, slot));
        if recv_inflight {
            Ok(())
        } else {
            self.post_recv(slot)
        }
    }

    /// The last response went out: close, or linger after a refused request.
    fn finish(&mut self, slot: usize) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        if !conn.refused {
            return self.close(slot);
        }
        let _ = conn.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        conn.phase = Phase::Lingering { deadline, discarded: 0 };
        conn.input.clear();
        self.lingering.push_back((deadline, slot));
        self.post_recv(slot)
    }

    /// Abandon a connection: cancel what is in flight, close once nothing is.
    fn close(&mut self, slot: usize) -> io::Result<()> {
        let Some(conn) = self.conn(slot) else { return Ok(()) };
        if conn.phase == Phase::Closing {
            return Ok(());
        }
        conn.phase = Phase::Closing;
        let targets = [(conn.recv_inflight, Op::Recv), (conn.send_inflight, Op::Send)];
        for (inflight, op) in targets {
            if inflight {
                if let Some(conn) = self.conn(slot) {
                    conn.cancels_inflight += 1;
                }
                let cancel = opcode::AsyncCancel::new(token(slot, op)).build();
                self.push(cancel.user_data(token(slot, Op::Cancel)))?;
            }
        }
        self.release_if_idle(slot)
    }

    /// Free a closing connection's slot (closing its descriptor and giving back its place under
    /// the cap) once the kernel holds nothing of it; a ring stopped at the cap accepts again.
    fn release_if_idle(&mut self, slot: usize) -> io::Result<()> {
        if let Some(Some(conn)) = self.conns.get(slot) {
            if conn.phase == Phase::Closing && conn.idle() {
                self.conns[slot] = None;
                self.free.push(slot);
                if !self.accepting {
                    return self.post_accept();
                }
            }
        }
        Ok(())
    }

    /// Close lingering connections whose deadline has passed. A slot reused by a newer
    /// connection is recognised by its different (or absent) deadline.
    fn expire_lingering(&mut self) -> io::Result<()> {
        let now = Instant::now();
        while let Some(&(deadline, slot)) = self.lingering.front() {
            if deadline > now {
                break;
            }
            self.lingering.pop_front();
            let same = matches!(self.conn(slot), Some(c) if matches!(c.phase, Phase::Lingering { deadline: d, .. } if d == deadline));
            if same {
                self.close(slot)?;
            }
        }
        Ok(())
    }
}

/// The `io-uring` architecture: `rings` threads, one ring each, sharing the listener.
pub struct IoUringProactor {
    options: ServerOptions,
    rings: usize,
}

impl IoUringProactor {
    pub fn new(options: &ServerOptions, rings: usize) -> Self {
        IoUringProactor { options: options.clone(), rings: rings.max(1) }
    }

    /// With more than one CPU given, ring i runs on the i-th CPU of the list (round-robin).
    fn cpu(&self, i: usize) -> Option<usize> {
        self.options.cpus.as_ref().filter(|c| c.ids().len() > 1).map(|c| c.nth(i))
    }
}

fn pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // Best effort: the process is already confined to the list.
        let _ = archlab_netio::cpus::pin_current_thread(&[cpu]);
    }
}

impl Server for IoUringProactor {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        let listener = Arc::new(listener);
        let admission = Admission::new(self.options.max_connections);
        // Every ring is made on the thread that runs it; none accepts before all exist, so a
        // ring that cannot be made fails `serve` before any connection is taken.
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let mut go = Vec::with_capacity(self.rings);
        for i in 1..self.rings {
            let (go_tx, go_rx) = mpsc::channel::<()>();
            go.push(go_tx);
            let (listener, admission, options, ready, cpu) =
                (listener.clone(), admission.clone(), self.options.clone(), ready_tx.clone(), self.cpu(i));
            std::thread::Builder::new().name(format!("ring-{i}")).spawn(move || {
                pin(cpu);
                let proactor = match Proactor::new(listener, admission, &options) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                if go_rx.recv().is_err() {
                    return; // set-up failed elsewhere: `serve` returned its error
                }
                if let Err(e) = proactor.run() {
                    eprintln!("io-uring: ring {i} failed: {e}");
                    std::process::exit(1);
                }
            })?;
        }
        drop(ready_tx);
        pin(self.cpu(0));
        let first = Proactor::new(listener, admission, &self.options)?;
        for _ in 1..self.rings {
            ready_rx.recv().map_err(|_| io::Error::other("io-uring: a ring thread ended during set-up"))??;
        }
        for g in go {
            let _ = g.send(());
        }
        first.run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for slot in [0, 1, 7, 1 << 40] {
            for op in [Op::Accept, Op::Recv, Op::Send, Op::Cancel] {
                assert_eq!(decode(token(slot, op)), (slot, op));
            }
        }
    }
}
