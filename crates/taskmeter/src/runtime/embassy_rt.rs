//! `embassy`: one embassy task per unit on the platform-std thread executor; timers come from
//! embassy-time's std driver (an alarm thread and a 1 us tick).

use crate::clock::now_ns;
use crate::workload::AsyncTimer;
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

/// Rounds up to embassy's 1 us tick so a unit never wakes before its deadline.
fn ticks_after(ns: u64) -> Duration {
    Duration::from_micros(ns.div_ceil(1_000))
}

impl AsyncTimer for Embassy {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> + Send {
        Timer::after(ticks_after(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> + Send {
        let now_instant = Instant::now();
        Timer::at(now_instant + ticks_after(deadline_ns.saturating_sub(now_ns())))
    }
    fn yield_now() -> impl Future<Output = ()> + Send {
        embassy_futures::yield_now()
    }
}

type UnitFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

static FINISHED: AtomicU32 = AtomicU32::new(0);

#[embassy_executor::task(pool_size = MAX_UNITS as usize)]
async fn unit_task(body: UnitFuture) {
    body.await;
    FINISHED.fetch_add(1, Ordering::Release);
}

/// Runs `units` tasks on a new executor on this thread and returns their results in order.
pub fn run<Out, Fut>(units: u32, make: impl Fn(u32) -> Fut) -> Result<Vec<Out>, String>
where
    Out: Send + 'static,
    Fut: Future<Output = Out> + Send + 'static,
{
    if units > MAX_UNITS {
        return Err(format!("embassy's task pool holds {MAX_UNITS} units; the plan asks for {units}"));
    }
    let (tx, rx) = mpsc::channel();
    FINISHED.store(0, Ordering::Release);
    let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
    let spawned = std::cell::Cell::new(0u32);
    let mut spawn_error = None;
    executor.run_until(
        |spawner: Spawner| {
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
                        spawn_error = Some(format!("could not spawn the task of unit {unit}: {e:?}"));
                        break;
                    }
                }
            }
        },
        || FINISHED.load(Ordering::Acquire) >= spawned.get(),
    );
    if let Some(e) = spawn_error {
        return Err(e);
    }
    drop(tx);
    let mut outputs: Vec<(u32, Out)> = rx.try_iter().collect();
    outputs.sort_by_key(|(unit, _)| *unit);
    Ok(outputs.into_iter().map(|(_, out)| out).collect())
}
