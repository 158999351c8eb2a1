//! Request mixes and the generator's SO_RCVBUF against archlab's own server (`single-thread`,
//! real `/response?size=N` on a loopback socket): per-class accounting adds up to the totals
//! exactly in every load model, the drawn shares follow the weights within binomial bounds, a
//! seed names the same class sequence, a pipelined mix matches each response to its request's
//! class (the class byte of every raw record against the bytes its response had), bad mixes are
//! refused naming `mix`, and `rcvbuf` reaches the kernel.

mod common;

use archlab_load::{
    run_load, ErrorClass, LoadConfig, LoadParams, LoadReport, Model, Protocol, RecordReader, SessionLength,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Body sizes of the two classes: far enough apart that a response's byte count names its class.
const SMALL: usize = 100;
const LARGE: usize = 20_000;

fn mix() -> archlab_load::Mix {
    format!("/response?size={LARGE}:1,/response?size={SMALL}:3").parse().unwrap()
}

/// archlab's single-thread server on 127.0.0.1:0, serving until the test process ends.
fn server() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = archlab_server::registry::build("single-thread", &archlab_server::ServerOptions::default()).unwrap();
    std::thread::spawn(move || server.serve(listener));
    addr
}

fn params(addr: SocketAddr) -> LoadParams {
    let mut p = LoadParams::new(addr);
    p.mix = Some(mix());
    p.connections = Some(4);
    p.threads = Some(2);
    p.warmup = Duration::from_millis(50);
    p.duration = Some(Duration::from_millis(400));
    p
}

fn run(p: LoadParams) -> LoadReport {
    run_load(&LoadConfig::new(p).unwrap()).unwrap()
}

fn records_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("archlab-mixes-{name}-{}.rec", std::process::id()))
}

/// The classes add up to the totals: sent, responses and 2xx exactly; errors exactly, less the
/// errors no request was in flight for (failed connects).
fn assert_classes_add_up(r: &LoadReport) {
    assert_eq!(r.classes.len(), 2);
    let sum = |f: &dyn Fn(&archlab_load::ClassTotals) -> u64| r.classes.iter().map(f).sum::<u64>();
    assert_eq!(sum(&|c| c.sent), r.totals.flow.sent, "{r:?}");
    assert_eq!(sum(&|c| c.responses), r.totals.responses, "{r:?}");
    assert_eq!(sum(&|c| c.requests), r.totals.requests, "{r:?}");
    let class_errors = sum(&|c| c.errors.total());
    assert_eq!(class_errors + r.totals.errors.get(ErrorClass::Connect), r.totals.errors.total(), "{r:?}");
    // Both times are kept for every 2xx response of a class.
    for c in &r.classes {
        assert_eq!(c.response_time.len(), c.requests);
        assert_eq!(c.service_time.len(), c.requests);
    }
    assert_eq!(r.classes.iter().map(|c| c.service_time.len()).sum::<u64>(), r.totals.requests);
}

/// Every raw record of the run has the class whose response size it received: the head plus
/// the class's body, so the smallest large response is bigger than any small one.
fn classes_of_records(path: &PathBuf) -> Vec<(u32, u64, u8)> {
    let mut out = Vec::new();
    for rec in RecordReader::open(path).unwrap() {
        let rec = rec.unwrap();
        assert!(rec.error.is_none(), "{rec:?}");
        let large = rec.bytes_received as usize > LARGE;
        assert!(rec.bytes_received as usize > SMALL, "{rec:?}");
        assert_eq!(rec.class, if large { 0 } else { 1 }, "the response of {rec:?} is not of its class");
        out.push((rec.connection, rec.sent_ns, rec.class));
    }
    let _ = std::fs::remove_file(path);
    out
}

#[test]
fn classes_add_up_to_the_totals_in_every_model() {
    let addr = server();
    let closed = params(addr);
    let mut open = params(addr);
    open.model = Model::Open;
    open.rate = Some(2000.0);
    let mut partly = params(addr);
    partly.model = Model::PartlyOpen;
    partly.session_rate = Some(300.0);
    partly.requests_per_session = Some(SessionLength::Fixed(3));
    partly.max_connections = Some(16);
    for (name, mut p) in [("closed", closed), ("open", open), ("partly-open", partly)] {
        let path = records_file(name);
        p.records = Some(path.clone());
        let r = run(p);
        assert!(r.totals.requests > 100, "{name}: {r:?}");
        assert_classes_add_up(&r);
        let recs = classes_of_records(&path);
        // The records are the window's completed requests, each in its class.
        for (i, c) in r.classes.iter().enumerate() {
            assert_eq!(recs.iter().filter(|(_, _, k)| usize::from(*k) == i).count() as u64, c.responses, "{name}");
        }
        // The summary carries the classes, in the mix's order.
        let s = serde_json::to_value(r.summary(None)).unwrap();
        assert_eq!(s["mix"][0]["path"], format!("/response?size={LARGE}"), "{name}");
        assert_eq!(s["mix"][1]["share"], 0.75, "{name}");
        assert_eq!(s["mix"][1]["requests"], r.classes[1].requests, "{name}");
    }
}

