//! Thread per connection (seed 001's sTomcat-Sync; seed 000 §5.1.1).
//!
//! Mechanism: an acceptor thread blocks in `accept` and spawns a thread for every connection;
//! that thread serves the connection with blocking reads and writes until it closes.
//! Requests queue only in the socket buffers; threads block in `read`. Expected bottleneck:
//! the scheduler and memory once connections (threads) far outnumber cores.

use crate::acceptor::{accept_blocking, Admission};
use crate::frontend::blocking_conn::BlockingConn;
use crate::http_service::{KeepAlive, Scratch};
use crate::options::ServerOptions;
use crate::Server;
use std::io;
use std::net::TcpListener;

pub struct ThreadPerConnection {
    options: ServerOptions,
}

impl ThreadPerConnection {
    pub fn new(options: &ServerOptions) -> Self {
        ThreadPerConnection { options: options.clone() }
    }
}

/// Small stacks: the handler needs little, and a thousand connections must not reserve GiBs.
const CONNECTION_STACK_BYTES: usize = 256 * 1024;

impl Server for ThreadPerConnection {
    fn serve(self: Box<Self>, listener: TcpListener) -> io::Result<()> {
        let limits = self.options.limits.clone();
        let options = &self.options;
        let timeouts = options.timeouts();
        accept_blocking(&listener, &self.options, &Admission::new(options.max_connections), |stream, place| {
            let limits = limits.clone();
            let mut scratch = Scratch::new(options);
            let spawned =
                std::thread::Builder::new().name("conn".into()).stack_size(CONNECTION_STACK_BYTES).spawn(move || {
                    let conn = BlockingConn::new(stream, place, &limits, timeouts);
                    conn.serve(&limits, &mut scratch, || KeepAlive::AsRequested);
                });
            if let Err(e) = spawned {
                // Thread limit reached: the connection is dropped (closed), as a real
                // thread-per-connection server would fail it.
                eprintln!("thread-per-connection: cannot spawn a thread: {e}");
            }
        })
    }
}
