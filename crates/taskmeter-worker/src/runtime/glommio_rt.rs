//! `glommio`: Datadog's thread-per-core runtime on io_uring. Its timers sit in an ordered map
//! keyed by (Instant, id) in the reactor (no millisecond buckets), and the thread sleeps in
//! io_uring_enter on a timeout armed for the earliest of them.

use super::per_core::LocalRuntime;
use crate::clock::now_ns;
use crate::workload::AsyncTimer;
use std::future::Future;
use std::time::Duration;

pub struct Glommio;

impl AsyncTimer for Glommio {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        glommio::timer::sleep(Duration::from_nanos(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        // glommio has no sleep_until: a sleep for what is left (our clock read first, so any
        // time between the two readings makes the wake-up later, never earlier).
        glommio::timer::sleep(Duration::from_nanos(deadline_ns.saturating_sub(now_ns())))
    }
    async fn yield_now() {
        glommio::executor().yield_now().await;
    }
}

/// One thread's glommio executor, not pinned to a CPU (the worker's own affinity stands).
pub struct GlommioRuntime(glommio::LocalExecutor);

impl LocalRuntime for GlommioRuntime {
    const NAME: &'static str = "glommio";

    fn build(_: u32) -> Result<Self, String> {
        let builder = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound);
        builder.make().map(GlommioRuntime).map_err(|e| e.to_string())
    }
    fn block_on<F: Future>(&mut self, future: F) -> F::Output {
        self.0.run(future)
    }
    fn spawn<F: Future + 'static>(future: F) -> impl Future<Output = Result<F::Output, String>> + 'static {
        let task = glommio::spawn_local(future);
        async move { Ok(task.await) }
    }
    fn detach<F: Future<Output = ()> + 'static>(future: F) {
        glommio::spawn_local(future).detach(); // dropping a glommio Task would cancel it
    }
}
