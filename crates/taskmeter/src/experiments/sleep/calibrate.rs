//! `--busy` as a time: each runtime's own worker turns it into busy iterations before anything
//! is measured, exactly as the granularity experiment sizes a task (protocol, "The granularity
//! experiment": the worker measures its rate of the shared arithmetic, Java and Node after their
//! JIT has compiled it, and reports the iterations of the size asked in its `P` frame). A
//! one-task plan of one round is all it takes; no driver needs to know of busy times.

use crate::machine::sched::SchedSettings;
use crate::process::worker::{run_worker, Outcome};
use crate::runtimes::{self, RuntimeInfo};
use std::time::Duration;
use taskmeter_protocol::plan::{FLUSH_NS, MIN_RING};
use taskmeter_protocol::{BusyPlan, Experiment, GrainPlan, Mode, Pattern, Plan, Room, Schedule, SleepPlan, PROTOCOL};

/// How long a worker measures its rate (the granularity experiment's default).
const CALIBRATE_NS: u64 = 10_000_000;

/// The busy iterations that take `busy_ns` in `runtime`, or why they could not be had.
pub fn iterations(
    info: &'static RuntimeInfo,
    busy_ns: u64,
    sched: &SchedSettings,
    grace: Duration,
) -> Result<u64, String> {
    let mut plan = Plan {
        protocol: PROTOCOL,
        experiment: Experiment::Granularity,
        runtime: info.base.into(),
        units: 1,
        priority_classes: 1,
        start_limit_ns: 10_000_000_000,
        duration_ns: 1,
        warmup_ns: 0,
        sleep: SleepPlan { mode: Mode::Relative, schedule: Schedule::None },
        busy: BusyPlan { iters: 0, yield_each_step: false },
        ring: MIN_RING,
        flush_ns: FLUSH_NS,
        room: Room::default(),
        grain: Some(GrainPlan {
            pattern: Pattern::Trivial,
            width: 1,
            steps: 1,
            grains_ns: vec![busy_ns],
            calibrate_ns: CALIBRATE_NS,
        }),
        wait: taskmeter_protocol::plan::DEFAULT_WAIT.to_string(),
    };
    plan.check().map_err(|e| e.to_string())?;
    let command = runtimes::worker_command(info)?;
    plan.room = crate::machine::room::now();
    let worker = run_worker(command, &plan, sched, grace, Box::new(|_| {}), || {});
    match worker.outcome {
        Outcome::Completed(d) => {
            d.points.first().map(|p| p.iters).ok_or_else(|| "its worker measured no task size".into())
        }
        Outcome::Interrupted(_, why) => Err(why),
        Outcome::Cut(_, why) => Err(why.to_string()),
        Outcome::Failed(failure) => Err(failure.to_string()),
    }
}
