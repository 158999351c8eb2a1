//! A real memcached for tests (feature `test-server`): Debian's `/usr/bin/memcached`, started
//! on 127.0.0.1 with a free port and killed when dropped. Shared by the codec's tests and the
//! load generator's and the middleware's, so that all start it the same way. Without memcached,
//! [`start`] returns `None` (the caller skips), except under CI (`CI` set), where it panics
//! saying how to install it; [`require`] always panics with that message.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MEMCACHED: &str = "/usr/bin/memcached";

/// A running memcached; killed on drop.
pub struct MemcachedProcess {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for MemcachedProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl MemcachedProcess {
    /// The process id (for tests that stop the server with SIGSTOP or kill it mid-run).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

fn not_found() -> String {
    format!("{MEMCACHED} not found: install the Debian package `memcached` (apt-get install memcached, or scripts/bootstrap test)")
}

/// Start memcached with `extra` arguments (e.g. `["-I", "1k"]`) and wait until it accepts
/// connections (at most 5 s).
pub fn start(extra: &[&str]) -> Option<MemcachedProcess> {
    if !std::path::Path::new(MEMCACHED).exists() {
        let msg = not_found();
        assert!(std::env::var_os("CI").is_none(), "{msg}");
        eprintln!("skipped: {msg}");
        return None;
    }
    Some(spawn(extra))
}

/// As [`start`], for tests of which memcached is a dependency, not an option: without it the
/// test fails, saying how to install it.
pub fn require(extra: &[&str]) -> MemcachedProcess {
    assert!(std::path::Path::new(MEMCACHED).exists(), "{}", not_found());
    spawn(extra)
}

/// As [`require`], on a given port (e.g. to bring back a server a test killed).
pub fn require_at(port: u16, extra: &[&str]) -> MemcachedProcess {
    assert!(std::path::Path::new(MEMCACHED).exists(), "{}", not_found());
    spawn_at(port, extra)
}

fn spawn(extra: &[&str]) -> MemcachedProcess {
    // A port free a moment ago; memcached cannot report a port it picked itself.
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    spawn_at(port, extra)
}

fn spawn_at(port: u16, extra: &[&str]) -> MemcachedProcess {
    let child = Command::new(MEMCACHED)
        // `-u nobody`: memcached refuses to run as root without it (ignored for other users).
        .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "64", "-t", "1", "-u", "nobody"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memcached starts");
    let mut server = MemcachedProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(server.addr) {
            Ok(_) => return server,
            Err(e) if Instant::now() > deadline => {
                let _ = server.child.kill();
                let mut why = String::new();
                let _ = server.child.stderr.take().map(|mut err| err.read_to_string(&mut why));
                panic!("memcached did not listen on port {port}: {e}; it said: {why}");
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
