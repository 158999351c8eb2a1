//! `archlab-engine serve` as a child process, for tests that look at a server from outside
//! (its descriptors, threads, context switches, system calls) or that must change the limits
//! of the server's process only. Started on 127.0.0.1 port 0; the address is read from the
//! `listening` line, the server's own counters from the `rusage` line it prints on SIGUSR1.

// Each test binary uses some of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `archlab-engine serve`; killed (by its pid) when dropped.
pub struct ServeProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
    pub addr: SocketAddr,
}

impl ServeProcess {
    /// `archlab-engine serve --arch ARCH ARGS...`, with RLIMIT_NOFILE set to `max_fds` if given.
    pub fn start(arch: &str, args: &[&str], max_fds: Option<u64>) -> ServeProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_archlab-engine"));
        cmd.args(["serve", "--arch", arch]).args(args).stdout(Stdio::piped()).stderr(Stdio::inherit());
        if let Some(n) = max_fds {
            // SAFETY: one system call on a value prepared before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    let limit = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        Self::spawn(cmd)
    }

    /// Start the prepared command (whose stdout must be piped) and wait for its `listening` line.
    pub fn spawn(mut cmd: Command) -> ServeProcess {
        let mut child = cmd.spawn().expect("archlab-engine serve starts");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the listening line");
        let addr = line
            .strip_prefix("listening ")
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("expected `listening HOST:PORT`, got {line:?}"));
        ServeProcess { child, stdout, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's `rusage` line (SIGUSR1), parsed.
    pub fn rusage(&mut self) -> serde_json::Value {
        // SAFETY: plain system call on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGUSR1) }, 0);
        self.rusage_line()
    }

    /// Read up to the next `rusage` line, parsed.
    fn rusage_line(&mut self) -> serde_json::Value {
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).expect("stdout") > 0, "the server ended");
            if let Some(json) = line.strip_prefix("rusage ") {
                return serde_json::from_str(json).expect("rusage JSON");
            }
        }
    }

    /// A counter of the `rusage` line.
    pub fn counter(&mut self, name: &str) -> u64 {
        let usage = self.rusage();
        usage[name].as_u64().unwrap_or_else(|| panic!("no counter {name} in {usage}"))
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// Send a GET and read the whole response; None when the server closed the connection first.
pub fn try_get(s: &mut TcpStream, target: &str) -> Option<Vec<u8>> {
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("reading a response: {e}"),
        };
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .expect("Content-Length");
            if buf.len() >= end + 4 + len {
                return Some(buf);
            }
        }
    }
}
