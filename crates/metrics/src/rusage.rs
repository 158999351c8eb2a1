//! Resource usage of the current process via `getrusage(RUSAGE_SELF)`.
//!
//! Unlike `/proc/<pid>/status`, which counts context switches of one thread only, `getrusage`
//! sums every thread of the process, including threads that have already exited — which is
//! what a thread-per-connection server needs, since its threads end with their connections.

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct ResourceUsage {
    pub user_cpu_s: f64,
    pub system_cpu_s: f64,
    pub voluntary_context_switches: u64,
    pub involuntary_context_switches: u64,
    pub max_rss_kib: u64,
}

/// Usage of the whole process (all threads, live and exited).
pub fn process_usage() -> ResourceUsage {
    usage(libc::RUSAGE_SELF)
}

/// Usage of the calling thread only (`RUSAGE_THREAD`).
pub fn thread_usage() -> ResourceUsage {
    usage(libc::RUSAGE_THREAD)
}

fn usage(who: libc::c_int) -> ResourceUsage {
    // SAFETY: rusage is plain data filled in by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    ResourceUsage {
        user_cpu_s: tv(ru.ru_utime),
        system_cpu_s: tv(ru.ru_stime),
        voluntary_context_switches: ru.ru_nvcsw as u64,
        involuntary_context_switches: ru.ru_nivcsw as u64,
        max_rss_kib: ru.ru_maxrss as u64,
    }
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cpu_and_switches_of_exited_threads() {
        let before = process_usage();
        let h = std::thread::spawn(|| {
            for _ in 0..50 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        });
        h.join().unwrap();
        let after = process_usage();
        // Each sleep is a voluntary switch of the (now exited) thread.
        assert!(after.voluntary_context_switches >= before.voluntary_context_switches + 50);
        assert!(after.max_rss_kib > 0);
    }
}
