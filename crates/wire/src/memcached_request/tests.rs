//! The request reader: each answer of memcached's parser for the subset and around it, the
//! stamps of arrival, bounded memory, and the property that the items read do not depend on
//! how the bytes were split into reads (every split point, byte by byte) or on what came before.

use super::*;
use proptest::prelude::*;

/// An item copied out of the reader's buffer, to compare across readers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Owned {
    Retrieval { cmd: Retrieval, keys: Vec<Vec<u8>> },
    Set { key: Vec<u8>, flags: u32, exptime: i64, data: Vec<u8>, noreply: bool },
    Reject { reject: Reject, silent: bool },
}

fn own(item: &Item<'_>) -> Owned {
    match item {
        Item::Request(r @ Request::Retrieval { cmd, key_count, .. }) => {
            let keys: Vec<Vec<u8>> = r.keys().map(<[u8]>::to_vec).collect();
            assert_eq!(keys.len(), *key_count);
            Owned::Retrieval { cmd: *cmd, keys }
        }
        Item::Request(Request::Set(s)) => Owned::Set {
            key: s.key.to_vec(),
            flags: s.flags,
            exptime: s.exptime,
            data: s.data.to_vec(),
            noreply: s.noreply,
        },
        Item::Reject { reject, silent } => Owned::Reject { reject: *reject, silent: *silent },
    }
}

fn drain(r: &mut RequestReader, out: &mut Vec<Owned>) {
    while let Some((item, _)) = r.next_item() {
        out.push(own(&item));
    }
}

/// Feed `chunks` one commit each, draining after every commit as a server does.
fn read_chunks<'a>(limits: RequestLimits, chunks: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Owned>, RequestReader) {
    let mut r = RequestReader::new(limits);
    let mut out = Vec::new();
    for c in chunks {
        r.extend(c, 0);
        drain(&mut r, &mut out);
    }
    (out, r)
}

fn read_all(bytes: &[u8]) -> Vec<Owned> {
    read_chunks(RequestLimits::default(), [bytes]).0
}

fn set(key: &str, flags: u32, exptime: i64, data: &[u8], noreply: bool) -> Owned {
    Owned::Set { key: key.into(), flags, exptime, data: data.to_vec(), noreply }
}

fn get(cmd: Retrieval, keys: &[&str]) -> Owned {
    Owned::Retrieval { cmd, keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect() }
}

fn reject(reject: Reject) -> Owned {
    Owned::Reject { reject, silent: false }
}

#[test]
fn the_subset_is_read_with_values_of_any_bytes() {
    let input = b"set k1 42 0 13\r\nab\r\ncd\r\nEND\r\n\r\nget k1\r\ngets a bb  ccc\r\nset k2 0 -1 0 noreply\r\n\r\n";
    assert_eq!(
        read_all(input),
        [
            set("k1", 42, 0, b"ab\r\ncd\r\nEND\r\n", false),
            get(Retrieval::Get, &["k1"]),
            get(Retrieval::Gets, &["a", "bb", "ccc"]),
            set("k2", 0, -1, b"", true),
        ]
    );
    // A bare LF ends a line as in memcached.
    assert_eq!(read_all(b"get a\nset b 1 2 1\nx\r\n"), [get(Retrieval::Get, &["a"]), set("b", 1, 2, b"x", false)]);
}

#[test]
fn keys_borrow_the_buffer_and_keep_their_order() {
    let mut r = RequestReader::new(RequestLimits::default());
    r.extend(b"get z y x z\r\n", 7);
    let (item, stamp) = r.next_item().unwrap();
    assert_eq!(stamp, 7);
    let Item::Request(req) = item else { panic!("{item:?}") };
    assert_eq!(req.keys().collect::<Vec<_>>(), [&b"z"[..], b"y", b"x", b"z"]);
    assert!(r.next_item().is_none());
    assert!(!r.in_request());
}

