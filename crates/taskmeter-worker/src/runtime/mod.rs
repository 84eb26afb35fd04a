//! The Rust runtimes this worker runs in its own process: how each starts its units, its
//! version, and how it applies priority classes.

mod compio_rt;
mod embassy_rt;
mod glommio_rt;
mod monoio_rt;
mod per_core;
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
    /// Whether it can run here (Ok), or what refuses it and the line that grants it.
    pub available: fn() -> Result<(), String>,
    /// How its timer works and its granularity, with upstream references and what taskmeter
    /// measured.
    pub timer: &'static str,
    /// In the default run; false for a variant (one thread of a thread-per-core runtime), which
    /// `--runtimes all` adds.
    pub default_run: bool,
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

/// A compio task's unit, with the raw io_uring timeout recipe as well.
async fn compio_unit(ctx: &LoopContext, unit: u32, sleeping: bool) -> UnitRun {
    match (sleeping, ctx.plan.wait.as_str()) {
        (true, "uring-timeout") => run_unit_async::<compio_rt::CompioUringTimeout>(ctx, unit).await,
        _ => async_unit::<compio_rt::Compio>(ctx, unit, sleeping).await,
    }
}

/// The threads a thread-per-core runtime uses: one per core this worker may run on, or one.
fn per_core_threads(one_thread: bool) -> u32 {
    if one_thread {
        1
    } else {
        crate::granularity::cpus()
    }
}

fn always() -> Result<(), String> {
    Ok(())
}

/// How OS threads map the two priority classes.
pub const OS_THREAD_PRIORITY: &str = "nice n / n+10, or real-time P / P-1 under fifo and rr";
pub const NO_PRIORITY: &str = "none: no task priorities";
/// The thread-per-core runtimes: their scheduler is a FIFO of local tasks per thread.
const PER_CORE_PRIORITY: &str =
    "none: each thread runs its local tasks first-come, first-served; its runtime has no task priorities";

/// The rustc that built this worker, e.g. "rustc 1.95.0 (...)".
pub const RUSTC_VERSION: &str = env!("TASKMETER_RUSTC_VERSION");

fn tokio_version() -> String {
    format!("tokio {}", env!("TASKMETER_TOKIO_VERSION"))
}

fn monoio_version() -> String {
    format!("monoio {}", env!("TASKMETER_MONOIO_VERSION"))
}

fn glommio_version() -> String {
    format!("glommio {}", env!("TASKMETER_GLOMMIO_VERSION"))
}

fn compio_version() -> String {
    format!("compio {}", env!("TASKMETER_COMPIO_VERSION"))
}

const TOKIO_TIMER: &str = "tokio's hierarchical timer wheel (6 levels x 64 slots, 1 ms the finest): a deadline is \
    rounded up to the next whole millisecond (tokio#970, tokio#5021), and the driver parks in epoll_wait or a \
    condvar until the wheel's next expiry. Measured here (5 units, shared 2-core VM): 1.05-1.22 ms late on \
    average at a 1 ms period, 1.10-1.14 ms at 50 us";
const MONOIO_TIMER: &str = "tokio's wheel, copied (6 levels x 64 slots of 1 ms, monoio/src/time/driver/wheel): \
    deadlines round up to whole milliseconds; the thread parks in io_uring_enter with an IORING_OP_TIMEOUT \
    for the wheel's next expiry. Measured here: 0.77-1.22 ms late on average at 1 ms, 1.05 ms at 50 us, as tokio";
const GLOMMIO_TIMER: &str = "an ordered map of timers keyed by (Instant, id) in glommio's reactor, no millisecond \
    buckets; the thread sleeps in io_uring_enter on an IORING_OP_TIMEOUT (ns) armed for the earliest. Measured \
    here: 67-121 us late on average at 1 ms, 25-92 us at 50 us (fewest on one thread)";
const COMPIO_TIMER: &str = "a binary heap of deadlines (compio-runtime/src/time), no rounding; the thread waits in \
    io_uring_enter with the time to the earliest as its timeout (ns). io_uring's own timeouts are hrtimers, \
    though liburing#531 measured a 5 us wait taking 2,012 us on kernels before a fix. Measured here: 46-74 us \
    late on average at 1 ms, 29-50 us at 50 us";

