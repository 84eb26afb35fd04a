//! The Rust runtimes this worker runs in its own process: how each starts its units, its
//! version, and how it applies priority classes.

mod embassy_rt;
mod smol_rt;
mod threads;
mod tokio_rt;

use crate::recipes::{self, Recipe, SpinYield};
use crate::workload::{run_unit_async, run_unit_blocking, AsyncTimer, LoopContext, NoSleep, OsThread, UnitRun};
use std::sync::atomic::AtomicBool;
use taskmeter_protocol::{GrainPlan, Plan, Point};
pub use threads::ThreadPriority;

/// What a runtime's units returned, and why the start stopped short when it did.
pub struct Started<Out> {
    pub outputs: Vec<Out>,
    pub start_error: Option<String>,
}

/// How many units may be started, given the start limit. Spawning tasks cannot fail, so the
/// limit is checked here, before each spawn.
fn startable(ctx: &LoopContext, units: u32) -> (u32, Option<String>) {
    for unit in 2..=units {
        if let Some(reason) = ctx.start_refused(unit) {
            return (unit - 1, Some(reason));
        }
    }
    (units, None)
}

/// Measures a granularity plan's grains: (grains, warmup_ns, duration_ns, stop, send each `P`).
pub type MeasureGrains = fn(&'static GrainPlan, u64, u64, &'static AtomicBool, fn(&Point)) -> Result<bool, String>;

/// What one unit of a runtime is: it decides which of the machine's limits bind (an OS thread
/// per unit meets threads-max, pid_max and vm.max_map_count; a task meets memory only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    OsThread,
    Task,
}

impl Unit {
    pub const NAMES: [&'static str; 2] = ["os-thread", "task"];

    pub fn as_str(self) -> &'static str {
        match self {
            Unit::OsThread => Self::NAMES[0],
            Unit::Task => Self::NAMES[1],
        }
    }

    pub fn parse(name: &str) -> Option<Unit> {
        [Unit::OsThread, Unit::Task].into_iter().find(|u| u.as_str() == name)
    }
}

