//! The HTTP response parsing of the load generator, fed any bytes as the stream a server sent:
//! the head parser (`archlab_wire::http::parse_response_head`) and the generator's framing of
//! whole responses on a connection (`archlab_load::ResponseReader`), with one request in flight
//! (`feed`) and pipelined (`feed_prefix`).
//!
//! Invariants checked, beyond "no panic":
//! - a parsed head lies inside the input, and every prefix of the input parses to "need more
//!   bytes" or to exactly the same head (or the same refusal; refusals are final);
//! - a head whose status the server writer knows, written again by it, parses the same;
//! - pipelined framing of the stream split into two pieces at any point, or fed byte by byte,
//!   frames the same responses (status, keep-alive) and ends the same way as the whole stream
//!   fed at once; every call uses at most what it was given, and something when given bytes;
//! - with one request in flight, whatever a split stream gives is what the bytes it read so far
//!   give when fed at once, and a complete response agrees with the head parser.
#![no_main]

use archlab_fuzz::{cut_points, EVERY_CUT_UP_TO};
use archlab_load::{Outcome, Progress, ResponseReader};
use archlab_wire::http::{parse_response_head, write_response_head, ResponseError, ResponseHead, Status};
use libfuzzer_sys::fuzz_target;

fn check_head(buf: &[u8]) {
    let whole = parse_response_head(buf);
    let marks: Vec<usize> = match whole {
        Ok(Some(h)) => {
            assert!(h.head_len > 0 && h.head_len <= buf.len(), "head of {} bytes in {}", h.head_len, buf.len());
            check_head_round_trip(&h);
            vec![h.head_len]
        }
        _ => Vec::new(),
    };
    let mut refused = false;
    for cut in cut_points(buf.len(), &marks) {
        let got = parse_response_head(&buf[..cut]);
        if got == Ok(None) {
            assert!(!refused, "a prefix of {cut} bytes needs more bytes after a shorter one was refused");
            if let Ok(Some(h)) = whole {
                assert!(cut < h.head_len, "a prefix of {cut} bytes holding the whole head is incomplete");
            }
            continue;
        }
        assert_eq!(got, whole, "the prefix of {cut} bytes parsed differently from the whole input");
        refused |= got.is_err();
    }
}

fn check_head_round_trip(h: &ResponseHead) {
    let Some(status) = Status::ALL.into_iter().find(|s| s.code() == h.status) else { return };
    let mut out = Vec::new();
    write_response_head(&mut out, status, h.keep_alive, h.body_len);
    let again: Result<Option<ResponseHead>, ResponseError> = parse_response_head(&out);
    assert_eq!(
        again,
        Ok(Some(ResponseHead { head_len: out.len(), ..*h })),
        "rewritten head {:?}",
        String::from_utf8_lossy(&out)
    );
}

/// What pipelined framing made of a stream: the responses it framed and how it stopped.
#[derive(Debug, PartialEq, Eq)]
struct Framed {
    responses: Vec<(Outcome, bool)>,
    /// `None` when the stream ended inside a response (or exactly after one).
    invalid: Option<&'static str>,
}

/// Feed `pieces` one after the other, each consumed response by response.
fn frame_pipelined<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Framed {
    let mut r = ResponseReader::default();
    let mut framed = Framed { responses: Vec::new(), invalid: None };
    for piece in pieces {
        let mut at = 0;
        while at < piece.len() {
            let (p, used) = r.feed_prefix(&piece[at..]);
            assert!(used > 0 && used <= piece.len() - at, "used {used} of {}", piece.len() - at);
            at += used;
            match p {
                Progress::More => assert_eq!(at, piece.len(), "More before the end of the piece"),
                Progress::Done { outcome, keep_alive } => framed.responses.push((outcome, keep_alive)),
                Progress::Invalid(why) => {
                    framed.invalid = Some(why);
                    return framed;
                }
            }
        }
    }
    framed
}

fn check_pipelined(buf: &[u8]) {
    let whole = frame_pipelined([buf]);
    for cut in cut_points(buf.len(), &[]) {
        let (a, b) = buf.split_at(cut);
        assert_eq!(frame_pipelined([a, b]), whole, "split at {cut}");
    }
    if buf.len() <= EVERY_CUT_UP_TO {
        assert_eq!(frame_pipelined(buf.chunks(1)), whole, "byte by byte");
    }
}

/// One request in flight: feed pieces until the response ends or is refused; returns that and
/// how many bytes were read.
fn feed_one<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Progress, usize) {
    let mut r = ResponseReader::default();
    let mut read = 0;
    for piece in pieces {
        read += piece.len();
        match r.feed(piece) {
            Progress::More => {}
            end => return (end, read),
        }
    }
    (Progress::More, read)
}

fn check_one_in_flight(buf: &[u8]) {
    let (whole, _) = feed_one([buf]);
    if let Progress::Done { outcome: Outcome::Status(status), keep_alive } = whole {
        let head = parse_response_head(buf).expect("a framed response has a valid head").expect("and a whole one");
        assert_eq!((head.status, head.keep_alive), (status, keep_alive));
        assert_eq!(head.head_len + head.body_len, buf.len(), "a response framed alone ends the input");
    }
    for cut in cut_points(buf.len(), &[]) {
        let (a, b) = buf.split_at(cut);
        let (got, read) = feed_one([a, b]);
        assert_eq!(got, feed_one([&buf[..read]]).0, "split at {cut}, {read} bytes read");
    }
}

fuzz_target!(|data: &[u8]| {
    check_head(data);
    check_pipelined(data);
    check_one_in_flight(data);
});