/// The entry of a thread-per-core runtime `$runtime` on `$threads` threads.
macro_rules! per_core {
    ($id:literal, $default_run:literal, $threads:expr, $runtime:ty, $unit:expr, $version:expr, $description:literal, $timer:expr,
     $recipes:expr, $available:expr) => {
        InProcess {
            id: $id,
            unit: Unit::Task,
            description: $description,
            priority: PER_CORE_PRIORITY,
            version: $version,
            classes: |_| PER_CORE_PRIORITY.into(),
            run: |ctx, sleeping| {
                per_core::run::<$runtime, _, _>(ctx, $threads, ctx.plan.units, |u| $unit(ctx, u, sleeping))
            },
            grains: per_core::grains::<$runtime>,
            task_pool: None,
            recipes: $recipes,
            available: $available,
            timer: $timer,
            default_run: $default_run,
        }
    };
}

/// Every in-process runtime, in the order `list` shows them.
pub const IN_PROCESS: [InProcess; 11] = [
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
        available: always,
        timer: "std::thread::sleep is nanosleep (relative), the absolute mode clock_nanosleep(TIMER_ABSTIME): a \
            kernel hrtimer per sleep, ns resolution, woken late by the thread's timer slack (50 us by default, \
            prctl PR_SET_TIMERSLACK) and the scheduler. Measured here: ~60 us late, the slack",
        default_run: true,
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
        available: always,
        timer: TOKIO_TIMER,
        default_run: true,
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
        available: always,
        timer: TOKIO_TIMER,
        default_run: true,
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
        available: always,
        timer: "async-io's reactor keeps timers in an ordered map keyed by (Instant, id) and waits in epoll \
            (the polling crate) with a timerfd armed for the earliest: ns resolution, no buckets. Measured here: \
            ~15 us late",
        default_run: true,
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
        available: always,
        timer: "embassy-time's std driver: a queue of alarms served by a thread of its own that waits on a \
            condvar until the earliest (a futex with a ns timeout), in ticks of 1 us; the wake-up then crosses \
            to the executor thread. Measured here: ~70-110 us late",
        default_run: true,
    },
    per_core!(
        "monoio",
        true,
        per_core_threads(false),
        monoio_rt::MonoioRuntime,
        async_unit::<monoio_rt::Monoio>,
        monoio_version,
        "monoio (io_uring) runtime per thread, a thread per core, a local task per unit; monoio::time::sleep_until",
        MONOIO_TIMER,
        recipes::PER_CORE_RECIPES,
        per_core::io_uring_available
    ),
    per_core!(
        "monoio-1",
        false,
        per_core_threads(true),
        monoio_rt::MonoioRuntime,
        async_unit::<monoio_rt::Monoio>,
        monoio_version,
        "monoio (io_uring) runtime on one thread, a local task per unit; monoio::time::sleep_until",
        MONOIO_TIMER,
        recipes::PER_CORE_RECIPES,
        per_core::io_uring_available
    ),
    per_core!(
        "glommio",
        true,
        per_core_threads(false),
        glommio_rt::GlommioRuntime,
        async_unit::<glommio_rt::Glommio>,
        glommio_version,
        "glommio LocalExecutor (io_uring) per thread, a thread per core, a local task per unit; glommio Timer",
        GLOMMIO_TIMER,
        recipes::PER_CORE_RECIPES,
        per_core::glommio_available
    ),
    per_core!(
        "glommio-1",
        false,
        per_core_threads(true),
        glommio_rt::GlommioRuntime,
        async_unit::<glommio_rt::Glommio>,
        glommio_version,
        "glommio LocalExecutor (io_uring) on one thread, a local task per unit; glommio Timer",
        GLOMMIO_TIMER,
        recipes::PER_CORE_RECIPES,
        per_core::glommio_available
    ),
    per_core!(
        "compio",
        true,
        per_core_threads(false),
        compio_rt::CompioRuntime,
        compio_unit,
        compio_version,
        "compio (io_uring) runtime per thread, a thread per core, a local task per unit; compio::time::sleep_until",
        COMPIO_TIMER,
        recipes::COMPIO_RECIPES,
        per_core::io_uring_available
    ),
    per_core!(
        "compio-1",
        false,
        per_core_threads(true),
        compio_rt::CompioRuntime,
        compio_unit,
        compio_version,
        "compio (io_uring) runtime on one thread, a local task per unit; compio::time::sleep_until",
        COMPIO_TIMER,
        recipes::COMPIO_RECIPES,
        per_core::io_uring_available
    ),
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
