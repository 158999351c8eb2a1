//! Rates and users that change inside one run, against the in-test server (tests/common):
//! the arrivals of each rate step are Poisson counts of the planned size (Pearson's
//! goodness-of-fit test on the counts read back from the raw records, not a timing
//! assertion; the same for partly-open session arrivals), the planned send times of a ramp
//! follow the intended cumulative intensity (Kolmogorov-Smirnov on Λ(t)/Λ(T)), users start
//! and stop at the scheduled times, and meaningless combinations are refused. Seeds are fixed, so each statistic is one number
//! that either passes or fails, every run.

mod common;

use archlab_load::{
    run_load, ArrivalStream, Arrivals, Intensity, LoadConfig, LoadParams, LoadReport, Model, Profile, RecordReader,
};
use common::{Behaviour, TestServer};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn records_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("archlab-schedules-{}-{name}.rec", std::process::id()))
}

fn run(p: LoadParams) -> LoadReport {
    run_load(&LoadConfig::new(p).unwrap()).unwrap()
}

/// Planned times (ns since t0) and connections of every record of a run.
fn planned_and_connections(path: &PathBuf) -> Vec<(u64, u64, u32)> {
    let v = RecordReader::open(path).unwrap().map(|r| r.unwrap()).map(|r| (r.planned_ns, r.sent_ns, r.connection));
    let v = v.collect();
    let _ = std::fs::remove_file(path);
    v
}

/// Upper alpha = 0.001 critical values of chi-squared with k degrees of freedom (NIST/SEMATECH
/// e-Handbook of Statistical Methods, §1.3.6.7.4, table of upper critical values).
fn chi2_critical_0001(k: usize) -> f64 {
    [10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588][k - 1]
}

/// Kolmogorov-Smirnov statistic of a sample against the uniform CDF on [0, 1].
fn ks_uniform(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| (x - i as f64 / n).abs().max(((i + 1) as f64 / n - x).abs()))
        .fold(0.0, f64::max)
}

/// Asymptotic KS critical value at alpha = 0.001 (Smirnov's limiting distribution).
fn ks_critical_0001(n: usize) -> f64 {
    (-(0.001f64 / 2.0).ln() / 2.0).sqrt() / (n as f64).sqrt()
}

#[test]
fn the_arrivals_of_each_rate_step_are_poisson_counts_of_the_planned_rate() {
    let _g = serial();
    let server = TestServer::start(Behaviour::default());
    let steps: Profile = "400@1s,1600@1s,800@1s".parse().unwrap();
    let path = records_path("steps");
    let mut p = LoadParams::new(server.addr);
    p.model = Model::Open;
    p.rate_steps = Some(steps.clone());
    p.duration = Some(steps.duration());
    p.warmup = Duration::ZERO;
    p.connections = Some(8);
    p.max_connections = Some(32);
    p.threads = Some(2);
    p.seed = Some(17);
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    // Spare connections: every arrival starts, except those due while the generator was
    // descheduled at the very end of the window (it ends the window when it wakes): 800/s x a
    // 25 ms preemption on a busy machine = 20. Each is either sent or never started, exactly.
    let f = r.totals.flow;
    assert!(f.never_started <= 20, "{f:?}");
    assert_eq!(f.sent + f.never_started, f.arrivals, "{f:?}");
    // Counts per step of the requests the generator actually sent, by planned time.
    let mut counts = [0u64; 3];
    for (planned, _, _) in planned_and_connections(&path) {
        counts[(planned / 1_000_000_000) as usize] += 1;
    }
    // Requests still in flight at the end have no record: at most that many are missing.
    let recorded: u64 = counts.iter().sum();
    assert!(r.totals.flow.sent - recorded <= r.in_flight_at_end as u64, "{counts:?} {:?}", r.totals.flow);
    // Pearson's test of Poisson counts: sum (n_i - mu_i)^2 / mu_i is chi-squared with 3 degrees
    // of freedom when every n_i ~ Poisson(mu_i) (variance = mean), mu_i = rate_i x 1 s.
    let planned = [400.0, 1600.0, 800.0];
    let chi: f64 = counts.iter().zip(planned).map(|(&n, mu)| (n as f64 - mu).powi(2) / mu).sum();
    assert!(chi < chi2_critical_0001(3), "chi2 {chi:.2}: counts {counts:?} vs {planned:?}");
    // Not vacuous: the same counts against the rates of the steps in another order fail.
    let swapped = [1600.0, 400.0, 800.0];
    let chi_wrong: f64 = counts.iter().zip(swapped).map(|(&n, mu)| (n as f64 - mu).powi(2) / mu).sum();
    assert!(chi_wrong > chi2_critical_0001(3));
    // The timeline reports the planned rate of each second and the summary the schedule.
    let planned_rps: Vec<f64> = r.timeline.iter().map(|t| t.planned_rps.unwrap()).collect();
    assert_eq!(planned_rps, [400.0, 1600.0, 800.0]);
    let s = serde_json::to_value(r.summary(None)).unwrap();
    assert_eq!(s["pacing"]["rate_schedule"][1]["from"], 1600.0);
    assert_eq!(s["pacing"]["rate_schedule"][2]["start_s"], 2.0);
    assert!((s["pacing"]["rate_per_s"].as_f64().unwrap() - 2800.0 / 3.0).abs() < 1e-9);
}

