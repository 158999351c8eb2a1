//! The memory a server holds for clients that ask for large responses and do not read them
//! (issue: 20 clients asking for `/echo?size=64MiB` pushed some architectures past 1-2.5 GB):
//! with the output bound (`max_output_bytes`, default 1 MiB) a response larger than the bound
//! is produced in parts as the client takes them, so the server's resident memory grows by
//! about one part per connection, not by the responses. Measured from outside: the server is a
//! child process (`archlab-engine serve`), its peak resident set (`VmHWM` of
//! `/proc/<pid>/status`) is read before the clients come and once every client has received the
//! beginning of its response (so every request has been answered as far as it will be).
//!
//! Architectures whose write path does not spin (a spinning writer serves one non-reading
//! client at a time by design, seed 001's SingleT-Async): netty's loops, tokio, io-uring,
//! thread-per-connection and the staged nio2.

mod common;

use common::{connect, try_get, ServeProcess, IO_TIMEOUT};
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const CLIENTS: usize = 20;
const SIZE: usize = 64 * 1024 * 1024;

/// A line of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Bytes waiting in a socket's receive queue (FIONREAD).
fn unread(s: &TcpStream) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: plain ioctl on a descriptor `s` owns, into an int.
    assert_eq!(unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut n) }, 0);
    n as usize
}

/// Growth of the server's peak resident set, in MiB, with `CLIENTS` non-reading clients of
/// `SIZE`-byte responses.
fn peak_growth_mib(arch: &str, args: &[&str]) -> u64 {
    let mut server = ServeProcess::start(arch, args, None);
    let mut warm = connect(server.addr);
    assert!(try_get(&mut warm, "/echo?size=100").is_some(), "{arch}");
    let before = status_kib(server.pid(), "VmHWM:");
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let mut s = connect(server.addr);
            s.write_all(format!("GET /echo?size={SIZE} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).unwrap();
            s
        })
        .collect();
    // Every client has the beginning of its response: the server has answered every request.
    let deadline = Instant::now() + IO_TIMEOUT;
    while clients.iter().any(|s| unread(s) == 0) {
        assert!(Instant::now() < deadline, "{arch}: not every client got the beginning of its response");
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = status_kib(server.pid(), "VmHWM:");
    let streamed = server.counter("responses_streamed");
    assert_eq!(streamed, CLIENTS as u64, "{arch}: every 64 MiB response is produced in parts");
    drop(clients);
    (after.saturating_sub(before)) / 1024
}

#[test]
fn twenty_clients_that_do_not_read_64_mib_responses_cost_parts_not_responses() {
    for (arch, args) in [
        ("netty", &["--loops", "2"][..]),
        ("tokio", &["--threads", "2"][..]),
        ("io-uring", &["--loops", "2"][..]),
        ("thread-per-connection", &[][..]),
        ("nio2", &["--threads", "2"][..]),
    ] {
        let growth = peak_growth_mib(arch, args);
        eprintln!("{arch}: peak RSS grew by {growth} MiB with {CLIENTS} non-reading clients of 64 MiB responses");
        // Held per connection: at most one part (1 MiB) in its output buffer, and per thread one
        // part being made: about 20 + threads MiB, 160 MiB leaves room for allocator slack and
        // thread stacks. Holding the responses would be 20 x 64 MiB = 1280 MiB or more.
        assert!(growth < 160, "{arch}: the server's peak RSS grew by {growth} MiB");
    }
}
