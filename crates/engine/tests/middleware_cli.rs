//! `archlab-engine middleware` as the lab runs it: bad flags get one line naming the flag, the
//! allowed values and the value received (exit 2), an unreachable server is refused before
//! anything listens (exit 1); a running middleware prints `listening HOST:PORT` first, a
//! `stats {json}` line on SIGUSR1 and, on SIGTERM, a final one covering every request, then
//! exits 0 leaving one readable HDR interval log per distribution in `--stats-dir`. memcached
//! is Debian's, started by the test; without it the test fails.

use archlab_wire::memcached_process;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ENGINE: &str = env!("CARGO_BIN_EXE_archlab-engine");

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(ENGINE).arg("middleware").args(args).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_flags_get_one_line_naming_the_flag_the_allowed_values_and_the_value() {
    let server = memcached_process::require(&[]);
    let s = server.addr.to_string();
    let cases: [(&[&str], &str); 7] = [
        (&["--servers", "127.0.0.1"], "expected HOST:PORT (e.g. 127.0.0.1:11211), got \"127.0.0.1\""),
        (&["--servers", &s, "--workers", "0"], "invalid --workers: expected an integer in 1..=1024, got 0"),
        (&["--servers", &s, "--arch", "netty"], "expected seed, ring, actor, event-loop, got \"netty\""),
        (&["--servers", &s, "--sharded", "yes"], "expected true or false, got \"yes\""),
        (
            &["--servers", &s, "--arch", "event-loop", "--workers", "4"],
            "invalid --workers: expected no value with --arch event-loop",
        ),
        (
            &["--servers", &s, "--max-item-bytes", "10"],
            "invalid --max-item-bytes: expected an integer in 1024..=134217728",
        ),
        (&["--servers", &s, "--window", "0s"], "invalid --window: expected a duration from 10ms to 1h, got 0 ms"),
    ];
    for (args, want) in cases {
        let (code, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A server that does not answer: refused before listening, naming it.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (code, err) = run(&["--servers", &format!("{s},{dead}")]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("memcached server {dead} does not answer")), "{err}");
}

/// Lines of the middleware's stdout, read on a thread so that every wait is bounded.
struct Output(mpsc::Receiver<String>);

impl Output {
    fn new(child: &mut Child) -> Output {
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        Output(rx)
    }

    fn next(&self) -> String {
        self.0.recv_timeout(Duration::from_secs(20)).expect("a line within 20 s")
    }

    fn stats(&self) -> serde_json::Value {
        let line = self.next();
        let json = line.strip_prefix("stats ").unwrap_or_else(|| panic!("not a stats line: {line}"));
        serde_json::from_str(json).unwrap()
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: plain syscall on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

fn exchange(stream: &mut TcpStream, request: &[u8], until: &[u8]) -> Vec<u8> {
    stream.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !got.ends_with(until) {
        let n = stream.read(&mut chunk).expect("an answer within the read timeout");
        assert!(n > 0, "closed");
        got.extend_from_slice(&chunk[..n]);
    }
    got
}

#[test]
fn a_running_middleware_reports_on_sigusr1_and_flushes_everything_on_sigterm() {
    let servers = [memcached_process::require(&[]), memcached_process::require(&[])];
    let list = format!("{},{}", servers[0].addr, servers[1].addr);
    let dir = std::env::temp_dir().join(format!("archlab-mw-cli-{}", std::process::id()));
    let mut child = Command::new(ENGINE)
        .args(["middleware", "--servers", &list, "--workers", "2", "--sharded", "true", "--port", "0"])
        .args(["--window", "200ms", "--stats-dir", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = Output::new(&mut child);
    let first = out.next();
    let addr: SocketAddr =
        first.strip_prefix("listening ").unwrap_or_else(|| panic!("first line: {first}")).parse().unwrap();
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for i in 0..10 {
        assert_eq!(exchange(&mut c, format!("set k{i} 0 0 2\r\nv{i}\r\n").as_bytes(), b"\r\n"), b"STORED\r\n");
    }
    let got = exchange(&mut c, b"get k1 nope k2\r\n", b"END\r\n");
    assert_eq!(got, b"VALUE k1 0 2\r\nv1\r\nVALUE k2 0 2\r\nv2\r\nEND\r\n");
    // A worker records a request just after its answer is written, so the report may be asked
    // for in between: ask again until the last request is in (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stats = loop {
        signal(&child, libc::SIGUSR1);
        let stats = out.stats();
        if stats["totals"]["requests"] == 11 || std::time::Instant::now() > deadline {
            break stats;
        }
    };
    assert_eq!(stats["arch"], "seed");
    assert_eq!(stats["workers"], 2);
    assert_eq!(stats["sharded"], true);
    assert_eq!(stats["totals"]["requests"], 11);
    assert_eq!(stats["totals"]["by_type"]["multi_get"]["requests"], 1);
    assert_eq!(stats["servers"].as_array().unwrap().len(), 2);
    assert!(stats["rusage"]["user_cpu_s"].is_number());
    assert_eq!(exchange(&mut c, b"gets\r\n", b"\r\n"), b"ERROR\r\n");
    signal(&child, libc::SIGTERM);
    let last = out.stats();
    assert_eq!(last["totals"]["requests"], 11);
    assert_eq!(last["totals"]["errors"]["by_class"]["unknown_command"], 1);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // Every window is closed and logged: the logs hold every request.
    let windows = last["windows"].as_array().unwrap();
    let logged: u64 = windows.iter().map(|w| w["requests"].as_u64().unwrap()).sum();
    assert_eq!(logged, 11);
    let log = std::fs::read(dir.join("response-all.hlog")).unwrap();
    let parsed = archlab_metrics::interval_log::read_interval_log(&log).unwrap();
    assert_eq!(parsed.intervals.len(), windows.len());
    assert_eq!(parsed.intervals.iter().map(|i| i.histogram.len()).sum::<u64>(), 11);
    std::fs::remove_dir_all(&dir).unwrap();
}
