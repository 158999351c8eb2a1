//! Proxies between archlab's load generator and real back-ends, built from the same pieces as
//! archlab's servers (`archlab-netio`'s poller and sockets, `archlab-handoff`'s queue, ring
//! and actors, the server registry's front-ends) so that a comparison of proxy designs measures
//! the design, not a runtime.
//!
//! [`http`]: the HTTP/1.1 reverse proxy and load balancer, a forwarding service that runs in the
//! server registry's front-ends (seed 004's load balancers, seed 000 §9 and §7.4).
//!
//! [`memcached`]: the memcached middleware of seed 002 (ETH ASL 2017): a net thread that reads
//! and parses client requests, a hand-off to W worker threads holding blocking connections to
//! every memcached server (SETs replicated to all, GETs round-robin, multi-gets sharded or
//! not), instrumented per request; and an event-loop variant with non-blocking server
//! connections.

pub mod http;
pub mod memcached;
