//! Seed 000 Table 8.1's closed system (N clients, no think time, k exponential servers of mean
//! 0.025, horizon 1000) run through the JSON interface the Python bindings use, `REPEAT` times:
//! the workload to profile the kernel with (`perf record`, `valgrind --tool=callgrind`).
//!
//! usage: cargo run --release -p archlab-sim --example table_8_1 -- [N] [k] [REPEAT] [HORIZON]

use std::sync::atomic::AtomicBool;
use std::time::Instant;

fn main() {
    let arg = |i: usize, default: &str| std::env::args().nth(i).unwrap_or_else(|| default.to_string());
    let (clients, servers, repeat, horizon) = (arg(1, "500"), arg(2, "1"), arg(3, "20"), arg(4, "1000"));
    let repeat: u32 = repeat.parse().expect("REPEAT: an integer");
    let model = format!(
        r#"{{"stations": [{{"name": "server", "servers": {servers}}}],
            "sources": [{{"kind": "closed", "name": "clients", "clients": {clients},
                         "think": {{"dist": "deterministic", "value": 0.0}},
                         "route": [{{"step": "serve", "station": "server",
                                     "service": {{"dist": "exponential", "mean": 0.025}}}}]}}]}}"#
    );
    let run = format!(r#"{{"horizon": {horizon}, "replications": 1, "threads": 1, "seed": 42}}"#);
    let cancel = AtomicBool::new(false);
    let mut best = f64::INFINITY;
    let mut bytes = 0;
    for _ in 0..repeat {
        // Timing the simulator from outside, as a profiler's driver: the simulation itself never
        // reads the clock (crates/sim/clippy.toml).
        #[allow(clippy::disallowed_methods)]
        let start = Instant::now();
        let out = archlab_sim::simulate_json(&model, &run, &cancel).expect("a valid model").expect("not cancelled");
        best = best.min(start.elapsed().as_secs_f64());
        bytes = out.len();
    }
    if let Ok(path) = std::env::var("TABLE_8_1_OUT") {
        let out = archlab_sim::simulate_json(&model, &run, &cancel).expect("a valid model").expect("not cancelled");
        std::fs::write(path, out).expect("writable output");
    }
    println!("N={clients} k={servers} horizon={horizon}: best of {repeat} {:.3} ms, {bytes} bytes of JSON", best * 1e3);
}
