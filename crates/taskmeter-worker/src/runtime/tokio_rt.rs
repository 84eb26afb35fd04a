//! `tokio-ct` and `tokio-mt`: one tokio task per unit.

use super::Started;
use crate::clock::instant_at;
use crate::granularity::{self, async_round, Round, Rounds, Spawn};
use crate::workload::{AsyncTimer, LoopContext};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;
use taskmeter_protocol::frames::RuntimeView;
use taskmeter_protocol::{GrainPlan, Point};

pub struct Tokio;

impl AsyncTimer for Tokio {
    fn sleep_for(ns: u64) -> impl Future<Output = ()> {
        tokio::time::sleep(Duration::from_nanos(ns))
    }
    fn sleep_until(deadline_ns: u64) -> impl Future<Output = ()> {
        tokio::time::sleep_until(instant_at(deadline_ns).into())
    }
    fn yield_now() -> impl Future<Output = ()> {
        tokio::task::yield_now()
    }
}

/// Tasks of the runtime the caller runs in, awaited through their `JoinHandle`s.
#[derive(Clone)]
struct TokioTasks {
    cores: u32,
}

impl Spawn for TokioTasks {
    fn start(&self, task: impl Future<Output = u64> + Send + 'static) -> impl Future<Output = u64> + 'static {
        let handle = tokio::spawn(task);
        // A task that panicked has no result: it counts as a wrong one.
        async move { handle.await.unwrap_or(u64::MAX) }
    }
    fn detach(&self, task: impl Future<Output = ()> + Send + 'static) {
        drop(tokio::spawn(task));
    }
}

impl Rounds for TokioTasks {
    fn cores(&self) -> u32 {
        self.cores
    }
    async fn round(&self, r: Round) -> Result<(), String> {
        async_round(self, r).await;
        Ok(())
    }
}

/// Measures the plan's grains with a tokio task per task; the grain loop is itself a task on
/// the runtime (as in every runtime: a coordinator in `block_on` would spawn from outside the
/// workers, through tokio-mt's inject queue, and await from a thread that is not one of them).
pub fn grains(
    multi_thread: bool,
    grain: &'static GrainPlan,
    warmup_ns: u64,
    duration_ns: u64,
    stop: &'static AtomicBool,
    send: fn(&Point),
) -> Result<bool, String> {
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread().build()
    } else {
        tokio::runtime::Builder::new_current_thread().build()
    };
    let runtime = runtime.map_err(|e| format!("could not start tokio: {e}"))?;
    let cores = if multi_thread { runtime.metrics().num_workers() as u32 } else { 1 };
    runtime.block_on(async move {
        let coordinator = tokio::spawn(async move {
            granularity::measure(grain, warmup_ns, duration_ns, &TokioTasks { cores }, stop, send).await
        });
        coordinator.await.map_err(|e| format!("the grain loop's task failed: {e}"))?
    })
}

/// Runs up to `units` tasks on a fresh runtime (current_thread, or multi_thread with one worker
/// thread per core) and returns their results in order.
pub fn run<Out, Fut>(
    ctx: &'static LoopContext,
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
    if ctx.plan.wait == "timerfd" {
        builder.enable_io(); // the recipe's AsyncFd needs the reactor; the others park without it
    }
    let runtime = builder.enable_time().build().map_err(|e| format!("could not start tokio: {e}"))?;
    runtime.block_on(async {
        let (units, start_error) = super::startable(ctx, units);
        ctx.gate.begin_creating();
        let tasks: Vec<_> = (1..=units).map(|unit| tokio::spawn(make(unit))).collect();
        ctx.gate.all_created(units, start_error.clone());
        let metrics = tokio::runtime::Handle::current().metrics();
        let (units_ended, ended) = mpsc::channel::<()>();
        let observer = std::thread::Builder::new().name("view".into()).spawn(move || view(ctx, &metrics, &ended));
        let mut outputs = Vec::with_capacity(tasks.len());
        for task in tasks {
            outputs.push(task.await.map_err(|e| format!("a unit task failed: {e}"))?);
        }
        drop(units_ended);
        if let Some(view) = observer.ok().and_then(|o| o.join().ok()).flatten() {
            let _ = ctx.view.set(view);
        }
        Ok(Started { outputs, start_error })
    })
}

/// tokio's own view of the measured window, from its stable `RuntimeMetrics` (which report no
/// scheduling delay): the share of the window its workers were busy and how often they parked.
/// Read on a thread of its own at `measure_start` and at `end` (or when the units have ended);
/// None when the units ended before the window began.
fn view(ctx: &LoopContext, metrics: &tokio::runtime::RuntimeMetrics, ended: &Receiver<()>) -> Option<RuntimeView> {
    let until = |at_ns: u64| Duration::from_nanos(at_ns.saturating_sub(crate::clock::now_ns()));
    let window = loop {
        match (ctx.gate.window(), ended.recv_timeout(Duration::from_millis(1))) {
            (Some(window), _) => break window,
            (None, Err(RecvTimeoutError::Timeout)) => {}
            (None, _) => return None,
        }
    };
    if !matches!(ended.recv_timeout(until(window.measure_start_ns)), Err(RecvTimeoutError::Timeout)) {
        return None;
    }
    let read = || {
        let workers = 0..metrics.num_workers();
        (
            crate::clock::now_ns(),
            workers.clone().map(|w| metrics.worker_total_busy_duration(w)).sum::<Duration>(),
            workers.map(|w| metrics.worker_park_count(w)).sum::<u64>(),
        )
    };
    let (start_ns, busy_before, parks_before) = read();
    let _ = ended.recv_timeout(until(window.end_ns));
    let (end_ns, busy_after, parks_after) = read();
    let capacity_ns = (end_ns - start_ns) as f64 * metrics.num_workers() as f64;
    Some(RuntimeView {
        source: "tokio RuntimeMetrics (stable)".into(),
        what:
            "no scheduling delay in the stable metrics: worker_total_busy_duration over the window, worker_park_count"
                .into(),
        delay: None,
        busy_ratio: Some(((busy_after - busy_before).as_nanos() as f64 / capacity_ns.max(1.0)).min(1.5)),
        parks: Some(parks_after - parks_before),
    })
}
