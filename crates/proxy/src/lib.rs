//! Proxies between archlab's load generator and real back-ends, built from the same pieces as
//! archlab's servers, so that a comparison of proxy designs measures the design, not a runtime.
//!
//! [`http`]: the HTTP/1.1 reverse proxy and load balancer, a forwarding service that runs in the
//! server registry's front-ends (seed 004's load balancers, seed 000 §9 and §7.4).

pub mod http;