#[test]
fn failed_requests_are_counted_in_their_class() {
    // The in-test server closes a connection instead of answering its 5th request (pipelined:
    // with the requests behind it), and one that never answers times out: every failure had a
    // request in flight, so the classes' errors are all the run's errors.
    for (name, behaviour, pipeline) in [
        ("dropped", common::Behaviour { drop_every: Some(5), ..Default::default() }, 1),
        ("dropped pipelined", common::Behaviour { drop_every: Some(5), ..Default::default() }, 4),
        ("silent", common::Behaviour { hang: true, ..Default::default() }, 1),
    ] {
        let server = common::TestServer::start(behaviour);
        let mut p = params(server.addr);
        p.pipeline = pipeline;
        p.request_timeout = Duration::from_millis(100);
        let r = run(p);
        assert!(r.totals.errors.total() >= 4, "{name}: {r:?}");
        assert_classes_add_up(&r);
        let failed: u64 = r.classes.iter().map(|c| c.errors.total()).sum();
        assert_eq!(failed, r.totals.errors.total(), "{name}: {r:?}");
    }
}

#[test]
fn drawn_shares_follow_the_weights() {
    let addr = server();
    let mut p = params(addr);
    p.duration = Some(Duration::from_millis(800));
    let r = run(p);
    assert_classes_add_up(&r);
    // Each request's class is an independent draw with P(large) = 1/4, so the large requests
    // sent among n are Binomial(n, 1/4): sd = sqrt(n p (1 - p)). A correct draw is outside
    // 5 sd with probability < 6e-7.
    let n = r.totals.flow.sent as f64;
    assert!(n > 1000.0, "{r:?}");
    let large = r.classes[0].sent as f64;
    let sd = (n * 0.25 * 0.75).sqrt();
    assert!((large - n * 0.25).abs() < 5.0 * sd, "{large} large of {n} (expected {} +- {})", n * 0.25, 5.0 * sd);
}

#[test]
fn a_seed_names_the_class_sequence() {
    let addr = server();
    // One connection on one thread: its requests go out in draw order.
    let sequence = |seed: u64| {
        let path = records_file(&format!("seed-{seed}-{}", rand_suffix()));
        let mut p = params(addr);
        (p.connections, p.threads, p.warmup, p.seed) = (Some(1), Some(1), Duration::ZERO, Some(seed));
        p.duration = Some(Duration::from_millis(200));
        p.records = Some(path.clone());
        run(p);
        let mut recs = classes_of_records(&path);
        recs.sort_by_key(|&(_, sent, _)| sent);
        recs.into_iter().map(|(_, _, class)| class).collect::<Vec<u8>>()
    };
    let (a, b, other) = (sequence(42), sequence(42), sequence(43));
    let n = a.len().min(b.len()).min(other.len());
    assert!(n >= 100, "{n} requests");
    assert_eq!(a[..n], b[..n], "the same seed gives the same classes");
    assert_ne!(a[..n], other[..n], "another seed gives other classes");
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

#[test]
fn a_pipelined_mix_matches_each_response_to_its_class() {
    let addr = server();
    let path = records_file("pipelined");
    let mut p = params(addr);
    p.pipeline = 8;
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    assert_classes_add_up(&r);
    // classes_of_records checks each response's size against its request's class: a response
    // matched to the wrong request of the pipeline would have the other class's size.
    let recs = classes_of_records(&path);
    assert!(recs.len() > 200, "{}", recs.len());
    // Both classes ran through the pipelines, interleaved on a connection.
    let mut per_conn: BTreeMap<u32, [u64; 2]> = BTreeMap::new();
    for (conn, _, class) in &recs {
        per_conn.entry(*conn).or_default()[usize::from(*class)] += 1;
    }
    assert!(per_conn.values().all(|n| n[0] > 0 && n[1] > 0), "{per_conn:?}");
}

#[test]
fn rcvbuf_is_set_on_the_connections() {
    let addr = server();
    let mut p = LoadParams::new(addr);
    (p.connections, p.warmup, p.duration) = (Some(2), Duration::ZERO, Some(Duration::from_millis(100)));
    p.rcvbuf = Some(8192);
    let r = run(p);
    // Linux doubles SO_RCVBUF for its bookkeeping overhead (socket(7)): 8192 reads back 16384.
    assert_eq!(r.rcvbuf_applied, Some(16384));
    let s = serde_json::to_value(r.summary(None)).unwrap();
    assert_eq!(s["rcvbuf"]["requested_bytes"], 8192);
    assert_eq!(s["rcvbuf"]["applied_bytes"], 16384);
    // Without it the summary says nothing about it.
    let mut p = LoadParams::new(addr);
    (p.connections, p.warmup, p.duration) = (Some(1), Duration::ZERO, Some(Duration::from_millis(50)));
    let s = serde_json::to_value(run(p).summary(None)).unwrap();
    assert!(s.get("rcvbuf").is_none() && s.get("mix").is_none());
}

#[test]
fn bad_mixes_are_refused_naming_the_parameter() {
    for bad in [
        serde_json::json!(""),
        serde_json::json!("/a:0,/b:0"),
        serde_json::json!("/a:-2,/b:3"),
        serde_json::json!("/a;2"),
        serde_json::json!([{"path": "/a", "weight": -1}]),
        serde_json::json!([]),
        serde_json::json!(7),
    ] {
        let e = LoadParams::from_json_value(&serde_json::json!({ "mix": bad })).unwrap_err();
        assert_eq!(e.field, "mix", "{bad}: {e}");
        assert!(e.to_string().contains("PATH:WEIGHT"), "{bad}: {e}");
    }
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut p = LoadParams::new(addr);
    p.mix = Some(mix());
    p.path = Some("/x".into());
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "mix");
    let mut p = LoadParams::new(addr);
    p.mix = Some(mix());
    p.protocol = Protocol::Memcached;
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "mix");
    let e = LoadParams::from_json_value(&serde_json::json!({ "rcvbuf": 10 })).unwrap_err();
    assert_eq!(e.field, "rcvbuf");
}
