//! The Rust runtimes this worker runs in its own process: how each starts its units, its
//! version, and how it applies priority classes.

mod embassy_rt;
mod smol_rt;
mod threads;
mod tokio_rt;

use crate::workload::{run_unit_async, run_unit_blocking, LoopContext, NoSleep, OsThread, UnitRun};
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

/// The runtimes this worker runs in its own process, with what a unit is and how priority
/// classes map (protocol: "Priority classes"): (id, description, priority classes).
pub const IN_PROCESS: [(&str, &str, &str); 5] = [
    ("thread", "std::thread per unit; thread::sleep (nanosleep) / clock_nanosleep(TIMER_ABSTIME)", OS_THREAD_PRIORITY),
    ("tokio-ct", "tokio current_thread runtime, a task per unit; tokio::time::sleep / sleep_until", NO_PRIORITY),
    ("tokio-mt", "tokio multi_thread runtime (one worker per core), a task per unit; tokio::time", NO_PRIORITY),
    ("smol", "smol executor on one thread, a task per unit; async-io Timer (epoll with a timerfd timeout)", NO_PRIORITY),
    ("embassy", "embassy-executor platform-std, a task per unit; embassy-time Timer (std driver)", "embassy scheduler-priority 1 / 0 (ready high tasks polled first)"),
];

/// How OS threads map the two priority classes.
pub const OS_THREAD_PRIORITY: &str = "nice n / n+10, or real-time P / P-1 under fifo and rr";
pub const NO_PRIORITY: &str = "none: no task priorities";

/// The rustc that built this worker, e.g. "rustc 1.95.0 (...)".
pub const RUSTC_VERSION: &str = env!("TASKMETER_RUSTC_VERSION");

/// The version string a worker of this runtime puts in its `hello` line.
pub fn in_process_version(id: &str) -> Option<String> {
    let v = match id {
        "thread" => format!("std ({})", env!("TASKMETER_RUSTC_VERSION")),
        "tokio-ct" | "tokio-mt" => format!("tokio {}", env!("TASKMETER_TOKIO_VERSION")),
        "smol" => format!("smol {}", env!("TASKMETER_SMOL_VERSION")),
        "embassy" => format!(
            "embassy-executor {}, embassy-time {}",
            env!("TASKMETER_EMBASSY_EXECUTOR_VERSION"),
            env!("TASKMETER_EMBASSY_TIME_VERSION")
        ),
        _ => return None,
    };
    Some(v)
}

/// The `hello.priority` of an in-process runtime for this plan.
pub fn in_process_priority(plan: &taskmeter_protocol::Plan) -> String {
    if plan.priority_classes < 2 {
        return "none".into();
    }
    match plan.runtime.as_str() {
        "thread" => ThreadPriority::of_this_worker(plan.priority_classes).describe(),
        "embassy" => embassy_rt::PRIORITY.into(),
        "smol" => "none: smol tasks have no priority".into(),
        _ => "none: tokio tasks have no priority".into(),
    }
}

/// Runs every unit of the plan in the named in-process runtime and returns what they measured.
pub fn run_in_process(ctx: &'static LoopContext) -> Result<Started<UnitRun>, crate::WorkerError> {
    let units = ctx.plan.units;
    match ctx.plan.runtime.as_str() {
        "thread" => {
            let priority = ThreadPriority::of_this_worker(ctx.plan.priority_classes);
            threads::run(ctx, units, |unit| {
                move || {
                    if let Err(e) = priority.apply(ctx.plan.class_of(unit)) {
                        panic!("unit {unit} could not take its class's priority: {e}");
                    }
                    run_unit_blocking::<OsThread>(ctx, unit)
                }
            })
        }
        "tokio-ct" => tokio_rt::run(ctx, false, units, |unit| run_unit_async::<tokio_rt::Tokio>(ctx, unit)),
        "tokio-mt" => tokio_rt::run(ctx, true, units, |unit| run_unit_async::<tokio_rt::Tokio>(ctx, unit)),
        "smol" => smol_rt::run(ctx, units, |unit| run_unit_async::<smol_rt::Smol>(ctx, unit)),
        "embassy" => embassy_rt::run(ctx, units, |unit| run_unit_async::<embassy_rt::Embassy>(ctx, unit)),
        other => Err(format!("runtime \"{other}\" is not served by this worker").into()),
    }
}

/// Runs the plan's units in the named runtime with the sleep call removed (for `selftest`):
/// each runtime's executor still polls the unit, but nothing ever waits.
pub fn run_without_sleeping(ctx: &'static LoopContext) -> Result<Started<UnitRun>, crate::WorkerError> {
    let units = ctx.plan.units;
    match ctx.plan.runtime.as_str() {
        "thread" => threads::run(ctx, units, |unit| move || run_unit_blocking::<NoSleep>(ctx, unit)),
        "tokio-ct" => tokio_rt::run(ctx, false, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "tokio-mt" => tokio_rt::run(ctx, true, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "smol" => smol_rt::run(ctx, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "embassy" => embassy_rt::run(ctx, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        other => Err(format!("runtime \"{other}\" does not run in process").into()),
    }
}