/// A Rust runtime this worker runs in its own process: the one place that says what it is.
pub struct InProcess {
    pub id: &'static str,
    pub unit: Unit,
    /// What a unit is and how it sleeps.
    pub description: &'static str,
    /// What priority classes map to (protocol: "Priority classes").
    pub priority: &'static str,
    /// The version its `H` frame names.
    pub version: fn() -> String,
    /// Its `H.priority` for a plan with two classes.
    pub classes: fn(&Plan) -> String,
    /// Runs every unit of the plan; `sleeping` false removes the sleep call (for `selftest`:
    /// the executor still polls each unit, but nothing ever waits).
    pub run: fn(&'static LoopContext, bool) -> Result<Started<UnitRun>, crate::WorkerError>,
    /// Measures the granularity experiment's grains (protocol: "The granularity experiment"),
    /// handing each `P` frame to the last argument; true when a stop request ended it early.
    pub grains: MeasureGrains,
    /// The most tasks it can hold in flight, when it has a fixed pool.
    pub task_pool: Option<u32>,
    /// The ways its units can wait besides its own sleep (the plan's `wait`).
    pub recipes: &'static [Recipe],
}

impl InProcess {
    pub fn has_recipe(&self, wait: &str) -> bool {
        wait == taskmeter_protocol::plan::DEFAULT_WAIT || self.recipes.iter().any(|r| r.name == wait)
    }
}

/// One unit of an OS thread waiting with the plan's recipe.
fn blocking_unit(ctx: &LoopContext, unit: u32, sleeping: bool) -> UnitRun {
    match (sleeping, ctx.plan.wait.as_str()) {
        (false, _) => run_unit_blocking::<NoSleep>(ctx, unit),
        (true, "nanosleep") => run_unit_blocking::<recipes::Nanosleep>(ctx, unit),
        (true, "timerfd") => run_unit_blocking::<recipes::TimerfdWait>(ctx, unit),
        (true, "spin") => run_unit_blocking::<recipes::Spin>(ctx, unit),
        (true, "hybrid") => run_unit_blocking::<recipes::Hybrid>(ctx, unit),
        (true, _) => run_unit_blocking::<OsThread>(ctx, unit),
    }
}

/// The timer of a task of runtime `T` waiting with the plan's recipe: `T`'s own, or yields
/// until the deadline (`spin-yield`).
async fn async_unit<T: AsyncTimer>(ctx: &LoopContext, unit: u32, sleeping: bool) -> UnitRun {
    match (sleeping, ctx.plan.wait.as_str()) {
        (false, _) => run_unit_async::<NoSleep>(ctx, unit).await,
        (true, "spin-yield") => run_unit_async::<SpinYield<T>>(ctx, unit).await,
        (true, _) => run_unit_async::<T>(ctx, unit).await,
    }
}

/// A tokio task's unit, with tokio's timerfd recipe as well.
async fn tokio_unit(ctx: &LoopContext, unit: u32, sleeping: bool) -> UnitRun {
    match (sleeping, ctx.plan.wait.as_str()) {
        (true, "timerfd") => run_unit_async::<recipes::TokioTimerfd>(ctx, unit).await,
        _ => async_unit::<tokio_rt::Tokio>(ctx, unit, sleeping).await,
    }
}

/// How OS threads map the two priority classes.
pub const OS_THREAD_PRIORITY: &str = "nice n / n+10, or real-time P / P-1 under fifo and rr";
pub const NO_PRIORITY: &str = "none: no task priorities";

/// The rustc that built this worker, e.g. "rustc 1.95.0 (...)".
pub const RUSTC_VERSION: &str = env!("TASKMETER_RUSTC_VERSION");

fn tokio_version() -> String {
    format!("tokio {}", env!("TASKMETER_TOKIO_VERSION"))
}

/// Every in-process runtime, in the order `list` shows them.
pub const IN_PROCESS: [InProcess; 5] = [
    InProcess {
        id: "thread",
        unit: Unit::OsThread,
        description: "std::thread per unit; thread::sleep (nanosleep) / clock_nanosleep(TIMER_ABSTIME)",
        priority: OS_THREAD_PRIORITY,
        version: || format!("std ({RUSTC_VERSION})"),
        classes: |plan| ThreadPriority::of_this_worker(plan.priority_classes).describe(),
        run: |ctx, sleeping| {
            let priority = ThreadPriority::of_this_worker(ctx.plan.priority_classes);
            threads::run(ctx, ctx.plan.units, |unit| {
                move || {
                    if let Err(e) = priority.apply(ctx.plan.class_of(unit)) {
                        panic!("unit {unit} could not take its class's priority: {e}");
                    }
                    blocking_unit(ctx, unit, sleeping)
                }
            })
        },
        grains: threads::grains,
        task_pool: None,
        recipes: recipes::THREAD_RECIPES,
    },
    InProcess {
        id: "tokio-ct",
        unit: Unit::Task,
        description: "tokio current_thread runtime, a task per unit; tokio::time::sleep / sleep_until",
        priority: NO_PRIORITY,
        version: tokio_version,
        classes: |_| "none: tokio tasks have no priority".into(),
        run: |ctx, sleeping| tokio_rt::run(ctx, false, ctx.plan.units, |unit| tokio_unit(ctx, unit, sleeping)),
        grains: |grain, warmup, duration, stop, send| tokio_rt::grains(false, grain, warmup, duration, stop, send),
        task_pool: None,
        recipes: recipes::TOKIO_RECIPES,
    },
    InProcess {
        id: "tokio-mt",
        unit: Unit::Task,
        description: "tokio multi_thread runtime (one worker per core), a task per unit; tokio::time",
        priority: NO_PRIORITY,
        version: tokio_version,
        classes: |_| "none: tokio tasks have no priority".into(),
        run: |ctx, sleeping| tokio_rt::run(ctx, true, ctx.plan.units, |unit| tokio_unit(ctx, unit, sleeping)),
        grains: |grain, warmup, duration, stop, send| tokio_rt::grains(true, grain, warmup, duration, stop, send),
        task_pool: None,
        recipes: recipes::TOKIO_RECIPES,
    },
    InProcess {
        id: "smol",
        unit: Unit::Task,
        description: "smol executor on one thread, a task per unit; async-io Timer (epoll with a timerfd timeout)",
        priority: NO_PRIORITY,
        version: || format!("smol {}", env!("TASKMETER_SMOL_VERSION")),
        classes: |_| "none: smol tasks have no priority".into(),
        run: |ctx, sleeping| smol_rt::run(ctx, ctx.plan.units, |unit| async_unit::<smol_rt::Smol>(ctx, unit, sleeping)),
        grains: smol_rt::grains,
        task_pool: None,
        recipes: recipes::SMOL_RECIPES,
    },
    InProcess {
        id: "embassy",
        unit: Unit::Task,
        description: "embassy-executor platform-std, a task per unit; embassy-time Timer (std driver)",
        priority: "embassy scheduler-priority 1 / 0 (ready high tasks polled first)",
        version: || {
            format!(
                "embassy-executor {}, embassy-time {}",
                env!("TASKMETER_EMBASSY_EXECUTOR_VERSION"),
                env!("TASKMETER_EMBASSY_TIME_VERSION")
            )
        },
        classes: |_| embassy_rt::PRIORITY.into(),
        run: |ctx, sleeping| match sleeping {
            true => embassy_rt::run(ctx, ctx.plan.units, |unit| run_unit_async::<embassy_rt::Embassy>(ctx, unit)),
            false => embassy_rt::run(ctx, ctx.plan.units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        },
        grains: embassy_rt::grains,
        task_pool: Some(embassy_rt::TASK_POOL),
        recipes: &[],
    },
];

/// The in-process runtime `id`.
pub fn find(id: &str) -> Option<&'static InProcess> {
    IN_PROCESS.iter().find(|r| r.id == id)
}

/// The `H.priority` of an in-process runtime for this plan.
pub fn hello_priority(runtime: &InProcess, plan: &Plan) -> String {
    if plan.priority_classes < 2 {
        "none".into()
    } else {
        (runtime.classes)(plan)
    }
}
