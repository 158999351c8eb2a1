//! The N-copy model (`ncopy`): copies share one address through SO_REUSEPORT and each serves
//! its own connections; a listener bound without SO_REUSEPORT is refused with a clear error.

mod common;

use archlab_netio::socket::{listen, ListenOptions};
use archlab_server::{registry, ServerOptions};
use common::{connect, start};
use std::io::{Read, Write};

#[test]
fn copies_share_the_address_and_serve_every_connection() {
    let addr = start("ncopy", &ServerOptions { copies: Some(3), ..Default::default() });
    let mut conns: Vec<_> = (0..12).map(|_| connect(addr)).collect();
    for round in 0..3 {
        for s in conns.iter_mut() {
            s.write_all(b"GET /echo?size=5 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.ends_with(b"abcde") {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "round {round}: closed");
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

#[test]
fn ncopy_needs_a_reuse_port_listener() {
    assert!(registry::listen_options("ncopy").reuse_port);
    assert!(!registry::listen_options("single-thread").reuse_port);
    let plain = listen("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
    let server = registry::build("ncopy", &ServerOptions { copies: Some(2), ..Default::default() }).unwrap();
    let e = server.serve(plain).unwrap_err();
    assert!(e.to_string().contains("SO_REUSEPORT"), "{e}");
}

#[test]
fn copies_option_is_validated() {
    let e = registry::build("ncopy", &ServerOptions { copies: Some(0), ..Default::default() }).err().unwrap();
    assert_eq!(e.to_string(), "copies: expected an integer in 1..=65536, got 0");
    let e = registry::build("netty", &ServerOptions { copies: Some(2), ..Default::default() }).err().unwrap();
    assert!(e.to_string().starts_with("option copies does not apply to architecture netty"), "{e}");
}
