//! The memcached driver against a real memcached started by the test (Debian's
//! `/usr/bin/memcached`, see `archlab_wire::memcached_process`): a closed and an open run on
//! the same engine with every value verified (values containing CR LF, multi-get order,
//! misses counted), server errors (`SERVER_ERROR object too large`) counted by class on
//! connections that stay usable, wrong values caught by verification, and a silent server
//! counted as timeouts without hanging the run. A missing memcached fails them, naming the package.

use archlab_load::{
    run_load, ErrorClass, KeyPatterns, LoadConfig, LoadParams, LoadReport, Model, Protocol, Ratio, Retrieval, ValueSize,
};
use archlab_wire::memcached_process;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A memcached run of 4 connections over keys 0..=99 with `gets` and verification.
fn params(addr: SocketAddr, ratio: &str, multi_get: u32, keys: &str, size: &str, prefix: &str) -> LoadParams {
    let mut p = LoadParams::new(addr);
    p.protocol = Protocol::Memcached;
    p.mc_command = Some(Retrieval::Gets);
    p.multi_get = Some(multi_get);
    p.ratio = Some(ratio.parse::<Ratio>().unwrap());
    p.key_pattern = Some(keys.parse::<KeyPatterns>().unwrap());
    p.key_prefix = Some(prefix.into());
    (p.key_min, p.key_max) = (Some(0), Some(99));
    p.data_size = Some(size.parse::<ValueSize>().unwrap());
    p.verify = true;
    p.connections = Some(4);
    p.warmup = ms(100);
    p.duration = Some(ms(500));
    p.request_timeout = ms(500);
    p
}

fn run(p: LoadParams) -> LoadReport {
    run_load(&LoadConfig::new(p).unwrap()).unwrap()
}

#[test]
fn closed_and_open_runs_verify_every_value() {
    let server = memcached_process::require(&[]);
    for model in [Model::Closed, Model::Open] {
        let mut p = params(server.addr, "1:4", 3, "S:G", "uniform:0-100", "v-");
        if model == Model::Open {
            p.model = Model::Open;
            p.rate = Some(2000.0);
        }
        let r = run(p);
        let (t, mc) = (&r.totals, r.totals.memcached);
        assert_eq!(t.errors.total(), 0, "{model:?}: {t:?} {:?}", r.error_examples);
        assert!(t.requests > 200, "{model:?}: {t:?}");
        assert!(mc.sets > 0 && mc.gets > 0 && mc.hits > 0, "{model:?}: {mc:?}");
        assert_eq!(mc.sets + mc.gets, t.requests);
        assert_eq!(mc.hits + mc.misses, mc.get_keys);
        // A 1:4 cycle with 3-key gets: set, get of 3 keys, get of 1 key; the window may cut
        // each connection's cycle anywhere.
        assert!(mc.get_keys.abs_diff(4 * mc.sets) <= 4 * 4 && mc.gets.abs_diff(2 * mc.sets) <= 2 * 4, "{mc:?}");
        let json = serde_json::to_value(r.summary(None)).unwrap();
        assert_eq!(json["protocol"], "memcached");
        assert_eq!(json["memcached"]["key_pattern"], "S:G");
        assert_eq!(json["errors"]["by_class"]["mc_verify"], 0);
        // backend auto: memcached runs on epoll, and the summary says why not io_uring.
        assert_eq!(json["generator"]["backend"], "epoll");
        assert!(json["generator"]["backend_fallback"].as_str().unwrap().contains("HTTP only"), "{}", json["generator"]);
    }
}

#[test]
fn server_errors_are_counted_by_class_and_connections_survive() {
    // Items above 1 KiB are refused with SERVER_ERROR; values are up to 2 KiB.
    let server = memcached_process::require(&["-I", "1024", "-o", "slab_chunk_max=1024"]);
    let r = run(params(server.addr, "1:1", 1, "R:R", "uniform:0-2000", "e-"));
    let e = &r.totals.errors;
    assert!(e.get(ErrorClass::McServerError) > 10, "{:?} {:?}", r.totals, r.error_examples);
    assert_eq!(e.total(), e.get(ErrorClass::McServerError), "{:?}", r.error_examples);
    assert!(r.totals.requests > 100);
    // No connection was lost: only the initial four were opened.
    assert_eq!(r.totals.connections_opened + r.warmup_totals.connections_opened, 4);
}

