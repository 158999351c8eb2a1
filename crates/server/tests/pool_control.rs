//! The adaptive pool (`pool_control = "hill-climb"`) against real servers on loopback whose best
//! pool size is known by construction, before and after the request mix changes.
//!
//! The downstream is a `reactor-pool` server (one poller, a pool of 4 workers) answering
//! `/delay?ms=10`: its workers sleep, so it serves at most 4 calls at once and completes at most
//! 4 / 10 ms = 400 calls/s, whatever the number of connections (the poller queues requests, not
//! connections, so an idle keep-alive connection holds no worker, as it would in `blocking`).
//! The measured server (`blocking`, 16 threads, sized by the controller, `/program` programs)
//! serves 16 closed-loop keep-alive clients:
//! - program `call`: one downstream call. With m threads, throughput is min(m, 4) x 100/s: it
//!   grows with m up to 4 and is flat beyond, so the best size is 4 (the knee);
//! - program `sleep_call`: a 10 ms sleep, then a call. A thread holds a request 20 ms, half of it
//!   at the downstream, so throughput is min(m x 50/s, 400/s): the knee moves to 8.
//!
//! The band accepted: from the knee to the knee plus the controller's largest step (7 for a pool
//! of 16: `pool_control` steps an eighth of the range, doubling up to half). Below the knee each
//! size loses at least 1/4 (call) or 1/8 (sleep_call) of the throughput, far more than the 5%
//! threshold, so the climber does not stay there; on the flat part beyond it no probe gains 5%
//! (beyond sampling noise: an interval of 300 ms completes ~120 requests of nearly fixed
//! duration), so it adopts no larger size, but it may have stepped past the knee by one step.
//! The load is bounded: each phase runs for a fixed time and each client stops at its deadline.

mod common;

use archlab_server::pool_control::{adopted_size, size_history, PoolControl};
use archlab_server::ServerOptions;
use archlab_workload::ProgramSet;
use common::{closed_loop, start};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

const PROGRAMS: &str = r#"
[programs.call]
steps = [{ step = "call", ms = 10 }]
[programs.sleep_call]
steps = [{ step = "sleep", ms = 10 }, { step = "call", ms = 10 }]
"#;

const CLIENTS: usize = 16;
const PHASE: Duration = Duration::from_secs(9);

#[test]
fn the_controller_finds_the_knee_and_follows_a_change_of_the_program_mix() {
    let downstream = start("reactor-pool", &ServerOptions { loops: Some(1), threads: Some(4), ..Default::default() });
    let options = ServerOptions {
        threads: Some(16),
        pool_control: Some(PoolControl::HillClimb),
        pool_interval_ms: Some(300),
        downstream: Some(downstream),
        programs: Some(ProgramSet::parse("pool-control.toml", PROGRAMS).unwrap()),
        ..Default::default()
    };
    let server = start("blocking", &options);
    let target = Arc::new(RwLock::new("/program?name=call".to_string()));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + 2 * PHASE + Duration::from_secs(5);
    let (clients, done) = closed_loop(server, CLIENTS, target.clone(), stop.clone(), deadline);
    std::thread::sleep(PHASE);
    let first = adopted_size();
    *target.write().unwrap() = "/program?name=sleep_call".to_string();
    std::thread::sleep(PHASE);
    let second = adopted_size();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let history = size_history();
    eprintln!("adopted {first} then {second}; sizes run [ms, size]: {history:?}");
    assert!(done.load(Ordering::Relaxed) > 1000, "the load ran: {} requests", done.load(Ordering::Relaxed));
    assert!(history.len() > 3 && history[0].1 == 1, "it started at pool_min (1) and moved: {history:?}");
    assert!((4..=11).contains(&first), "program call: knee 4, adopted {first}; sizes {history:?}");
    assert!((8..=15).contains(&second), "program sleep_call: knee 8, adopted {second}; sizes {history:?}");
}
