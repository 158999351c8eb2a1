//! The middleware against real memcached servers, black-box through its socket: SETs
//! replicated to every server, multi-gets sharded (each server asked for its share, answers in
//! key order without misses) or not (one server asked for all), values of any bytes, the
//! protocol's error answers on a connection that stays usable, requests arriving byte by byte
//! or pipelined, `noreply`, and every architecture with 1 and 64 workers under concurrent
//! clients. memcached is Debian's, started by the tests; without it they fail.

mod common;

use archlab_proxy::memcached::Arch;
use common::*;
use std::collections::HashMap;

#[test]
fn sets_are_replicated_to_every_server() {
    let servers = memcacheds(3);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        let mut c = Client::connect(mw.local_addr());
        for i in 0..30 {
            let value = format!("value {i}\r\nof {arch}");
            assert_eq!(c.set(&format!("{arch}-{i}"), i, value.as_bytes()), "STORED");
        }
        for i in 0..30 {
            let want = Some((i, format!("value {i}\r\nof {arch}").into_bytes()));
            for s in &servers {
                assert_eq!(direct_get(s.addr, &format!("{arch}-{i}")), want, "{arch}: key {i} on {}", s.addr);
            }
        }
        let report = mw.shutdown().unwrap();
        assert_eq!(report.totals.by_type["set"].requests, 30, "{arch}");
        assert!(report.servers.iter().all(|s| s.requests == 30), "{arch}: {:?}", report.servers);
    }
}

#[test]
fn sharded_multi_gets_ask_each_server_for_its_share_and_answer_in_key_order() {
    let servers = memcacheds(3);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, true));
        let mut c = Client::connect(mw.local_addr());
        for k in ["a", "b", "c", "d", "e", "f"] {
            assert_eq!(c.set(&format!("{arch}{k}"), 7, format!("<{k}>").as_bytes()), "STORED");
        }
        let keys: Vec<String> =
            ["f", "miss1", "a", "c", "miss2", "e", "b", "a", "miss3"].iter().map(|k| format!("{arch}{k}")).collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let before: Vec<u64> = servers.iter().map(|s| server_stat(s.addr, "cmd_get")).collect();
        let got = c.get(&key_refs).unwrap();
        let after: Vec<u64> = servers.iter().map(|s| server_stat(s.addr, "cmd_get")).collect();
        // Every present key, in request order (the duplicate too), misses left out.
        let want: Vec<(Vec<u8>, u32, Vec<u8>)> = ["f", "a", "c", "e", "b", "a"]
            .iter()
            .map(|k| (format!("{arch}{k}").into_bytes(), 7, format!("<{k}>").into_bytes()))
            .collect();
        assert_eq!(got, want, "{arch}");
        // 9 keys over 3 servers: 3 each (memcached's cmd_get counts keys).
        let asked: Vec<u64> = before.iter().zip(&after).map(|(b, a)| a - b).collect();
        assert_eq!(asked, [3, 3, 3], "{arch}");
        // A single key is not split.
        assert_eq!(c.get(&[key_refs[0]]).unwrap().len(), 1);
        let report = mw.shutdown().unwrap();
        let t = &report.totals;
        assert_eq!((t.by_type["multi_get"].requests, t.by_type["get"].requests), (1, 1), "{arch}");
        assert_eq!((t.keys, t.hits, t.misses), (10, 7, 3), "{arch}");
    }
}

#[test]
fn non_sharded_multi_gets_go_whole_to_one_server_in_turn() {
    let servers = memcacheds(2);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        let mut c = Client::connect(mw.local_addr());
        assert_eq!(c.set("nk1", 0, b"1"), "STORED");
        assert_eq!(c.set("nk2", 0, b"2"), "STORED");
        let mut asked_total = vec![0u64; 2];
        for _ in 0..4 {
            let before: Vec<u64> = servers.iter().map(|s| server_stat(s.addr, "cmd_get")).collect();
            assert_eq!(c.get(&["nk2", "nx", "nk1"]).unwrap().len(), 2);
            let asked: Vec<u64> =
                servers.iter().zip(&before).map(|(s, b)| server_stat(s.addr, "cmd_get") - b).collect();
            assert!(asked == [3, 0] || asked == [0, 3], "{arch}: one server gets all three keys: {asked:?}");
            asked_total.iter_mut().zip(&asked).for_each(|(t, a)| *t += a);
        }
        // Round robin: each server answered two of the four.
        assert_eq!(asked_total, [6, 6], "{arch}");
        drop(mw.shutdown());
    }
}