#[test]
fn wrong_values_fail_verification() {
    let server = memcached_process::require(&[]);
    // Every key holds a value the generator would not have written.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for k in 0..100 {
        s.write_all(format!("set w-{k} 0 0 5\r\nwrong\r\n").as_bytes()).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 100 * b"STORED\r\n".len() {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let r = run(params(server.addr, "0:1", 2, "R:R", "32", "w-"));
    let e = &r.totals.errors;
    assert!(e.get(ErrorClass::McVerify) > 10, "{:?}", r.totals);
    assert_eq!(e.total(), e.get(ErrorClass::McVerify));
    assert_eq!(r.totals.memcached.misses, 0);
}

#[test]
fn a_silent_server_counts_timeouts_and_the_run_ends_on_time() {
    // Accepts and reads, never answers (no memcached needed).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let keep = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut held = Vec::new();
        while Instant::now() < deadline && held.len() < 64 {
            match listener.accept() {
                Ok((c, _)) => held.push(c),
                Err(_) => std::thread::sleep(ms(5)),
            }
        }
        held
    });
    let mut p = params(addr, "1:1", 1, "S:S", "8", "t-");
    p.connections = Some(2);
    p.request_timeout = ms(100);
    let started = Instant::now();
    let r = run(p);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(r.totals.errors.get(ErrorClass::Timeout) >= 2, "{:?}", r.totals);
    assert_eq!(r.totals.requests, 0);
    drop(keep);
}

/// `stats` value of a memcached counter, read over a fresh connection.
fn mc_stat(addr: SocketAddr, name: &str) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"stats\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8(got).unwrap();
    let prefix = format!("STAT {name} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap().trim().parse().unwrap()
}

#[test]
fn parallel_pattern_loads_every_key_of_the_range_once_per_pass() {
    let server = memcached_process::require(&[]);
    // Sets only, P:P over keys 0..=99 on 4 connections: each connection walks its own 25 keys,
    // so as soon as every connection has made 25 sets the server holds all 100 keys and no
    // other; R:R with as many sets would leave about 100/e of them unwritten.
    let mut p = params(server.addr, "1:0", 1, "P:P", "16", "p-");
    p.warmup = Duration::ZERO;
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    assert!(r.totals.memcached.sets >= 4 * 25 * 2, "{:?}", r.totals);
    assert_eq!(mc_stat(server.addr, "curr_items"), 100);
    // Read every key back, verified: no miss, no wrong value.
    let r = run(params(server.addr, "0:1", 10, "S:S", "16", "p-"));
    let mc = r.totals.memcached;
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    assert!(mc.get_keys >= 100 && mc.misses == 0, "{mc:?}");
    // More connections than keys is refused with the reason.
    let mut p = params(server.addr, "1:0", 1, "P:P", "16", "p-");
    p.connections = Some(101);
    let e = LoadConfig::new(p).unwrap_err();
    assert_eq!(e.parameter, "key_pattern");
}

#[test]
fn zipf_keys_concentrate_hits_on_the_lowest_ranks() {
    let server = memcached_process::require(&[]);
    // Set only key 0 (rank 1); Zipf gets with s = 1 over 100 keys hit it with probability
    // 1/H_100 = 1/5.187 = 0.193 (H_n the harmonic number), uniform gets with 0.01.
    let mut seed = TcpStream::connect(server.addr).unwrap();
    seed.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut p = params(server.addr, "0:1", 1, "R:Z", "8", "z-");
    p.key_zipf_exp = Some(1.0);
    let value: Vec<u8> = b"0123456789abcdef\r\n".iter().cycle().take(8).copied().collect();
    seed.write_all(b"set z-0 0 0 8\r\n").unwrap();
    seed.write_all(&value).unwrap();
    seed.write_all(b"\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = seed.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STORED\r\n");
    let r = run(p);
    let mc = r.totals.memcached;
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    let n = mc.get_keys as f64;
    let p = 1.0 / (1..=100).map(|k| 1.0 / k as f64).sum::<f64>();
    // Binomial(n, p): within 5 standard deviations.
    let sd = (n * p * (1.0 - p)).sqrt();
    assert!(n > 500.0 && (mc.hits as f64 - n * p).abs() < 5.0 * sd, "{mc:?} expected {:.0}", n * p);
}
