//! `archlab-engine link` as a process: the `ready` and `stats` lines, removal of everything on
//! SIGTERM and SIGINT, the cleanup path after SIGKILL, one-line refusals of impossible
//! parameters (naming the flag) and of missing privileges (naming the capability or device).
//! Real namespaces and TUN devices throughout; the privileges are taken away from the child
//! process only (its capability bounding set, or a private mount hiding /dev/net/tun).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

const ENGINE: &str = env!("CARGO_BIN_EXE_archlab-engine");

fn unique(tag: &str) -> String {
    format!("c{}-{tag}", std::process::id())
}

fn namespaces(name: &str) -> [String; 2] {
    [format!("alk-{name}-client"), format!("alk-{name}-server")]
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn assert_nothing_left(name: &str) {
    for ns in namespaces(name) {
        assert!(!netns_exists(&ns), "namespace {ns} is left");
    }
    let lock = format!("/run/archlab-link/{name}.lock");
    assert!(!Path::new(&lock).exists(), "{lock} is left");
}

/// A running `archlab-engine link` and its stdout, line by line. If a test fails while it
/// runs, dropping it kills the process and removes what it left.
struct Forwarder {
    child: Child,
    lines: Receiver<String>,
    name: String,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = Command::new(ENGINE).args(["link", "--cleanup", &self.name]).output();
        }
    }
}

impl Forwarder {
    fn spawn(args: &[&str]) -> Forwarder {
        Self::spawn_with(args, |_| {})
    }

    fn spawn_with(args: &[&str], setup: impl FnOnce(&mut Command)) -> Forwarder {
        let mut cmd = Command::new(ENGINE);
        cmd.arg("link").args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        setup(&mut cmd);
        let mut child = cmd.spawn().expect("archlab-engine runs");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let name = args.iter().skip_while(|a| **a != "--name").nth(1).expect("a --name").to_string();
        Forwarder { child, lines, name }
    }

    /// The JSON of the next stdout line starting with `kind`, waiting at most 30 s.
    fn next(&self, kind: &str) -> serde_json::Value {
        let line =
            self.lines.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no `{kind}` line in 30 s"));
        let json =
            line.strip_prefix(&format!("{kind} ")).unwrap_or_else(|| panic!("expected `{kind} ...`, got {line:?}"));
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{kind} line is not JSON ({e}): {json}"))
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: signalling our own child by its pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, sig) }, 0);
    }

    fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        (status, err)
    }
}

fn run(args: &[&str], setup: impl FnOnce(&mut Command)) -> (i32, String, String) {
    let mut cmd = Command::new(ENGINE);
    cmd.arg("link").args(args);
    setup(&mut cmd);
    let out = cmd.output().expect("archlab-engine runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn ready_and_stats_lines_and_removal_on_sigterm_and_sigint() {
    for (tag, sig) in [("term", libc::SIGTERM), ("int", libc::SIGINT)] {
        let name = unique(tag);
        let f = Forwarder::spawn(&["--name", &name, "--delay-down", "2ms", "--rate-up", "10mbit", "--mtu", "1400"]);
        let ready = f.next("ready");
        let [client, server] = namespaces(&name);
        assert_eq!(ready["client"]["netns"], client.as_str());
        assert_eq!(ready["server"]["netns"], server.as_str());
        assert_eq!(ready["client"]["peer"], ready["server"]["addr"]);
        assert_eq!(ready["mtu"], 1400);
        assert_eq!(ready["down"]["delay_us"], 2000.0);
        assert_eq!(ready["up"]["rate"]["rate_bps"], 10_000_000);
        assert_eq!(ready["scheduling"], "realtime");
        assert!(netns_exists(&client) && netns_exists(&server));
        // A datagram sent from the client side (bash's /dev/udp) crosses the link: the
        // documented way to run a program on a side is `ip netns exec`.
        let sent = Command::new("ip")
            .args(["netns", "exec", &client, "bash", "-c", "echo probe > /dev/udp/10.200.0.2/9"])
            .status()
            .expect("ip netns exec runs a program on the client side");
        assert!(sent.success());
        // The forwarder counts it asynchronously: ask for reports until it shows (bounded).
        let mut stats = serde_json::Value::Null;
        for _ in 0..100 {
            f.signal(libc::SIGUSR1);
            stats = f.next("stats");
            if stats["up"]["packets_in"].as_u64() >= Some(1) {
                break;
            }
        }
        assert_eq!(stats["name"], name.as_str());
        assert_eq!(stats["up"]["packets_out"], 1, "{stats}");
        assert_eq!(stats["up"]["bytes_out"], 20 + 8 + 6, "IP + UDP headers + \"probe\\n\": {stats}");
        assert!(stats["down"]["delay_hdr"].is_string() && stats["rusage"]["user_cpu_s"].is_f64(), "{stats}");
        f.signal(sig);
        let final_stats = f.next("stats");
        assert!(final_stats["elapsed_s"].as_f64().unwrap() >= stats["elapsed_s"].as_f64().unwrap());
        let (status, err) = f.wait();
        assert!(status.success(), "{tag}: {status:?} {err}");
        assert_nothing_left(&name);
    }
}

/// The CPUs the thread named `name` of process `pid` may run on, from /proc.
fn thread_cpus(pid: u32, name: &str) -> String {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        if std::fs::read_to_string(dir.join("comm")).unwrap().trim() == name {
            let status = std::fs::read_to_string(dir.join("status")).unwrap();
            let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
            return line.split_whitespace().nth(1).unwrap().to_string();
        }
    }
    panic!("no thread named {name} in process {pid}");
}

