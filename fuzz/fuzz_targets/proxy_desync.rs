//! The reverse proxy's request reader and relay (`archlab_proxy::http::exchange::Exchange`),
//! differentially against an independent strict reading of HTTP framing
//! (`archlab_wire::http_oracle`). The input is a client's byte stream and a backend's answer,
//! either as raw bytes (its first byte, even, says where the one ends and the other starts) or
//! built from words (first byte odd): requests and an answer whose fields are picked from the
//! ones the proxy gives meaning to, so that the fuzzer reaches their combinations quickly.
//!
//! Invariants checked, beyond "no panic":
//! - requests: the bytes the proxy forwards for the requests it accepts (each rewritten head
//!   and its body, in order, as the drivers send them on one pooled connection) read, under the
//!   oracle, as exactly the requests the proxy accounted for: the same number, and each with the
//!   method, target and body length the proxy's reader parsed, nothing ambiguous and nothing
//!   left over. A request whose framing the proxy drops while framing its body by it (the
//!   `Connection: Content-Length` smuggle) breaks this at once;
//! - responses: an answer relayed to the client reads, under the oracle, as one final answer
//!   (after any interim ones) with the status the proxy accounted for and the payload the
//!   backend sent; an answer on a client connection the proxy keeps open is delimited by its
//!   own framing, never by the end of the connection; the relay gives the same bytes whatever
//!   pieces the answer arrives in (up to where it fails, when it does).
#![no_main]

use archlab_fuzz::cut_points;
use archlab_proxy::http::exchange::{Exchange, Relay};
use archlab_proxy::http::HashKey;
use archlab_wire::http::{header_slots, parse_request_head, Limits};
use archlab_wire::http_oracle::{self, Unreadable};
use libfuzzer_sys::fuzz_target;

/// Forward every whole request of `client` as the proxy does, and check the backend's reading.
fn check_requests(client: &[u8], limits: &Limits) {
    let mut at = 0;
    let mut forwarded = Vec::new();
    let mut accounted = Vec::new();
    while at < client.len() {
        let Ok(Some(x)) = Exchange::begin(&client[at..], limits, None, &HashKey::Path, true) else { break };
        if client.len() - at < x.request_len {
            break; // the proxy waits for the rest of the body
        }
        let mut slots = header_slots();
        let head = parse_request_head(&client[at..], limits, &mut slots).unwrap().unwrap();
        accounted.push((head.method.to_owned(), head.target.to_owned(), head.body_len));
        forwarded.extend_from_slice(&x.backend_head);
        forwarded.extend_from_slice(&client[at + x.head_len..at + x.request_len]);
        at += x.request_len;
    }
    let (read, left) = http_oracle::requests(&forwarded).unwrap_or_else(|e| {
        panic!("the proxy forwarded an ambiguous stream ({e:?}): {:?}", String::from_utf8_lossy(&forwarded))
    });
    let read: Vec<_> = read.iter().map(|m| (m.method().to_owned(), m.target().to_owned(), m.body.len())).collect();
    assert_eq!(read, accounted, "the backend reads other requests than the proxy accounted for");
    assert_eq!(left, 0, "the backend is left with a partial request: {:?}", String::from_utf8_lossy(&forwarded));
}

/// Cut points checked per answer, at most (about).
const RELAY_CUTS: usize = 32;

/// What relaying `answer` in the given pieces gave the client: the bytes, how the exchange
/// ended (None: failed), and the exchange.
fn relay(x: &mut Exchange, answer: &[u8], cuts: &[usize]) -> (Vec<u8>, Option<Relay>) {
    let mut out = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&answer.len())) {
        match x.relay(&answer[from..to], &mut out) {
            Ok(Relay::Done) => return (out, Some(Relay::Done)),
            Ok(Relay::More) => {}
            Err(_) => return (out, None),
        }
        from = to;
    }
    // The answer ends where the backend closed the connection.
    match x.backend_closed() {
        Ok(r) => (out, Some(r)),
        Err(_) => (out, None),
    }
}

