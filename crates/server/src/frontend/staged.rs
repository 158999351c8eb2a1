//! Dispatching front-ends: one poller thread plus stages of handler threads, each stage fed
//! through a hand-off (`archlab-handoff`: queue, ring or actor). One [`Route`] says which step
//! of a request (read, handle, write) runs where; every architecture of this family is a route:
//!
//! | architecture | route (P = poller) | hand-offs per request |
//! |---|---|---|
//! | `async-fix` (sTomcat-Async-Fix) | P -> pool(read, handle, write) -> P | 2 |
//! | `async-4` (sTomcat-Async) | P -> pool(read, handle) -> P (wait writable) -> pool(write) -> P | 4 |
//! | `reactor-ring`, `reactor-actor` (NIO Disruptor/Actor) | P reads -> X(handle, write) -> P | 2 |
//! | `nio2` (emulated proactor) | P -> completion pool(read, handle) -> completion pool(write) -> P | 3 |
//! | `nio2-ring`, `nio2-actor` | P -> completion pool(read) -> X(handle, write) -> P | 3 |
//! | `seda-queue`, `seda-ring`, `seda-actor` | P -> X(read) -> X(handle) -> X(write) -> P | 4 |
//!
//! Mechanism: the poller registers connections one-shot (a Java selector key whose interest is
//! cleared while a worker owns the connection), so a ready connection is taken out of the
//! poller's slab and travels with the request: it is sent to the stage of the next hop, and it
//! returns to the poller through the poller's inbox (an eventfd wake-up: the "worker -> reactor"
//! step of seed 001's Fig. 5) to be re-armed. Each send and each return counts one hand-off.
//! Requests queue in the stages' hand-offs (FIFO, ring slots, mailboxes) and in the poller's
//! inbox; stage threads block in their hand-off's wait, the poller in `epoll_wait`. Workers
//! write like Tomcat's (`while (buf.hasRemaining()) write(buf)`: spin), the NIO2 completion
//! pool like a proactor (a blocked write goes back to the poller and completes later). When
//! requests had to wait behind output over `max_output_bytes` (`Flow::Drain`), the route does
//! not end once the output has gone out: it goes on from its first handling hop, without
//! reading, until they are answered.
//! Expected bottleneck: the hand-offs themselves (a wake-up and often a context switch each)
//! when requests are cheap; the stage with the fewest threads when they are not.
//!
//! With `pollers` > 1 the route has N pollers instead of one (seed 004's HTTPCore-NIO reactor
//! and its Netty transport in front of a ring): an acceptor thread hands connections
//! round-robin to the pollers' inboxes (one hand-off per connection, as `netty`'s boss does),
//! and a connection always returns to the poller it came from.

use crate::acceptor::{accept_blocking, Admission};
use crate::conn::WritePolicy;
use crate::frontend::reactor::{Away, Back, Conn, Ctx, EventLoop, Inbox, Mode, Next};
use crate::http_service::{serve_connection, Flow, KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::service::ClientConn;
use crate::Server;
use archlab_handoff::{HandOffSpec, Sender};
use archlab_netio::{Interest, Trigger};
use archlab_wire::http::Limits;
use std::io::{self, ErrorKind};
use std::net::TcpListener;
use std::sync::{Arc, OnceLock};

/// Which steps of a request a hop performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ops {
    pub read: bool,
    pub handle: bool,
    pub write: bool,
}

impl Ops {
    pub const READ: Ops = Ops { read: true, handle: false, write: false };
    pub const HANDLE: Ops = Ops { read: false, handle: true, write: false };
    pub const WRITE: Ops = Ops { read: false, handle: false, write: true };
    pub const READ_HANDLE: Ops = Ops { read: true, handle: true, write: false };
    pub const HANDLE_WRITE: Ops = Ops { read: false, handle: true, write: true };
    pub const ALL: Ops = Ops { read: true, handle: true, write: true };
}

/// One hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// Run on the poller thread (only as the first hop).
    Poller(Ops),
    /// Go back to the poller and wait until the connection is writable.
    AwaitWritable,
    /// Run on a thread of stage `stage`.
    Stage { ops: Ops, stage: usize },
}

/// What a connection carries along its route: the hop to run when it is next ready.
#[derive(Default)]
pub struct RouteState {
    resume_hop: usize,
    /// The poller the connection belongs to.
    home: usize,
}

/// A connection travelling between the poller and the stages.
type Job = Away<RouteState>;

