//! The in-process sink: one append-only log per (thread, job), so `record()` takes no lock and
//! shares no cache line with another thread.
//!
//! A log is a list of fixed-size chunks. Only its own thread writes: it fills a slot, then
//! publishes the chunk's new length with a release store. The reader (the bench runner, after the
//! measurement) reads each chunk up to its published length with an acquire load, so it may run
//! while stragglers still record.

use crate::event::{Event, Kind};
use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

const CHUNK_EVENTS: usize = 8192;

struct Chunk {
    len: AtomicUsize,
    slots: Box<[UnsafeCell<MaybeUninit<Event>>]>,
}

// SAFETY: a slot is written only by the chunk's owning thread, before the length that covers it
// is published with release; other threads read only slots below the length they loaded with
// acquire (see `ThreadLog`).
unsafe impl Sync for Chunk {}
unsafe impl Send for Chunk {}

impl Chunk {
    fn new() -> Arc<Chunk> {
        let slots = (0..CHUNK_EVENTS).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
        Arc::new(Chunk { len: AtomicUsize::new(0), slots })
    }
}

/// What one thread recorded for one job.
struct ThreadLog {
    chunks: Mutex<Vec<Arc<Chunk>>>,
    /// The chunk being filled; touched only by the owning thread.
    current: UnsafeCell<Arc<Chunk>>,
    /// Units recorded during the warm-up: counted, not stored. Written only by the owning thread.
    warmup_units: AtomicU64,
    last_warmup_t: AtomicU64,
    /// Starts minus completions, for the drain phase to know when nothing is in flight.
    open_ids: AtomicU64,
    /// Events `close` copied from this log; any written beyond them are in no report.
    copied_by_close: AtomicUsize,
}

// SAFETY: `current` is only accessed by the thread that owns the log (enforced by the lookup by
// ThreadId in `Job::log_for_this_thread`); chunk slots are written before their length is
// published with release and read only below the length loaded with acquire.
unsafe impl Sync for ThreadLog {}
unsafe impl Send for ThreadLog {}

impl ThreadLog {
    fn new() -> ThreadLog {
        let first = Chunk::new();
        ThreadLog {
            chunks: Mutex::new(vec![first.clone()]),
            current: UnsafeCell::new(first),
            warmup_units: AtomicU64::new(0),
            last_warmup_t: AtomicU64::new(0),
            open_ids: AtomicU64::new(0),
            copied_by_close: AtomicUsize::new(0),
        }
    }

    /// Appends an event. Must be called only from the owning thread.
    #[inline]
    unsafe fn push(&self, event: Event) {
        let current = &mut *self.current.get();
        let len = current.len.load(Ordering::Relaxed);
        if len == CHUNK_EVENTS {
            let fresh = Chunk::new();
            self.chunks.lock().unwrap_or_else(|e| e.into_inner()).push(fresh.clone());
            *current = fresh;
            return self.push(event);
        }
        (*current.slots[len].get()).write(event);
        current.len.store(len + 1, Ordering::Release);
    }

    /// Appends the events written so far to `out`; returns how many.
    fn copy_into(&self, out: &mut Vec<Event>) -> usize {
        let before = out.len();
        for chunk in self.chunks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let len = chunk.len.load(Ordering::Acquire);
            // SAFETY: slots below the published length were initialised before it was stored.
            out.extend(chunk.slots[..len].iter().map(|slot| unsafe { (*slot.get()).assume_init() }));
        }
        out.len() - before
    }

    /// Events written so far.
    fn len(&self) -> usize {
        self.chunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|chunk| chunk.len.load(Ordering::Acquire))
            .sum()
    }
}

/// The window of one job, fixed before its body first runs: CLOCK_MONOTONIC ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    /// When the body was first invoked.
    pub start_ns: u64,
    /// End of the warm-up, start of the measurement.
    pub warmup_end_ns: u64,
    /// End of the measurement.
    pub end_ns: u64,
}

/// One scenario-and-input job in this process.
pub(crate) struct Job {
    id: u64,
    pub window: Window,
    logs: Mutex<Vec<(ThreadId, Arc<ThreadLog>)>>,
    closed: AtomicBool,
    after_close: AtomicU64,
}

/// What the reader takes from a job.
pub(crate) struct Collected {
    pub events: Vec<Event>,
    pub warmup_units: u64,
    /// The last unit recorded during the warm-up, if any (the first measured gap starts there).
    pub last_warmup_t: Option<u64>,
}

thread_local! {
    /// The log this thread last wrote to, and its job's id: the fast path of `push`.
    static CACHED: (Cell<u64>, Cell<*const ThreadLog>) = const { (Cell::new(0), Cell::new(std::ptr::null())) };
}

static NEXT_JOB_ID: AtomicU64 = AtomicU64::new(1);

impl Job {
    pub fn new(window: Window) -> Arc<Job> {
        Arc::new(Job {
            id: NEXT_JOB_ID.fetch_add(1, Ordering::Relaxed),
            window,
            logs: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            after_close: AtomicU64::new(0),
        })
    }