#[test]
fn many_poisson_steps_pass_a_dispersion_test_offline() {
    // 10 steps of 0.5 s at rates 100..1000 from the schedule alone: counts per step are
    // independent Poisson(mu_i), so Pearson's statistic is chi-squared with 10 degrees of
    // freedom; constant spacing gives counts too regular (statistic near 0).
    let steps: Profile = (1..=10).map(|i| format!("{}@500ms", i * 100)).collect::<Vec<_>>().join(",").parse().unwrap();
    let intensity = Arc::new(Intensity::new(Duration::ZERO, steps));
    let counts = |a: Arrivals, seed: u64| {
        let mut s = ArrivalStream::new(a, seed, 0, 1).with_intensity(intensity.clone());
        let mut c = [0u64; 10];
        loop {
            let t = s.next_offset_ns();
            if t >= 5_000_000_000 {
                return c;
            }
            c[(t / 500_000_000) as usize] += 1;
        }
    };
    let mus: Vec<f64> = (1..=10).map(|i| i as f64 * 50.0).collect();
    let pearson = |c: [u64; 10]| -> f64 { c.iter().zip(&mus).map(|(&n, mu)| (n as f64 - mu).powi(2) / mu).sum() };
    let poisson = counts(Arrivals::Poisson { rate_per_s: 1.0 }, 3);
    assert!(pearson(poisson) < chi2_critical_0001(10), "{poisson:?}");
    // Lower tail: P(chi2_10 < 0.5) is about 2e-6; constant spacing lands there.
    let constant = counts(Arrivals::Constant { rate_per_s: 1.0 }, 3);
    assert!(pearson(constant) < 0.5, "{constant:?}");
    assert_eq!(constant.iter().sum::<u64>(), 2750);
}

#[test]
fn planned_send_times_of_a_ramp_follow_its_cumulative_intensity() {
    let _g = serial();
    let server = TestServer::start(Behaviour::default());
    let ramp: Profile = "200-3000@2s".parse().unwrap();
    let path = records_path("ramp");
    let mut p = LoadParams::new(server.addr);
    p.model = Model::Open;
    p.rate_steps = Some(ramp.clone());
    p.duration = Some(ramp.duration());
    p.warmup = Duration::from_millis(200);
    p.connections = Some(8);
    p.max_connections = Some(32);
    p.seed = Some(5);
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    // Given their number, the points of a Poisson process of intensity λ on [a, b] are iid
    // with CDF (Λ(t) - Λ(a)) / (Λ(b) - Λ(a)): that transform of the planned times of the
    // window must be uniform.
    let intensity = Intensity::new(Duration::from_millis(200), ramp);
    let (a, b) = (0.2, 2.2);
    let (la, lb) = (intensity.cumulative(a), intensity.cumulative(b));
    let xs: Vec<f64> = planned_and_connections(&path)
        .into_iter()
        .map(|(planned, _, _)| planned as f64 / 1e9)
        .filter(|&t| t >= a)
        .map(|t| (intensity.cumulative(t) - la) / (lb - la))
        .collect();
    let n = xs.len();
    // Λ(b) - Λ(a) = (200 + 3000) / 2 x 2 = 3200 expected arrivals.
    assert!((n as f64 - 3200.0).abs() < 5.0 * 3200f64.sqrt(), "{n}");
    let d = ks_uniform(xs.clone());
    assert!(d < ks_critical_0001(n), "D {d} (n {n})");
    // Not vacuous: the same times against a flat rate (uniform in time) fail.
    let flat: Vec<f64> = xs
        .iter()
        .map(|&x| {
            // Back to time, then the CDF of a constant rate on [a, b].
            let t = intensity.inverse(la + x * (lb - la)).unwrap();
            (t - a) / (b - a)
        })
        .collect();
    assert!(ks_uniform(flat) > ks_critical_0001(n));
}

