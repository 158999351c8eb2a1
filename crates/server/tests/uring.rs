//! The `io-uring` front-end beyond the conformance suite: it closes every connection it gives
//! up (no descriptor left behind, also for clients that vanish mid-request or mid-response),
//! runs one ring per thread as `loops` says, and fails `serve` with the cause when the kernel
//! refuses io_uring (simulated with a seccomp filter in a child process, since the lab must not
//! change kernel.io_uring_disabled). The descriptor counts are process-wide, so the tests of
//! this file run one at a time (a lock) and this file is its own test binary (process).

mod common;

use archlab_netio::socket::listen;
use archlab_server::{registry, ServerOptions};
use common::{connect, get, open_descriptors, settle_to, small_window_client, start};
use std::io::Write;
use std::net::Shutdown;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn every_connection_is_closed_however_the_client_leaves() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let addr = start("io-uring", &ServerOptions { loops: Some(2), sndbuf: Some(16 * 1024), ..Default::default() });
    // The server's rings, listener and first connection exist before the baseline.
    let mut warm = connect(addr);
    assert_eq!(get(&mut warm, "/echo?size=10").status, 200);
    drop(warm);
    std::thread::sleep(Duration::from_millis(50));
    let baseline = open_descriptors();
    for round in 0..20 {
        // Keep-alive client that closes after its response.
        let mut s = connect(addr);
        assert_eq!(get(&mut s, "/echo?size=100").status, 200, "round {round}");
        drop(s);
        // Client that vanishes with half a request sent.
        let mut s = connect(addr);
        s.write_all(b"GET /echo?size=1 HTTP/1.1\r\nHo").unwrap();
        drop(s);
        // Client that asks for 1 MiB through a small window and resets without reading:
        // the send in flight fails or is cancelled.
        let mut s = small_window_client(addr);
        s.write_all(b"GET /echo?size=1048576 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let _ = s.shutdown(Shutdown::Both);
        drop(s);
        // Client that sends garbage: refused, lingered, closed.
        let mut s = connect(addr);
        s.write_all(b"NOT HTTP\r\n\r\n").unwrap();
        drop(s);
    }
    let left = settle_to(baseline);
    eprintln!("descriptors: {baseline} before, {left} after");
    assert!(left <= baseline, "{left} descriptors open, {baseline} before the 80 connections");
}

#[test]
fn loops_sets_the_number_of_rings() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let addr = start("io-uring", &ServerOptions { loops: Some(3), ..Default::default() });
    let mut conns: Vec<_> = (0..9).map(|_| connect(addr)).collect();
    for s in &mut conns {
        assert_eq!(get(s, "/prime?n=11").body, b"true");
    }
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    // Ring 0 runs on the thread that called `serve`; rings 1 and 2 on threads of their own.
    for ring in ["ring-1", "ring-2"] {
        assert!(names.iter().any(|n| n == ring), "{ring} not among {names:?}");
    }
}

const DENY_ENV: &str = "ARCHLAB_TEST_DENY_IO_URING";
const CHILD_TEST: &str = "serve_fails_with_the_cause_when_the_kernel_refuses_io_uring";

/// A seccomp filter that fails `io_uring_setup` with `errno` and allows everything else.
fn deny_io_uring_setup(errno: i32) -> [libc::sock_filter; 4] {
    let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    [
        // A = seccomp_data.nr
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

#[test]
fn serve_fails_with_the_cause_when_the_kernel_refuses_io_uring() {
    if std::env::var_os(DENY_ENV).is_some() {
        // The child: io_uring_setup is denied by the filter its parent installed.
        let listener = listen("127.0.0.1:0".parse().unwrap(), &registry::listen_options("io-uring")).unwrap();
        let server = registry::build("io-uring", &ServerOptions { loops: Some(2), ..Default::default() }).unwrap();
        let e = server.serve(listener).expect_err("serve must fail without io_uring");
        println!("serve failed: {e}");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap();
    for (errno, cause) in [(libc::EPERM, "io_uring is not permitted"), (libc::ENOSYS, "this kernel has no io_uring")] {
        let filter = deny_io_uring_setup(errno);
        let mut child = Command::new(std::env::current_exe().unwrap());
        child.args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"]).env(DENY_ENV, "1");
        // SAFETY: the closure makes two system calls on data prepared before the fork.
        unsafe {
            child.pre_exec(move || {
                let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog)
                        != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = child.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        // The harness prints "test NAME ... " before the child's line.
        let line = stdout.split_once("serve failed: ").map(|(_, l)| l).unwrap_or_else(|| panic!("{stdout}"));
        assert!(line.contains("io_uring is unavailable") && line.contains(cause), "{line}");
    }
}
