//! `compio`: a completion-based runtime on io_uring, one per thread. Its timers are a binary
//! heap of deadlines (compio-runtime/src/time), and the thread waits in io_uring_enter with the
//! time to the earliest as its timeout, in nanoseconds.

use super::per_core::LocalRuntime;
use crate::clock::{instant_at, now_ns};
use crate::workload::AsyncTimer;
use compio::driver::{OpCode, OpEntry};
use std::future::Future;
use std::time::Duration;

pub struct Compio;

impl AsyncTimer for Compio {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        compio::time::sleep(Duration::from_nanos(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        compio::time::sleep_until(instant_at(deadline_ns))
    }
    fn yield_now() -> impl Future<Output = ()> {
        // compio has no yield of its own: futures-lite's wakes the task and returns Pending once.
        smol::future::yield_now()
    }
}

/// One thread's compio runtime.
pub struct CompioRuntime(compio::runtime::Runtime);

impl LocalRuntime for CompioRuntime {
    const NAME: &'static str = "compio";

    fn build(tasks: u32) -> Result<Self, String> {
        // A wake from another thread spins until there is room in a bounded queue (64 by
        // default), and the start gate wakes every unit at once from one thread: with the
        // default, 10,000 units on two threads hung there. Room for all of this thread's units.
        let mut builder = compio::runtime::RuntimeBuilder::new();
        builder.sync_queue_size((tasks as usize).max(64));
        builder.build().map(CompioRuntime).map_err(|e| e.to_string())
    }
    fn block_on<F: Future>(&mut self, future: F) -> F::Output {
        self.0.block_on(future)
    }
    fn spawn<F: Future + 'static>(future: F) -> impl Future<Output = Result<F::Output, String>> + 'static {
        let task = compio::runtime::spawn(future);
        async move { task.await.map_err(|e| format!("a compio task failed: {e}")) }
    }
    fn detach<F: Future<Output = ()> + 'static>(future: F) {
        compio::runtime::spawn(future).detach(); // dropping a compio JoinHandle would cancel it
    }
}

/// `IORING_OP_TIMEOUT` with an absolute CLOCK_MONOTONIC deadline (`IORING_TIMEOUT_ABS`),
/// submitted on the thread's own compio ring: the kernel's hrtimer, no runtime timer between.
struct UringTimeout(io_uring::types::Timespec);

// SAFETY: the entry points at the op's own timespec, which compio keeps in place (boxed with
// the op) until the completion arrives.
unsafe impl OpCode for UringTimeout {
    type Control = ();

    fn create_entry(&mut self, _: &mut ()) -> OpEntry {
        let timeout = io_uring::opcode::Timeout::new(&self.0).flags(io_uring::types::TimeoutFlags::ABS);
        OpEntry::Submission(timeout.build())
    }
}

/// Waits on compio's ring until `deadline_ns` with one `IORING_OP_TIMEOUT`.
pub async fn uring_timeout_until(deadline_ns: u64) {
    if deadline_ns <= now_ns() {
        return;
    }
    let at =
        io_uring::types::Timespec::new().sec(deadline_ns / 1_000_000_000).nsec((deadline_ns % 1_000_000_000) as u32);
    let compio::BufResult(result, _) = compio::runtime::submit(UringTimeout(at)).await;
    match result {
        // A timeout that expires completes with ETIME.
        Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
        Ok(_) => {}
        Err(e) => panic!("IORING_OP_TIMEOUT failed: {e}"),
    }
}

/// compio waiting with [`uring_timeout_until`].
pub struct CompioUringTimeout;

impl AsyncTimer for CompioUringTimeout {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        uring_timeout_until(now_ns() + ns)
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        uring_timeout_until(deadline_ns)
    }
    fn yield_now() -> impl Future<Output = ()> {
        Compio::yield_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uring_timeout_wakes_at_or_after_its_deadline() {
        if let Err(why) = super::super::per_core::io_uring_available() {
            eprintln!("skipped: {why}");
            return;
        }
        let mut runtime = CompioRuntime::build(1).unwrap();
        runtime.block_on(async {
            for ahead_ns in [0, 200_000, 1_000_000] {
                let deadline = now_ns() + ahead_ns;
                uring_timeout_until(deadline).await;
                assert!(now_ns() >= deadline);
            }
        });
    }
}
