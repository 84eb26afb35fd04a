//! Stops a child's process group at a deadline (or at Ctrl-C): SIGTERM, then SIGKILL after a
//! grace, as `taskmeter bench` does to a body still running after the drain.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use taskmeter_record::clock::now_ns;

pub struct Watchdog {
    pgid: Arc<AtomicI32>,
    stopped: Arc<AtomicBool>,
    done: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    /// Watches until `deadline_ns` (CLOCK_MONOTONIC); the group to stop is set with [`Watchdog::watch`].
    pub fn start(deadline_ns: u64, term_grace: Duration) -> Watchdog {
        let pgid = Arc::new(AtomicI32::new(0));
        let stopped = Arc::new(AtomicBool::new(false));
        let (done, wait) = mpsc::channel();
        let (group, flag) = (pgid.clone(), stopped.clone());
        let thread = std::thread::spawn(move || {
            let poll = Duration::from_millis(20);
            while now_ns() < deadline_ns && !super::interrupt::interrupted() {
                if wait.recv_timeout(poll) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
            }
            let target = group.load(Ordering::SeqCst);
            if target <= 0 {
                return;
            }
            flag.store(true, Ordering::SeqCst);
            super::kill_group(target, libc::SIGTERM);
            if wait.recv_timeout(term_grace).is_err() {
                super::kill_group(target, libc::SIGKILL);
            }
        });
        Watchdog { pgid, stopped, done, thread }
    }

    /// The process group to stop now (0: none).
    pub fn watch(&self, pgid: i32) {
        self.pgid.store(pgid, Ordering::SeqCst);
    }

    /// Whether it stopped a group.
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    pub fn finish(self) {
        let _ = self.done.send(());
        let _ = self.thread.join();
    }
}
