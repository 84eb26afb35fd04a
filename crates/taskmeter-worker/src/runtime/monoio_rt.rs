//! `monoio`: ByteDance's thread-per-core runtime on io_uring. Its timer is tokio's wheel (6
//! levels of 64 slots of 1 ms, monoio/src/time/driver/wheel), and the thread parks in
//! io_uring_enter with a timeout until the wheel's next expiry.

use super::per_core::LocalRuntime;
use crate::clock::instant_at;
use crate::workload::AsyncTimer;
use std::future::Future;
use std::time::Duration;

pub struct Monoio;

impl AsyncTimer for Monoio {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        monoio::time::sleep(Duration::from_nanos(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        monoio::time::sleep_until(monoio::time::Instant::from_std(instant_at(deadline_ns)))
    }
    fn yield_now() -> impl Future<Output = ()> {
        // monoio has no yield of its own: futures-lite's wakes the task and returns Pending once.
        smol::future::yield_now()
    }
}

/// One thread's monoio runtime: the io_uring driver with its timer.
pub struct MonoioRuntime(monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>);

impl LocalRuntime for MonoioRuntime {
    const NAME: &'static str = "monoio";

    fn build(_: u32) -> Result<Self, String> {
        let builder = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer();
        builder.build().map(MonoioRuntime).map_err(|e| e.to_string())
    }
    fn block_on<F: Future>(&mut self, future: F) -> F::Output {
        self.0.block_on(future)
    }
    fn spawn<F: Future + 'static>(future: F) -> impl Future<Output = Result<F::Output, String>> + 'static {
        let task = monoio::spawn(future);
        async move { Ok(task.await) }
    }
    fn detach<F: Future<Output = ()> + 'static>(future: F) {
        drop(monoio::spawn(future)); // dropping a monoio JoinHandle detaches its task
    }
}