/// Relay `answer` to the first request of `client` and check what the client reads.
fn check_relay(client: &[u8], answer: &[u8], limits: &Limits) {
    let Ok(Some(first)) = Exchange::begin(client, limits, None, &HashKey::Path, true) else { return };
    let mut slots = header_slots();
    let head_request = parse_request_head(client, limits, &mut slots).unwrap().unwrap().method == "HEAD";
    let start = |first: &Exchange| {
        let mut x = Exchange::begin(client, limits, None, &HashKey::Path, true).unwrap().unwrap();
        x.attempt();
        // The body went before the answer when the client sent it whole; else the answer came
        // first and cuts it.
        if client.len() >= first.request_len {
            x.mark_body_forwarded();
        }
        x
    };
    let mut x = start(&first);
    let (out, ended) = relay(&mut x, answer, &[]);
    // The same answer in two pieces: at every point of a short answer, at a stride of about
    // `RELAY_CUTS` points of a long one (each cut relays the whole answer again).
    let cuts = cut_points(answer.len(), &[]);
    for &cut in cuts.iter().step_by(cuts.len().div_ceil(RELAY_CUTS)) {
        let mut again = start(&first);
        let (out_again, ended_again) = relay(&mut again, answer, &[cut]);
        assert_eq!(ended_again, ended, "the relay ends otherwise when the answer is cut at {cut}");
        if ended.is_some() {
            assert_eq!(out_again, out, "the relay depends on where the answer was cut ({cut})");
        } else {
            // A failure closes the client's connection after whatever was relayed before it was
            // seen, which depends on the pieces; the bytes themselves never do.
            let n = out.len().min(out_again.len());
            assert_eq!(out_again[..n], out[..n], "the relay depends on where the answer was cut ({cut})");
        }
    }
    let Some(Relay::Done) = ended else { return };
    // The client's reading, with the connection open if the proxy keeps it.
    let closed = !x.keep_client;
    let (_, final_answer) = match http_oracle::response(&out, head_request, closed) {
        Ok(r) => r,
        Err(Unreadable::Incomplete) if !closed => {
            panic!("an answer on a kept connection that only its end delimits: {:?}", String::from_utf8_lossy(&out))
        }
        Err(e) => panic!("the client cannot read the relayed answer ({e:?}): {:?}", String::from_utf8_lossy(&out)),
    };
    assert_eq!(final_answer.status(), x.status, "the client reads another status than the proxy accounted for");
    if x.keep_client {
        assert!(!http_oracle::ends_at_close(&final_answer, head_request), "a kept connection's answer without framing");
        let (interim, again) = http_oracle::response(&out, head_request, false).expect("framed");
        let used: usize = interim.iter().map(|m| m.len).sum::<usize>() + again.len;
        assert_eq!(used, out.len(), "bytes after the relayed answer on a kept connection");
    }
    // The payload is the backend's, where the oracle can read the backend's answer at all.
    if let Ok((_, sent)) = http_oracle::response(answer, head_request, true) {
        if sent.status() == final_answer.status() {
            assert_eq!(final_answer.body, sent.body, "the client reads another payload than the backend sent");
        }
    }
}

/// Words a structured input picks header names and values from: every field the proxy gives
/// meaning to, each framing field also as a value (what `Connection` may name), and lengths
/// that agree with the body, disagree with it, or repeat it.
const NAMES: [&str; 8] =
    ["Host", "Content-Length", "Transfer-Encoding", "Connection", "Expect", "Keep-Alive", "X-Forwarded-For", "X-Other"];
const VALUES: [&str; 16] = [
    "LEN",
    "LEN, LEN",
    "0",
    "7",
    "chunked",
    "gzip, chunked",
    "close",
    "keep-alive",
    "Content-Length",
    "Transfer-Encoding",
    "Host",
    "keep-alive, Content-Length",
    "100-continue",
    "a.test",
    "b.test:81",
    "X-Other",
];
const TARGETS: [&str; 4] = ["/echo?size=3", "http://a.test/x", "*", "/r?u=http://b.test/"];
const STATUSES: [&str; 6] = ["200 OK", "100 Continue", "204 No Content", "304 Not Modified", "417 X", "101 Switching"];

/// A structured input: requests and an answer built from the words above, one byte per choice,
/// so that combinations of fields (a `Connection` naming `Content-Length` on a request with a
/// body) are a few choices away rather than a lucky run of raw bytes.
struct Words<'a>(std::slice::Iter<'a, u8>);

impl Words<'_> {
    fn pick(&mut self, n: usize) -> Option<usize> {
        self.0.next().map(|&b| usize::from(b) % n)
    }

    /// Header lines: a count, then (name, value) picks; `LEN` stands for `len`.
    fn headers(&mut self, out: &mut Vec<u8>, names: &[&str], len: usize) -> Option<()> {
        for _ in 0..self.pick(6)? {
            let (name, value) = (names[self.pick(names.len())?], VALUES[self.pick(VALUES.len())?]);
            out.extend_from_slice(format!("{name}: {}\r\n", value.replace("LEN", &len.to_string())).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        Some(())
    }

    fn build(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut client = Vec::new();
        for _ in 0..=self.pick(3)? {
            let method = ["GET", "POST", "PUT", "HEAD"][self.pick(4)?];
            let version = ["1.1", "1.0"][self.pick(2)?];
            client.extend_from_slice(format!("{method} {} HTTP/{version}\r\n", TARGETS[self.pick(4)?]).as_bytes());
            let body = self.pick(9)?;
            self.headers(&mut client, &NAMES, body)?;
            client.resize(client.len() + body, b'x');
        }
        let mut answer = format!("HTTP/1.1 {}\r\n", STATUSES[self.pick(STATUSES.len())?]).into_bytes();
        let body = self.pick(9)?;
        self.headers(&mut answer, &NAMES[1..4], body)?;
        answer.resize(answer.len() + body, b'y');
        Some((client, answer))
    }
}

fn check(client: &[u8], answer: &[u8]) {
    let limits = Limits::default();
    check_requests(client, &limits);
    check_relay(client, answer, &limits);
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    // Even first byte: raw bytes, split where it says (`first` / 255 of the way). Odd: words.
    if first % 2 == 0 {
        let (client, answer) = rest.split_at(usize::from(first) * rest.len() / 255);
        check(client, answer);
    } else if let Some((client, answer)) = Words(rest.iter()).build() {
        check(&client, &answer);
    }
});
