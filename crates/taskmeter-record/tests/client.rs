//! The Rust client against the collector, over real sockets: the contract, drops counted when
//! the collector does not read, and no event lost without a count at thread or process exit.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::time::Duration;
use taskmeter_record::analysis::analyze;
use taskmeter_record::collector::Collector;
use taskmeter_record::event::{decode_batch, MAGIC};
use taskmeter_record::report::Delivery;
use taskmeter_record::{Recorder, Window};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("taskmeter-record-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Reads batches (skipping the filler) until `finals` final batches came; waits up to 10 s for
/// each datagram.
fn read_batches(socket: &UnixDatagram, finals: usize) -> Vec<Vec<u8>> {
    socket.set_nonblocking(false).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buffer = vec![0u8; 1 << 17];
    let (mut batches, mut seen) = (Vec::new(), 0);
    while seen < finals {
        let n = socket.recv(&mut buffer).expect("a batch within 10 s");
        if buffer[..n].starts_with(&MAGIC) {
            seen += usize::from(decode_batch(&buffer[..n]).unwrap().0.is_final());
            batches.push(buffer[..n].to_vec());
        }
    }
    batches
}

/// Reads what is queued now, without waiting (the filler is skipped).
fn read_queued(socket: &UnixDatagram) -> Vec<Vec<u8>> {
    socket.set_nonblocking(true).unwrap();
    let mut buffer = vec![0u8; 1 << 17];
    let mut batches = Vec::new();
    while let Ok(n) = socket.recv(&mut buffer) {
        if buffer[..n].starts_with(&MAGIC) {
            batches.push(buffer[..n].to_vec());
        }
    }
    batches
}

/// The collector's account of these batches, as if it had received them from the client.
fn account(batches: &[Vec<u8>]) -> Delivery {
    let dir = temp_dir(&format!("account-{:?}", std::thread::current().id()));
    let collector = Collector::bind(&dir, "replay").unwrap();
    let replay = UnixDatagram::unbound().unwrap();
    replay.connect(&collector.env()[0].1).unwrap();
    for batch in batches {
        replay.send(batch).unwrap();
    }
    let (_, delivery) = collector.finish(Duration::from_secs(1));
    let _ = std::fs::remove_dir_all(&dir);
    delivery
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
    assert_eq!(
        (delivery.streams_without_final, delivery.malformed_batches, delivery.events_dropped_by_clients),
        (0, 0, 0)
    );
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

#[test]
fn a_batch_dropped_by_a_full_queue_is_counted_once_not_as_a_gap() {
    let dir = temp_dir("seq");
    let path = dir.join("full.sock");
    let collector = UnixDatagram::bind(&path).unwrap();
    let _filler = taskmeter_record::collector::fill_queue(&path).unwrap();
    let rec = Recorder::connect(path.to_str().unwrap(), None).unwrap();
    let early = std::thread::spawn(move || {
        for _ in 0..2048 {
            rec.record(); // the full batch meets the full queue: dropped
        }
        let early = read_queued(&collector);
        rec.record();
        rec.flush(); // goes, with the count of the dropped batch
        (early, collector)
    });
    let (mut batches, collector) = early.join().unwrap();
    batches.extend(read_batches(&collector, 1));
    let d = account(&batches);
    assert_eq!(d.events_dropped_by_clients, 2048, "{d:?}");
    assert_eq!(d.events_received + d.events_dropped_by_clients, 2049, "{d:?}");
    assert_eq!((d.batches_missing, d.streams_without_final), (0, 0), "{d:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_final_batch_waits_for_a_collector_whose_queue_is_full() {
    let dir = temp_dir("patience");
    let path = dir.join("slow.sock");
    let collector = UnixDatagram::bind(&path).unwrap();
    let _filler = taskmeter_record::collector::fill_queue(&path).unwrap();
    let rec = Recorder::connect(path.to_str().unwrap(), None).unwrap();
    let sent = 100;
    let (recorded, recorded_rx) = mpsc::channel();
    // The thread's end sends its final batch into the full queue: the first try times out.
    let thread = std::thread::spawn(move || {
        for _ in 0..sent {
            rec.record();
        }
        recorded.send(()).unwrap();
    });
    recorded_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(100)); // the collector reads late
    let batches = read_batches(&collector, 1);
    thread.join().unwrap();
    let d = account(&batches);
    assert_eq!(d.events_received + d.events_dropped_by_clients, sent, "{d:?}");
    assert_eq!((d.batches_missing, d.streams_without_final), (0, 0), "{d:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_event_recorded_after_the_threads_batch_is_gone_is_sent() {
    struct RecordsWhenDropped(Recorder);
    impl Drop for RecordsWhenDropped {
        fn drop(&mut self) {
            self.0.record();
        }
    }
    thread_local! {
        static LATE: Mutex<Option<RecordsWhenDropped>> = const { Mutex::new(None) };
    }
    let dir = temp_dir("late-tls");
    let collector = Collector::bind(&dir, "job").unwrap();
    let rec = Recorder::connect(&collector.env()[0].1, None).unwrap();
    std::thread::spawn(move || {
        // Set before the first record, so its destructor runs after the client's batch is gone.
        LATE.with(|late| *late.lock().unwrap() = Some(RecordsWhenDropped(rec.clone())));
        rec.record();
    })
    .join()
    .unwrap();
    let (_, d) = collector.finish(Duration::from_secs(1));
    assert_eq!((d.events_received, d.events_dropped_by_clients, d.streams_without_final), (2, 0, 0), "{d:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Set in the child process of the test below.
const CHILD_VAR: &str = "TASKMETER_RECORD_TEST_CHILD";
const BEFORE_EXIT: u64 = 1000;
const AFTER_EXIT: u64 = 3;

#[test]
fn a_thread_still_running_at_exit_loses_nothing() {
    if std::env::var_os(CHILD_VAR).is_some() {
        exit_while_a_thread_still_records();
    }
    let dir = temp_dir("exit");
    let collector = Collector::bind(&dir, "job").unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_thread_still_running_at_exit_loses_nothing", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, "1")
        .envs(collector.env())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (_, d) = collector.finish(Duration::from_secs(1));
    assert_eq!(d.events_received, BEFORE_EXIT + AFTER_EXIT, "{d:?}");
    assert_eq!((d.events_dropped_by_clients, d.batches_missing, d.streams_without_final), (0, 0, 0), "{d:?}");
    // The thread's stream, ended at exit, then one new stream per event after it.
    assert_eq!(d.streams, 1 + AFTER_EXIT, "{d:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The exit handler below asks the recording thread for more events, and waits for them.
static AFTER_EXIT_HANDSHAKE: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>> = Mutex::new(None);

/// The child: a thread records fewer events than a batch (so it never sent one), then blocks
/// for ever while the process exits; after the client's exit handler it records more.
fn exit_while_a_thread_still_records() -> ! {
    extern "C" fn record_after_the_exit_flush() {
        if let Some((go, done)) = AFTER_EXIT_HANDSHAKE.lock().unwrap().take() {
            go.send(()).unwrap();
            done.recv_timeout(Duration::from_secs(30)).unwrap();
        }
    }
    // Handlers run in reverse order of registration: this one after the client's.
    // SAFETY: a plain `extern "C" fn()`.
    unsafe { libc::atexit(record_after_the_exit_flush) };
    let rec = Recorder::from_env();
    assert!(rec.is_enabled());
    let ((recorded, recorded_rx), (go, go_rx), (done, done_rx)) = (mpsc::channel(), mpsc::channel(), mpsc::channel());
    std::thread::spawn(move || {
        for _ in 0..BEFORE_EXIT {
            rec.record();
        }
        recorded.send(()).unwrap();
        go_rx.recv().unwrap();
        for _ in 0..AFTER_EXIT {
            rec.record();
        }
        done.send(()).unwrap();
        loop {
            std::thread::park();
        }
    });
    recorded_rx.recv().unwrap();
    *AFTER_EXIT_HANDSHAKE.lock().unwrap() = Some((go, done_rx));
    std::process::exit(0)
}
