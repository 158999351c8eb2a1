//! A TUN device: the kernel hands every IP packet routed to it to whoever reads the descriptor,
//! and takes every packet written to the descriptor as received on the device. Opened with
//! `IFF_TUN | IFF_NO_PI` (bare IP packets, one per read or write) and non-blocking, so that a
//! forwarding thread waits for it in `ppoll` beside its timer.
//!
//! The device is created in the network namespace of the thread that opens `/dev/net/tun`
//! (run it inside [`crate::netns::run_in`]) and is not persistent: it disappears when the last
//! descriptor closes, including when the process is killed, so a dead forwarder never leaves a
//! device behind.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The name of the TUN device on each side of a link (inside its own namespace).
pub const DEVICE: &str = "alk-tun";

pub const TUN_PATH: &str = "/dev/net/tun";

#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
}

impl Tun {
    /// Create the device `name` in the calling thread's network namespace.
    pub fn create(name: &str) -> io::Result<Tun> {
        // SAFETY: a NUL-terminated path and plain flags; the fd is owned from here on.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ifreq is plain data; the name fits (checked) and stays NUL-terminated.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        if name.len() >= req.ifr_name.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("device name {name:?} is too long")));
        }
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads an ifreq from a valid pointer.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Tun { fd })
    }

    /// Read one packet into `buf`; `WouldBlock` when none is waiting.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Inject one packet as received on the device. The kernel processes it (up to the
    /// receiving socket's queue) before the call returns.
    #[inline]
    pub fn send(&self, packet: &[u8]) -> io::Result<usize> {
        // SAFETY: packet is valid for reads of its length.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
