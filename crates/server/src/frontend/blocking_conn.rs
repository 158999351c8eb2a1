//! Serving one connection with blocking I/O: read, answer every complete request, write the
//! responses with `write_all`, repeat until the connection closes. Shared by the
//! thread-per-connection and pool front-ends. The thread serving a connection blocks in
//! `read` while the client is silent, which is exactly the cost those architectures pay.

use crate::conn::{linger_close_blocking, InBuf, OutBuf};
use crate::http_service::{serve_connection, Flow, KeepAlive, Scratch};
use crate::service::ClientConn;
use archlab_wire::http::Limits;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::Duration;

/// How often a handler waiting on an idle connection looks whether another connection is
/// starving for it (see [`BlockingConn::serve_yielding`]).
const IDLE_CHECK: Duration = Duration::from_millis(50);

/// A connection with its buffers.
pub struct BlockingConn {
    stream: TcpStream,
    input: InBuf,
    output: OutBuf,
}

impl BlockingConn {
    pub fn new(stream: TcpStream, limits: &Limits) -> BlockingConn {
        BlockingConn {
            stream,
            input: InBuf::new(limits.max_header_bytes + limits.max_body_bytes),
            output: OutBuf::default(),
        }
    }

    /// Serve requests until the connection ends. `policy()` is asked before each batch of
    /// buffered requests whether the connection may stay open after them.
    pub fn serve(self, limits: &Limits, scratch: &mut Scratch, policy: impl Fn() -> KeepAlive) {
        self.serve_inner(limits, scratch, policy, None)
    }

    /// As [`BlockingConn::serve`] for a handler shared by many connections: while the client is
    /// idle between requests the handler wakes every [`IDLE_CHECK`], and when
    /// `starving()` says another connection has waited for a handler through two checks in a
    /// row, it closes this idle keep-alive connection (as HTTP lets a server do at any time,
    /// RFC 9112 §9.8) and takes the next. Without it a connection handed to a handler that is
    /// blocked on a silent client (an actor's mailbox, or every pool thread held by idle
    /// clients) would wait until that client spoke again: forever, if it waits for the answer.
    pub fn serve_yielding(
        self,
        limits: &Limits,
        scratch: &mut Scratch,
        policy: impl Fn() -> KeepAlive,
        starving: impl Fn() -> bool,
    ) {
        if self.stream.set_read_timeout(Some(IDLE_CHECK)).is_err() {
            return self.serve_inner(limits, scratch, policy, None);
        }
        self.serve_inner(limits, scratch, policy, Some(&starving))
    }

    fn serve_inner(
        mut self,
        limits: &Limits,
        scratch: &mut Scratch,
        policy: impl Fn() -> KeepAlive,
        starving: Option<&dyn Fn() -> bool>,
    ) {
        let mut starved_checks = 0;
        loop {
            let flow = if self.input.is_empty() {
                Flow::KeepOpen
            } else {
                let conn = ClientConn { stream: &mut self.stream, input: &mut self.input, output: &mut self.output };
                serve_connection(conn, limits, scratch, policy())
            };
            if self.output.pending() > 0 && self.output.flush_to(&mut self.stream).is_err() {
                return;
            }
            match flow {
                Flow::KeepOpen => {}
                Flow::Close => return,
                Flow::Refused => return linger_close_blocking(&mut self.stream),
            }
            match self.input.read_from(&mut self.stream) {
                Ok(0) => return,
                Ok(_) => starved_checks = 0,
                Err(e) if starving.is_some() && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    let idle = self.input.is_empty();
                    starved_checks = if idle && starving.is_some_and(|s| s()) { starved_checks + 1 } else { 0 };
                    if starved_checks >= 2 {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }
}
