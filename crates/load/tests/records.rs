//! Raw per-request records: a closed and an open run write exactly one record per request
//! counted in the window, with ordered times on known connections, and the file exports to
//! JTL CSV row for row.

mod common;

use archlab_load::{export_jtl, run_load, LoadConfig, LoadParams, Model, RecordReader, JTL_HEADER, RECORD_LEN};
use common::{Behaviour, TestServer};
use std::time::Duration;

#[test]
fn every_request_of_the_window_has_one_record_and_exports_to_jtl() {
    let server = TestServer::start(Behaviour::default());
    let dir = std::env::temp_dir().join(format!("archlab-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for model in [Model::Closed, Model::Open] {
        let path = dir.join(format!("{}.rec", model.name()));
        let mut p = LoadParams::new(server.addr);
        p.connections = Some(4);
        p.warmup = Duration::from_millis(100);
        p.duration = Some(Duration::from_millis(400));
        p.records = Some(path.clone());
        if model == Model::Open {
            p.model = Model::Open;
            p.rate = Some(3000.0);
        }
        let r = run_load(&LoadConfig::new(p).unwrap()).unwrap();
        assert_eq!(r.records_error, None);
        let n = r.totals.responses + r.totals.errors.total();
        assert!(n > 100, "{model:?}: {:?}", r.totals);
        assert_eq!(r.records_written, n, "{model:?}");
        let reader = RecordReader::open(&path).unwrap();
        let header_len = 40 + reader.header.label.len();
        assert_eq!(reader.header.connections, 4);
        assert!(reader.header.label.starts_with("GET http://"), "{}", reader.header.label);
        let size = std::fs::metadata(&path).unwrap().len() as usize;
        assert_eq!(size, header_len + n as usize * RECORD_LEN);
        let warmup_ns = 100_000_000;
        for rec in reader {
            let rec = rec.unwrap();
            assert!(rec.planned_ns <= rec.sent_ns || model == Model::Closed, "{rec:?}");
            let first = rec.first_byte_ns.unwrap();
            assert!(rec.sent_ns <= first && first <= rec.done_ns, "{rec:?}");
            assert!(rec.done_ns >= warmup_ns && rec.done_ns < warmup_ns + 400_000_000 + 1, "{rec:?}");
            assert!(rec.connection < 4 && rec.status == 200 && rec.error.is_none(), "{rec:?}");
            assert!(rec.bytes_received > 0 && rec.bytes_sent > 0);
        }
        let mut csv = Vec::new();
        let rows = export_jtl(RecordReader::open(&path).unwrap(), &mut csv).unwrap();
        assert_eq!(rows, n);
        let text = String::from_utf8(csv).unwrap();
        assert_eq!(text.lines().next(), Some(JTL_HEADER));
        assert_eq!(text.lines().count() as u64, n + 1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