/// The (nice, policy) of the thread named `name` (fields 19 and 41 of /proc/PID/task/TID/stat).
fn thread_scheduling(pid: u32, name: &str) -> (i32, u32) {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        if std::fs::read_to_string(dir.join("comm")).unwrap().trim() == name {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
            // Fields after the parenthesised command name start at field 3.
            let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
            return (rest[19 - 3].parse().unwrap(), rest[41 - 3].parse().unwrap());
        }
    }
    panic!("no thread named {name} in process {pid}");
}

#[test]
fn each_direction_is_pinned_and_scheduled_as_asked() {
    let name = unique("cpus");
    let f = Forwarder::spawn(&["--name", &name, "--cpus-up", "0", "--cpus-down", "1"]);
    let ready = f.next("ready");
    assert_eq!((ready["cpus_up"].as_str(), ready["cpus_down"].as_str()), (Some("0"), Some("1")));
    let pid = f.child.id();
    assert_eq!(thread_cpus(pid, "link-up"), "0");
    assert_eq!(thread_cpus(pid, "link-down"), "1");
    assert_eq!(thread_scheduling(pid, "link-up").1, libc::SCHED_FIFO as u32, "realtime by default");
    f.signal(libc::SIGTERM);
    assert!(f.wait().0.success());

    let f = Forwarder::spawn(&["--name", &name, "--cpus", "1", "--scheduling", "high"]);
    f.next("ready");
    let pid = f.child.id();
    assert_eq!(thread_cpus(pid, "link-up"), "1");
    assert_eq!(thread_cpus(pid, "link-down"), "1");
    assert_eq!(thread_scheduling(pid, "link-down"), (-20, libc::SCHED_OTHER as u32), "high: nice -20");
    f.signal(libc::SIGTERM);
    assert!(f.wait().0.success());
    assert_nothing_left(&name);
}

#[test]
fn a_killed_forwarder_is_cleaned_up_by_cleanup() {
    let name = unique("kill");
    let f = Forwarder::spawn(&["--name", &name, "--delay", "1ms"]);
    f.next("ready");
    f.signal(libc::SIGKILL);
    let (status, _) = f.wait();
    assert!(!status.success());
    let [client, server] = namespaces(&name);
    // The namespaces outlive the process; its TUN devices do not (they were not persistent).
    assert!(netns_exists(&client) && netns_exists(&server), "the namespaces survive SIGKILL");
    for ns in [&client, &server] {
        let shown = Command::new("ip").args(["-n", ns, "link", "show", "alk-tun"]).output().unwrap();
        assert!(!shown.status.success(), "alk-tun in {ns} died with its forwarder");
    }
    let (code, out, err) = run(&["--cleanup", &name], |_| {});
    assert_eq!(code, 0, "{err}");
    let removed: Vec<String> = serde_json::from_str(out.trim().strip_prefix("removed ").unwrap()).unwrap();
    assert_eq!(removed, vec![client, server]);
    assert_nothing_left(&name);
}

