//! Protocol codecs of the data plane: HTTP/1.1 ([`http`]), server side (requests in,
//! responses out) and client side (requests out, responses in) for the load generator, and
//! the memcached text protocol ([`memcached`]), client side for now.

pub mod http;
pub mod memcached;
