//! `smol`: one task per unit on a smol executor driven by one thread, which also drives the
//! async-io reactor (timers on timerfd/epoll) while it is idle.

use super::Started;
use crate::clock::instant_at;
use crate::workload::{AsyncTimer, LoopContext};
use std::future::Future;
use std::time::Duration;

pub struct Smol;

impl AsyncTimer for Smol {
    async fn sleep_for(ns: u64) {
        smol::Timer::after(Duration::from_nanos(ns)).await;
    }
    async fn sleep_until(deadline_ns: u64) {
        smol::Timer::at(instant_at(deadline_ns)).await;
    }
    fn yield_now() -> impl Future<Output = ()> + Send {
        smol::future::yield_now()
    }
}

/// Runs up to `units` tasks and returns their results in order.
pub fn run<Out, Fut>(ctx: &LoopContext, units: u32, make: impl Fn(u32) -> Fut) -> Result<Started<Out>, crate::WorkerError>
where
    Out: Send + 'static,
    Fut: Future<Output = Out> + Send + 'static,
{
    let executor = smol::Executor::new();
    let (units, start_error) = super::startable(ctx, units);
    let outputs = smol::block_on(executor.run(async {
        ctx.gate.begin_creating();
        let tasks: Vec<_> = (1..=units).map(|unit| executor.spawn(make(unit))).collect();
        ctx.gate.all_created(units, start_error.clone());
        let mut outputs = Vec::with_capacity(tasks.len());
        for task in tasks {
            outputs.push(task.await);
        }
        outputs
    }));
    Ok(Started { outputs, start_error })
}
