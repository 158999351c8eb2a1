//! How a caller steers a run from outside: [`StopHandle`] ends it early (Ctrl-C, SIGTERM, a
//! controlling process) and [`Phase`] events tell it when the measurement window opens and
//! closes, so that the orchestrator can read the server's CPU counters at those moments.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A moment of the run reported to the caller's phase callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The warm-up is over: completions are recorded from now on.
    Measure,
    /// The window has closed and nothing more is recorded; connections are still open.
    End,
}

type Notify = Box<dyn Fn() + Send>;

/// Stops a run early; clone it freely (e.g. into a signal-handling thread).
#[derive(Clone, Default)]
pub struct StopHandle {
    inner: Arc<StopInner>,
}

#[derive(Default)]
struct StopInner {
    stopped: AtomicBool,
    /// Installed by the running driver so that a stop wakes it at once instead of at its next
    /// poll; empty when no run is in progress.
    notify: Mutex<Option<Notify>>,
}

impl StopHandle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask the run to stop. What was measured until now is still reported (`interrupted`).
    pub fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        if let Some(notify) = self.inner.notify.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            notify();
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::SeqCst)
    }

    /// Install the driver's wake-up for the duration of a run (removed when the guard drops).
    /// If a stop came before, `notify` runs at once.
    pub(crate) fn install(&self, notify: Notify) -> NotifyGuard<'_> {
        *self.inner.notify.lock().unwrap_or_else(|e| e.into_inner()) = Some(notify);
        if self.is_stopped() {
            self.stop();
        }
        NotifyGuard(self)
    }
}

pub(crate) struct NotifyGuard<'a>(&'a StopHandle);

impl Drop for NotifyGuard<'_> {
    fn drop(&mut self) {
        *self.0.inner.notify.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn stop_notifies_the_installed_run_only_while_installed() {
        let h = StopHandle::new();
        let calls = Arc::new(AtomicUsize::new(0));
        {
            let c = calls.clone();
            let _g = h.install(Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
            }));
            h.clone().stop();
            assert_eq!(calls.load(Ordering::SeqCst), 1);
        }
        h.stop();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(h.is_stopped());
        // A stop that came before the run is delivered on install.
        let c = calls.clone();
        let _g = h.install(Box::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
