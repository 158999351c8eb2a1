//! How the owner of a link talks to it while it runs: requests to report or to stop (from a
//! signal-handling thread, typically) and failures of the forwarding threads, delivered to one
//! waiting thread as [`Event`]s. A stop also writes an eventfd that every forwarding thread
//! polls beside its TUN device, so that a thread asleep until a departure leaves at once.
//!
//! A `Control` can be made before the link exists, so that a signal arriving during set-up is
//! not lost: the link is then created, sees the stop, and is removed again.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// What the owner of a link is told, in this order of precedence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A forwarding thread failed (returned again on every later call).
    Failed(String),
    /// A report was requested (once per request).
    Report,
    /// A stop was requested (returned again on every later call).
    Stop,
}

#[derive(Default)]
struct State {
    stop: bool,
    reports: u32,
    failure: Option<String>,
}

pub struct Control {
    state: Mutex<State>,
    changed: Condvar,
    stopping: AtomicBool,
    wake: OwnedFd,
}

impl Control {
    pub fn new() -> io::Result<Arc<Control>> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Arc::new(Control {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        }))
    }

    pub fn request_stop(&self) {
        self.update(|s| s.stop = true);
    }

    pub fn request_report(&self) {
        self.update(|s| s.reports += 1);
    }

    /// Record the first failure and stop.
    pub(crate) fn fail(&self, message: String) {
        self.update(|s| {
            s.failure.get_or_insert(message);
            s.stop = true;
        });
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut s);
        if s.stop && !self.stopping.swap(true, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our eventfd; it never stays readable
            // long enough to overflow, and the counter is never read, so it stays readable.
            unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
        self.changed.notify_all();
    }

    /// Block until something happens.
    pub fn next_event(&self) -> Event {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(f) = &s.failure {
                return Event::Failed(f.clone());
            }
            if s.reports > 0 {
                s.reports -= 1;
                return Event::Report;
            }
            if s.stop {
                return Event::Stop;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The failure of a forwarding thread, if one failed.
    pub fn failure(&self) -> Option<String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).failure.clone()
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Readable once a stop has been requested.
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_come_once_and_stop_and_failure_stay() {
        let c = Control::new().unwrap();
        c.request_report();
        c.request_stop();
        assert_eq!(c.next_event(), Event::Report);
        assert_eq!(c.next_event(), Event::Stop);
        assert_eq!(c.next_event(), Event::Stop);
        assert!(c.is_stopping());
        c.fail("boom".into());
        c.fail("second".into());
        assert_eq!(c.next_event(), Event::Failed("boom".into()));
        let mut pfd = libc::pollfd { fd: c.wake_fd(), events: libc::POLLIN, revents: 0 };
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1, "the eventfd is readable after a stop");
    }

    #[test]
    fn a_waiting_thread_is_woken() {
        let c = Control::new().unwrap();
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.next_event());
        c.request_stop();
        assert_eq!(t.join().unwrap(), Event::Stop);
    }
}
