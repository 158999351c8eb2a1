//! Signal handling without async-signal-safety worries: the signals of interest are blocked in
//! the main thread before any other thread starts (so every thread inherits the mask), and one
//! dedicated thread receives them synchronously with `sigwait` and runs ordinary Rust code.

use std::io;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, SIGINT or SIGHUP: stop.
    Terminate,
    /// SIGUSR1: report resource usage.
    Report,
}

const HANDLED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR1];

fn handled_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in HANDLED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Block the handled signals in the calling thread (call first thing in `main`), then start a
/// thread that calls `on_signal` for each one received.
pub fn spawn_handler<F>(on_signal: F) -> io::Result<()>
where
    F: Fn(Signal) + Send + 'static,
{
    let set = handled_set();
    // SAFETY: set is initialised; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    std::thread::Builder::new().name("signals".into()).spawn(move || loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: set is initialised and the signals are blocked, as sigwait requires.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            continue;
        }
        on_signal(if sig == libc::SIGUSR1 { Signal::Report } else { Signal::Terminate });
    })?;
    Ok(())
}
