//! Blocking front-end: an acceptor thread hands each connection to K handlers through a
//! hand-off (seed 000's Blocking server with a pool of four; Blocking Disruptor: "a Disruptor
//! is used to send the accepted socket to a handler. There are four handlers"; Blocking Actor:
//! "threads ... replaced by Actors").
//!
//! Mechanism: the acceptor blocks in `accept` and sends the connection through the hand-off
//! (`blocking`: an unbounded queue; `blocking-ring`: the ring; `blocking-actor`: an actor
//! mailbox); the handler that receives it serves it with blocking reads and writes until it
//! closes. Requests queue in the hand-off (as connections) and in socket buffers; handlers block
//! in `read` on a silent client. Expected bottleneck: K, once a request costs real CPU or a
//! client thinks. One hand-off per connection, none per request.
//!
//! Keep-alive policy: a handler serves its connection for as long as the client keeps it open,
//! except that while other connections wait in the hand-off it answers with `Connection: close`
//! and closes. Without that, the (K+1)-th keep-alive connection would wait until one of the
//! first K closes, i.e. forever under a closed-loop load (the field notes on seed 000's pool
//! discuss this); Tomcat's blocking connector solved the same problem the same way, by
//! disabling keep-alive when its threads run short. Handing an idle keep-alive connection
//! back instead would not work: a handler that picks it up blocks in `read` on a client with
//! nothing to say while others wait. Under pressure this architecture therefore pays a TCP
//! connection per request, which is its real cost. The policy is asked at response time, so
//! a handler also wakes while its client is idle and closes that idle connection when another
//! has been starving for a handler through two checks (50 ms apart; `serve_yielding`): an
//! actor's mailbox is served only by its actor, and idle clients can hold every pool thread.

use crate::acceptor::{accept_blocking, Admission};
use crate::frontend::blocking_conn::BlockingConn;
use crate::http_service::{KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::Server;
use archlab_handoff::{HandOffSpec, Sender};
use std::io;
use std::net::TcpListener;
use std::sync::{Arc, OnceLock};

pub struct BlockingHandOff {
    options: ServerOptions,
    handoff: HandOffSpec,
}

impl BlockingHandOff {
    pub fn new(options: &ServerOptions, handoff: HandOffSpec) -> Self {
        BlockingHandOff { options: options.clone(), handoff }
    }
}

impl Server for BlockingHandOff {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let sender: Arc<OnceLock<Sender<BlockingConn>>> = Arc::new(OnceLock::new());
        let limits = self.options.limits.clone();
        // The adaptive pool (`pool_control`): the workers run requests through its gate.
        let gate =
            self.options.pool_control_settings(self.handoff.threads()).map(crate::pool_control::start).transpose()?;
        let started = archlab_handoff::start(&self.handoff, "worker", |_| {
            let (sender, limits) = (sender.clone(), limits.clone());
            let mut scratch = Scratch::new(&self.options).with_gate(gate.clone());
            move |conn: BlockingConn| {
                let waiting = || sender.get().is_some_and(|s| s.backlog() > 0);
                let policy = || if waiting() { KeepAlive::Refuse } else { KeepAlive::AsRequested };
                conn.serve_yielding(&limits, &mut scratch, policy, waiting);
            }
        })?;
        let _ = sender.set(started.clone());
        let timeouts = self.options.timeouts();
        accept_blocking(&listener, &self.options, &Admission::new(self.options.max_connections), |stream, place| {
            started.send(BlockingConn::new(stream, place, &limits, timeouts))
        })
    }
}