    #[inline]
    pub fn push(&self, event: Event) {
        if self.closed.load(Ordering::Relaxed) {
            self.after_close.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.log(event);
    }

    /// Writes an event to this thread's log. A push that passed the `closed` check just before
    /// `close` writes after `close` copied the log: `after_close` counts it.
    #[inline]
    fn log(&self, event: Event) {
        let log = CACHED.with(|(job, log)| {
            if job.get() == self.id {
                // SAFETY: the log is kept alive by `self.logs` for as long as `self` lives.
                unsafe { &*log.get() }
            } else {
                let found = self.log_for_this_thread();
                job.set(self.id);
                log.set(Arc::as_ptr(&found));
                // SAFETY: as above; `found` is also held in `self.logs`.
                unsafe { &*Arc::as_ptr(&found) }
            }
        });
        match event.kind() {
            Some(Kind::Record) if event.t_ns < self.window.warmup_end_ns => {
                let units = log.warmup_units.load(Ordering::Relaxed);
                log.warmup_units.store(units + event.value(), Ordering::Relaxed);
                log.last_warmup_t.store(event.t_ns, Ordering::Relaxed);
                return;
            }
            Some(Kind::Start) => {
                log.open_ids.store(log.open_ids.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed)
            }
            Some(Kind::Complete) => {
                log.open_ids.store(log.open_ids.load(Ordering::Relaxed).wrapping_sub(1), Ordering::Relaxed)
            }
            _ => {}
        }
        // SAFETY: this thread owns `log` (found by its ThreadId).
        unsafe { log.push(event) }
    }

    #[cold]
    fn log_for_this_thread(&self) -> Arc<ThreadLog> {
        let me = std::thread::current().id();
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, log)) = logs.iter().find(|(id, _)| *id == me) {
            return log.clone();
        }
        let log = Arc::new(ThreadLog::new());
        logs.push((me, log.clone()));
        log
    }

    /// Units started and not yet completed, over all threads (duplicates and unknown ids make it
    /// approximate; it only ends the drain early).
    pub fn open_ids(&self) -> i64 {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        logs.iter().map(|(_, log)| log.open_ids.load(Ordering::Relaxed) as i64).sum()
    }

    /// Stops accepting events and returns what was recorded.
    pub fn close(&self) -> Collected {
        self.closed.store(true, Ordering::SeqCst);
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = Vec::new();
        let (mut warmup_units, mut last_warmup_t) = (0, None);
        for (_, log) in logs.iter() {
            log.copied_by_close.store(log.copy_into(&mut events), Ordering::Relaxed);
            let units = log.warmup_units.load(Ordering::Relaxed);
            if units > 0 {
                warmup_units += units;
                last_warmup_t = last_warmup_t.max(Some(log.last_warmup_t.load(Ordering::Relaxed)));
            }
        }
        Collected { events, warmup_units, last_warmup_t }
    }

    /// Events that arrived after `close` and are in no report: those refused by the `closed`
    /// check, and those written to a log (by pushes that passed the check just before `close`)
    /// after `close` copied it. Read it as late as possible: a push that passed the check and
    /// has not written yet is not seen.
    pub fn after_close(&self) -> u64 {
        let logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let written_late: usize =
            logs.iter().map(|(_, log)| log.len() - log.copied_by_close.load(Ordering::Relaxed)).sum();
        self.after_close.load(Ordering::Relaxed) + written_late as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_from_many_threads_and_chunks_are_all_collected() {
        let job = Job::new(Window { start_ns: 0, warmup_end_ns: 100, end_ns: u64::MAX });
        std::thread::scope(|s| {
            for thread in 0..4u64 {
                let job = &job;
                s.spawn(move || {
                    for i in 0..(CHUNK_EVENTS as u64 + 10) {
                        job.push(Event::record(1000 + i, 1 + thread));
                    }
                    job.push(Event::record(5, 3)); // in the warm-up: counted only
                });
            }
        });
        let collected = job.close();
        assert_eq!(collected.events.len(), 4 * (CHUNK_EVENTS + 10));
        let units: u64 = collected.events.iter().map(|e| e.value()).sum();
        assert_eq!(units, (CHUNK_EVENTS as u64 + 10) * (1 + 2 + 3 + 4));
        assert_eq!((collected.warmup_units, collected.last_warmup_t), (12, Some(5)));
        job.push(Event::record(2000, 1));
        assert_eq!(job.after_close(), 1);
    }

    #[test]
    fn an_event_written_after_close_copied_the_logs_is_counted() {
        let job = Job::new(Window { start_ns: 0, warmup_end_ns: 0, end_ns: u64::MAX });
        job.push(Event::record(10, 1));
        let collected = job.close();
        assert_eq!(collected.events.len(), 1);
        // Pushes that passed the `closed` check before `close` stored it, and wrote afterwards:
        // one from a thread whose log `close` copied, one from a thread whose log is new.
        job.log(Event::record(11, 1));
        std::thread::scope(|s| {
            s.spawn(|| job.log(Event::record(12, 1)));
        });
        job.push(Event::record(13, 1)); // refused by the check
        assert_eq!(job.after_close(), 3);
    }

    #[test]
    fn two_jobs_on_one_thread_keep_their_own_events() {
        let window = Window { start_ns: 0, warmup_end_ns: 0, end_ns: u64::MAX };
        let (a, b) = (Job::new(window), Job::new(window));
        for t in 0..10 {
            a.push(Event::record(t, 1));
            b.push(Event::start(t, t));
        }
        assert_eq!(b.open_ids(), 10);
        assert!(a.close().events.iter().all(|e| e.kind() == Some(Kind::Record)));
        assert_eq!(b.close().events.len(), 10);
    }
}
