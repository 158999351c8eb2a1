//! Behaviour of every hand-off mechanism: delivery exactly once under several producers,
//! dispatch rules, bounds, counting, and that idle blocking handlers sleep (thread CPU time).
//!
//! Nothing here waits for time to pass: a test waits for a condition (an item handled, a
//! thread asleep as the kernel reports it in `/proc/self/task/TID/stat`, a count of voluntary
//! context switches, another thread's CPU time), polled with a deadline far beyond any idle
//! machine's need, so that a loaded machine is slower but not wrong.

use archlab_handoff::{
    start, ActorConfig, Dispatch, HandOffSpec, Queue, QueueConfig, RingConfig, Sender, WaitStrategy,
};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for a condition before failing: conditions here take microseconds to
/// milliseconds on an idle machine, so only a hang (or a mechanism that never gets there) fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// Poll `cond` until it holds; fail, naming `what`, after [`PATIENCE`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "gave up after {PATIENCE:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The calling thread's kernel id.
fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Scheduler state of thread `tid` of this process as the kernel reports it (`R` running or
/// runnable, `S` asleep in a blocking call, ...); `None` once the thread has exited.
fn thread_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Times thread `tid` of this process gave up its CPU to wait (slept or blocked); `None` once
/// the thread has exited.
fn voluntary_switches(tid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"));
    Some(line.expect("voluntary_ctxt_switches in the status file").trim().parse().unwrap())
}

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
fn a_bounded_queue_blocks_the_producer_until_a_pop() {
    let q = Arc::new(Queue::new(Some(2)));
    q.push(1);
    q.push(2);
    let (q2, (tid_tx, tid_rx)) = (q.clone(), mpsc::channel());
    let producer = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        q2.push(3)
    });
    let tid = tid_rx.recv().unwrap();
    // The third push must wait: the producer goes to sleep on the queue's condition variable
    // (nothing else here can put it to sleep: this thread does not touch the queue's lock
    // meanwhile). A queue that does not block lets it finish instead.
    wait_until("the producer to sleep in push or finish", || producer.is_finished() || thread_state(tid) == Some('S'));
    assert!(!producer.is_finished(), "the third push into a full queue of 2 returned without a pop");
    assert_eq!(q.len(), 2, "the third push must wait");
    assert_eq!(q.pop(), 1);
    producer.join().unwrap();
    let mut out = Vec::new();
    q.pop_batch(10, &mut out);
    assert_eq!(out, vec![2, 3]);
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
    let (s2, sent2, (tid_tx, tid_rx)) = (sender.clone(), sent.clone(), mpsc::channel());
    let producer = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        for i in 0..10 {
            s2.send(i);
            sent2.fetch_add(1, Ordering::AcqRel);
        }
    });
    let tid = tid_rx.recv().unwrap();
    wait_until("four sends into an empty ring of 4", || sent.load(Ordering::Acquire) >= 4);
    // Four items fill the ring; the one in the handler still holds its slot (LMAX frees a slot
    // only when its handler moves past it), so the fifth send waits: the producer backs off
    // (spin, yield, then short sleeps) and looks again after each sleep. Twenty sleeps after the
    // fourth send with the count still 4 are twenty looks that found no slot; a ring that let
    // the fifth item in would have counted it long before.
    let base = voluntary_switches(tid).unwrap_or(0);
    wait_until("the producer to sleep 20 times waiting for a slot, or to send more", || {
        // An exited producer sent all ten: the assertion below says so.
        sent.load(Ordering::Acquire) > 4 || voluntary_switches(tid).is_none_or(|n| n >= base + 20)
    });
    assert_eq!(sent.load(Ordering::Acquire), 4, "a send into a full ring did not wait for the handler");
    assert_eq!(handled.load(Ordering::Acquire), 0);
    gate.store(true, Ordering::Release);
    producer.join().unwrap();
    wait_until("all ten items handled", || handled.load(Ordering::Acquire) == 10);
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
    wait_until("200 messages handled", || log.lock().unwrap().len() >= 200);
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
}