#[test]
fn commands_outside_the_subset_get_error_and_the_connection_goes_on() {
    let input = b"delete k\r\nGET k\r\n\r\nget\r\nadd k 0 0 5\r\nget x\r\ncas k 0 0 3 99\r\nabc\r\nget k\r\n";
    assert_eq!(
        read_all(input),
        [
            reject(Reject::UnknownCommand),
            reject(Reject::UnknownCommand), // commands are case-sensitive
            reject(Reject::UnknownCommand), // an empty line
            reject(Reject::UnknownCommand), // a retrieval without keys, as memcached answers it
            reject(Reject::UnknownCommand), // `add`: its 5-byte block "get x" is swallowed
            reject(Reject::UnknownCommand),
            get(Retrieval::Get, &["k"]),
        ]
    );
}

#[test]
fn a_meta_set_gets_one_answer_and_its_block_is_swallowed() {
    // memcached 1.6 stores `ms k 5` + block (`HD`); outside the subset it is one `ERROR`, and its
    // block, which may hold anything, is never read as commands.
    assert_eq!(
        read_all(b"ms k 5\r\nvalue\r\nms k 9 T0 F3 q\r\nget x\r\nab\r\nget k\r\n"),
        [reject(Reject::UnknownCommand), reject(Reject::UnknownCommand), get(Retrieval::Get, &["k"])]
    );
    // Without a readable length there is nothing to swallow (memcached reads the block as
    // commands too); meta commands without a block are one line each.
    assert_eq!(
        read_all(b"ms k many\r\nmg k v\r\nms\r\n"),
        [reject(Reject::UnknownCommand), reject(Reject::UnknownCommand), reject(Reject::UnknownCommand)]
    );
}

#[test]
fn quit_ends_the_requests_and_what_follows_is_never_read() {
    let mut r = RequestReader::new(RequestLimits::default());
    let mut out = Vec::new();
    r.extend(b"get a\r\nquit\r\nget b\r\n", 0);
    drain(&mut r, &mut out);
    assert_eq!(out, [get(Retrieval::Get, &["a"])]);
    assert_eq!((r.closed(), r.buffered(), r.in_request()), (Some(Closed::Quit), 0, false));
    r.extend(b"get c\r\n", 0);
    assert!(r.next_item().is_none() && r.buffered() == 0);
    // memcached takes `quit` with further tokens; `quitx` is another command.
    assert_eq!(read_chunks(RequestLimits::default(), [&b"quit now\r\n"[..]]).1.closed(), Some(Closed::Quit));
    assert_eq!(read_all(b"quitx\r\n"), [reject(Reject::UnknownCommand)]);
}

#[test]
fn a_binary_request_closes_at_its_first_byte() {
    // A binary get header (magic, opcode 0, key length 1, body length 1) and its key: nothing
    // is waited for, not even the rest of the header.
    for input in [&[BINARY_REQUEST_MAGIC][..], b"\x80\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01k"] {
        let (items, r) = read_chunks(RequestLimits::default(), [input]);
        assert!(items.is_empty(), "{items:?}");
        assert_eq!((r.closed(), r.buffered()), (Some(Closed::BinaryProtocol), 0));
    }
    // At any command's start, after text requests too; inside a value it is data.
    let (items, r) = read_chunks(RequestLimits::default(), [&b"set k 0 0 1\r\n\x80\r\nget k\r\n\x80"[..]]);
    assert_eq!(items, [set("k", 0, 0, b"\x80", false), get(Retrieval::Get, &["k"])]);
    assert_eq!(r.closed(), Some(Closed::BinaryProtocol));
    assert_eq!(read_all(b"get k\x80\r\n"), [Owned::Retrieval { cmd: Retrieval::Get, keys: vec![b"k\x80".to_vec()] }]);
}

