//! Requests in, responses out: the one request handler behind every architecture.
//!
//! Given the bytes a connection has received, [`serve_buffered`] answers every complete
//! request in them (pipelining), runs each request's workload, and appends the responses to
//! the output buffer, stopping at a partial request (after a `100 Continue` for a head that
//! asks for one and waits for its body). Refused requests (400/431/413) get their
//! error response and close the connection; a workload error (404, 400 for a bad parameter)
//! is an ordinary response on a healthy connection.
//!
//! The output a connection holds is bounded by `max_output_bytes`: a response body larger
//! than the bound is streamed (its head is appended with the first part of the body, and the
//! [`OutBuf`] produces the rest as the client takes it), and once the unsent output is over the
//! bound, the requests behind it wait in the input ([`Flow::Drain`]) until it has drained, so
//! a client that pipelines requests and does not read holds at most about one bound of memory.
//! The bound applies the same way to every architecture, whatever its write path.

use crate::conn::{InBuf, OutBuf};
use crate::options::ServerOptions;
use crate::pool_control::Gate;
use crate::service::{ClientConn, Service};
pub use crate::service::{Flow, KeepAlive, Scratch};
use archlab_metrics::counters::{count_limit, LimitEvent};
use archlab_wire::http::{self, Limits, Method, Parse, Status};
use archlab_workload::{Context, WorkError, Workload};
use std::sync::Arc;

impl Scratch {
    /// Scratch for a thread of a server built from `options` (its `--downstream`, `--db` and
    /// `--programs`, `max_output_bytes`, and its service).
    pub fn new(options: &ServerOptions) -> Scratch {
        let work =
            Context::new(options.downstream).with_db(options.database.clone()).with_programs(options.programs.clone());
        let forward = match &options.service {
            Service::Workload => None,
            Service::Forward(f) => Some(f.blocking()),
        };
        Scratch {
            body: Vec::new(),
            work,
            class: String::new(),
            max_output: options.max_output_bytes,
            forward,
            gate: None,
        }
    }

    /// The same scratch for a thread of a pool sized by `gate` (see `crate::pool_control`).
    pub fn with_gate(mut self, gate: Option<Arc<Gate>>) -> Scratch {
        self.gate = gate;
        self
    }

    /// Path and query of the last request answered with this scratch (HybridNetty's class).
    pub fn last_class(&self) -> &str {
        &self.class
    }
}

/// Answer the requests of a connection served by a thread that may block, with the service
/// the scratch was made for: the workloads ([`serve_buffered`]) or a forwarding handler.
pub fn serve_connection(conn: ClientConn<'_>, limits: &Limits, scratch: &mut Scratch, policy: KeepAlive) -> Flow {
    match &mut scratch.forward {
        None => serve_buffered(conn.input, conn.output, limits, scratch, policy),
        Some(forward) => forward.serve(conn, limits, policy),
    }
}

/// Answer every complete request in `input`, appending responses to `out`.
pub fn serve_buffered(
    input: &mut InBuf,
    out: &mut OutBuf,
    limits: &Limits,
    scratch: &mut Scratch,
    policy: KeepAlive,
) -> Flow {
    loop {
        let consumed;
        let keep_alive;
        match http::parse_request(input.filled(), limits) {
            Ok(Parse::Partial) => return Flow::KeepOpen,
            Ok(Parse::ExpectsContinue) => {
                // The client waits for this before sending its body (RFC 9110 §10.1.1); once per
                // request, and never when the body came with the head (that is `Complete`).
                if !input.continue_sent() {
                    out.vec().extend_from_slice(http::CONTINUE_RESPONSE);
                    input.mark_continue_sent();
                }
                return Flow::KeepOpen;
            }
            Ok(Parse::Complete { .. }) if out.pending() >= scratch.max_output => {
                count_limit(LimitEvent::OutputWaited);
                return Flow::Drain;
            }
            Ok(Parse::Complete { mut request, consumed: n }) => {
                request.keep_alive &= policy == KeepAlive::AsRequested;
                let gate = scratch.gate.clone();
                let permit = gate.as_deref().map(Gate::enter);
                respond(&request, out, scratch);
                drop(permit);
                consumed = n;
                keep_alive = request.keep_alive;
            }
            Err(e) => {
                out.vec().extend_from_slice(http::error_response(e));
                return Flow::Refused;
            }
        }
        input.consume(consumed);
        if !keep_alive {
            return Flow::Close;
        }
        if input.is_empty() {
            return Flow::KeepOpen;
        }
    }
}

fn respond(request: &http::Request<'_>, out: &mut OutBuf, scratch: &mut Scratch) {
    scratch.class.clear();
    scratch.class.push_str(request.path);
    if !request.query.is_empty() {
        scratch.class.push('?');
        scratch.class.push_str(request.query);
    }
    let head_only = request.method == Method::Head;
    if !matches!(request.method, Method::Get | Method::Head | Method::Post) {
        http::write_response(
            out.vec(),
            Status::MethodNotAllowed,
            request.keep_alive,
            b"405 method not allowed (use GET, HEAD or POST)\n",
        );
        return;
    }
    let body = &mut scratch.body;
    body.clear();
    let status = match Workload::from_target(request.path, request.query) {
        Err(e) => error_body(&e, body),
        // A body larger than the bound is streamed: its first part now, the rest as it drains.
        Ok(work) => match work.body_stream(request.body).filter(|s| s.len() > scratch.max_output) {
            Some(stream) if head_only => {
                http::write_response_head(out.vec(), Status::Ok, request.keep_alive, stream.len());
                return;
            }
            Some(mut stream) => match stream.fill(scratch.max_output, body) {
                Ok(_) => {
                    count_limit(LimitEvent::ResponseStreamed);
                    http::write_response_head(out.vec(), Status::Ok, request.keep_alive, stream.len());
                    out.vec().extend_from_slice(body);
                    out.stream_body(stream, scratch.max_output);
                    return;
                }
                Err(reason) => {
                    body.clear();
                    error_body(&WorkError::Unavailable { workload: "/file", reason }, body)
                }
            },
            None => match work.execute(&mut scratch.work, request.body, body) {
                Ok(()) => Status::Ok,
                Err(e) => error_body(&e, body),
            },
        },
    };
    if head_only {
        http::write_response_head(out.vec(), status, request.keep_alive, body.len());
    } else {
        http::write_response(out.vec(), status, request.keep_alive, body);
    }
}

/// The body and status of a workload error.
fn error_body(e: &WorkError, body: &mut Vec<u8>) -> Status {
    body.extend_from_slice(e.to_string().as_bytes());
    body.push(b'\n');
    match e {
        WorkError::UnknownPath { .. } | WorkError::NotFound { .. } => Status::NotFound,
        WorkError::BadParameter { .. } => Status::BadRequest,
        WorkError::Unavailable { .. } => Status::ServiceUnavailable,
    }
}
