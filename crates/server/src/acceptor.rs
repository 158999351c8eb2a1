//! The accept loops, written once for every front-end.
//!
//! Blocking front-ends (thread-per-connection, pool, the multi-reactor's boss thread) park a
//! thread in `accept`; reactors accept non-blockingly when the listener is readable and drain
//! the backlog; the io_uring proactor has the kernel accept and hands each completion to
//! [`accepted`] or [`accept_failed`]. All set the per-connection socket options (TCP_NODELAY,
//! SO_SNDBUF, SO_RCVBUF) in the same place.
//!
//! Running out of file descriptors (EMFILE, ENFILE) must neither kill a server nor make it
//! spin: the refused connection stays in the backlog, so a level-triggered listener is ready
//! again at once and a blocking `accept` fails again at once. The acceptors therefore keep one
//! reserve descriptor (`/dev/null`): out of descriptors, they close the reserve, accept the
//! pending connection, close it at once (its client sees the connection end instead of waiting
//! in the backlog for ever) and reopen the reserve: the reserve-descriptor trick of libev and
//! nginx. Each such connection counts `LimitEvent::ClosedOutOfDescriptors`. When the reserve
//! cannot be reopened (another thread took the freed descriptor, or the system-wide table is
//! full), accepting pauses for [`PAUSE`] instead (`LimitEvent::AcceptPaused`): a blocking
//! acceptor sleeps, a reactor stops watching its listener until the pause is over, and the
//! reserve is taken again as soon as a descriptor is free. This happens when several acceptors
//! share the process (io-uring's rings, ncopy's copies): the descriptor one frees to shed a
//! connection can be taken by another's accept, which then serves that connection. Each kind of
//! error is reported on stderr once per process; other transient errors (aborted handshakes)
//! are simply retried.
//!
//!
//! The cap on connections (`max_connections`) is [`Admission`] (`admission.rs`): every acceptor
//! takes a place before it accepts, which the connection keeps until it is closed.

pub use crate::admission::{Admission, Admitted};
use crate::options::ServerOptions;
use archlab_metrics::counters::{count_limit, LimitEvent};
use archlab_netio::socket;
use std::fs::File;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long accepting stops when the process is out of descriptors and no reserve is left.
pub const PAUSE: Duration = Duration::from_millis(100);

fn prepare(stream: &TcpStream, options: &ServerOptions) {
    // Best effort: a socket that was reset already fails here and will fail its first read.
    let fd = stream.as_raw_fd();
    if options.nodelay {
        let _ = socket::set_nodelay(fd, true);
    }
    if let Some(bytes) = options.sndbuf {
        let _ = socket::set_send_buffer(fd, bytes);
    }
    if let Some(bytes) = options.rcvbuf {
        let _ = socket::set_recv_buffer(fd, bytes);
    }
}

fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether an accept error is transient (retry) or fatal (the listener is unusable).
fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ECONNABORTED | libc::ENOBUFS | libc::ENOMEM | libc::EPROTO | libc::EPERM))
        || e.kind() == io::ErrorKind::Interrupted
        || out_of_descriptors(e)
}

/// Say once per process and kind of error what the acceptors do about it.
fn report_once(e: &io::Error) {
    static OUT_OF_DESCRIPTORS: AtomicBool = AtomicBool::new(false);
    static OTHER: AtomicBool = AtomicBool::new(false);
    let (flag, action) = if out_of_descriptors(e) {
        (&OUT_OF_DESCRIPTORS, "closing new connections at accept while it lasts (counted in closed_out_of_descriptors)")
    } else {
        (&OTHER, "retrying")
    };
    if !flag.swap(true, Ordering::Relaxed) {
        eprintln!("accept: {e}; {action}");
    }
}

/// The reserve descriptor (see the module comment), shared by every acceptor of the process.
static RESERVE: Mutex<Option<File>> = Mutex::new(None);
static HAVE_RESERVE: AtomicBool = AtomicBool::new(false);

/// Open the reserve if it is not open (cheap when it is: one atomic load).
fn keep_reserve() {
    if !HAVE_RESERVE.load(Ordering::Relaxed) {
        let mut reserve = RESERVE.lock().unwrap();
        if reserve.is_none() {
            *reserve = File::open("/dev/null").ok();
        }
        HAVE_RESERVE.store(reserve.is_some(), Ordering::Relaxed);
    }
}

/// What making room for one pending connection did.
#[derive(Debug, PartialEq, Eq)]
enum Shed {
    /// A pending connection was accepted and closed.
    Closed,
    /// Nothing was pending any more.
    NothingPending,
    /// No descriptor could be freed: pause accepting.
    NoRoom,
}

