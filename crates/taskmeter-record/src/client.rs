//! The cross-process sink: per-thread batches sent as datagrams to the collector of
//! `taskmeter bench` (wire format in clients/README.md).
//!
//! Each thread appends to its own batch, behind a lock that only the exit handler ever contends:
//! at process exit the handler sends every live thread's pending batch, final, so a thread still
//! running then loses nothing.

use crate::event::{encode_batch, BatchHeader, Event, CLIENT_BATCH_EVENTS, FLAG_FINAL};
use std::cell::RefCell;
use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError};
use std::time::{Duration, Instant};

/// A batch older than this is sent at the next call.
const MAX_BATCH_AGE_NS: u64 = 100_000_000;
/// The longest a send may hold up the measured program; then the batch is dropped and counted.
const SEND_TIMEOUT: Duration = Duration::from_millis(10);
/// How long a final batch waits for room in a full queue: no later batch of its stream could
/// carry its count.
const FINAL_PATIENCE: Duration = Duration::from_secs(1);

pub(crate) struct Client {
    id: u64,
    socket: UnixDatagram,
    pid: u32,
    next_stream: AtomicU32,
}

/// One thread's pending batch for one client.
struct Batch {
    client: Arc<Client>,
    stream: u32,
    seq: u32,
    dropped: u32,
    events: Vec<Event>,
    bytes: Vec<u8>,
    /// The stream's final batch was sent (the thread ended, or the process is exiting): nothing
    /// will send a batch later, so each further event goes at once.
    ended: bool,
}

impl Batch {
    fn new(client: &Arc<Client>) -> Batch {
        Batch {
            client: client.clone(),
            stream: client.next_stream.fetch_add(1, Ordering::Relaxed),
            seq: 0,
            dropped: 0,
            events: Vec::with_capacity(CLIENT_BATCH_EVENTS),
            bytes: Vec::new(),
            ended: false,
        }
    }

    #[inline]
    fn push(&mut self, event: Event) {
        self.events.push(event);
        if self.ended {
            // The event goes now, as the final batch of a new stream.
            self.stream = self.client.next_stream.fetch_add(1, Ordering::Relaxed);
            self.seq = 0;
            self.send(FLAG_FINAL, Instant::now() + FINAL_PATIENCE);
        } else if self.events.len() >= CLIENT_BATCH_EVENTS
            || event.t_ns.saturating_sub(self.events[0].t_ns) > MAX_BATCH_AGE_NS
        {
            self.send(0, Instant::now());
        }
    }

    /// Sends the events as one batch, trying again while the collector's queue is full until
    /// `patient_until`. A batch that could not go is counted in `dropped` of the next one; a final
    /// batch has no next one, so then a header-only final batch carries the count.
    fn send(&mut self, flags: u32, patient_until: Instant) {
        let mut sent = self.try_send(flags, patient_until);
        if !sent && flags & FLAG_FINAL != 0 {
            self.dropped = self.dropped.saturating_add(self.events.len() as u32);
            self.events.clear();
            sent = self.try_send(flags, patient_until);
        }
        // seq advances only when the batch went: a dropped batch is counted once, as dropped.
        if sent {
            self.seq = self.seq.wrapping_add(1);
            self.dropped = 0;
        } else {
            self.dropped = self.dropped.saturating_add(self.events.len() as u32);
        }
        self.events.clear();
    }

    fn try_send(&mut self, flags: u32, patient_until: Instant) -> bool {
        let header = BatchHeader {
            flags,
            pid: self.client.pid,
            stream: self.stream,
            seq: self.seq,
            dropped: self.dropped,
            count: self.events.len() as u32,
        };
        self.bytes.clear();
        encode_batch(&header, &self.events, &mut self.bytes);
        loop {
            match self.client.socket.send(&self.bytes) {
                Ok(_) => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // SO_SNDTIMEO ran out with the queue full; any other error (the collector gone:
                // ECONNREFUSED, ENOENT) would not clear by waiting.
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < patient_until => {}
                Err(_) => return false,
            }
        }
    }

    /// Ends the stream with a final batch, once: the thread's end and the exit handler may both
    /// come to it.
    fn end(&mut self, patient_until: Instant) {
        if !self.ended {
            self.send(FLAG_FINAL, patient_until);
            self.ended = true;
        }
    }
}

/// The calling thread's batch, also listed in `LIVE` for the exit handler.
struct ThreadBatch {
    client_id: u64,
    batch: Arc<Mutex<Batch>>,
}

