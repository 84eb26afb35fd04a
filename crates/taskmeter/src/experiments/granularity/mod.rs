//! `taskmeter run granularity`: the smallest task each runtime runs efficiently (Task Bench's
//! METG). One worker per runtime and repetition measures every task size of the plan
//! (protocol: "The granularity experiment"); the figures come from `analysis::granularity`.

mod compare;
mod consistency;
pub mod family;
pub mod flags;
mod history;
mod report;

use crate::session::{Output, Session};
use std::process::ExitCode;
use std::time::Duration;
use taskmeter_analysis::granularity::{derive, metg, summarise};
use taskmeter_machine::idle::LatencyRequest;
use taskmeter_machine::sched::SchedSettings;
use taskmeter_measure::process::worker::{run_worker, Outcome};
use taskmeter_measure::runtimes::{self, RuntimeInfo};
use taskmeter_model::granularity::{GrainRecord, GrainRun, GrainSettings, SkippedRuntime};
use taskmeter_protocol::plan::{FLUSH_NS, MIN_RING};
use taskmeter_protocol::{BusyPlan, Delivered, Experiment, GrainPlan, Mode, Plan, Room, Schedule, SleepPlan, PROTOCOL};

/// The granularity family, as the registry (`cli::families`) and the catalog name it.
pub const FAMILY: &str = "granularity";

pub struct GrainOptions {
    pub settings: GrainSettings,
    pub grace: Duration,
    pub sched: SchedSettings,
    pub cpu_dma_latency_us: Option<u32>,
    pub output: Output,
}

/// The plan of one worker: every task size of the settings, one runtime; its room is measured
/// when its worker starts.
pub fn plan_for(s: &GrainSettings, runtime: &str) -> Plan {
    Plan {
        protocol: PROTOCOL,
        experiment: Experiment::Granularity,
        runtime: runtime.into(),
        units: 1,
        priority_classes: 1,
        start_limit_ns: 10_000_000_000,
        duration_ns: s.duration_ns,
        warmup_ns: s.warmup_ns,
        sleep: SleepPlan { mode: Mode::Relative, schedule: Schedule::None },
        busy: BusyPlan { iters: 0, yield_each_step: false },
        ring: MIN_RING,
        flush_ns: FLUSH_NS,
        room: Room::default(),
        grain: Some(GrainPlan {
            pattern: s.pattern,
            width: s.width,
            steps: s.steps,
            grains_ns: s.grains_ns.clone(),
            calibrate_ns: s.calibrate_ns,
        }),
        wait: taskmeter_protocol::plan::DEFAULT_WAIT.to_string(),
    }
}

/// Refuses settings no worker could run, before anything starts (also `--dry-run`'s check).
pub fn check(settings: &GrainSettings) -> Result<(), super::ExperimentError> {
    plan_for(settings, "check").check().map_err(|e| super::ExperimentError::Settings(e.to_string()))
}

