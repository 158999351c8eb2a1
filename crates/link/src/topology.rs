//! The two sides of a link and their lifetime: namespaces `alk-NAME-client` and
//! `alk-NAME-server`, each holding one TUN device `alk-tun` with a point-to-point address
//! (client 10.200.0.1, server 10.200.0.2), the configured MTU and IPv6 off (so that only what
//! the programs under test send crosses the link). Every name made here starts with `alk-`,
//! and removal only ever touches names of that form, so cleanup cannot remove anything else.
//!
//! Ownership of a name is a `flock` on `/run/archlab-link/NAME.lock`, held for the life of the
//! forwarder: the kernel releases it when the process dies, however it dies. A link whose lock
//! is free but whose namespaces exist was left by a killed forwarder; creating a link of that
//! name removes the leftovers first, and [`cleanup`] / [`cleanup_stale`] remove them on
//! request. The TUN devices need no cleanup: they are not persistent, so they vanish with the
//! forwarder's descriptors.

use crate::error::LinkError;
use crate::netns;
use crate::params::LinkName;
use crate::tun::{Tun, DEVICE};
use serde::Serialize;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

/// The prefix of every namespace and device this crate creates.
pub const PREFIX: &str = "alk-";
/// Where the lock files of link names live.
pub const LOCK_DIR: &str = "/run/archlab-link";
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);
/// Packets the kernel may queue on a TUN device while its forwarding thread is not reading
/// (500 by default): room for about 15 ms at 10 Gbit/s of 1500-byte packets, so a forwarder
/// descheduled for a moment does not drop what a real link would have carried.
const TXQUEUELEN: u32 = 10_000;

/// One side of a link, as programs in it see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Side {
    /// Run a program on this side with `ip netns exec NETNS PROGRAM ...`.
    pub netns: String,
    pub device: String,
    /// This side's address.
    pub addr: Ipv4Addr,
    /// The other side's address, reached through the link.
    pub peer: Ipv4Addr,
}

/// The names of the client and server namespaces of link `name`.
pub fn namespace_names(name: &LinkName) -> [String; 2] {
    [format!("{PREFIX}{name}-client"), format!("{PREFIX}{name}-server")]
}

/// The namespaces and TUN devices of a running link.
#[derive(Debug)]
pub struct Topology {
    pub client: Side,
    pub server: Side,
    /// The client side's device: read for the up direction, written for the down direction.
    pub client_tun: Arc<Tun>,
    pub server_tun: Arc<Tun>,
    /// Namespaces of the same name left by a killed forwarder, removed before creating these.
    pub stale_removed: Vec<String>,
    lock: Option<NameLock>,
}

impl Topology {
    /// Take the name, remove what a killed forwarder of this name left, and create both sides.
    /// On failure everything created so far is removed.
    pub fn create(name: &LinkName, mtu: u32, congestion: Option<&str>) -> Result<Topology, LinkError> {
        let lock = NameLock::acquire(name)?;
        let [client_ns, server_ns] = namespace_names(name);
        let mut stale_removed = Vec::new();
        for ns in [&client_ns, &server_ns] {
            if netns::exists(ns) {
                netns::delete(ns).map_err(LinkError::setup(format!("remove the stale namespace {ns}")))?;
                stale_removed.push(ns.clone());
            }
        }
        let mut made = Created(Vec::new());
        let client = Side { netns: client_ns, device: DEVICE.into(), addr: CLIENT_ADDR, peer: SERVER_ADDR };
        let server = Side { netns: server_ns, device: DEVICE.into(), addr: SERVER_ADDR, peer: CLIENT_ADDR };
        let client_tun = make_side(&client, mtu, &mut made)?;
        let server_tun = make_side(&server, mtu, &mut made)?;
        if let Some(algorithm) = congestion {
            for side in [&client, &server] {
                set_congestion(&side.netns, algorithm)?;
            }
        }
        made.0.clear();
        Ok(Topology {
            client,
            server,
            client_tun: Arc::new(client_tun),
            server_tun: Arc::new(server_tun),
            stale_removed,
            lock: Some(lock),
        })
    }

    /// Remove both namespaces and give the name back. The TUN devices go when the last
    /// holder of their descriptors drops them (the forwarding threads, joined before this).
    pub fn remove(mut self) -> Result<(), LinkError> {
        self.remove_now()
    }

    fn remove_now(&mut self) -> Result<(), LinkError> {
        let Some(lock) = self.lock.take() else { return Ok(()) };
        let mut first_error = None;
        for ns in [&self.client.netns, &self.server.netns] {
            if let Err(e) = netns::delete(ns) {
                first_error.get_or_insert(LinkError::Setup { step: format!("remove the namespace {ns}"), source: e });
            }
        }
        lock.release();
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = self.remove_now();
    }
}

/// Namespaces created so far, removed on drop unless the set-up completed (and cleared it).
struct Created(Vec<String>);

impl Drop for Created {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = netns::delete(ns);
        }
    }
}