impl ThreadBatch {
    fn open(client: &Arc<Client>) -> ThreadBatch {
        let mut batch = Batch::new(client);
        let mut live = lock(&LIVE);
        // Opened after the exit handler ran: no one would end the stream, so it starts ended.
        batch.ended = live.exit_handler_ran;
        let batch = Arc::new(Mutex::new(batch));
        if !live.exit_handler_ran {
            live.batches.push(batch.clone());
        }
        ThreadBatch { client_id: client.id, batch }
    }
}

impl Drop for ThreadBatch {
    /// A thread that ends (and the main thread at `exit`, before the exit handler) sends what it
    /// holds, marked final.
    fn drop(&mut self) {
        lock(&self.batch).end(Instant::now() + FINAL_PATIENCE);
        lock(&LIVE).batches.retain(|b| !Arc::ptr_eq(b, &self.batch));
    }
}

/// The batches of the threads that have not ended, for the exit handler.
struct Live {
    batches: Vec<Arc<Mutex<Batch>>>,
    exit_handler_ran: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live { batches: Vec::new(), exit_handler_ran: false });

/// Registered with `atexit`: sends every live thread's batch as its stream's final batch, all
/// within one `FINAL_PATIENCE`.
extern "C" fn end_every_stream_at_exit() {
    let batches = {
        let mut live = lock(&LIVE);
        live.exit_handler_ran = true;
        std::mem::take(&mut live.batches)
    };
    let patient_until = Instant::now() + FINAL_PATIENCE;
    for batch in batches {
        lock(&batch).end(patient_until);
    }
}

/// A lock that a panic elsewhere does not make unusable: the data stays consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    static BATCH: RefCell<Option<ThreadBatch>> = const { RefCell::new(None) };
}

static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

impl Client {
    pub fn connect(path: &str) -> std::io::Result<Client> {
        let socket = UnixDatagram::unbound()?;
        socket.connect(path)?;
        socket.set_write_timeout(Some(SEND_TIMEOUT))?;
        static EXIT_HANDLER: Once = Once::new();
        // SAFETY: registering a handler that is a plain `extern "C" fn()` with no arguments.
        EXIT_HANDLER.call_once(|| unsafe {
            libc::atexit(end_every_stream_at_exit);
        });
        Ok(Client {
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            socket,
            pid: std::process::id(),
            next_stream: AtomicU32::new(0),
        })
    }

    #[inline]
    pub fn push(self: &Arc<Client>, event: Event) {
        let buffered = BATCH.try_with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|thread_batch| thread_batch.client_id != self.id) {
                // Another client's batch (rare: a second Recorder) goes out, final, before switching.
                *slot = Some(ThreadBatch::open(self));
            }
            lock(&slot.as_ref().unwrap().batch).push(event);
        });
        if buffered.is_err() {
            // The thread's batch is already destroyed (a call from another thread-local's
            // destructor): the event goes alone, as the final batch of a new stream.
            let mut alone = Batch::new(self);
            alone.events.push(event);
            alone.send(FLAG_FINAL, Instant::now() + FINAL_PATIENCE);
        }
    }

    /// Sends the calling thread's batch now.
    pub fn flush(&self) {
        let _ = BATCH.try_with(|cell| {
            if let Some(thread_batch) = cell.borrow().as_ref().filter(|t| t.client_id == self.id) {
                let mut batch = lock(&thread_batch.batch);
                if !batch.ended && (!batch.events.is_empty() || batch.dropped > 0) {
                    batch.send(0, Instant::now());
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::decode_batch;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_final_batch_too_big_to_send_goes_as_a_header_carrying_its_count() {
        let dir = std::env::temp_dir().join(format!("taskmeter-record-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("header-only.sock");
        let _ = std::fs::remove_file(&path);
        let collector = UnixDatagram::bind(&path).unwrap();
        let client = Arc::new(Client::connect(path.to_str().unwrap()).unwrap());
        // The smallest send buffer (about 4.5 KB) refuses a datagram of 1000 events at once
        // (EMSGSIZE) and takes a 32-byte header.
        let one: libc::c_int = 1;
        // SAFETY: setsockopt with a valid fd and an int option value of the right size.
        let r = unsafe {
            libc::setsockopt(
                client.socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
        let mut batch = Batch::new(&client);
        batch.events.extend((0..1000).map(|t| Event::record(t, 1)));
        batch.end(Instant::now() + FINAL_PATIENCE);
        let mut buffer = vec![0u8; 1 << 16];
        collector.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = collector.recv(&mut buffer).unwrap();
        let (header, events) = decode_batch(&buffer[..n]).unwrap();
        assert_eq!((header.is_final(), header.seq, header.dropped, events.len()), (true, 0, 1000, 0));
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(&dir);
    }
}