pub fn run(options: GrainOptions) -> Result<ExitCode, super::ExperimentError> {
    let GrainOptions { settings, grace, sched, cpu_dma_latency_us, output } = options;
    let s = &settings;
    check(s)?;
    let _latency_request = cpu_dma_latency_us.map(LatencyRequest::hold).transpose()?;
    let mut session = Session::start("granularity", output)?;
    let availability: Vec<(&'static RuntimeInfo, Result<(), String>)> = s
        .runtimes
        .iter()
        .map(|id| runtimes::find(id).expect("runtimes are checked when parsed"))
        .map(|info| (info, runtimes::availability(info)))
        .collect();
    let mut skipped = Vec::new();
    for (info, available) in &availability {
        if let Err(reason) = available {
            taskmeter_console::errln!("taskmeter: skipping {}: {reason}", info.id);
            skipped.push(SkippedRuntime { runtime: info.id.to_string(), reason: reason.clone() });
        }
    }
    runtimes::prepare_drivers(&availability);
    let available: Vec<&'static RuntimeInfo> =
        availability.iter().filter(|(_, a)| a.is_ok()).map(|(info, _)| *info).collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let per_worker = plan_for(s, "estimate").planned_ns_on(cpus) as f64 / 1e9;
    let estimate =
        Duration::from_secs_f64((per_worker * (available.len() as u32 * s.repeat) as f64 * 1.2).round().min(1e12));
    taskmeter_console::errln!(
        "granularity: {} runtimes x {} repetitions, {} task sizes each (about {})",
        available.len(),
        s.repeat,
        s.grains_ns.len(),
        humantime::format_duration(estimate.max(Duration::from_secs(1)))
    );
    let mut runs = Vec::new();
    'repetitions: for repetition in 1..=s.repeat {
        // Each repetition starts one runtime later, so that no runtime always runs first.
        let order =
            available.iter().cycle().skip((repetition as usize - 1) % available.len().max(1)).take(available.len());
        for info in order {
            if session.stop_reason().is_some() {
                break 'repetitions;
            }
            session.environment.toolchains.insert(info.id.to_string(), runtimes::toolchain(info));
            let run = run_one(info, s, repetition, &sched, grace);
            taskmeter_console::progressln!("{}", report::progress_line(&run, s.repeat));
            runs.push(run);
        }
    }
    let summaries = summarise(&runs, &s.runtimes, s.grains_ns.len());
    let record = GrainRecord { header: session.header::<GrainRecord>(), settings: s.clone(), runs, summaries, skipped };
    let failed = record.runs.iter().any(|r| r.error.is_some() && !r.interrupted);
    Ok(session.finish(record, crate::report::page::write_folder, report::console, failed))
}

/// The point's figures, its cores those taskmeter counted when the runtime runs tasks in parallel
/// (a one-threaded runtime reports 1 and keeps it); what the runtime reported is kept beside.
fn derive_with_cores(
    mut measured: taskmeter_protocol::Point,
    usable: Option<u32>,
) -> taskmeter_model::granularity::GrainPoint {
    let reported = measured.cores;
    if let Some(cores) = usable.filter(|c| reported > 1 && *c != reported) {
        measured.cores = cores;
    }
    let mut point = derive(measured);
    point.cores_reported = (point.measured.cores != reported).then_some(reported);
    point
}

/// One worker: every task size for one runtime.
fn run_one(
    info: &'static RuntimeInfo,
    s: &GrainSettings,
    repetition: u32,
    sched: &SchedSettings,
    grace: Duration,
) -> GrainRun {
    let mut run = GrainRun {
        runtime: info.id.into(),
        repetition,
        runtime_version: None,
        points: Vec::new(),
        metg: None,
        error: None,
        interrupted: false,
        wall_ns: 0,
    };
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => {
            run.error = Some(reason);
            return run;
        }
    };
    let plan = Plan { room: taskmeter_machine::room::now(), ..plan_for(s, info.id) };
    let worker = run_worker(command, &plan, sched, (grace, None), Box::new(|_| {}), || {});
    run.wall_ns = worker.wall_ns;
    // The CPUs are counted one way for every runtime that runs tasks in parallel: the worker's
    // affinity, read back, capped by a cgroup quota (each runtime counts its own otherwise).
    let usable = worker.sched.as_ref().and_then(|s| s.cpus.as_deref()).and_then(taskmeter_machine::sched::usable_cpus);
    let mut keep = |delivered: Delivered| {
        run.runtime_version = Some(delivered.hello.runtime_version);
        run.points = delivered.points.into_iter().map(|p| derive_with_cores(p, usable)).collect();
    };
    match worker.outcome {
        Outcome::Completed(d) => keep(d),
        Outcome::Interrupted(d, why) => {
            keep(d);
            run.interrupted = true;
            run.error = Some(why);
        }
        Outcome::Cut(d, why) => {
            keep(d);
            run.error = Some(format!("cut short before its D frame: {why}"));
        }
        Outcome::Bounded(d, why) => {
            keep(d);
            run.error = Some(why);
        }
        Outcome::Failed(failure) => {
            run.interrupted = matches!(failure, taskmeter_measure::process::Failure::Interrupted { .. });
            run.error = Some(failure.to_string());
        }
    }
    if run.error.is_none() {
        run.metg = metg(&run.points);
    }
    run
}