#[test]
fn malformed_sets_get_client_error_and_their_block_is_swallowed() {
    let long = "k".repeat(251);
    let cases: Vec<(Vec<u8>, Reject)> = vec![
        (format!("set {long} 0 0 3\r\nabc\r\n").into_bytes(), Reject::Malformed(Malformed::KeyTooLong { bytes: 251 })),
        (b"set k\x01 0 0 3\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadKeyByte)),
        (b"set k 4294967296 0 3\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadFormat)),
        (b"set k x 0 3\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadFormat)),
        (b"set k 0 soon 3\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadFormat)),
        (b"set k 0 0 3 maybe\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadFormat)),
        (b"set k 0 0 3 noreply extra\r\nabc\r\n".to_vec(), Reject::Malformed(Malformed::BadFormat)),
        // memcached reads length + 2 bytes and checks the last two (what follows is read as commands).
        (b"set k 0 0 3\r\nabcde".to_vec(), Reject::Malformed(Malformed::BadDataChunk)),
    ];
    for (mut input, want) in cases {
        input.extend_from_slice(b"get after\r\n");
        let got = read_all(&input);
        let silent = input.windows(7).any(|w| w == b"noreply") && !input.windows(5).any(|w| w == b"extra");
        assert_eq!(
            got,
            [Owned::Reject { reject: want, silent }, get(Retrieval::Get, &["after"])],
            "{:?}",
            String::from_utf8_lossy(&input)
        );
    }
    // Without a readable length there is nothing to swallow: the block is read as a command.
    assert_eq!(
        read_all(b"set k 0 0 many\r\nabc\r\n"),
        [reject(Reject::Malformed(Malformed::BadFormat)), reject(Reject::UnknownCommand)]
    );
    // A key of exactly 250 bytes is fine.
    let key = "k".repeat(250);
    assert_eq!(read_all(format!("get {key}\r\n").as_bytes()), [get(Retrieval::Get, &[&key])]);
}

#[test]
fn answers_are_memcacheds_lines() {
    assert_eq!(&*Reject::UnknownCommand.reply(), b"ERROR\r\n");
    assert_eq!(&*Reject::TooLarge { bytes: 9 }.reply(), b"SERVER_ERROR object too large for cache\r\n");
    assert_eq!(&*Reject::Malformed(Malformed::BadDataChunk).reply(), b"CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(
        &*Reject::Malformed(Malformed::KeyTooLong { bytes: 300 }).reply(),
        b"CLIENT_ERROR key of 300 bytes is longer than 250\r\n"
    );
    assert!(Reject::LineTooLong.closes() && !Reject::UnknownCommand.closes());
}

#[test]
fn a_value_above_the_limit_is_swallowed_without_being_buffered() {
    let limits = RequestLimits { max_value_bytes: 1000, ..Default::default() };
    let mut r = RequestReader::new(limits);
    let mut out = Vec::new();
    r.extend(b"set big 0 0 10000000\r\n", 0);
    drain(&mut r, &mut out);
    assert_eq!(out, [Owned::Reject { reject: Reject::TooLarge { bytes: 10_000_000 }, silent: false }]);
    let chunk = vec![b'x'; 65536];
    let mut left = 10_000_000usize;
    while left > 0 {
        let n = left.min(chunk.len());
        r.extend(&chunk[..n], 0);
        drain(&mut r, &mut out);
        assert!(r.buffered() == 0 && r.in_request(), "nothing kept while swallowing");
        left -= n;
    }
    r.extend(b"\r\nset ok 0 0 1000\r\n", 0);
    r.extend(&vec![b'v'; 1000], 0);
    r.extend(b"\r\n", 0);
    drain(&mut r, &mut out);
    assert_eq!(out[1], set("ok", 0, 0, &vec![b'v'; 1000], false));
    // With noreply the refusal is silent (memcached suppresses its error strings too).
    assert_eq!(
        read_chunks(limits, [&b"set big 0 0 1001 noreply\r\n"[..], &vec![0u8; 1003]]).0,
        [Owned::Reject { reject: Reject::TooLarge { bytes: 1001 }, silent: true }]
    );
}

#[test]
fn an_endless_line_is_refused_and_everything_after_ignored() {
    let limits = RequestLimits::default();
    let mut r = RequestReader::new(limits);
    let mut out = Vec::new();
    // 2048 bytes and a CR may still become a valid line...
    r.extend(&[b'x'; MAX_COMMAND_LINE_BYTES], 0);
    r.extend(b"\r", 0);
    drain(&mut r, &mut out);
    assert!(out.is_empty());
    // ...one more byte cannot.
    r.extend(b"y", 0);
    drain(&mut r, &mut out);
    assert_eq!(out, [reject(Reject::LineTooLong)]);
    assert!(r.is_closed() && r.buffered() == 0);
    r.extend(b"get k\r\n", 0);
    assert!(r.next_item().is_none());
    // get/gets lines may be longer: many keys.
    let keys: Vec<String> = (0..3000).map(|i| format!("memtier-{i}")).collect();
    let line = format!("get {}\r\n", keys.join(" "));
    assert!(line.len() > MAX_COMMAND_LINE_BYTES && line.len() < MAX_RETRIEVAL_LINE_BYTES);
    let got = read_all(line.as_bytes());
    assert!(matches!(&got[..], [Owned::Retrieval { keys, .. }] if keys.len() == 3000));
    let too_many = format!("get {}\r\n", "k ".repeat(MAX_RETRIEVAL_LINE_BYTES / 2));
    assert_eq!(read_all(too_many.as_bytes()), [reject(Reject::LineTooLong)]);
}

#[test]
fn stamps_are_the_arrival_of_each_items_first_byte() {
    let mut r = RequestReader::new(RequestLimits::default());
    let mut stamps = Vec::new();
    for (chunk, stamp) in [(&b"get a\r\nge"[..], 1), (b"t b\r\nget c\r\nset d 0 0 3\r\na", 2), (b"bc\r\n", 3)] {
        r.extend(chunk, stamp);
        while let Some((_, s)) = r.next_item() {
            stamps.push(s);
        }
    }
    // b began in the first read, c in the second, d in the second.
    assert_eq!(stamps, [1, 1, 2, 2]);
}

#[test]
fn spare_and_commit_read_in_place() {
    let mut r = RequestReader::new(RequestLimits::default());
    let input = b"set k 0 0 5\r\nhello\r\nget k\r\n";
    let space = r.spare(16);
    assert!(space.len() >= 16);
    space[..10].copy_from_slice(&input[..10]);
    r.commit(10, 5);
    assert!(r.next_item().is_none() && r.in_request());
    let space = r.spare(64);
    space[..input.len() - 10].copy_from_slice(&input[10..]);
    r.commit(input.len() - 10, 6);
    let mut out = Vec::new();
    drain(&mut r, &mut out);
    assert_eq!(out, [set("k", 0, 0, b"hello", false), get(Retrieval::Get, &["k"])]);
}

// --- properties ------------------------------------------------------------------------------

/// What a client may send, and what the reader must make of it.
#[derive(Clone, Debug)]
enum Op {
    Get(Retrieval, Vec<String>),
    Set { key: String, flags: u32, exptime: i64, data: Vec<u8>, noreply: bool },
    TooLarge(usize),
    Unknown(String),
    UnknownStorage(Vec<u8>),
    BadChunk,
}

const LIMIT: usize = 64;

impl Op {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Op::Get(cmd, keys) => {
                let c = if *cmd == Retrieval::Get { "get" } else { "gets" };
                format!("{c} {}\r\n", keys.join(" ")).into_bytes()
            }
            Op::Set { key, flags, exptime, data, noreply } => {
                let nr = if *noreply { " noreply" } else { "" };
                let mut b = format!("set {key} {flags} {exptime} {}{nr}\r\n", data.len()).into_bytes();
                b.extend_from_slice(data);
                b.extend_from_slice(b"\r\n");
                b
            }
            Op::TooLarge(n) => {
                let mut b = format!("set big 0 0 {n}\r\n").into_bytes();
                b.extend(std::iter::repeat_n(b'\n', *n));
                b.extend_from_slice(b"\r\n");
                b
            }
            Op::Unknown(word) => format!("{word} k\r\n").into_bytes(),
            Op::UnknownStorage(data) => {
                let mut b = format!("append k 0 0 {}\r\n", data.len()).into_bytes();
                b.extend_from_slice(data);
                b.extend_from_slice(b"\r\n");
                b
            }
            Op::BadChunk => b"set k 0 0 2\r\nabcd".to_vec(),
        }
    }

    fn expected(&self) -> Owned {
        match self {
            Op::Get(cmd, keys) => {
                Owned::Retrieval { cmd: *cmd, keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect() }
            }
            Op::Set { key, flags, exptime, data, noreply } => Owned::Set {
                key: key.as_bytes().to_vec(),
                flags: *flags,
                exptime: *exptime,
                data: data.clone(),
                noreply: *noreply,
            },
            Op::TooLarge(n) => reject(Reject::TooLarge { bytes: *n as u64 }),
            Op::Unknown(_) | Op::UnknownStorage(_) => reject(Reject::UnknownCommand),
            Op::BadChunk => reject(Reject::Malformed(Malformed::BadDataChunk)),
        }
    }
}

fn key() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_:.-]{1,12}"
}

/// Values heavy in protocol bytes: CR, LF, spaces, and lines that look like commands.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![Just(b'\r'), Just(b'\n'), Just(b' '), any::<u8>(), Just(b'g'), Just(b'e'), Just(b't')],
        0..LIMIT,
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (prop_oneof![Just(Retrieval::Get), Just(Retrieval::Gets)], prop::collection::vec(key(), 1..6))
            .prop_map(|(c, k)| Op::Get(c, k)),
        4 => (key(), any::<u32>(), -5i64..100_000, value(), any::<bool>())
            .prop_map(|(key, flags, exptime, data, noreply)| Op::Set { key, flags, exptime, data, noreply }),
        1 => (LIMIT + 1..3 * LIMIT).prop_map(Op::TooLarge),
        1 => prop_oneof![Just("delete"), Just("incr"), Just("stats"), Just("GET"), Just("version")]
            .prop_map(|w| Op::Unknown(w.into())),
        1 => value().prop_map(Op::UnknownStorage),
        1 => Just(Op::BadChunk),
    ]
}

