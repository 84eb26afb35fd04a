//! `tokio-ct` and `tokio-mt`: one tokio task per unit.

use super::Started;
use crate::clock::instant_at;
use crate::workload::{AsyncTimer, LoopContext};
use std::future::Future;
use std::time::Duration;

pub struct Tokio;

impl AsyncTimer for Tokio {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(Duration::from_nanos(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(instant_at(deadline_ns).into())
    }
    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

/// Runs up to `units` tasks on a fresh runtime (current_thread, or multi_thread with one worker
/// thread per core) and returns their results in order.
pub fn run<Out, Fut>(
    ctx: &LoopContext,
    multi_thread: bool,
    units: u32,
    make: impl Fn(u32) -> Fut,
) -> Result<Started<Out>, crate::WorkerError>
where
    Out: Send + 'static,
    Fut: Future<Output = Out> + Send + 'static,
{
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder.enable_time().build().map_err(|e| format!("could not start tokio: {e}"))?;
    runtime.block_on(async {
        let (units, start_error) = super::startable(ctx, units);
        ctx.gate.begin_creating();
        let tasks: Vec<_> = (1..=units).map(|unit| tokio::spawn(make(unit))).collect();
        ctx.gate.all_created(units, start_error.clone());
        let mut outputs = Vec::with_capacity(tasks.len());
        for task in tasks {
            outputs.push(task.await.map_err(|e| format!("a unit task failed: {e}"))?);
        }
        Ok(Started { outputs, start_error })
    })
}
