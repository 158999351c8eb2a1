//! The accept loops, written once for every front-end.
//!
//! Blocking front-ends (thread-per-connection, pool, the multi-reactor's boss thread) park a
//! thread in `accept`; reactors accept non-blockingly when the listener is readable and drain
//! the backlog; the io_uring proactor has the kernel accept and hands each completion to
//! [`accepted`] or [`accept_failed`]. All set the per-connection socket options (TCP_NODELAY, SO_SNDBUF, SO_RCVBUF)
//! in the same place. Transient
//! accept errors (out of file descriptors, aborted handshakes) must not kill a server under
//! load, so they are reported once per kind and the loop goes on.

use crate::options::ServerOptions;
use archlab_netio::socket;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

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

/// Whether an accept error is transient (retry) or fatal (the listener is unusable).
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::EMFILE
                | libc::ENFILE
                | libc::ENOBUFS
                | libc::ENOMEM
                | libc::EPROTO
                | libc::EPERM
        )
    ) || e.kind() == io::ErrorKind::Interrupted
}

fn backoff(e: &io::Error) {
    // Out of descriptors: give connections a moment to close instead of spinning.
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
        eprintln!("accept: {e}; retrying");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A connection a completion-based front-end got from the kernel (io_uring's accept): set its
/// socket options as every accept loop does.
pub fn accepted(stream: &TcpStream, options: &ServerOptions) {
    prepare(stream, options);
}

/// A failed accept completion: Ok after a transient error (reported and backed off as the
/// accept loops do; the caller accepts again), the error itself when the listener is unusable.
pub fn accept_failed(e: io::Error) -> io::Result<()> {
    if transient(&e) {
        backoff(&e);
        Ok(())
    } else {
        Err(e)
    }
}

/// Block in `accept` forever, handing each connection to `on_accept`.
pub fn accept_blocking(
    listener: &TcpListener,
    options: &ServerOptions,
    mut on_accept: impl FnMut(TcpStream),
) -> io::Result<()> {
    loop {
        accept_one(listener, options, &mut on_accept)?;
    }
}

/// Accept every pending connection of a non-blocking listener (until `WouldBlock`).
pub fn accept_pending(
    listener: &TcpListener,
    options: &ServerOptions,
    mut on_accept: impl FnMut(TcpStream),
) -> io::Result<()> {
    while accept_one(listener, options, &mut on_accept)? {}
    Ok(())
}

/// One `accept`: Ok(true) when a connection was handed over or a transient error should be
/// retried by a blocking caller, Ok(false) when a non-blocking listener has nothing pending or
/// ran out of descriptors (the level-triggered registration brings the reactor back).
fn accept_one(
    listener: &TcpListener,
    options: &ServerOptions,
    on_accept: &mut impl FnMut(TcpStream),
) -> io::Result<bool> {
    match listener.accept() {
        Ok((stream, _)) => {
            prepare(&stream, options);
            on_accept(stream);
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) if transient(&e) => {
            backoff(&e);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