fn limits() -> RequestLimits {
    RequestLimits { max_value_bytes: LIMIT, ..Default::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A pipelined stream of requests reads as each request's expected item, in order, whether
    /// it arrives whole, split at any one point, or byte by byte.
    #[test]
    fn split_at_every_point_equals_whole(ops in prop::collection::vec(op(), 1..8)) {
        let bytes: Vec<u8> = ops.iter().flat_map(Op::bytes).collect();
        let expected: Vec<Owned> = ops.iter().map(Op::expected).collect();
        let (whole, r) = read_chunks(limits(), [&bytes[..]]);
        prop_assert_eq!(&whole, &expected);
        prop_assert!(!r.in_request());
        for cut in 0..=bytes.len() {
            let (got, _) = read_chunks(limits(), [&bytes[..cut], &bytes[cut..]]);
            prop_assert_eq!(&got, &expected, "cut at {}", cut);
        }
        let (got, _) = read_chunks(limits(), bytes.chunks(1));
        prop_assert_eq!(&got, &expected);
    }

    /// Arbitrary bytes in arbitrary reads never panic and never make the reader hold more
    /// than one line, or one data block under the limit, plus the last read.
    #[test]
    fn arbitrary_bytes_keep_memory_bounded(
        chunks in prop::collection::vec(prop::collection::vec(
            prop_oneof![Just(b'\r'), Just(b'\n'), Just(b' '), Just(b'9'), any::<u8>()], 0..300), 0..20),
        prefix in prop_oneof![Just(&b""[..]), Just(&b"set k 0 0 "[..]), Just(&b"get "[..])],
    ) {
        let lim = RequestLimits { max_value_bytes: LIMIT, max_line_bytes: 128, max_retrieval_line_bytes: 256 };
        let mut r = RequestReader::new(lim);
        r.extend(prefix, 0);
        for c in &chunks {
            r.extend(c, 0);
            while r.next_item().is_some() {}
            let bound = lim.max_retrieval_line_bytes + 2 + LIMIT + 2 + c.len();
            prop_assert!(r.buffered() <= bound, "{} buffered", r.buffered());
        }
    }
}