/// Make `algorithm` the TCP congestion control of namespace `ns` (a per-namespace sysctl).
/// The kernel lets a namespace other than the host's choose only among the host's
/// `tcp_allowed_congestion_control` (EPERM otherwise); the error says which those are.
fn set_congestion(ns: &str, algorithm: &str) -> Result<(), LinkError> {
    const SYSCTL: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap_or_default();
    netns::run_in(ns, || std::fs::write(SYSCTL, algorithm)).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::PermissionDenied {
            let allowed = read("tcp_allowed_congestion_control");
            format!(
                "a namespace may only choose among net.ipv4.tcp_allowed_congestion_control ({0}); the host's root \
                 can widen it: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{0} {algorithm}\"",
                allowed.trim()
            )
        } else {
            format!("this kernel has: {}", read("tcp_available_congestion_control").trim())
        };
        let e = io::Error::new(e.kind(), format!("{e} ({why})"));
        LinkError::setup(format!("set TCP congestion control {algorithm} in {ns}"))(e)
    })
}

fn make_side(side: &Side, mtu: u32, made: &mut Created) -> Result<Tun, LinkError> {
    let ns = &side.netns;
    netns::add(ns).map_err(LinkError::setup(format!("create the namespace {ns}")))?;
    made.0.push(ns.clone());
    let tun = netns::run_in(ns, || {
        let tun = Tun::create(DEVICE)?;
        // Before the device is up, so it never sends router solicitations or MLD reports.
        match std::fs::write(format!("/proc/sys/net/ipv6/conf/{DEVICE}/disable_ipv6"), "1") {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(tun)
    })
    .map_err(LinkError::setup(format!("create the TUN device {DEVICE} in {ns}")))?;
    let script = format!(
        "link set dev lo up\n\
         link set dev {DEVICE} mtu {mtu} txqueuelen {TXQUEUELEN} up\n\
         addr add {}/32 peer {}/32 dev {DEVICE}\n",
        side.addr, side.peer
    );
    netns::configure(ns, &script).map_err(LinkError::setup(format!("configure {DEVICE} in {ns}")))?;
    Ok(tun)
}

/// Remove what a killed forwarder of link `name` left (its namespaces and lock file); refused
/// while a live forwarder holds the name. Returns the namespaces removed.
pub fn cleanup(name: &LinkName) -> Result<Vec<String>, LinkError> {
    let lock = NameLock::acquire(name)?;
    let mut removed = Vec::new();
    for ns in namespace_names(name) {
        if netns::exists(&ns) {
            netns::delete(&ns).map_err(LinkError::setup(format!("remove the namespace {ns}")))?;
            removed.push(ns);
        }
    }
    lock.release();
    Ok(removed)
}

/// Clean up every link whose forwarder is gone: each `alk-NAME-client` / `alk-NAME-server`
/// namespace and each lock file whose name no live forwarder holds. Returns the namespaces
/// removed.
pub fn cleanup_stale() -> Result<Vec<String>, LinkError> {
    let mut names: Vec<String> = netns::list()
        .map_err(LinkError::setup(format!("list {}", netns::NETNS_DIR)))?
        .into_iter()
        .filter_map(|ns| {
            let rest = ns.strip_prefix(PREFIX)?;
            rest.strip_suffix("-client").or_else(|| rest.strip_suffix("-server")).map(str::to_string)
        })
        .collect();
    if let Ok(entries) = std::fs::read_dir(LOCK_DIR) {
        names.extend(
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|f| f.strip_suffix(".lock")).map(str::to_string)),
        );
    }
    names.sort();
    names.dedup();
    let mut removed = Vec::new();
    for name in names {
        // Names this crate could not have made are not its to remove.
        let Ok(name) = LinkName::new(&name) else { continue };
        match cleanup(&name) {
            Ok(r) => removed.extend(r),
            Err(LinkError::InUse { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// An exclusive `flock` on the lock file of a link name, holding the owner's pid.
#[derive(Debug)]
struct NameLock {
    /// Holds the lock: closing it lets go.
    _file: File,
    path: PathBuf,
}

impl NameLock {
    fn acquire(name: &LinkName) -> Result<NameLock, LinkError> {
        let step = || LinkError::setup(format!("lock the link name {name} in {LOCK_DIR}"));
        std::fs::create_dir_all(LOCK_DIR).map_err(step())?;
        let path = PathBuf::from(LOCK_DIR).join(format!("{name}.lock"));
        loop {
            let mut file =
                File::options().create(true).truncate(false).read(true).write(true).open(&path).map_err(step())?;
            // SAFETY: a valid descriptor owned by `file`.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::WouldBlock {
                    return Err(step()(e));
                }
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                return Err(LinkError::InUse { name: name.to_string(), pid: pid.trim().parse().ok() });
            }
            // The previous owner may have unlinked the file between our open and our lock:
            // then the lock is on a file nobody else will open, so start over.
            let same = match (file.metadata(), std::fs::metadata(&path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if !same {
                continue;
            }
            file.set_len(0).map_err(step())?;
            file.rewind().map_err(step())?;
            write!(file, "{}", std::process::id()).map_err(step())?;
            return Ok(NameLock { _file: file, path });
        }
    }

    /// Give the name back (see `Drop`).
    fn release(self) {}
}

impl Drop for NameLock {
    /// Unlink the lock file while still holding the lock; closing the file then lets go of it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
