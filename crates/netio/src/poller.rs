//! A bare epoll wrapper: register file descriptors with a token, an interest and a trigger mode,
//! then wait for events.
//!
//! Readiness front-ends (single-thread reactor, Netty-style loops, and later the proactor and
//! SEDA stages) all sit on this one type. It exposes both trigger modes because the seeds'
//! Java servers use a level-triggered selector (`interestOps` toggled per event) while a tuned
//! Rust reactor prefers edge-triggered registration, drained until `WouldBlock`. A [`Waker`]
//! (an eventfd) lets another thread interrupt a blocked `wait`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a registration waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest {
    pub readable: bool,
    pub writable: bool,
}

impl Interest {
    pub const READABLE: Interest = Interest { readable: true, writable: false };
    pub const WRITABLE: Interest = Interest { readable: false, writable: true };
    pub const BOTH: Interest = Interest { readable: true, writable: true };
}

/// Edge-triggered: one event per change of state, the handler must drain to `WouldBlock`.
/// Level-triggered: an event on every `wait` while the condition holds (Java `Selector`).
/// One-shot: level-triggered, but the registration is disabled after one event until
/// [`Poller::reregister`] arms it again (a Java selector key whose interest ops are cleared while a
/// worker thread owns the connection; the dispatching front-ends use it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Edge,
    Level,
    OneShot,
}

/// One readiness event.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Peer hung up or the socket is in error: the handler should read to find out why.
    pub closed: bool,
}

pub struct Poller {
    epfd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn flags(interest: Interest, trigger: Trigger) -> u32 {
    let mut f = libc::EPOLLRDHUP as u32;
    if interest.readable {
        f |= libc::EPOLLIN as u32;
    }
    if interest.writable {
        f |= libc::EPOLLOUT as u32;
    }
    match trigger {
        Trigger::Edge => f |= libc::EPOLLET as u32,
        Trigger::OneShot => f |= libc::EPOLLONESHOT as u32,
        Trigger::Level => {}
    }
    f
}

impl Poller {
    /// A poller that returns at most `capacity` events per `wait`.
    pub fn new(capacity: usize) -> io::Result<Poller> {
        // SAFETY: plain syscall; the returned fd is owned from here on.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Poller { epfd, buf: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)] })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev lives for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    pub fn register(&self, fd: RawFd, token: u64, interest: Interest, trigger: Trigger) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, flags(interest, trigger))
    }

    pub fn reregister(&self, fd: RawFd, token: u64, interest: Interest, trigger: Trigger) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, flags(interest, trigger))
    }

    pub fn deregister(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Wait for events (None = forever) and append them to `out` (which is cleared first).
    /// An interrupted wait (EINTR) returns with no events.
    pub fn wait(&mut self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        out.clear();
        let ms = match timeout {
            None => -1,
            // Round up so that a short timeout does not become a busy loop.
            Some(d) => d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32,
        };
        // SAFETY: buf has `len` initialised entries that the kernel may overwrite.
        let n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), self.buf.as_mut_ptr(), self.buf.len() as i32, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        for ev in &self.buf[..n as usize] {
            let bits = ev.events;
            out.push(Event {
                token: ev.u64,
                readable: bits & (libc::EPOLLIN as u32) != 0,
                writable: bits & (libc::EPOLLOUT as u32) != 0,
                closed: bits & ((libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32) != 0,
            });
        }
        Ok(())
    }
}

/// Wakes a thread blocked in [`Poller::wait`]: register its fd (level-triggered, readable) and
/// call [`Waker::drain`] when its token fires.
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        Ok(Waker { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub fn wake(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64.
        let rc = unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // A full counter already guarantees a wake-up.
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
        }
        Ok(())
    }

    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; errors (WouldBlock) are irrelevant here.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl AsRawFd for Waker {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    /// How long a wait for an event that is (or is about to be) there may take: it returns as
    /// soon as the event is, so only a missing event takes this long; generous so that a busy
    /// machine cannot turn a late wake-up into a failure. (Waits that check for the absence of
    /// an event are short: the event they rule out would already be pending.)
    const PRESENT: Duration = Duration::from_secs(60);

    #[test]
    fn level_triggered_repeats_edge_does_not() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        c.write_all(b"x").unwrap();
        for (trigger, second) in [(Trigger::Level, 1), (Trigger::Edge, 0)] {
            let mut p = Poller::new(8).unwrap();
            p.register(s.as_raw_fd(), 7, Interest::READABLE, trigger).unwrap();
            let mut evs = Vec::new();
            p.wait(&mut evs, Some(PRESENT)).unwrap();
            assert_eq!(evs.len(), 1);
            assert_eq!(evs[0].token, 7);
            assert!(evs[0].readable);
            p.wait(&mut evs, Some(Duration::from_millis(10))).unwrap();
            assert_eq!(evs.len(), second, "{trigger:?}");
        }
    }

    #[test]
    fn one_shot_fires_once_until_rearmed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(b"x").unwrap();
        let mut p = Poller::new(8).unwrap();
        p.register(s.as_raw_fd(), 3, Interest::READABLE, Trigger::OneShot).unwrap();
        let mut evs = Vec::new();
        p.wait(&mut evs, Some(PRESENT)).unwrap();
        assert_eq!(evs.len(), 1);
        p.wait(&mut evs, Some(Duration::from_millis(10))).unwrap();
        assert!(evs.is_empty(), "disabled after one event");
        // Re-armed while the condition holds: fires again at once (level semantics).
        p.reregister(s.as_raw_fd(), 3, Interest::READABLE, Trigger::OneShot).unwrap();
        p.wait(&mut evs, Some(PRESENT)).unwrap();
        assert_eq!(evs.len(), 1);
    }

    #[test]
    fn waker_interrupts_wait() {
        let mut p = Poller::new(8).unwrap();
        let w = std::sync::Arc::new(Waker::new().unwrap());
        p.register(w.as_raw_fd(), 1, Interest::READABLE, Trigger::Level).unwrap();
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.wake().unwrap());
        let mut evs = Vec::new();
        p.wait(&mut evs, Some(PRESENT)).unwrap();
        t.join().unwrap();
        assert_eq!(evs.len(), 1);
        w.drain();
        p.wait(&mut evs, Some(Duration::from_millis(1))).unwrap();
        assert!(evs.is_empty());
    }
}
