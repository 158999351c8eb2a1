//! Protocol codecs of the data plane: HTTP/1.1 ([`http`]), server side (requests in,
//! responses out) and client side (requests out, responses in) for the load generator, and
//! the memcached text protocol: client side ([`memcached`]: requests out, replies in) and
//! server side ([`memcached_request`]: requests in, for the memcached middleware); with the
//! `test-server` feature, a real memcached for tests ([`memcached_process`]); with the `oracle`
//! feature, an independent reading of HTTP framing for the desync tests ([`http_oracle`]).

pub mod http;
#[cfg(feature = "oracle")]
pub mod http_oracle;
pub mod memcached;
#[cfg(feature = "test-server")]
pub mod memcached_process;
pub mod memcached_request;
