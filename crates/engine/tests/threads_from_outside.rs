//! The options that size a server (`loops`, `copies`, `threads`) seen from outside: the
//! threads of an `archlab-engine serve` child process, as the kernel lists them in
//! `/proc/<pid>/task`, by the names the server gives them (`loop-i` for netty's loops,
//! `copy-i` for the copies of ncopy beyond the first, which runs on the main thread, `ring-i`
//! likewise for io-uring, `worker-i` for a blocking pool, `stage0-i` for a staged pool). Every
//! one of these threads exists before the server accepts its first connection, but a thread
//! takes its name itself once it runs (Rust's `Builder::name`; until then it has the process's
//! name), and every thread of the server is named, so the names are awaited: until the main
//! thread is the only one with the process's name (bounded by `IO_TIMEOUT`; the kernel has no
//! notification for it). Then the count is final.

mod common;

use common::{connect, try_get, ServeProcess, IO_TIMEOUT};
use std::time::{Duration, Instant};

/// Threads of process `pid` whose name starts with `prefix`.
fn threads_named(pid: u32, prefix: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the server's task list")
        .flatten()
        .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|name| name.starts_with(prefix)))
        .count()
}

#[test]
fn loops_copies_and_threads_are_the_threads_the_server_runs() {
    // (architecture, option, value, thread name prefix, threads of that name): the values are
    // not the defaults (the CPU count, 8 workers), so an option that is ignored is seen.
    let cases = [
        ("netty", "--loops", 3, "loop-", 3),
        ("netty", "--loops", 1, "loop-", 1),
        ("hybrid", "--loops", 3, "loop-", 3),
        ("ncopy", "--copies", 3, "copy-", 2),
        ("io-uring", "--loops", 3, "ring-", 2),
        ("blocking", "--threads", 3, "worker-", 3),
        ("async-fix", "--threads", 3, "stage0-", 3),
    ];
    for (arch, flag, value, prefix, expected) in cases {
        let value = value.to_string();
        let server = ServeProcess::start(arch, &[flag, &value], None);
        let mut s = connect(server.addr);
        assert!(try_get(&mut s, "/echo?size=1").is_some(), "{arch}: no response");
        let deadline = Instant::now() + IO_TIMEOUT;
        while threads_named(server.pid(), "archlab-engine") > 1 {
            assert!(Instant::now() < deadline, "{arch}: threads still unnamed after {IO_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
        let seen = threads_named(server.pid(), prefix);
        assert_eq!(seen, expected, "{arch} {flag} {value}: {seen} threads named {prefix}*");
    }
}
