//! HTTP pipelining (closed model, depth D > 1) against real servers: the in-test server
//! (tests/common), which answers every second request of a connection with another status so
//! that the order of matching shows in the records and counts the responses it wrote, and one
//! of archlab's own architectures. Accounting is exact per request: every request sent ends as
//! a response, an error or in flight at the end, and a connection the server closes or stops
//! answering fails every request on it without hanging the run.

mod common;

use archlab_load::{run_load, ErrorClass, LoadConfig, LoadParams, LoadReport, Model, RecordReader};
use common::{Behaviour, TestServer};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn pipelined(addr: std::net::SocketAddr, depth: u32) -> LoadParams {
    let mut p = LoadParams::new(addr);
    p.pipeline = depth;
    p.connections = Some(3);
    p.threads = Some(2);
    p.warmup = Duration::ZERO;
    p.duration = Some(ms(500));
    p.request_timeout = ms(300);
    p
}

fn run(p: LoadParams) -> LoadReport {
    run_load(&LoadConfig::new(p).unwrap()).unwrap()
}

/// Every request sent in the window ended in exactly one way: a response (of any status), a
/// failure without one (errors minus those counted for a 4xx/5xx status), or in flight.
fn assert_exact(r: &LoadReport) {
    let t = &r.totals;
    let status_errors: u64 = t.status_codes().iter().filter(|(s, _)| !(200..300).contains(*s)).map(|(_, n)| *n).sum();
    let failures = t.errors.total() - status_errors;
    assert_eq!(t.flow.sent, t.responses + failures + r.in_flight_at_end as u64, "{r:?}");
}

#[test]
fn each_request_gets_exactly_one_response_in_order() {
    let server = TestServer::start(Behaviour { alternate_status: Some(203), ..Behaviour::default() });
    let path = std::env::temp_dir().join(format!("archlab-pipelining-{}.rec", std::process::id()));
    let mut p = pipelined(server.addr, 8);
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    assert!(r.totals.responses > 300, "{r:?}");
    assert_exact(&r);
    // Up to D requests per connection were in flight when the window closed.
    assert!(r.in_flight_at_end <= 3 * 8, "{r:?}");
    // The server wrote every response we counted, and never more than we asked for.
    let served = server.served();
    assert!(r.totals.responses <= served && served <= r.totals.flow.sent, "{served} {:?}", r.totals);
    // Per connection, in sending order, the statuses alternate 200, 203, 200, ...: response k
    // was matched to request k.
    let mut by_conn: BTreeMap<u32, Vec<(u64, u16)>> = BTreeMap::new();
    for rec in RecordReader::open(&path).unwrap() {
        let rec = rec.unwrap();
        assert!(rec.sent_ns <= rec.first_byte_ns.unwrap() && rec.first_byte_ns.unwrap() <= rec.done_ns);
        by_conn.entry(rec.connection).or_default().push((rec.sent_ns, rec.status));
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(by_conn.len(), 3);
    for (conn, mut recs) in by_conn {
        recs.sort_by_key(|&(sent, _)| sent); // stable: equal send times keep their queue order
        for (k, &(_, status)) in recs.iter().enumerate() {
            assert_eq!(status, if k % 2 == 0 { 200 } else { 203 }, "connection {conn}, request {k}");
        }
    }
}

#[test]
fn a_server_that_drops_the_connection_fails_every_request_in_flight() {
    // The 5th request of each connection gets no answer and its connection is closed, with up
    // to 3 more requests pipelined behind it.
    let server = TestServer::start(Behaviour { drop_every: Some(5), ..Behaviour::default() });
    let started = Instant::now();
    let r = run(pipelined(server.addr, 4));
    assert!(started.elapsed() < Duration::from_secs(3));
    let closed = r.totals.errors.get(ErrorClass::Closed);
    assert!(closed >= 4 && r.totals.responses >= 4, "{r:?} {:?}", r.error_examples);
    assert_eq!(r.totals.errors.total(), closed, "{:?}", r.error_examples);
    assert_exact(&r);
    // Each socket yields 4 responses, then loses the 4 requests in flight on it.
    let sockets = r.totals.connections_opened + r.warmup_totals.connections_opened;
    assert!(r.totals.responses <= 4 * sockets, "{r:?}");
}

#[test]
fn a_silent_server_counts_timeouts_and_the_run_ends_on_time() {
    let server = TestServer::start(Behaviour { hang: true, ..Behaviour::default() });
    let started = Instant::now();
    let mut p = pipelined(server.addr, 4);
    p.request_timeout = ms(100);
    let r = run(p);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(r.totals.responses, 0);
    // Each timeout fails the 4 requests of its connection.
    let timeouts = r.totals.errors.get(ErrorClass::Timeout);
    assert!(timeouts >= 4 && timeouts.is_multiple_of(4), "{r:?}");
    assert_exact(&r);
}

#[test]
fn archlabs_own_server_answers_a_deep_pipeline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = archlab_server::registry::build("single-thread", &archlab_server::ServerOptions::default()).unwrap();
    // Serves until the test process ends.
    std::thread::spawn(move || server.serve(listener));
    let mut p = pipelined(addr, 16);
    p.path = Some("/prime?n=1000".into());
    let r = run(p);
    assert_exact(&r);
    assert_eq!(r.totals.errors.total(), 0, "{:?} {:?}", r.error_examples, r.totals);
    assert!(r.totals.responses > 300, "{r:?}");
}

#[test]
fn pipelining_is_refused_where_it_is_not_written() {
    let addr = "127.0.0.1:9".parse().unwrap();
    let refused = |f: &dyn Fn(&mut LoadParams)| {
        let mut p = LoadParams::new(addr);
        p.pipeline = 4;
        f(&mut p);
        LoadConfig::new(p).unwrap_err()
    };
    let e = refused(&|p| {
        p.model = Model::Open;
        p.rate = Some(100.0);
    });
    assert_eq!(e.parameter, "pipeline");
    assert!(e.allowed.contains("open model"), "{e}");
    assert_eq!(refused(&|p| p.keep_alive = false).parameter, "pipeline");
    assert_eq!(refused(&|p| p.think = archlab_load::ThinkTime::Constant(ms(1))).parameter, "pipeline");
    assert_eq!(refused(&|p| p.pipeline = 0).parameter, "pipeline");
}
