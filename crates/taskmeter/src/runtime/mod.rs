//! The runtimes taskmeter knows: their ids, how a worker for each is started, and whether it
//! can run on this machine.

mod embassy_rt;
mod smol_rt;
mod threads;
mod tokio_rt;

use crate::driver;
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

/// How a runtime's worker is started.
#[derive(Clone, Copy)]
pub enum Launch {
    /// The taskmeter executable itself, in worker mode.
    InProcess,
    /// A driver program from `drivers/`, built on first use (one driver may serve several runtimes).
    Driver(&'static crate::driver::Driver),
}

impl Launch {
    pub fn in_process(self) -> bool {
        matches!(self, Launch::InProcess)
    }
}

pub struct RuntimeInfo {
    pub id: &'static str,
    pub launch: Launch,
    /// What a unit is and how it sleeps.
    pub description: &'static str,
    /// What `--priority-classes 2` maps to (protocol: "Priority classes").
    pub priority: &'static str,
}

const OS_THREAD_PRIORITY: &str = "nice n / n+10, or real-time P / P-1 under fifo and rr";
const NO_PRIORITY: &str = "none: no task priorities";

pub const RUNTIMES: &[RuntimeInfo] = &[
    RuntimeInfo {
        id: "thread",
        launch: Launch::InProcess,
        description: "std::thread per unit; thread::sleep (nanosleep) / clock_nanosleep(TIMER_ABSTIME)",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "tokio-ct",
        launch: Launch::InProcess,
        description: "tokio current_thread runtime, a task per unit; tokio::time::sleep / sleep_until",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "tokio-mt",
        launch: Launch::InProcess,
        description: "tokio multi_thread runtime (one worker per core), a task per unit; tokio::time",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "smol",
        launch: Launch::InProcess,
        description: "smol executor on one thread, a task per unit; async-io Timer (epoll with a timerfd timeout)",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "embassy",
        launch: Launch::InProcess,
        description: "embassy-executor platform-std, a task per unit; embassy-time Timer (std driver)",
        priority: "embassy scheduler-priority 1 / 0 (ready high tasks polled first)",
    },
    RuntimeInfo {
        id: "c-thread",
        launch: Launch::Driver(&driver::C),
        description: "C pthread per unit; nanosleep / clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "go",
        launch: Launch::Driver(&driver::GO),
        description: "goroutine per unit; time.Sleep / time.Sleep until the deadline; runtime.Gosched",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "go-locked",
        launch: Launch::Driver(&driver::GO),
        description: "goroutine per unit, each locked to its own OS thread (runtime.LockOSThread)",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "python-thread",
        launch: Launch::Driver(&driver::PYTHON),
        description: "Python threading.Thread per unit; time.sleep",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "python-asyncio",
        launch: Launch::Driver(&driver::PYTHON),
        description: "asyncio task per unit; asyncio.sleep; await asyncio.sleep(0) to yield",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "python-abs",
        launch: Launch::Driver(&driver::PYTHON),
        description: "Python thread per unit; clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) through ctypes",
        priority: OS_THREAD_PRIORITY,
    },
    RuntimeInfo {
        id: "node",
        launch: Launch::Driver(&driver::NODE),
        description: "promise chain per unit on the event loop; setTimeout; setImmediate to yield",
        priority: NO_PRIORITY,
    },
    RuntimeInfo {
        id: "node-worker",
        launch: Launch::Driver(&driver::NODE),
        description: "worker_threads Worker per unit; Atomics.wait on a SharedArrayBuffer to sleep",
        priority: "nice n / n+10 (none under fifo and rr: Node cannot set them)",
    },
    RuntimeInfo {
        id: "java-thread",
        launch: Launch::Driver(&driver::JAVA),
        description: "Java platform thread per unit; Thread.sleep; Thread.yield",
        priority: "Thread.setPriority MAX / MIN (nice -5 / 4 as root)",
    },
    RuntimeInfo {
        id: "java-virtual",
        launch: Launch::Driver(&driver::JAVA),
        description: "Java virtual thread per unit (JDK 21+); Thread.sleep; Thread.yield",
        priority: NO_PRIORITY,
    },
];

pub fn find(id: &str) -> Option<&'static RuntimeInfo> {
    RUNTIMES.iter().find(|r| r.id == id)
}

pub fn ids() -> Vec<&'static str> {
    RUNTIMES.iter().map(|r| r.id).collect()
}

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
pub fn in_process_priority(plan: &crate::plan::Plan) -> String {
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
pub fn run_in_process(ctx: &'static LoopContext) -> Result<Started<UnitRun>, String> {
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
        other => Err(format!("runtime \"{other}\" is not served by this worker")),
    }
}

/// Runs the plan's units in the named runtime with the sleep call removed (for `selftest`):
/// each runtime's executor still polls the unit, but nothing ever waits.
pub fn run_without_sleeping(ctx: &'static LoopContext) -> Result<Started<UnitRun>, String> {
    let units = ctx.plan.units;
    match ctx.plan.runtime.as_str() {
        "thread" => threads::run(ctx, units, |unit| move || run_unit_blocking::<NoSleep>(ctx, unit)),
        "tokio-ct" => tokio_rt::run(ctx, false, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "tokio-mt" => tokio_rt::run(ctx, true, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "smol" => smol_rt::run(ctx, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        "embassy" => embassy_rt::run(ctx, units, |unit| run_unit_async::<NoSleep>(ctx, unit)),
        other => Err(format!("runtime \"{other}\" does not run in process")),
    }
}
