//! Serving one connection with blocking I/O: read, answer every complete request, write the
//! responses with `write_all`, repeat until the connection closes. Shared by the
//! thread-per-connection and pool front-ends. The thread serving a connection blocks in
//! `read` while the client is silent, which is exactly the cost those architectures pay.

use crate::conn::{linger_close_blocking, InBuf, OutBuf};
use crate::http_service::{serve_buffered, Flow, KeepAlive, Scratch};
use archlab_wire::http::Limits;
use std::net::TcpStream;

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
    pub fn serve(mut self, limits: &Limits, scratch: &mut Scratch, policy: impl Fn() -> KeepAlive) {
        loop {
            let flow = if self.input.is_empty() {
                Flow::KeepOpen
            } else {
                serve_buffered(&mut self.input, self.output.vec(), limits, scratch, policy())
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
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}
