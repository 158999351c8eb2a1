//! Helpers shared by the server's integration tests: start an architecture in-process on
//! 127.0.0.1 port 0, connect a plain blocking client.

use archlab_netio::socket::{listen, ListenOptions};
use archlab_server::{registry, ServerOptions};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// Build `name` from the registry and serve it on a thread; returns its address.
pub fn start(name: &str, options: &ServerOptions) -> SocketAddr {
    let listener = listen("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = registry::build(name, options).unwrap();
    std::thread::spawn(move || server.serve(listener));
    addr
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // `write!` issues several small writes: without TCP_NODELAY, Nagle + delayed ACK would add
    // 40 ms to a request and the tests would measure the client, not the server.
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}
