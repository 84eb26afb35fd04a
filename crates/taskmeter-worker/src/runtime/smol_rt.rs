//! `smol`: one task per unit on a smol executor driven by one thread, which also drives the
//! async-io reactor (timers on timerfd/epoll) while it is idle.

use super::Started;
use crate::clock::instant_at;
use crate::granularity::{self, async_round, Round, Rounds, Spawn};
use crate::workload::{AsyncTimer, LoopContext};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use taskmeter_protocol::{GrainPlan, Point};

pub struct Smol;

impl AsyncTimer for Smol {
    async fn sleep_for(ns: u64) {
        smol::Timer::after(Duration::from_nanos(ns)).await;
    }
    async fn sleep_until(deadline_ns: u64) {
        smol::Timer::at(instant_at(deadline_ns)).await;
    }
    fn yield_now() -> impl Future<Output = ()> {
        smol::future::yield_now()
    }
}

/// Runs up to `units` tasks and returns their results in order.
pub fn run<Out, Fut>(
    ctx: &LoopContext,
    units: u32,
    make: impl Fn(u32) -> Fut,
) -> Result<Started<Out>, crate::WorkerError>
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

/// Tasks of one executor driven by this thread, awaited through their `Task` handles.
#[derive(Clone, Copy)]
struct SmolTasks(&'static smol::Executor<'static>);

impl Spawn for SmolTasks {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static {
        self.0.spawn(task)
    }
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.0.spawn(task).detach();
    }
}

impl Rounds for SmolTasks {
    fn cores(&self) -> u32 {
        1
    }
    async fn round(&self, r: Round) -> Result<(), String> {
        async_round(self, r).await;
        Ok(())
    }
}

/// Measures the plan's grains with a smol task per task, on one thread.
pub fn grains(
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
) -> Result<bool, String> {
    let executor: &'static smol::Executor<'static> = Box::leak(Box::new(smol::Executor::new()));
    smol::block_on(executor.run(granularity::measure(grain, warmup_ns, duration_ns, &SmolTasks(executor), stop, send)))
}