/// The route of every request, and the senders feeding its stages.
pub struct Route {
    hops: Vec<Hop>,
    /// The first hop that handles requests (where requests that waited behind output resume).
    first_handle: usize,
    stages: OnceLock<Vec<Sender<Job>>>,
    homes: Vec<Arc<Inbox<RouteState>>>,
    limits: Limits,
    write: WritePolicy,
}

impl Route {
    /// Continue the job from hop `conn.state.resume_hop` on the current thread (`on_poller` says
    /// which). Returns the job when it must go back to the poller, None when it was sent on.
    fn advance(&self, mut job: Job, on_poller: bool, scratch: &mut Scratch) -> Option<(Job, Back)> {
        loop {
            let h = job.conn.state.resume_hop;
            let Some(&hop) = self.hops.get(h) else {
                if job.conn.waiting {
                    // Requests wait behind the output that has just gone out: answer them.
                    job.conn.state.resume_hop = self.first_handle;
                    continue;
                }
                job.conn.state.resume_hop = 0;
                return Some((job, Back::Rearm(Interest::READABLE)));
            };
            match hop {
                Hop::AwaitWritable => {
                    job.conn.state.resume_hop = h + 1;
                    return Some((job, Back::Rearm(Interest::WRITABLE)));
                }
                Hop::Poller(_) if !on_poller => return Some((job, Back::Rearm(Interest::READABLE))),
                Hop::Poller(ops) => {
                    job.conn.state.resume_hop = h + 1;
                    if let Some(back) = self.execute(&mut job.conn, ops, h, scratch) {
                        return Some((job, back));
                    }
                }
                Hop::Stage { stage, .. } => {
                    self.stages.get().expect("stages started")[stage].send(job);
                    return None;
                }
            }
        }
    }

    /// A stage thread's handler: run the hop the job was sent for, then move it on.
    fn on_stage(&self, mut job: Job, scratch: &mut Scratch) {
        let h = job.conn.state.resume_hop;
        let Hop::Stage { ops, .. } = self.hops[h] else { unreachable!("a job is only sent for a stage hop") };
        job.conn.state.resume_hop = h + 1;
        let back = match self.execute(&mut job.conn, ops, h, scratch) {
            Some(back) => Some((job, back)),
            None => self.advance(job, false, scratch),
        };
        if let Some((job, back)) = back {
            self.homes[job.conn.state.home].back(job, back);
        }
    }

    /// Perform `ops` of hop `h`. None: go on with the next hop; Some: back to the poller.
    fn execute(&self, conn: &mut Conn<RouteState>, ops: Ops, h: usize, scratch: &mut Scratch) -> Option<Back> {
        // Requests that waited behind output are in the input already: no read for them.
        if ops.read && !conn.waiting {
            match conn.input.read_from(&mut conn.stream) {
                Ok(0) => return Some(Back::Close),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    conn.state.resume_hop = 0;
                    return Some(Back::Rearm(Interest::READABLE));
                }
                Err(_) => return Some(Back::Close),
            }
        }
        if ops.handle {
            conn.waiting = false;
            let client = ClientConn { stream: &mut conn.stream, input: &mut conn.input, output: &mut conn.output };
            let flow = serve_connection(client, &self.limits, scratch, KeepAlive::AsRequested);
            match flow {
                // Only part of a request so far: wait for the rest.
                Flow::KeepOpen if conn.output.pending() == 0 => {
                    conn.state.resume_hop = 0;
                    return Some(Back::Rearm(Interest::READABLE));
                }
                Flow::KeepOpen => {}
                Flow::Drain => conn.waiting = true,
                Flow::Close => conn.closing = true,
                Flow::Refused => {
                    conn.closing = true;
                    conn.refused = true;
                }
            }
        }
        if ops.write {
            match conn.output.flush(&mut conn.stream, self.write) {
                Ok(crate::conn::Flushed::Done) => {}
                Ok(_) => {
                    // A proactor's pending write: completes on a later writable event.
                    conn.state.resume_hop = h;
                    return Some(Back::Rearm(Interest::WRITABLE));
                }
                Err(_) => return Some(Back::Close),
            }
            if conn.closing {
                return Some(if conn.refused { Back::Linger } else { Back::Close });
            }
        }
        None
    }
}

/// A poller plus stages, following one route.
pub struct Staged {
    options: ServerOptions,
    hops: Vec<Hop>,
    stages: Vec<HandOffSpec>,
    write: WritePolicy,
    pollers: usize,
}

