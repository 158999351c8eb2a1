//! Named network namespaces, the way iproute2 keeps them: a namespace named N is a bind mount
//! of its nsfs file on `/run/netns/N`, so `ip netns exec N ...` runs any command in it and it
//! outlives the process that made it. Creation and removal go through `ip netns add/del`
//! (which also set up the mount propagation other tools expect); configuration goes through
//! `ip -n N -batch -`, one process per namespace.
//!
//! [`run_in`] runs a closure on a short-lived thread that has entered the namespace with
//! `setns`: sockets and TUN devices opened there belong to that namespace for good, while the
//! calling thread never changes namespace.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

/// Where iproute2 keeps named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Whether the namespace `name` exists.
pub fn exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// The names of every named namespace.
pub fn list() -> io::Result<Vec<String>> {
    match std::fs::read_dir(NETNS_DIR) {
        Ok(entries) => {
            let mut names = Vec::new();
            for entry in entries {
                names.push(entry?.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            Ok(names)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Create the namespace `name` (`ip netns add`).
pub fn add(name: &str) -> io::Result<()> {
    ip(&["netns", "add", name], None).map(drop)
}

/// Remove the namespace `name` if it exists (`ip netns del`). Processes still inside keep it
/// alive, but it loses its name and every device it holds goes with its last user.
pub fn delete(name: &str) -> io::Result<()> {
    if !exists(name) {
        return Ok(());
    }
    ip(&["netns", "del", name], None).map(drop)
}

/// Run `ip` commands, one per line of `script`, inside the namespace `name`.
pub fn configure(name: &str, script: &str) -> io::Result<()> {
    ip(&["-n", name, "-batch", "-"], Some(script)).map(drop)
}

/// Packets the kernel dropped on their way out through `device` of namespace `name` (its
/// `tx_dropped` counter): for a TUN device, packets that found its queue full because nobody
/// read them in time.
pub fn tx_dropped(name: &str, device: &str) -> io::Result<u64> {
    let out = ip(&["-n", name, "-s", "-j", "link", "show", "dev", device], None)?;
    let v: serde_json::Value = serde_json::from_slice(&out).map_err(io::Error::other)?;
    v[0]["stats64"]["tx"]["dropped"]
        .as_u64()
        .ok_or_else(|| io::Error::other(format!("no tx dropped counter in `ip -s -j link show` of {device}")))
}

/// Run `f` on a thread that has entered the namespace `name`.
pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let file = std::fs::File::open(Path::new(NETNS_DIR).join(name))?;
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: a valid descriptor of an nsfs file; only this thread changes namespace.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("a thread working inside a namespace panicked")))
    })
}

/// Run `ip ARGS` (with `input` on its stdin) and return its stdout; an error carries `ip`'s
/// own message.
fn ip(args: &[&str], input: Option<&str>) -> io::Result<Vec<u8>> {
    let mut child = Command::new("ip")
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(e.kind(), "the `ip` command (iproute2) is not installed: apt-get install iproute2")
            } else {
                e
            }
        })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!("`ip {}` failed: {}", args.join(" "), stderr.trim().replace('\n', "; "))))
}
