//! `/program?name=P` on a real server: `archlab-engine serve --programs FILE` runs named
//! service programs with the architecture's pool. A loop issues its calls as many times as it
//! says (counted by a downstream the test owns); a fan-out step's calls are all in flight
//! together (the test's downstream answers none until it holds every one of them, so a
//! server that issued them one after another would never complete the request); the same
//! program against the lab's real downstream (`serve --arch sync`) answers 200 on several
//! architectures; an unknown program is a 404 naming the file; a bad program file stops
//! `serve` before it listens, with one line naming the file, program, step and key.

mod common;

use common::{connect, ServeProcess};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

/// A program file in a fresh temporary directory (removed by the caller's `TempFile`).
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!("archlab-programs-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("programs.toml");
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// Status and body of one GET on a fresh connection.
fn get(addr: SocketAddr, target: &str) -> (u16, String) {
    let mut s = connect(addr);
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// One request received by the test's downstream: the `ms` it asked for and the connection to
/// answer it on.
struct Pending {
    ms: u64,
    conn: TcpStream,
}

/// A downstream owned by the test: every `GET /delay?ms=M` it receives is reported on the
/// channel, unanswered; the test decides when to answer. Each connection is read by its own
/// thread, so requests on different connections are seen as they arrive.
fn test_downstream() -> (SocketAddr, mpsc::Receiver<Pending>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let Some(ms) = line.strip_prefix("GET /delay?ms=").and_then(|r| r.split(' ').next()) else {
                        continue;
                    };
                    let ms = ms.parse().unwrap();
                    // The rest of the head, up to the blank line.
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    if tx.send(Pending { ms, conn: conn.try_clone().unwrap() }).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}

fn answer(p: &mut Pending) {
    let body = format!("slept {} ms", p.ms);
    let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    p.conn.write_all(response.as_bytes()).unwrap();
}

/// Waits on the channel, never on the clock: the deadline only turns a hang into a failure.
const WAIT: Duration = Duration::from_secs(30);

const PROGRAMS: &str = r#"
[programs.loop3]
steps = [{ step = "prime", n = 7919 }, { step = "repeat", times = 3, steps = [{ step = "call", ms = 7 }] }]

[programs.fan4]
steps = [{ step = "fanout", ms = [11, 12, 13, 14] }]

[programs.cpu]
steps = [{ step = "repeat", times = 2, steps = [{ step = "sort", n = 100 }, { step = "sleep", ms = 1 }] }]
"#;

#[test]
fn a_loop_issues_its_calls_as_often_as_it_says() {
    let file = TempFile::new("loop", PROGRAMS);
    let (down, requests) = test_downstream();
    let server = ServeProcess::start(
        "blocking",
        &["--threads", "2", "--downstream", &down.to_string(), "--programs", file.path()],
        None,
    );
    let addr = server.addr;
    let client = std::thread::spawn(move || get(addr, "/program?name=loop3"));
    // The calls of a blocking loop come one at a time: each is answered before the next arrives.
    for _ in 0..3 {
        let mut p = requests.recv_timeout(WAIT).expect("the loop's next call");
        assert_eq!(p.ms, 7);
        answer(&mut p);
    }
    let (status, body) = client.join().unwrap();
    assert_eq!(status, 200, "{body}");
    // The prime step and three calls.
    assert!(body.starts_with(r#"{"program":"loop3","steps":4,"checksum":"0x"#), "{body}");
    assert!(requests.try_recv().is_err(), "no call beyond the loop's three");
}

#[test]
fn a_fanout_step_has_all_its_calls_in_flight_at_once() {
    let file = TempFile::new("fan", PROGRAMS);
    let (down, requests) = test_downstream();
    let server = ServeProcess::start(
        "blocking",
        &["--threads", "1", "--downstream", &down.to_string(), "--programs", file.path()],
        None,
    );
    let addr = server.addr;
    for round in 0..2 {
        let client = std::thread::spawn(move || get(addr, "/program?name=fan4"));
        // Nothing is answered until all four calls have arrived: a server that waited for one
        // response before sending the next call would leave this loop waiting (and failing).
        let mut held: Vec<Pending> = (0..4)
            .map(|i| requests.recv_timeout(WAIT).unwrap_or_else(|_| panic!("call {i} of round {round}")))
            .collect();
        let mut ms: Vec<u64> = held.iter().map(|p| p.ms).collect();
        ms.sort_unstable();
        assert_eq!(ms, [11, 12, 13, 14]);
        // Answer in reverse order of arrival: the server must match answers to connections.
        for p in held.iter_mut().rev() {
            answer(p);
        }
        let (status, body) = client.join().unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body.starts_with(r#"{"program":"fan4","steps":1,"#), "{body}");
    }
}

#[test]
fn programs_run_against_the_real_downstream_on_several_architectures() {
    let file = TempFile::new("real", PROGRAMS);
    let downstream = ServeProcess::start("sync", &[], None);
    let down = downstream.addr.to_string();
    let mut bodies = Vec::new();
    for arch in ["blocking", "seda-queue", "tokio"] {
        let server = ServeProcess::start(arch, &["--downstream", &down, "--programs", file.path()], None);
        let mut per_arch = Vec::new();
        for name in ["loop3", "fan4", "cpu"] {
            let (status, body) = get(server.addr, &format!("/program?name={name}"));
            assert_eq!(status, 200, "{arch} {name}: {body}");
            per_arch.push(body);
        }
        bodies.push(per_arch);
    }
    // The same program gives the same body (checksum of every step's output) everywhere.
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");
    assert!(bodies[0][2].starts_with(r#"{"program":"cpu","steps":4,"#), "{}", bodies[0][2]);
}

#[test]
fn an_unknown_program_is_a_404_naming_the_file() {
    let file = TempFile::new("unknown", PROGRAMS);
    let server = ServeProcess::start("single-thread", &["--programs", file.path()], None);
    let (status, body) = get(server.addr, "/program?name=lop3");
    assert_eq!(status, 404);
    assert!(body.contains("no program named \"lop3\"") && body.contains("(known: cpu, fan4, loop3)"), "{body}");
    // Steps that need a service the server was not given answer 503, naming the step.
    let (status, body) = get(server.addr, "/program?name=loop3");
    assert_eq!(status, 503);
    assert!(body.contains("program loop3, steps[1].steps[0] (call): no downstream"), "{body}");
}

#[test]
fn a_bad_program_file_stops_serve_before_it_listens() {
    let file = TempFile::new(
        "bad",
        "[programs.p]\nsteps = [{ step = \"repeat\", times = 5000, steps = [{ step = \"call\", ms = 1 }] }]\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_archlab-engine"))
        .args(["serve", "--arch", "blocking", "--programs", file.path()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing listened: {}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8(out.stderr).unwrap();
    // One line says it all (the usage hint that follows is the argument parser's).
    let first = err.lines().next().unwrap_or("");
    assert!(first.contains("--programs"), "{err}");
    assert!(
        first
            .contains(&format!("{}: programs.p.steps[0].times: got 5000, allowed an integer in 1..=1000", file.path())),
        "{err}"
    );
    let missing = Command::new(env!("CARGO_BIN_EXE_archlab-engine"))
        .args(["serve", "--arch", "blocking", "--programs", "/nonexistent/programs.toml"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    let err = String::from_utf8(missing.stderr).unwrap();
    assert!(err.contains("/nonexistent/programs.toml: (file): got No such file"), "{err}");
}
