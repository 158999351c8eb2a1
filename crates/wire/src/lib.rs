//! Protocol codecs of the data plane. Today: HTTP/1.1 ([`http`]), server side (requests in,
//! responses out) and client side (requests out, responses in) for the load generator.

pub mod http;
