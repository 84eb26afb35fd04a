//! The cross-process sink: per-thread batches sent as datagrams to the collector of
//! `taskmeter bench` (wire format in clients/README.md).

use crate::event::{encode_batch, BatchHeader, Event, CLIENT_BATCH_EVENTS, FLAG_FINAL};
use std::cell::RefCell;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A batch older than this is sent at the next call.
const MAX_BATCH_AGE_NS: u64 = 100_000_000;
/// The longest a send may hold up the measured program; then the batch is dropped and counted.
const SEND_TIMEOUT: Duration = Duration::from_millis(10);

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
}

impl Batch {
    fn send(&mut self, flags: u32) {
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
        self.seq = self.seq.wrapping_add(1);
        match self.client.socket.send(&self.bytes) {
            Ok(_) => self.dropped = 0,
            Err(_) => self.dropped = self.dropped.saturating_add(self.events.len() as u32),
        }
        self.events.clear();
    }
}

impl Drop for Batch {
    /// A thread that ends (and the main thread at `exit`) sends what it holds, marked final.
    fn drop(&mut self) {
        self.send(FLAG_FINAL);
    }
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

impl Client {
    pub fn connect(path: &str) -> std::io::Result<Client> {
        let socket = UnixDatagram::unbound()?;
        socket.connect(path)?;
        socket.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok(Client {
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            socket,
            pid: std::process::id(),
            next_stream: AtomicU32::new(0),
        })
    }

    #[inline]
    pub fn push(self: &Arc<Client>, event: Event) {
        // A thread-local that is already destroyed (a call from another thread-local's
        // destructor) cannot buffer: the event is lost, like any send after exit.
        let _ = BATCH.try_with(|cell| {
            let mut slot = cell.borrow_mut();
            let batch = match slot.as_mut() {
                Some(batch) if batch.client.id == self.id => batch,
                _ => {
                    // Another client's batch (rare: a second Recorder) goes out before switching.
                    *slot = Some(Batch {
                        client: self.clone(),
                        stream: self.next_stream.fetch_add(1, Ordering::Relaxed),
                        seq: 0,
                        dropped: 0,
                        events: Vec::with_capacity(CLIENT_BATCH_EVENTS),
                        bytes: Vec::new(),
                    });
                    slot.as_mut().unwrap()
                }
            };
            batch.events.push(event);
            if batch.events.len() >= CLIENT_BATCH_EVENTS || event.t_ns.saturating_sub(batch.events[0].t_ns) > MAX_BATCH_AGE_NS {
                batch.send(0);
            }
        });
    }

    /// Sends the calling thread's batch now.
    pub fn flush(&self) {
        let _ = BATCH.try_with(|cell| {
            if let Some(batch) = cell.borrow_mut().as_mut().filter(|b| b.client.id == self.id && (!b.events.is_empty() || b.dropped > 0)) {
                batch.send(0);
            }
        });
    }
}
