//! `embassy`: one embassy task per unit on the platform-std thread executor; timers come from
//! embassy-time's std driver (an alarm thread and a 1 us tick).

use super::Started;
use crate::clock::now_ns;
use crate::workload::{AsyncTimer, LoopContext};
use embassy_executor::{Executor, Spawner};
use embassy_time::{Duration, Instant, Timer};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;

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
    fn sleep_for(ns: u64) -> impl Future<Output = ()> + Send {
        Timer::after(ticks_after(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> + Send {
        // Our clock first: any time between the two readings makes the wake-up later, not earlier.
        let remaining = deadline_ns.saturating_sub(now_ns());
        Timer::at(Instant::now() + ticks_after(remaining))
    }
    fn yield_now() -> impl Future<Output = ()> + Send {
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
pub fn run<Out, Fut>(ctx: &LoopContext, units: u32, make: impl Fn(u32) -> Fut) -> Result<Started<Out>, crate::WorkerError>
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
                        let pool = if unit > MAX_UNITS { format!(" (the task pool holds {MAX_UNITS})") } else { String::new() };
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
