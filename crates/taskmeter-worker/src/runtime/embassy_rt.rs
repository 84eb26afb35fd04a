//! `embassy`: one embassy task per unit on the platform-std thread executor; timers come from
//! embassy-time's std driver (an alarm thread and a 1 us tick).

use super::Started;
use crate::clock::now_ns;
use crate::granularity::{self, async_round, Round, Rounds, Slot, Spawn};
use crate::workload::{AsyncTimer, LoopContext};
use embassy_executor::SendSpawner;
use embassy_executor::{Executor, Spawner};
use embassy_time::{Duration, Instant, Timer};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use taskmeter_protocol::{GrainPlan, Point};

/// Tasks are statically allocated in embassy: this is the size of the pool, the most units one
/// worker can run. A slot holds only a pointer to the unit's future, so the pool stays small.
pub const MAX_UNITS: u32 = 100_000;

pub struct Embassy;

/// embassy-time's std driver floors the clock to its 1 us tick and adds the duration to that
/// floored `now`, so a duration rounded up to whole ticks could still end up to one tick before
/// the intended time: one more tick makes the wake-up never early.
fn ticks_after(ns: u64) -> Duration {
    Duration::from_micros(ns.div_ceil(1_000) + 1)
}

impl AsyncTimer for Embassy {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        Timer::after(ticks_after(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        // Our clock first: any time between the two readings makes the wake-up later, not earlier.
        let remaining = deadline_ns.saturating_sub(now_ns());
        Timer::at(Instant::now() + ticks_after(remaining))
    }
    fn yield_now() -> impl Future<Output = ()> {
        embassy_futures::yield_now()
    }
    async fn enter_class(class: u32) {
        embassy_executor::Metadata::for_current_task().await.set_priority(class_priority(class));
    }
}

/// `scheduler-priority` polls ready tasks of a higher priority first: class 0 gets 1.
fn class_priority(class: u32) -> u8 {
    u8::from(class == 0)
}

pub const PRIORITY: &str =
    "embassy: priority 1 high, 0 low (ready tasks of higher priority are polled first; no pre-emption)";

type UnitFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

static FINISHED: AtomicU32 = AtomicU32::new(0);

#[embassy_executor::task(pool_size = MAX_UNITS as usize)]
async fn unit_task(body: UnitFuture) {
    body.await;
    FINISHED.fetch_add(1, Ordering::Release);
}

/// Runs up to `units` tasks on a new executor on this thread and returns their results in
/// order; beyond the pool's size the start is partial.
pub fn run<Out, Fut>(
    ctx: &LoopContext,
    units: u32,
    make: impl Fn(u32) -> Fut,
) -> Result<Started<Out>, crate::WorkerError>
where
    Out: Send + 'static,
    Fut: Future<Output = Out> + Send + 'static,
{
    let (units, mut start_error) = super::startable(ctx, units);
    let (tx, rx) = mpsc::channel();
    FINISHED.store(0, Ordering::Release);
    let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
    let spawned = std::cell::Cell::new(0u32);
    executor.run_until(
        |spawner: Spawner| {
            ctx.gate.begin_creating();
            for unit in 1..=units {
                let (tx, body) = (tx.clone(), make(unit));
                let boxed: UnitFuture = Box::pin(async move {
                    let _ = tx.send((unit, body.await));
                });
                match unit_task(boxed) {
                    Ok(token) => {
                        spawner.spawn(token);
                        spawned.set(spawned.get() + 1);
                    }
                    Err(e) => {
                        let pool = if unit > MAX_UNITS {
                            format!(" (the task pool holds {MAX_UNITS})")
                        } else {
                            String::new()
                        };
                        start_error = Some(format!("could not spawn the task of unit {unit}: {e:?}{pool}"));
                        break;
                    }
                }
            }
            ctx.gate.all_created(spawned.get(), start_error.clone());
        },
        || FINISHED.load(Ordering::Acquire) >= spawned.get(),
    );
    drop(tx);
    let mut outputs: Vec<(u32, Out)> = rx.try_iter().collect();
    outputs.sort_by_key(|(unit, _)| *unit);
    let outputs = outputs.into_iter().map(|(_, out)| out).collect();
    Ok(Started { outputs, start_error })
}

/// The granularity experiment's task pool: the most tasks in flight (trivial's `width x steps`).
pub const TASK_POOL: u32 = 4096;

#[embassy_executor::task(pool_size = TASK_POOL as usize)]
async fn grain_task(body: UnitFuture) {
    body.await;
}

/// Tasks from the static pool, their results handed back through a [`Slot`] (embassy has no
/// join handles).
#[derive(Clone)]
struct EmbassyTasks(SendSpawner);

impl Spawn for EmbassyTasks {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static {
        let slot = Arc::new(Slot::default());
        let filled = slot.clone();
        self.detach(async move { filled.fill(task.await) });
        slot.take()
    }
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static) {
        match grain_task(Box::pin(task)) {
            Ok(token) => self.0.spawn(token),
            Err(e) => {
                // The worker refused plans with more tasks in flight than the pool holds.
                eprintln!("taskmeter worker: embassy's task pool of {TASK_POOL} is full: {e:?}");
                std::process::exit(1);
            }
        }
    }
}

impl Rounds for EmbassyTasks {
    fn cores(&self) -> u32 {
        1
    }
    async fn round(&self, r: Round) -> Result<(), String> {
        async_round(self, r).await;
        Ok(())
    }
}

type Measured = Result<bool, String>;

/// What the measuring task needs (an embassy task takes `'static` arguments, none a pattern).
struct Measuring {
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
    result: OnceLock<Measured>,
}

#[embassy_executor::task]
async fn measure_task(spawner: SendSpawner, m: &'static Measuring) {
    let measured =
        granularity::measure(m.grain, m.warmup_ns, m.duration_ns, &EmbassyTasks(spawner), m.stop, m.send).await;
    let _ = m.result.set(measured);
}

/// Measures the plan's grains with an embassy task per task, on one executor thread.
pub fn grains(
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
) -> Result<bool, String> {
    let m: &'static Measuring =
        Box::leak(Box::new(Measuring { grain, warmup_ns, duration_ns, stop, send, result: OnceLock::new() }));
    let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
    executor.run_until(
        |spawner: Spawner| match measure_task(spawner.make_send(), m) {
            Ok(token) => spawner.spawn(token),
            Err(e) => drop(m.result.set(Err(format!("could not spawn the measuring task: {e:?}")))),
        },
        || m.result.get().is_some(),
    );
    m.result.get().cloned().unwrap_or_else(|| Err("the measuring task ended without a result".into()))
}