impl Staged {
    /// `hops` refer to `stages` by index; a `Poller` hop may only come first.
    pub fn new(options: &ServerOptions, hops: Vec<Hop>, stages: Vec<HandOffSpec>, write: WritePolicy) -> Self {
        assert!(hops.iter().skip(1).all(|h| !matches!(h, Hop::Poller(_))), "a poller hop may only come first");
        assert!(hops.iter().all(|h| match h {
            Hop::Stage { stage, .. } => *stage < stages.len(),
            _ => true,
        }));
        assert!(
            hops.iter().any(|h| matches!(h, Hop::Stage { ops, .. } if ops.handle)),
            "requests are handled on a stage (where those that waited behind output resume)"
        );
        Staged { options: options.clone(), hops, stages, write, pollers: 1 }
    }

    /// The same route behind `pollers` pollers fed by an acceptor thread.
    pub fn with_pollers(mut self, pollers: usize) -> Self {
        self.pollers = pollers.max(1);
        self
    }
}

impl Server for Staged {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let homes = (0..self.pollers).map(|_| Inbox::new()).collect::<io::Result<Vec<_>>>()?;
        let first_handle = self
            .hops
            .iter()
            .position(|h| matches!(h, Hop::Stage { ops, .. } if ops.handle))
            .expect("checked by Staged::new");
        let route = Arc::new(Route {
            first_handle,
            hops: self.hops,
            stages: OnceLock::new(),
            homes: homes.clone(),
            limits: self.options.limits.clone(),
            write: self.write,
        });
        // The adaptive pool (`pool_control`) sizes the stage that handles requests.
        let Hop::Stage { stage: handling, .. } = route.hops[first_handle] else { unreachable!("a stage hop") };
        let gate = self
            .options
            .pool_control_settings(self.stages[handling].threads())
            .map(crate::pool_control::start)
            .transpose()?;
        let mut senders = Vec::with_capacity(self.stages.len());
        for (i, spec) in self.stages.iter().enumerate() {
            let stage_gate = if i == handling { gate.clone() } else { None };
            let sender = archlab_handoff::start(spec, &format!("stage{i}"), |_| {
                let route = route.clone();
                let mut scratch = Scratch::new(&self.options).with_gate(stage_gate.clone());
                move |job: Job| route.on_stage(job, &mut scratch)
            })?;
            senders.push(sender);
        }
        if route.stages.set(senders).is_err() {
            unreachable!("stages are set once");
        }
        let admission = Admission::new(self.options.max_connections);
        if self.pollers == 1 {
            let home = homes[0].clone();
            return EventLoop::with_listener(listener, admission, home, &self.options, Poller { route, home: 0 })?
                .run();
        }
        for (i, inbox) in homes.iter().enumerate() {
            let mode = Poller { route: route.clone(), home: i };
            let event_loop = EventLoop::with_inbox_of(inbox.clone(), &self.options, mode)?;
            let cpu = self.options.cpus.as_ref().filter(|c| c.ids().len() > 1).map(|c| c.nth(i));
            std::thread::Builder::new().name(format!("poller-{i}")).spawn(move || {
                if let Some(cpu) = cpu {
                    // Best effort: the process is already confined to the list.
                    let _ = archlab_netio::cpus::pin_current_thread(&[cpu]);
                }
                if let Err(e) = event_loop.run() {
                    eprintln!("poller {i} failed: {e}");
                    std::process::exit(1);
                }
            })?;
        }
        let mut next = 0;
        accept_blocking(&listener, &self.options, &admission, |stream, place| {
            homes[next].send(stream, place);
            next = (next + 1) % homes.len();
        })
    }
}

/// The event loop as the route's poller: connections registered one-shot, taken out of the
/// loop when ready and sent along the route, re-armed when they come back.
struct Poller {
    route: Arc<Route>,
    /// This poller's index in the route's `homes`.
    home: usize,
}

impl Mode for Poller {
    type State = RouteState;

    fn registration(&self) -> (Interest, Trigger) {
        (Interest::READABLE, Trigger::OneShot)
    }

    fn ready(&mut self, slot: &mut Option<Box<Conn<RouteState>>>, idx: usize, ctx: Ctx<'_>, _: bool) -> Next {
        let mut conn = slot.take().expect("the loop passes a present connection");
        conn.state.home = self.home;
        let Some((job, back)) = self.route.advance(Job { idx, conn }, true, ctx.scratch) else { return Next::Away };
        *slot = Some(job.conn);
        match back {
            Back::Rearm(interest) => Next::Rearm(interest),
            Back::Close => Next::Close,
            Back::Linger => Next::Linger,
        }
    }
}
