//! The collector: receives clients' batches on a Unix datagram socket and a Unix stream socket
//! (wire format in clients/README.md) and keeps every event with an account of what it refused.

use crate::event::{decode_batch, decode_header, Event, Refusal, EVENT_LEN, HEADER_LEN, MAX_BATCH_EVENTS};
use crate::report::Delivery;
use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(20);

#[derive(Default)]
struct State {
    events: Vec<Event>,
    /// Next expected seq and whether the final batch came, per (pid, stream).
    streams: HashMap<(u32, u32), (u32, bool)>,
    delivery: Delivery,
}

impl State {
    fn accept(&mut self, bytes: &[u8]) {
        match decode_batch(bytes) {
            Ok((header, events)) => {
                let d = &mut self.delivery;
                d.batches += 1;
                d.events_received += events.len() as u64;
                d.events_dropped_by_clients += header.dropped as u64;
                let stream = self.streams.entry((header.pid, header.stream)).or_insert((0, false));
                if header.seq > stream.0 {
                    d.batches_missing += (header.seq - stream.0) as u64;
                }
                *stream = (header.seq.wrapping_add(1), stream.1 || header.is_final());
                self.events.extend(events);
            }
            Err(refusal) => self.refuse(refusal),
        }
    }

    fn refuse(&mut self, refusal: Refusal) {
        let d = &mut self.delivery;
        d.malformed_batches += 1;
        *d.refusals.entry(refusal.reason.to_string()).or_default() += 1;
        d.first_error.get_or_insert(refusal.detail);
    }
}

/// A running collector; `finish` stops it and returns what it received.
pub struct Collector {
    datagram_path: PathBuf,
    stream_path: PathBuf,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    readers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Collector {
    /// Binds `NAME.sock` (datagrams) and `NAME.stream.sock` (stream) in `dir`.
    pub fn bind(dir: &Path, name: &str) -> std::io::Result<Collector> {
        let datagram_path = dir.join(format!("{name}.sock"));
        let stream_path = dir.join(format!("{name}.stream.sock"));
        let datagrams = UnixDatagram::bind(&datagram_path)?;
        datagrams.set_read_timeout(Some(POLL))?;
        let listener = UnixListener::bind(&stream_path)?;
        listener.set_nonblocking(true)?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Mutex::new(Vec::new()));
        let threads = vec![
            spawn_datagram_reader(datagrams, state.clone(), stop.clone()),
            spawn_listener(listener, state.clone(), stop.clone(), readers.clone()),
        ];
        Ok(Collector { datagram_path, stream_path, state, stop, threads, readers })
    }

    /// The environment a client needs: (variable, value) pairs.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            (crate::recorder::ENDPOINT_VAR, self.datagram_path.display().to_string()),
            ("TASKMETER_RECORD_STREAM", self.stream_path.display().to_string()),
        ]
    }

    /// Stops listening, reads what is already queued, waits up to `grace` for stream clients to
    /// close, and returns every event received with the delivery account.
    pub fn finish(self, grace: Duration) -> (Vec<Event>, Delivery) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads {
            let _ = thread.join();
        }
        let deadline = Instant::now() + grace;
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|e| e.into_inner()));
        for reader in readers {
            while !reader.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        let _ = std::fs::remove_file(&self.datagram_path);
        let _ = std::fs::remove_file(&self.stream_path);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut delivery = std::mem::take(&mut state.delivery);
        delivery.streams = state.streams.len() as u64;
        let mut pids: Vec<u32> = state.streams.keys().map(|k| k.0).collect();
        pids.sort_unstable();
        pids.dedup();
        delivery.processes = pids.len() as u64;
        delivery.streams_without_final = state.streams.values().filter(|s| !s.1).count() as u64;
        (std::mem::take(&mut state.events), delivery)
    }
}

fn spawn_datagram_reader(socket: UnixDatagram, state: Arc<Mutex<State>>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; HEADER_LEN + (MAX_BATCH_EVENTS + 1) * EVENT_LEN];
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if stopping {
                // Read what is queued, without waiting for more.
                let _ = socket.set_nonblocking(true);
            }
            match socket.recv(&mut buffer) {
                Ok(n) => state.lock().unwrap_or_else(|e| e.into_inner()).accept(&buffer[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    if stopping {
                        return;
                    }
                }
                Err(e) => {
                    return refuse(&state, Refusal::new("datagram socket error", format!("datagram socket: {e}")))
                }
            }
        }
    })
}

fn spawn_listener(
    listener: UnixListener,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    readers: Arc<Mutex<Vec<JoinHandle<()>>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || loop {
        match listener.accept() {
            Ok((connection, _)) => {
                let state = state.clone();
                let reader = std::thread::spawn(move || read_stream(connection, &state));
                readers.lock().unwrap_or_else(|e| e.into_inner()).push(reader);
            }
            Err(_) if stop.load(Ordering::SeqCst) => return,
            Err(_) => std::thread::sleep(POLL / 4),
        }
    })
}

/// Reads batches back to back until the client closes; a batch cut short is refused.
fn read_stream(connection: UnixStream, state: &Mutex<State>) {
    let _ = connection.set_nonblocking(false);
    let mut reader = std::io::BufReader::with_capacity(1 << 16, connection);
    let mut batch = Vec::with_capacity(HEADER_LEN + MAX_BATCH_EVENTS * EVENT_LEN);
    let cut = || Refusal::new("stream cut mid-batch", "a stream client disconnected in the middle of a batch");
    let read_error = |e: std::io::Error| Refusal::new("stream read error", format!("stream read: {e}"));
    loop {
        batch.resize(HEADER_LEN, 0);
        match read_full(&mut reader, &mut batch[..]) {
            Ok(0) => return,
            Ok(n) if n < HEADER_LEN => return refuse(state, cut()),
            Ok(_) => {}
            Err(e) => return refuse(state, read_error(e)),
        }
        let header = match decode_header(&batch) {
            Ok(header) => header,
            // Without a valid header the stream cannot be resynchronised: the rest is refused.
            Err(refusal) => return refuse(state, refusal),
        };
        batch.resize(header.batch_len(), 0);
        match read_full(&mut reader, &mut batch[HEADER_LEN..]) {
            Ok(n) if n == header.batch_len() - HEADER_LEN => {
                state.lock().unwrap_or_else(|e| e.into_inner()).accept(&batch)
            }
            Ok(_) => return refuse(state, cut()),
            Err(e) => return refuse(state, read_error(e)),
        }
    }
}

fn refuse(state: &Mutex<State>, refusal: Refusal) {
    state.lock().unwrap_or_else(|e| e.into_inner()).refuse(refusal);
}

/// Reads until `buf` is full or EOF; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Fills the receive queue of the datagram socket at `path` with datagrams that are not batches,
/// so that the next send to it waits, as a collector that has fallen behind would: how the tests
/// force a client's drops and its patience with a final batch. The returned socket must stay
/// open while the queue is to stay full.
pub fn fill_queue(path: &Path) -> std::io::Result<UnixDatagram> {
    let filler = UnixDatagram::unbound()?;
    filler.connect(path)?;
    filler.set_nonblocking(true)?;
    loop {
        match filler.send(b"fill") {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(filler),
            Err(e) => return Err(e),
        }
    }
}
