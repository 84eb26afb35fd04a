//! One job's worker, run and judged, as its row: the plan it got, what its worker really had,
//! its counts and statistics, or why it failed, was partial or skipped.

use super::jobs::Job;
use crate::analysis::rows::{classes, counts, statistics};
use crate::machine::env::Environment;
use crate::model::run::{Row, RowStatus, Settings, WorkerInfo};
use crate::process::worker::{self, Outcome, WorkerRun};
use crate::runtimes;
use std::time::Duration;
use taskmeter_protocol::{Plan, WorkerReport, PROTOCOL};

/// Runs one (runtime, point) job: its worker, judged, as a row.
/// Runs one job: its worker, judged, as a row (with the worker's report, for `--raw`).
pub fn run_job(job: &Job, environment: &Environment, tick: impl FnMut()) -> (Row, Option<WorkerReport>) {
    let plan = plan_for(&job.settings, job.info.id);
    let toolchain = environment.toolchains.get(job.info.id).cloned().unwrap_or_default();
    let mut command = match runtimes::worker_command(job.info) {
        Ok(command) => command,
        Err(reason) => return (failed_row(job.info.id, &plan, reason, None), None),
    };
    if job.settings.sched.mlock {
        if let Err(reason) = runtimes::preload_mlock(&mut command) {
            return (failed_row(job.info.id, &plan, reason, None), None);
        }
    }
    let grace = Duration::from_nanos(job.settings.grace_ns);
    let worker = worker::run_worker(command, &plan, &job.settings.sched, grace, tick);
    row_from(job.info.id, plan, worker, toolchain)
}

pub fn plan_for(settings: &Settings, runtime: &str) -> Plan {
    Plan {
        protocol: PROTOCOL,
        experiment: settings.experiment,
        runtime: runtime.to_string(),
        units: settings.units,
        priority_classes: settings.priority_classes,
        start_limit_ns: settings.start_limit_ns,
        duration_ns: settings.duration_ns,
        warmup_ns: settings.warmup_ns,
        sleep: settings.sleep,
        busy: settings.busy,
    }
}

fn failed_row(runtime: &str, plan: &Plan, reason: String, worker: Option<WorkerInfo>) -> Row {
    Row {
        runtime: runtime.to_string(),
        point: 0,
        repetition: 1,
        sequence: 0,
        status: RowStatus::Failed,
        reason: Some(reason),
        plan: Some(plan.clone()),
        worker,
        counts: None,
        statistics: None,
        histograms: None,
        deviation_histograms: None,
        classes: Vec::new(),
    }
}

fn row_from(runtime: &str, plan: Plan, worker: WorkerRun, toolchain: String) -> (Row, Option<WorkerReport>) {
    let mut info = WorkerInfo {
        runtime_version: None,
        toolchain,
        pid: None,
        sched: worker.sched,
        wall_ns: worker.wall_ns,
        peak_rss_kb: worker.peak_rss_kb,
        cpu_ns: worker.cpu_ns,
        priority: None,
        measure_start_ns: None,
        end_ns: None,
        cpu_dma_latency_us: None,
        stderr: None,
    };
    let (status, report) = match worker.outcome {
        Outcome::Completed(report) => (RowStatus::Ok, report),
        Outcome::Interrupted(report) => (RowStatus::Interrupted, report),
        Outcome::Failed(failure) => {
            info.stderr = Some(worker.stderr).filter(|s| !s.is_empty());
            return (failed_row(runtime, &plan, failure.to_string(), Some(info)), None);
        }
    };
    info.runtime_version = Some(report.hello.runtime_version.clone());
    info.pid = Some(report.hello.pid);
    info.priority = Some(report.hello.priority.clone());
    (info.measure_start_ns, info.end_ns) = (Some(report.done.measure_start_ns), Some(report.done.end_ns));
    let (statistics, histograms, deviations) = statistics(&report);
    let partial = report.done.start_error.as_ref().map(|e| {
        format!("partial: {} of {} units started ({e})", report.done.units, plan.units)
    });
    let (status, reason) = match (status, partial) {
        (RowStatus::Interrupted, partial) => {
            let why = "stopped early by Ctrl-C".to_string();
            (status, Some(partial.map_or(why.clone(), |p| format!("{why}; {p}"))))
        }
        (_, Some(partial)) => (RowStatus::Partial, Some(partial)),
        (status, None) => (status, None),
    };
    let row = Row {
        runtime: runtime.to_string(),
        point: 0,
        repetition: 1,
        sequence: 0,
        status,
        reason,
        counts: Some(counts(&plan, &report)),
        classes: classes(&plan, &report),
        plan: Some(plan),
        worker: Some(info),
        statistics: Some(statistics),
        histograms: Some(histograms),
        deviation_histograms: Some(deviations),
    };
    (row, Some(report))
}

/// A row for a job that did not run, and why.
pub fn skipped_row(job: &Job, reason: String) -> Row {
    Row { status: RowStatus::Skipped, plan: None, ..failed_row(job.info.id, &super::rows::plan_for(&job.settings, job.info.id), reason, None) }
}
