//! Ctrl-C: every child that is running is told (workers finish their iteration and report what
//! they measured), and the command then ends, keeping what it has.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// What to do at Ctrl-C for one listener.
type Tell = Box<dyn Fn() + Send>;

/// Who is listening now (several workers with `--together`), by id.
static LISTENERS: Mutex<Vec<(u64, Tell)>> = Mutex::new(Vec::new());
static NEXT_LISTENER: AtomicU64 = AtomicU64::new(0);
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);

/// Children run in their own process group, so the terminal's SIGINT reaches only taskmeter,
/// which passes it on this way.
pub fn install_handler() {
    let _ = ctrlc::set_handler(|| {
        INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        for (_, tell) in LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            tell();
        }
    });
}

pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

/// A subscription to Ctrl-C for as long as it lives.
pub struct Listener(u64);

impl Listener {
    /// Calls `tell` at Ctrl-C (from the signal-handling thread).
    pub fn new(tell: impl Fn() + Send + 'static) -> Listener {
        let id = NEXT_LISTENER.fetch_add(1, Ordering::SeqCst);
        LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).push((id, Box::new(tell)));
        Listener(id)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        LISTENERS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(id, _)| *id != self.0);
    }
}