#[test]
fn values_of_any_bytes_and_the_protocols_error_answers() {
    let servers = memcacheds(2);
    for (arch, workers) in every_arch() {
        let mut cfg = config(addrs(&servers), arch, workers, true);
        cfg.max_value_bytes = 600 * 1024;
        let mw = start(cfg);
        let mut c = Client::connect(mw.local_addr());
        let all_bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let tricky: [&[u8]; 5] = [b"", b"\r\n", b"END\r\n", b"x\r\nVALUE y 0 1\r\nz\r\nEND\r\n", &all_bytes];
        for (i, v) in tricky.iter().enumerate() {
            assert_eq!(c.set(&format!("t{i}"), 0, v), "STORED");
        }
        let big = vec![b'\n'; 512 * 1024];
        assert_eq!(c.set("big", 1, &big), "STORED");
        let got = c.get(&["t0", "t1", "t2", "t3", "t4", "big"]).unwrap();
        let datas: Vec<&[u8]> = got.iter().map(|(_, _, d)| d.as_slice()).collect();
        assert_eq!(datas, [tricky[0], tricky[1], tricky[2], tricky[3], tricky[4], &big[..]], "{arch}");
        // Refused by the middleware itself; the connection goes on.
        assert_eq!(c.set("huge", 0, &vec![b'v'; 600 * 1024 + 1]), "SERVER_ERROR object too large for cache");
        assert_eq!(c.set(&"k".repeat(251), 0, b"x"), "CLIENT_ERROR key of 251 bytes is longer than 250");
        c.send(b"delete t0\r\n");
        assert_eq!(c.line(), "ERROR");
        c.send(b"get\r\n");
        assert_eq!(c.line(), "ERROR");
        c.send(b"set k 0 0 notanumber\r\n");
        assert_eq!(c.line(), "CLIENT_ERROR bad command line format");
        c.send(b"set k 0 0 2\r\nabcd");
        assert_eq!(c.line(), "CLIENT_ERROR bad data chunk");
        assert_eq!(c.get(&["t2"]).unwrap()[0].2, b"END\r\n", "{arch}");
        // A line without end is answered, then the connection is closed.
        c.send(&vec![b'x'; 5000]);
        assert_eq!(c.line(), "CLIENT_ERROR line too long");
        assert!(c.closed(), "{arch}");
        let report = mw.shutdown().unwrap();
        let e = &report.totals.errors.by_class;
        assert_eq!(
            (e["too_large"], e["client_error"], e["unknown_command"], e["line_too_long"]),
            (1, 3, 2, 1),
            "{arch}"
        );
    }
}

/// A mixed script of requests and the answers memcached semantics require, from a model.
fn script(prefix: &str, keys: usize, rounds: usize) -> (Vec<u8>, Vec<u8>) {
    let mut model: HashMap<String, (u32, Vec<u8>)> = HashMap::new();
    let (mut req, mut want) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let k = format!("{prefix}{}", r % keys);
        let data = format!("v{r}\r\n{}", "x".repeat(r % 7)).into_bytes();
        req.extend_from_slice(format!("set {k} {r} 0 {}\r\n", data.len()).as_bytes());
        req.extend_from_slice(&data);
        req.extend_from_slice(b"\r\n");
        want.extend_from_slice(b"STORED\r\n");
        model.insert(k, (r as u32, data));
        let ks: Vec<String> = (0..1 + r % 4).map(|j| format!("{prefix}{}", (r + j * 3) % (keys + 2))).collect();
        req.extend_from_slice(format!("get {}\r\n", ks.join(" ")).as_bytes());
        for key in &ks {
            if let Some((flags, data)) = model.get(key) {
                want.extend_from_slice(format!("VALUE {key} {flags} {}\r\n", data.len()).as_bytes());
                want.extend_from_slice(data);
                want.extend_from_slice(b"\r\n");
            }
        }
        want.extend_from_slice(b"END\r\n");
        if r % 5 == 0 {
            req.extend_from_slice(b"version\r\n");
            want.extend_from_slice(b"ERROR\r\n");
        }
    }
    (req, want)
}

fn read_exactly(c: &mut Client, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < n {
        match c.element() {
            El::Value { key, flags, data } => {
                got.extend_from_slice(
                    format!("VALUE {} {flags} {}\r\n", String::from_utf8_lossy(&key), data.len()).as_bytes(),
                );
                got.extend_from_slice(&data);
                got.extend_from_slice(b"\r\n");
            }
            El::End => got.extend_from_slice(b"END\r\n"),
            El::Line(l) => {
                got.extend_from_slice(&l);
                got.extend_from_slice(b"\r\n");
            }
        }
    }
    got
}