/// Out of descriptors: free the reserve, accept one pending connection, close it, reopen the
/// reserve. `listener` is made non-blocking for the accept (a blocking listener is set back),
/// so that a connection aborted meanwhile cannot park the thread with the reserve lock held.
fn shed(listener: &TcpListener, blocking: bool) -> Shed {
    let mut reserve = RESERVE.lock().unwrap();
    if reserve.take().is_none() {
        HAVE_RESERVE.store(false, Ordering::Relaxed);
        return Shed::NoRoom;
    }
    if blocking && listener.set_nonblocking(true).is_err() {
        *reserve = File::open("/dev/null").ok();
        return Shed::NoRoom;
    }
    let outcome = match listener.accept() {
        Ok((stream, _)) => {
            // Counted before the close, so that a client that saw its connection end finds it
            // in the server's counts.
            count_limit(LimitEvent::ClosedOutOfDescriptors);
            drop(stream);
            Shed::Closed
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Shed::NothingPending,
        Err(_) => Shed::NoRoom,
    };
    if blocking {
        let _ = listener.set_nonblocking(false);
    }
    *reserve = File::open("/dev/null").ok();
    HAVE_RESERVE.store(reserve.is_some(), Ordering::Relaxed);
    outcome
}

/// A connection a completion-based front-end got from the kernel (io_uring's accept, which
/// took its place under the cap before it posted the accept): set its socket options as every
/// accept loop does.
pub fn accepted(stream: &TcpStream, options: &ServerOptions) {
    keep_reserve();
    prepare(stream, options);
}

/// A failed accept completion on the non-blocking `listener`: Ok after a transient error (the
/// caller accepts again), the error itself when the listener is unusable. Out of descriptors,
/// a pending connection is closed through the reserve; without a reserve the calling ring
/// sleeps [`PAUSE`] (its connections wait meanwhile: this happens only when even the reserve
/// is gone).
pub fn accept_failed(e: io::Error, listener: &TcpListener) -> io::Result<()> {
    if !transient(&e) {
        return Err(e);
    }
    report_once(&e);
    if out_of_descriptors(&e) {
        keep_reserve();
    }
    if out_of_descriptors(&e) && shed(listener, false) == Shed::NoRoom {
        count_limit(LimitEvent::AcceptPaused);
        std::thread::sleep(PAUSE);
    }
    Ok(())
}

/// Block in `accept` forever, handing each connection and its place to `on_accept`; at the cap,
/// wait for a place first.
pub fn accept_blocking(
    listener: &TcpListener,
    options: &ServerOptions,
    admission: &Arc<Admission>,
    mut on_accept: impl FnMut(TcpStream, Admitted),
) -> io::Result<()> {
    keep_reserve();
    loop {
        let place = admission.admit_blocking();
        if let Backlog::Paused(pause) = accept_one(listener, options, true, place, &mut on_accept)? {
            std::thread::sleep(pause);
        }
    }
}

/// What a non-blocking acceptor should do after [`accept_pending`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backlog {
    /// Nothing is pending: wait for the listener to be readable.
    Drained,
    /// Out of descriptors with no reserve: do not watch the listener for this long.
    Paused(Duration),
    /// At `max_connections`: do not watch the listener until a place is free
    /// ([`Admission::on_free`] tells when).
    Capped,
    /// One connection handed over or shed (internal: [`accept_pending`] goes on).
    More,
}

/// Accept every pending connection of a non-blocking listener (until `WouldBlock`, or the cap).
pub fn accept_pending(
    listener: &TcpListener,
    options: &ServerOptions,
    admission: &Arc<Admission>,
    mut on_accept: impl FnMut(TcpStream, Admitted),
) -> io::Result<Backlog> {
    keep_reserve();
    loop {
        let Some(place) = admission.try_admit() else {
            count_limit(LimitEvent::AcceptCapped);
            return Ok(Backlog::Capped);
        };
        match accept_one(listener, options, false, place, &mut on_accept)? {
            Backlog::More => {}
            done => return Ok(done),
        }
    }
}

fn accept_one(
    listener: &TcpListener,
    options: &ServerOptions,
    blocking: bool,
    place: Admitted,
    on_accept: &mut impl FnMut(TcpStream, Admitted),
) -> io::Result<Backlog> {
    match listener.accept() {
        Ok((stream, _)) => {
            keep_reserve();
            prepare(&stream, options);
            on_accept(stream, place);
            Ok(Backlog::More)
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Backlog::Drained),
        Err(e) if out_of_descriptors(&e) => {
            report_once(&e);
            keep_reserve(); // lost in a race earlier, it may be had again now
            match shed(listener, blocking) {
                Shed::Closed => Ok(Backlog::More),
                Shed::NothingPending => Ok(Backlog::Drained),
                Shed::NoRoom => {
                    count_limit(LimitEvent::AcceptPaused);
                    Ok(Backlog::Paused(PAUSE))
                }
            }
        }
        Err(e) if transient(&e) => {
            report_once(&e);
            if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENOMEM)) {
                // The kernel is short of memory: retrying at once would spin.
                count_limit(LimitEvent::AcceptPaused);
                return Ok(Backlog::Paused(PAUSE));
            }
            Ok(Backlog::More)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(max: usize) -> Arc<Admission> {
        Admission::new(max)
    }

    #[test]
    fn places_are_taken_up_to_the_cap_and_given_back_on_drop() {
        let a = capped(2);
        let first = a.try_admit().unwrap();
        let second = a.try_admit().unwrap();
        assert!(a.try_admit().is_none());
        assert_eq!(a.open(), 2);
        drop(first);
        assert!(a.has_room());
        let third = a.try_admit().unwrap();
        drop((second, third));
        assert_eq!(a.open(), 0);
        let uncapped = capped(0);
        let many: Vec<_> = (0..10).map(|_| uncapped.try_admit().unwrap()).collect();
        assert_eq!((uncapped.open(), many.len()), (0, 10), "without a cap nothing is counted");
    }

    #[test]
    fn a_freed_place_wakes_the_stopped_acceptors() {
        let a = capped(1);
        let held = a.try_admit().unwrap();
        let (woke_tx, woke_rx) = std::sync::mpsc::channel();
        a.on_free(move || {
            let _ = woke_tx.send(());
        });
        assert!(a.try_admit().is_none(), "a reactor stops");
        let waiter = {
            let a = a.clone();
            std::thread::spawn(move || drop(a.admit_blocking()))
        };
        drop(held);
        woke_rx.recv().unwrap();
        waiter.join().unwrap();
    }
}