#[test]
fn impossible_parameters_are_refused_naming_the_flag() {
    let name = unique("bad");
    for (args, flag) in [
        (vec!["--delay", "-5ms"], "--delay"),
        (vec!["--delay-up=-1ms"], "--delay-up"),
        (vec!["--rate", "0mbit"], "--rate"),
        (vec!["--rate-down", "0"], "--rate-down"),
        (vec!["--loss", "1.5"], "--loss"),
        (vec!["--loss-up", "-0.1"], "--loss-up"),
        (vec!["--mtu", "575"], "--mtu"),
        (vec!["--mtu", "65536"], "--mtu"),
        (vec!["--delay-up", "1ms", "--jitter-up", "2ms"], "--jitter-up"),
        (vec!["--queue", "64KiB"], "--queue"),
        (vec!["--seed", "3"], "--seed"),
        (vec!["--scheduling", "fifo"], "--scheduling"),
    ] {
        let mut full = vec!["--name", name.as_str()];
        full.extend(&args);
        let (code, out, err) = run(&full, |_| {});
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: the message names {flag}: {err}");
        assert!(err.starts_with("error:") || err.starts_with("archlab-engine: error:"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    let (code, _, err) = run(&["--name", "Bad_Name"], |_| {});
    assert_eq!(code, 2);
    assert!(err.contains("--name"), "{err}");
    assert_nothing_left(&name);
}

/// Remove capability `cap` from the child's bounding set: as root, a program gets exactly the
/// bounding set at exec.
fn without_capability(cmd: &mut Command, cap: libc::c_int) {
    // SAFETY: prctl is async-signal-safe; it runs in the child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

const CAP_NET_ADMIN: libc::c_int = 12;
const CAP_SYS_ADMIN: libc::c_int = 21;
const CAP_SYS_NICE: libc::c_int = 23;

#[test]
fn missing_privileges_are_named_in_one_line() {
    let name = unique("priv");
    for (cap, cap_name) in
        [(CAP_NET_ADMIN, "CAP_NET_ADMIN"), (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"), (CAP_SYS_NICE, "CAP_SYS_NICE")]
    {
        let (code, _, err) = run(&["--name", &name], |c| without_capability(c, cap));
        assert_eq!(code, 1, "{cap_name}: {err}");
        assert!(err.contains(&format!("lacks {cap_name}")), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert_nothing_left(&name);
    }
    // Ordinary scheduling does not need CAP_SYS_NICE, and gets nice 0.
    let f =
        Forwarder::spawn_with(&["--name", &name, "--scheduling", "normal"], |c| without_capability(c, CAP_SYS_NICE));
    assert_eq!(f.next("ready")["scheduling"], "normal");
    assert_eq!(thread_scheduling(f.child.id(), "link-up"), (0, libc::SCHED_OTHER as u32));
    f.signal(libc::SIGTERM);
    let (status, err) = f.wait();
    assert!(status.success(), "{err}");
    assert_nothing_left(&name);

    // No /dev/net/tun: the child sees an empty /dev/net in a private mount namespace.
    let (code, _, err) = run(&["--name", &name], |c| {
        // SAFETY: raw syscalls only, in the child between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let ok = libc::unshare(libc::CLONE_NEWNS) == 0
                    && libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) == 0
                    && libc::mount(c"tmpfs".as_ptr(), c"/dev/net".as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null())
                        == 0;
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    });
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/dev/net/tun") && err.contains("modprobe tun"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert_nothing_left(&name);
}

/// The parameters as one JSON object (`--params`, how the lab passes a spec's `[network]`):
/// the same link as the flags make, with the congestion control set in both namespaces;
/// refusals name the JSON key; flags and `--params` together are refused.
#[test]
fn params_as_json_and_congestion_control() {
    let dir = std::env::temp_dir().join(unique("params"));
    std::fs::create_dir_all(&dir).unwrap();
    let params = dir.join("link.json");
    std::fs::write(&params, r#"{"delay_down": "2ms", "rate_up": "10mbit", "mtu": 1400, "congestion": "reno"}"#)
        .unwrap();
    let name = unique("json");
    let f = Forwarder::spawn(&["--name", &name, "--params", params.to_str().unwrap()]);
    let ready = f.next("ready");
    assert_eq!(ready["mtu"], 1400);
    assert_eq!(ready["down"]["delay_us"], 2000.0);
    assert_eq!(ready["up"]["rate"]["rate_bps"], 10_000_000);
    assert_eq!(ready["congestion"], "reno");
    for ns in namespaces(&name) {
        let out =
            Command::new("ip").args(["netns", "exec", &ns, "sysctl", "-n", "net.ipv4.tcp_congestion_control"]).output();
        assert_eq!(String::from_utf8_lossy(&out.expect("sysctl runs").stdout).trim(), "reno", "in {ns}");
    }
    f.signal(libc::SIGTERM);
    let _ = f.next("stats");
    let (status, err) = f.wait();
    assert!(status.success(), "{status:?} {err}");
    assert_nothing_left(&name);

    let bad = unique("badjson");
    for (doc, key) in [
        (r#"{"loss_up": 1.5}"#, "loss_up"),
        (r#"{"delay": "5ms", "jitter_down": "6ms"}"#, "jitter_down"),
        (r#"{"delai": "5ms"}"#, "delai"),
        (r#"{"congestion": "Cubic!"}"#, "congestion"),
    ] {
        std::fs::write(&params, doc).unwrap();
        let (code, out, err) = run(&["--name", &bad, "--params", params.to_str().unwrap()], |_| {});
        assert_eq!(code, 2, "{doc}: {err}");
        assert!(
            err.starts_with(&format!("archlab-engine: error: invalid {key} in --params: expected ")),
            "{doc}: {err}"
        );
        assert!(out.is_empty(), "{doc}: {out}");
    }
    std::fs::write(&params, "{}").unwrap();
    let (code, _, err) = run(&["--name", &bad, "--params", params.to_str().unwrap(), "--delay", "1ms"], |_| {});
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--params takes the link's parameters in place of their flags"), "{err}");
    assert_nothing_left(&bad);
    std::fs::remove_dir_all(&dir).unwrap();
}