#[test]
fn requests_byte_by_byte_and_pipelined_are_answered_in_order() {
    let servers = memcacheds(3);
    for (arch, workers) in every_arch() {
        for sharded in [false, true] {
            let mw = start(config(addrs(&servers), arch, workers, sharded));
            // Byte by byte: each byte its own write (TCP_NODELAY), so reads split everywhere.
            let (req, want) = script(&format!("{arch}{sharded}b"), 4, 12);
            let mut c = Client::connect(mw.local_addr());
            for b in &req {
                c.send(std::slice::from_ref(b));
            }
            assert_eq!(
                String::from_utf8_lossy(&read_exactly(&mut c, want.len())),
                String::from_utf8_lossy(&want),
                "{arch}"
            );
            // Pipelined: hundreds of requests in one write, more than a client may have waiting.
            let (req, want) = script(&format!("{arch}{sharded}p"), 10, 400);
            let mut c = Client::connect(mw.local_addr());
            c.send(&req);
            assert!(read_exactly(&mut c, want.len()) == want, "{arch} sharded={sharded}: pipelined answers differ");
            let report = mw.shutdown().unwrap();
            // One request of a client at a time: the queue never holds more than one per client.
            assert_eq!(report.totals.queue_length.max, Some(1), "{arch}");
        }
    }
}

#[test]
fn noreply_sets_are_stored_on_every_server_and_answered_with_nothing() {
    let servers = memcacheds(2);
    for (arch, workers) in every_arch() {
        let mw = start(config(addrs(&servers), arch, workers, false));
        let mut c = Client::connect(mw.local_addr());
        c.send(b"set q1 3 0 2 noreply\r\nab\r\nset q2 0 0 2000000 noreply\r\n");
        c.send(&vec![b'z'; 2_000_002]);
        c.send(b"set q3 0 0 1 noreply\r\nc\r\nset q3 0 0 1 noreply\r\nd\r\nget q1 q2 q3\r\n");
        // Only the get is answered; the too-large set was swallowed silently.
        let got = c.values().unwrap();
        assert_eq!(got, [(b"q1".to_vec(), 3, b"ab".to_vec()), (b"q3".to_vec(), 0, b"d".to_vec())], "{arch}");
        for s in &servers {
            assert_eq!(direct_get_eventually(s.addr, "q1"), Some((3, b"ab".to_vec())), "{arch}");
        }
        let report = mw.shutdown().unwrap();
        assert_eq!(report.totals.by_type["set"].requests, 3, "{arch}");
        assert_eq!(report.totals.errors.by_class["too_large"], 1, "{arch}");
    }
}

#[test]
fn one_and_sixty_four_workers_serve_concurrent_clients_correctly() {
    let servers = memcacheds(2);
    let mut cases: Vec<(Arch, Option<usize>)> =
        [Arch::Seed, Arch::Ring, Arch::Actor].iter().flat_map(|&a| [(a, Some(1)), (a, Some(64))]).collect();
    cases.push((Arch::EventLoop, None));
    for (arch, workers) in cases {
        let mw = start(config(addrs(&servers), arch, workers, true));
        let addr = mw.local_addr();
        const CLIENTS: usize = 16;
        const ROUNDS: usize = 60;
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    for r in 0..ROUNDS {
                        let (k, other) = (format!("c{t}-{r}"), format!("c{}-{r}", (t + 1) % CLIENTS));
                        assert_eq!(c.set(&k, r as u32, k.as_bytes()), "STORED");
                        let got = c.get(&[&other, &k]).unwrap();
                        // Our own key is there; the neighbour's may not be yet.
                        assert_eq!(got.last().unwrap(), &(k.clone().into_bytes(), r as u32, k.into_bytes()));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a client failed");
        }
        let report = mw.shutdown().unwrap();
        let t = &report.totals;
        assert_eq!(t.errors.total, 0, "{arch} {workers:?}: {:?}", t.errors);
        assert_eq!(t.requests, (CLIENTS * ROUNDS * 2) as u64, "{arch} {workers:?}");
        assert_eq!(report.workers, workers.unwrap_or(0));
        // At most one request per client waits in the hand-off.
        assert!(t.queue_length.max.unwrap() <= CLIENTS as u64, "{arch}: {:?}", t.queue_length);
    }
}
