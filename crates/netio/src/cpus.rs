//! CPU lists ("0,2-3") and thread pinning with `sched_setaffinity`.
//!
//! The lab pins the server and the load generator to different CPUs so that one does not steal
//! cycles from the other; every architecture receives the same list and decides how to spread
//! its own threads over it (see `CpuList::nth`).

use std::fmt;
use std::io;
use std::str::FromStr;

/// A non-empty, sorted, duplicate-free list of CPU ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

/// Why a CPU list could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError {
    pub input: String,
    pub reason: String,
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid CPU list {:?}: {} (expected comma-separated ids or ranges, e.g. \"0\", \"1,3\", \"0-3\")",
            self.input, self.reason
        )
    }
}

impl std::error::Error for CpuListError {}

impl CpuList {
    pub fn new(mut ids: Vec<usize>) -> Result<Self, CpuListError> {
        if ids.is_empty() {
            return Err(CpuListError { input: String::new(), reason: "the list is empty".into() });
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(CpuList(ids))
    }

    pub fn ids(&self) -> &[usize] {
        &self.0
    }

    /// The CPU for the `i`-th thread of a component: threads are spread round-robin.
    pub fn nth(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }

    /// Pin the calling thread to every CPU of the list.
    pub fn pin_current_thread(&self) -> io::Result<()> {
        pin_current_thread(&self.0)
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;

    /// A list of CPUs this machine has.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let list = CpuList::parse_ids(s)?;
        let max = max_cpus();
        if let Some(bad) = list.0.iter().find(|&&c| c >= max) {
            let reason = format!("CPU {bad} does not exist (this machine has CPUs 0-{})", max - 1);
            return Err(CpuListError { input: s.to_string(), reason });
        }
        Ok(list)
    }
}

/// The largest CPU id a list may name. Linux numbers at most 8192 CPUs (NR_CPUS with MAXSMP);
/// a bound far above it keeps a typo such as "0-99999999" from building a list of 10^8 ids
/// before any check against a machine.
pub const MAX_CPU_ID: usize = (1 << 16) - 1;

impl CpuList {
    /// The CPUs of a list as written (`"0,2-3"`), whether or not this machine has them (a
    /// spec may be checked for another machine).
    pub fn parse_ids(s: &str) -> Result<CpuList, CpuListError> {
        let err = |reason: String| CpuListError { input: s.to_string(), reason };
        let mut ids = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(err("empty element".into()));
            }
            let parse = |x: &str| x.trim().parse::<usize>().map_err(|_| err(format!("{x:?} is not a CPU id")));
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (parse(a)?, parse(b)?);
                    if a > b {
                        return Err(err(format!("range {part:?} is reversed")));
                    }
                    if b > MAX_CPU_ID {
                        return Err(err(format!("CPU {b} is above {MAX_CPU_ID}, the largest CPU id a list may name")));
                    }
                    ids.extend(a..=b);
                }
                None => {
                    let id = parse(part)?;
                    if id > MAX_CPU_ID {
                        return Err(err(format!("CPU {id} is above {MAX_CPU_ID}, the largest CPU id a list may name")));
                    }
                    ids.push(id);
                }
            }
        }
        CpuList::new(ids).map_err(|e| err(e.reason))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&s.join(","))
    }
}

/// Number of CPUs configured on this machine.
pub fn max_cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// Pin the calling thread to the given CPUs.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty state.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes inside `set`; c is bounded by CPU_SETSIZE below.
        if c >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {c} out of range")));
        }
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 = calling thread; the set is valid for its size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on (its affinity mask).
pub fn allowed_cpus() -> io::Result<CpuList> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty state.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 = calling thread; the set is valid for its size.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads inside `set` for c < CPU_SETSIZE.
    let ids = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect();
    CpuList::new(ids).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_and_ranges() {
        let l: CpuList = "0".parse().unwrap();
        assert_eq!(l.ids(), &[0]);
        if max_cpus() >= 2 {
            let l: CpuList = "1,0-1".parse().unwrap();
            assert_eq!(l.ids(), &[0, 1]);
            assert_eq!(l.nth(3), 1);
        }
        assert!(!allowed_cpus().unwrap().ids().is_empty());
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in ["", "a", "3-1", "0,,1", "100000"] {
            let e = bad.parse::<CpuList>().unwrap_err();
            assert!(e.to_string().contains("invalid CPU list"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_list_names_no_cpu_above_the_bound() {
        assert_eq!(CpuList::parse_ids("65535").unwrap().ids(), &[MAX_CPU_ID]);
        for bad in ["65536", "0-99999999", "1,70000"] {
            let e = CpuList::parse_ids(bad).unwrap_err();
            assert!(e.reason.contains("largest CPU id"), "{bad}: {e}");
        }
    }

    /// The calling thread's affinity as the kernel reports it in text, an oracle independent of
    /// `sched_getaffinity` (which `allowed_cpus` uses).
    fn kernel_cpus_allowed_list() -> String {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list");
        line.trim().to_string()
    }

    #[test]
    fn pinning_sets_the_affinity_mask_the_kernel_reports() {
        let allowed = allowed_cpus().unwrap();
        let last = *allowed.ids().last().unwrap();
        // In a thread of its own, so that the test harness's threads keep their mask.
        std::thread::spawn(move || {
            pin_current_thread(&[last]).unwrap();
            assert_eq!(kernel_cpus_allowed_list(), last.to_string());
            assert_eq!(allowed_cpus().unwrap().ids(), &[last]);
            if let [a, b, ..] = *allowed.ids() {
                pin_current_thread(&[a, b]).unwrap();
                let expected = if b == a + 1 { format!("{a}-{b}") } else { format!("{a},{b}") };
                assert_eq!(kernel_cpus_allowed_list(), expected);
            }
        })
        .join()
        .unwrap();
    }
}
