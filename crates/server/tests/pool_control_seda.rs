//! The adaptive pool on a staged architecture: `seda-queue` with `pool_control = "hill-climb"`
//! sizes its handling stage (16 handlers) against the downstream of fixed capacity of
//! `tests/pool_control.rs` (4 calls at once, `reactor-pool` sleeping in its 4 workers), serving
//! the program `call` (one downstream call): throughput min(m, 4) x 100/s, best size 4, band
//! [4, 11] (the knee plus the largest step, 7 for 16 handlers; derivation in that file). Its own
//! binary: the controller's adopted size is one per process.

mod common;

use archlab_server::pool_control::{adopted_size, size_history, PoolControl};
use archlab_server::ServerOptions;
use archlab_workload::ProgramSet;
use common::{closed_loop, start};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

#[test]
fn the_handling_stage_is_sized_to_the_knee() {
    let downstream = start("reactor-pool", &ServerOptions { loops: Some(1), threads: Some(4), ..Default::default() });
    let options = ServerOptions {
        handlers: Some(16),
        pool_control: Some(PoolControl::HillClimb),
        pool_interval_ms: Some(300),
        downstream: Some(downstream),
        programs: Some(
            ProgramSet::parse("p.toml", "[programs.call]\nsteps = [{ step = \"call\", ms = 10 }]\n").unwrap(),
        ),
        ..Default::default()
    };
    let server = start("seda-queue", &options);
    let stop = Arc::new(AtomicBool::new(false));
    let target = Arc::new(RwLock::new("/program?name=call".to_string()));
    let (clients, done) = closed_loop(server, 16, target, stop.clone(), Instant::now() + Duration::from_secs(15));
    std::thread::sleep(Duration::from_secs(9));
    let adopted = adopted_size();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let history = size_history();
    assert!(done.load(Ordering::Relaxed) > 500, "the load ran: {} requests", done.load(Ordering::Relaxed));
    assert!(history.len() > 3, "it moved: {history:?}");
    assert!((4..=11).contains(&adopted), "knee 4, adopted {adopted}; sizes {history:?}");
}