#[test]
fn each_send_counts_one_hand_off_and_the_backlog_drains() {
    let spec = HandOffSpec::Queue(QueueConfig { capacity: None, handlers: 1, batch: 1 });
    let gate = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let g = gate.clone();
    let sender = start(&spec, "c", move |_| {
        let (g, entered) = (g.clone(), entered_tx.lock().unwrap().clone());
        move |_: u8| {
            entered.send(()).unwrap();
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
    entered_rx.recv_timeout(PATIENCE).expect("the handler takes the first item");
    assert_eq!(sender.backlog(), 4, "one item is in the handler, four wait");
    gate.store(true, Ordering::Release);
    wait_until("the backlog to drain", || sender.backlog() == 0);
}

/// CPU time consumed so far by the thread whose CPU-time clock is `clock`.
fn thread_cpu(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; the clock belongs to a live thread.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A ring's handler thread: its kernel id and its CPU-time clock.
struct HandlerThread {
    tid: i32,
    clock: libc::clockid_t,
}

/// Total CPU time of `threads` so far.
fn cpu_of(threads: &[HandlerThread]) -> Duration {
    threads.iter().map(|t| thread_cpu(t.clock)).sum()
}

/// The item that parks its handler for good (so that a busy-spin handler stops spinning).
const PARK: u8 = 1;

/// Start a ring of `handlers` with `wait` and modulo dispatch, and give each handler one item,
/// on which it reports its thread; the ring is then idle, nothing more is published.
fn idle_ring(wait: WaitStrategy, handlers: usize) -> (Sender<u8>, Vec<HandlerThread>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let spec = HandOffSpec::Ring(RingConfig { slots: 64, handlers, wait, dispatch: Dispatch::Modulo });
    let sender = start(&spec, "idle", |_| {
        let tx = tx.lock().unwrap().clone();
        move |item: u8| {
            if item == PARK {
                loop {
                    std::thread::park();
                }
            }
            let mut clock: libc::clockid_t = 0;
            // SAFETY: pthread_self is the calling thread; clock is a valid out-pointer.
            assert_eq!(unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) }, 0);
            tx.send(HandlerThread { tid: gettid(), clock }).unwrap();
        }
    })
    .unwrap();
    for _ in 0..handlers {
        sender.send(0); // modulo: one item per handler
    }
    let threads = (0..handlers).map(|_| rx.recv_timeout(PATIENCE).expect("each handler handles its item")).collect();
    (sender, threads)
}

#[test]
fn a_ring_handler_with_the_blocking_wait_strategy_sleeps_when_idle() {
    // CPU a busy-spin handler burns while the blocking handlers are watched.
    const SPIN: Duration = Duration::from_millis(100);
    let (_blocking, sleepers) = idle_ring(WaitStrategy::Blocking, 4);
    // Blocking handlers go to sleep on the ring's condition variable (a yielding or spinning
    // one stays runnable, `R`, and never gets here)...
    wait_until("every blocking handler to sleep", || sleepers.iter().all(|t| thread_state(t.tid) == Some('S')));
    let before = cpu_of(&sleepers);
    // ... and use no CPU while nothing is published, however long that is. The interval is set
    // by CPU time, not by the clock: it ends when a busy-spin handler, idle in the same way,
    // has burnt SPIN, which also shows that the measurement sees a handler that spins. On a
    // busy machine it lasts longer, which only gives a spinning "blocking" handler more time to
    // show. Four sleepers woken by nothing use exactly 0; SPIN / 50 leaves room for a
    // spurious wake-up or two (microseconds each), and is far below what any thread that
    // polls gets in the same interval.
    let (spin, spinner) = idle_ring(WaitStrategy::BusySpin, 1);
    let spin_start = cpu_of(&spinner);
    wait_until("the busy-spin handler to burn 100 ms of CPU", || cpu_of(&spinner) - spin_start >= SPIN);
    let used = cpu_of(&sleepers) - before;
    spin.send(PARK); // the spinner parks for good: the other tests get their CPUs back
    assert!(used < SPIN / 50, "four idle blocking handlers used {used:?} of CPU while a spinner used {SPIN:?}");
}
