//! What a link needs from the system, checked before anything is created, so that a run
//! without it fails in one line naming what is missing instead of half-way through set-up:
//! CAP_SYS_ADMIN (create and enter network namespaces), CAP_NET_ADMIN (create TUN devices,
//! set addresses and MTUs), CAP_SYS_NICE for high-priority forwarding threads, a usable
//! `/dev/net/tun`, and iproute2's `ip`.

use crate::pacing::Scheduling;
use crate::tun::TUN_PATH;
use std::io;
use std::path::Path;

/// Capability numbers from `linux/capability.h`.
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_NICE: u32 = 23;

/// Something the link needs and this process lacks, as one line saying how to get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingPrivilege(pub String);

impl std::fmt::Display for MissingPrivilege {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Check every requirement, in the order set-up needs them.
pub fn check(scheduling: Scheduling) -> Result<(), MissingPrivilege> {
    let effective =
        effective_capabilities().map_err(|e| MissingPrivilege(format!("cannot read /proc/self/status: {e}")))?;
    let mut needed = vec![
        (CAP_SYS_ADMIN, "CAP_SYS_ADMIN", "to create and enter network namespaces"),
        (CAP_NET_ADMIN, "CAP_NET_ADMIN", "to create TUN devices and configure their addresses"),
    ];
    if scheduling.needs_cap_sys_nice() {
        needed.push((
            CAP_SYS_NICE,
            "CAP_SYS_NICE",
            "to raise the forwarding threads' priority (or schedule them as normal threads)",
        ));
    }
    for (cap, name, why) in needed {
        if effective & (1u64 << cap) == 0 {
            return Err(MissingPrivilege(format!("this process lacks {name}, needed {why}: run it as root")));
        }
    }
    // SAFETY: a NUL-terminated path; the descriptor is closed at once.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.kind() {
            io::ErrorKind::NotFound => {
                " (load the tun module with `modprobe tun`, or create the node: mknod /dev/net/tun c 10 200)"
            }
            io::ErrorKind::PermissionDenied => " (it needs read and write access)",
            _ => "",
        };
        return Err(MissingPrivilege(format!("cannot open {TUN_PATH}: {e}{hint}")));
    }
    // SAFETY: fd was just opened by this function.
    unsafe { libc::close(fd) };
    if !on_path("ip") {
        return Err(MissingPrivilege("the `ip` command (iproute2) is not installed: apt-get install iproute2".into()));
    }
    Ok(())
}

/// The effective capability set (`CapEff` of `/proc/self/status`).
fn effective_capabilities() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| io::Error::other("no CapEff line"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
