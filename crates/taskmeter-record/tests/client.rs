//! The Rust client against the collector, over real sockets: the contract, and drops counted
//! when the collector does not read.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use taskmeter_record::analysis::analyze;
use taskmeter_record::collector::Collector;
use taskmeter_record::event::decode_batch;
use taskmeter_record::{Recorder, Window};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("taskmeter-record-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_client_contract() {
    let dir = temp_dir("contract");
    let collector = Collector::bind(&dir, "job").unwrap();
    let path = collector.env()[0].1.clone();
    let rec = Recorder::connect(&path, None).unwrap();
    // A thread that ends sends its batch, marked final.
    std::thread::spawn(move || {
        for _ in 0..3 {
            rec.record();
        }
        rec.record_n(5);
        rec.start(1);
        rec.start(2);
        rec.complete(2);
        rec.complete(1);
        rec.complete(99);
        rec.complete(1);
        rec.start(3);
    })
    .join()
    .unwrap();
    let (events, delivery) = collector.finish(Duration::from_secs(1));
    assert_eq!((delivery.events_received, delivery.batches, delivery.streams, delivery.processes), (11, 1, 1, 1));
    assert_eq!((delivery.streams_without_final, delivery.malformed_batches, delivery.events_dropped_by_clients), (0, 0, 0));
    let a = analyze(events, Window { start_ns: 0, warmup_end_ns: 0, end_ns: u64::MAX }, 0, None).measured;
    assert_eq!(a.units, 10);
    assert_eq!(a.latency.unwrap().count, 2);
    assert_eq!((a.ids.unknown_ids, a.ids.duplicate_completions, a.ids.never_completed), (1, 1, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_client_that_outruns_the_collector_counts_what_it_dropped() {
    let dir = temp_dir("stalled");
    let path = dir.join("stalled.sock");
    let stalled = UnixDatagram::bind(&path).unwrap(); // never read until the end
    let rec = Recorder::connect(path.to_str().unwrap(), None).unwrap();
    let sent = 40 * 2048;
    let rec_in_thread = rec.clone();
    std::thread::spawn(move || {
        for _ in 0..sent {
            rec_in_thread.record();
        }
        // Read what queued up, then flush one last batch that carries the dropped count.
        let mut received = 0u64;
        let mut dropped = 0u64;
        let mut buffer = vec![0u8; 1 << 17];
        stalled.set_nonblocking(true).unwrap();
        while let Ok(n) = stalled.recv(&mut buffer) {
            let (header, events) = decode_batch(&buffer[..n]).unwrap();
            received += events.len() as u64;
            dropped += header.dropped as u64;
        }
        rec_in_thread.record();
        rec_in_thread.flush();
        stalled.set_nonblocking(false).unwrap();
        stalled.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = stalled.recv(&mut buffer).unwrap();
        let (header, events) = decode_batch(&buffer[..n]).unwrap();
        received += events.len() as u64;
        dropped += header.dropped as u64;
        assert!(dropped > 0, "a queue of {} datagrams cannot hold 40 batches", received / 2048);
        assert_eq!(received + dropped, sent + 1, "every event is received or counted as dropped");
    })
    .join()
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_collector_every_call_is_a_no_op() {
    let rec = Recorder::disabled();
    rec.record();
    rec.start(1);
    rec.complete(1);
    rec.flush();
    assert!(!rec.is_enabled());
    assert!(rec.running());
    assert!(Recorder::connect("/nonexistent/taskmeter.sock", None).is_err());
}
