//! A real memcached for tests (feature `test-server`): Debian's `/usr/bin/memcached`, started
//! on 127.0.0.1 with a free port and killed when dropped. Shared by the codec's tests and the
//! load generator's and the middleware's, so that all start it the same way. memcached is a
//! dependency of those tests, never an option: without it every function here panics, naming
//! the Debian package and the command that installs it (`scripts/bootstrap test`), so a missing
//! memcached fails the test instead of letting it pass unchecked.

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

/// Fail the calling test, saying what is missing and how to install it, unless memcached is
/// installed.
fn assert_installed() {
    assert!(
        std::path::Path::new(MEMCACHED).exists(),
        "{MEMCACHED} not found: the tests need the Debian package `memcached`; install it with `scripts/bootstrap test` (or apt-get install memcached)"
    );
}

/// Start memcached with `extra` arguments (e.g. `["-I", "1k"]`) and wait until it accepts
/// connections (at most 5 s); without memcached the test fails, saying how to install it.
pub fn require(extra: &[&str]) -> MemcachedProcess {
    assert_installed();
    spawn(extra)
}

/// As [`require`], on a given port (e.g. to bring back a server a test killed).
pub fn require_at(port: u16, extra: &[&str]) -> MemcachedProcess {
    assert_installed();
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