#[test]
fn users_start_and_stop_at_the_scheduled_times() {
    let _g = serial();
    // 5 ms per request: a user makes about 200 requests per second.
    let server = TestServer::start(Behaviour { delay: Duration::from_millis(5), ..Behaviour::default() });
    let users: Profile = "1@500ms,4@500ms,2@500ms".parse().unwrap();
    let path = records_path("users");
    let mut p = LoadParams::new(server.addr);
    p.users_steps = Some(users.clone());
    p.duration = Some(users.duration());
    p.connections = Some(4);
    p.threads = Some(2);
    p.warmup = Duration::ZERO;
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    let recs = planned_and_connections(&path);
    let ms = 1_000_000;
    // Connections that sent a request in each step (after a 20 ms grace for the change): users
    // are global 0, 1, ... spread over the threads, connection = slot of its thread.
    let used = |lo: u64, hi: u64| {
        let mut c: Vec<u32> = recs.iter().filter(|r| r.1 >= lo && r.1 < hi).map(|r| r.2).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    assert_eq!(used(0, 500 * ms).len(), 1, "{:?}", used(0, 500 * ms));
    assert_eq!(used(520 * ms, 1000 * ms).len(), 4);
    assert_eq!(used(1020 * ms, 1500 * ms).len(), 2);
    // Users started at 500 ms send their first request planned exactly then.
    let started = recs.iter().filter(|r| r.0 == 500 * ms).count();
    assert_eq!(started, 3, "three users start at 500 ms");
    // The timeline and the summary say what was planned.
    let planned: Vec<f64> = r.timeline.iter().map(|t| t.planned_users.unwrap()).collect();
    assert_eq!(planned.len(), 2);
    assert!((planned[0] - 2.5).abs() < 1e-9 && (planned[1] - 2.0).abs() < 1e-9, "{planned:?}");
    let s = serde_json::to_value(r.summary(None)).unwrap();
    assert_eq!(s["pacing"]["users_schedule"][1]["to"], 4.0);
}

#[test]
fn meaningless_schedules_are_refused() {
    let addr = "127.0.0.1:9".parse().unwrap();
    let steps: Profile = "100@1s,200@1s".parse().unwrap();
    // A rate schedule with the closed model.
    let mut p = LoadParams::new(addr);
    p.rate_steps = Some(steps.clone());
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "rate_steps");
    // A schedule and a window of another length.
    let mut p = LoadParams::new(addr);
    p.model = Model::Open;
    p.rate_steps = Some(steps.clone());
    p.duration = Some(Duration::from_secs(5));
    let e = LoadConfig::new(p).unwrap_err();
    assert_eq!(e.parameter, "duration");
    assert!(e.allowed.contains("2s"), "{e}");
    // A fixed rate and a schedule.
    let mut p = LoadParams::new(addr);
    p.model = Model::Open;
    p.rate = Some(10.0);
    p.rate_steps = Some(steps.clone());
    p.duration = Some(steps.duration());
    assert!(LoadConfig::new(p).unwrap_err().to_string().contains("not both"));
    // Users schedules: whole numbers, connections = peak, closed model only.
    let mut p = LoadParams::new(addr);
    p.users_steps = Some("1.5@1s".parse().unwrap());
    p.duration = Some(Duration::from_secs(1));
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "users_steps");
    let mut p = LoadParams::new(addr);
    p.users_steps = Some("4@1s".parse().unwrap());
    p.duration = Some(Duration::from_secs(1));
    p.connections = Some(16);
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "connections");
    let mut p = LoadParams::new(addr);
    p.model = Model::Open;
    p.rate = Some(10.0);
    p.users_steps = Some("4@1s".parse().unwrap());
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "users_steps");
    // All-zero rates plan nothing.
    let mut p = LoadParams::new(addr);
    p.model = Model::Open;
    p.rate_steps = Some("0@1s".parse().unwrap());
    p.duration = Some(Duration::from_secs(1));
    assert_eq!(LoadConfig::new(p).unwrap_err().parameter, "rate_steps");
}

#[test]
fn session_arrivals_of_the_partly_open_model_follow_their_steps() {
    let _g = serial();
    let server = TestServer::start(Behaviour::default());
    let steps: Profile = "200@1s,800@1s".parse().unwrap();
    let path = records_path("sessions");
    let mut p = LoadParams::new(server.addr);
    p.model = Model::PartlyOpen;
    p.session_rate_steps = Some(steps.clone());
    p.requests_per_session = Some(archlab_load::SessionLength::Fixed(1));
    p.session_connection = Some(archlab_load::SessionConnection::Pooled);
    p.duration = Some(steps.duration());
    p.warmup = Duration::ZERO;
    p.connections = Some(8);
    p.max_connections = Some(32);
    p.seed = Some(23);
    p.records = Some(path.clone());
    let r = run(p);
    assert_eq!(r.totals.errors.total(), 0, "{:?}", r.error_examples);
    // One request per session, planned at the session's arrival.
    let mut counts = [0u64; 2];
    for (planned, _, _) in planned_and_connections(&path) {
        counts[(planned / 1_000_000_000) as usize] += 1;
    }
    let planned = [200.0, 800.0];
    let chi: f64 = counts.iter().zip(planned).map(|(&n, mu)| (n as f64 - mu).powi(2) / mu).sum();
    assert!(chi < chi2_critical_0001(2), "chi2 {chi:.2}: counts {counts:?} vs {planned:?}");
    let s = serde_json::to_value(r.summary(None)).unwrap();
    assert_eq!(s["pacing"]["rate_schedule"][1]["from"], 800.0);
    assert_eq!(s["timeline"][1]["planned_rps"], 800.0);
}
