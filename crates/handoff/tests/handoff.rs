//! Behaviour of every hand-off mechanism: delivery exactly once under several producers,
//! dispatch rules, bounds, counting, and that idle blocking handlers sleep (thread CPU time).

use archlab_handoff::{start, ActorConfig, Dispatch, HandOffSpec, QueueConfig, RingConfig, WaitStrategy};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn specs() -> Vec<HandOffSpec> {
    let mut v = vec![
        HandOffSpec::Queue(QueueConfig { capacity: None, handlers: 4, batch: 1 }),
        HandOffSpec::Queue(QueueConfig { capacity: Some(8), handlers: 3, batch: 5 }),
        HandOffSpec::Actor(ActorConfig { actors: 4, mailbox: 4, dispatchers: 2, batch: 5 }),
        HandOffSpec::Actor(ActorConfig { actors: 1, mailbox: 1024, dispatchers: 3, batch: 1 }),
    ];
    for dispatch in Dispatch::ALL {
        for wait in [WaitStrategy::Blocking, WaitStrategy::Yielding] {
            v.push(HandOffSpec::Ring(RingConfig { slots: 16, handlers: 3, wait, dispatch }));
        }
    }
    v
}

#[test]
fn every_item_is_handled_exactly_once() {
    const PRODUCERS: u64 = 3;
    const PER_PRODUCER: u64 = 5_000;
    for spec in specs() {
        let (tx, rx) = mpsc::channel::<u64>();
        let tx = Mutex::new(tx);
        let sender = start(&spec, "t", |_| {
            let tx = tx.lock().unwrap().clone();
            move |v: u64| tx.send(v).unwrap()
        })
        .unwrap();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let s = sender.clone();
                std::thread::spawn(move || {
                    for i in 0..PER_PRODUCER {
                        s.send(p * PER_PRODUCER + i);
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut seen = HashSet::new();
        for _ in 0..PRODUCERS * PER_PRODUCER {
            let v = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{spec:?}: items lost"));
            assert!(seen.insert(v), "{spec:?}: {v} handled twice");
        }
        assert!(rx.recv_timeout(Duration::from_millis(20)).is_err(), "{spec:?}: extra items");
        assert_eq!(sender.backlog(), 0, "{spec:?}");
    }
}

#[test]
fn modulo_dispatch_gives_sequence_i_to_handler_i_mod_k() {
    let (tx, rx) = mpsc::channel::<(usize, u64)>();
    let tx = Mutex::new(tx);
    let spec = HandOffSpec::Ring(RingConfig {
        slots: 8,
        handlers: 3,
        wait: WaitStrategy::Blocking,
        dispatch: Dispatch::Modulo,
    });
    let sender = start(&spec, "m", |id| {
        let tx = tx.lock().unwrap().clone();
        move |v: u64| tx.send((id, v)).unwrap()
    })
    .unwrap();
    for v in 0..100u64 {
        sender.send(v);
    }
    for _ in 0..100 {
        let (id, v) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(id as u64, v % 3);
    }
}

#[test]
fn a_full_ring_makes_the_producer_wait_for_the_slowest_handler() {
    let gate = Arc::new(AtomicBool::new(false));
    let handled = Arc::new(AtomicU64::new(0));
    let spec = HandOffSpec::Ring(RingConfig {
        slots: 4,
        handlers: 1,
        wait: WaitStrategy::Blocking,
        dispatch: Dispatch::WorkPool,
    });
    let (g, h) = (gate.clone(), handled.clone());
    let sender = start(&spec, "full", move |_| {
        let (g, h) = (g.clone(), h.clone());
        move |_: u32| {
            while !g.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            h.fetch_add(1, Ordering::AcqRel);
        }
    })
    .unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let (s2, sent2) = (sender.clone(), sent.clone());
    let producer = std::thread::spawn(move || {
        for i in 0..10 {
            s2.send(i);
            sent2.fetch_add(1, Ordering::AcqRel);
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    // Four items fill the ring; the one in the handler still holds its slot (LMAX frees a slot
    // only when its handler moves past it), so the fifth send waits.
    assert_eq!(sent.load(Ordering::Acquire), 4);
    gate.store(true, Ordering::Release);
    producer.join().unwrap();
    while handled.load(Ordering::Acquire) < 10 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn an_actor_runs_on_one_thread_at_a_time_and_in_order() {
    // One actor, several dispatchers: its messages must still run one at a time, in order.
    let spec = HandOffSpec::Actor(ActorConfig { actors: 1, mailbox: 16, dispatchers: 4, batch: 3 });
    let busy = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (b, l) = (busy.clone(), log.clone());
    let sender = start(&spec, "a", move |_| {
        let (b, l) = (b.clone(), l.clone());
        move |v: u32| {
            assert!(!b.swap(true, Ordering::AcqRel), "actor entered twice");
            std::thread::sleep(Duration::from_micros(50));
            l.lock().unwrap().push(v);
            b.store(false, Ordering::Release);
        }
    })
    .unwrap();
    for v in 0..200 {
        sender.send(v);
    }
    while log.lock().unwrap().len() < 200 {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
}

#[test]
fn each_send_counts_one_hand_off_and_the_backlog_drains() {
    let spec = HandOffSpec::Queue(QueueConfig { capacity: None, handlers: 1, batch: 1 });
    let gate = Arc::new(AtomicBool::new(false));
    let g = gate.clone();
    let sender = start(&spec, "c", move |_| {
        let g = g.clone();
        move |_: u8| {
            while !g.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap();
    let before = archlab_metrics::counters::totals().handoffs;
    for _ in 0..5 {
        sender.send(1);
    }
    // Counted on the sending thread, so no other test's sends can be in between on this one.
    assert!(archlab_metrics::counters::totals().handoffs - before >= 5);
    // The handler takes its first item on its own time: wait for that (bounded), not for a
    // while. A hand-off that loses or runs items apart from the handler never gets to 4.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sender.backlog() != 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(sender.backlog(), 4, "one item is in the handler, four wait");
    gate.store(true, Ordering::Release);
    while sender.backlog() > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPU time consumed so far by the thread whose CPU-time clock is `clock`.
fn thread_cpu(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; the clock belongs to a live thread.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The scheduler state of thread `tid` of this process (`R` running, `S` sleeping, ...).
fn thread_state(tid: libc::pid_t) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).expect("the thread's stat");
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat[stat.rfind(')').expect("(comm)") + 2..].chars().next().expect("a state")
}

/// Start a ring of `handlers` with `wait`, let each handler handle one item (which records its
/// own CPU clock and thread id), then measure the handlers' CPU time with nothing published,
/// over `idle` or until it reaches `enough` (whichever comes first). Handlers that block are
/// measured once every one sleeps in its wait (its state in `/proc`), so that the way into the
/// wait is not measured.
fn idle_cpu(wait: WaitStrategy, handlers: usize, idle: Duration, enough: Duration) -> Duration {
    let clocks = Arc::new(Mutex::new(Vec::new()));
    let c = clocks.clone();
    let spec = HandOffSpec::Ring(RingConfig { slots: 64, handlers, wait, dispatch: Dispatch::Modulo });
    let sender = start(&spec, "idle", move |_| {
        let c = c.clone();
        move |_: u8| {
            let mut clock: libc::clockid_t = 0;
            // SAFETY: pthread_self is the calling thread; clock is a valid out-pointer.
            assert_eq!(unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) }, 0);
            // SAFETY: plain system call without arguments.
            let tid = unsafe { libc::gettid() };
            c.lock().unwrap().push((clock, tid));
        }
    })
    .unwrap();
    for _ in 0..handlers {
        sender.send(0); // modulo: one item per handler
    }
    while clocks.lock().unwrap().len() < handlers {
        std::thread::sleep(Duration::from_millis(1));
    }
    let handlers = clocks.lock().unwrap().clone();
    if wait == WaitStrategy::Blocking {
        let deadline = Instant::now() + Duration::from_secs(20);
        while handlers.iter().any(|&(_, tid)| thread_state(tid) != 'S') {
            assert!(Instant::now() < deadline, "the blocking handlers never went to sleep");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let clocks: Vec<libc::clockid_t> = handlers.iter().map(|&(clock, _)| clock).collect();
    let used = || clocks.iter().map(|&c| thread_cpu(c)).sum::<Duration>();
    let (before, end) = (used(), Instant::now() + idle);
    while used() - before < enough && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    used() - before
}

#[test]
fn a_ring_handler_with_the_blocking_wait_strategy_sleeps_when_idle() {
    let idle = Duration::from_millis(300);
    let used = idle_cpu(WaitStrategy::Blocking, 4, idle, Duration::MAX);
    // Four sleeping handlers: no CPU at all in principle; allow scheduler noise (a load on the
    // machine takes CPU from them, never gives them more).
    assert!(used < Duration::from_millis(5), "blocking handlers used {used:?} of CPU while idle for {idle:?}");
    // The measurement can see spinning: one busy-spin handler burns 20 ms of CPU, however long
    // a shared machine takes to give it that (bounded at 20 s); a sleeping one never would.
    let (window, enough) = (Duration::from_secs(20), Duration::from_millis(20));
    let spun = idle_cpu(WaitStrategy::BusySpin, 1, window, enough);
    assert!(spun >= enough, "a busy-spin handler used only {spun:?} in {window:?}");
}
