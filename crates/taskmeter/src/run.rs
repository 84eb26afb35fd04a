//! `taskmeter run`: one worker per (runtime, point), one row per worker, one results folder.
//! Workers run one after another, or each point's side by side with `--together`.

use crate::driver;
use crate::env::Environment;
use crate::export;
use crate::orchestrate::{self, Outcome};
use crate::output;
use crate::plan::{Plan, PROTOCOL};
use crate::protocol::WorkerReport;
use crate::results::{self, Metric, Order, Row, RowStatus, RunRecord, Settings, WorkerInfo};
use crate::sweep::{self, Point, Sweep};
use crate::runtime;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub struct RunOptions {
    pub settings: Settings,
    /// The experiment's name on the command line: sleep, volume or atomic-sum.
    pub experiment: &'static str,
    pub sweeps: Vec<Sweep>,
    /// Run (runtime, point) jobs in a shuffled order; with a seed, a reproducible one.
    pub shuffle: bool,
    pub seed: Option<u64>,
    pub metric: Metric,
    pub layout: Option<crate::output::Layout>,
    pub output: Option<PathBuf>,
    pub raw: bool,
    pub json: bool,
    pub exports: Exports,
    pub command_line: Vec<String>,
}

/// Files to write besides the results folder (`--export-json`, ...), as hyperfine does.
#[derive(Default)]
pub struct Exports {
    pub json: Option<PathBuf>,
    pub csv: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
}

/// One worker to run: a runtime at a point, one repetition of it.
struct Job<'a> {
    info: &'static runtime::RuntimeInfo,
    available: &'a Result<(), String>,
    point: &'a Point,
    /// 1-based.
    repetition: u32,
    settings: Settings,
}

/// Exit status of a run that measured something: 0, 1 when a row failed, 130 when interrupted.
pub fn run(options: RunOptions) -> Result<ExitCode, String> {
    let base = &options.settings;
    let points = sweep::points(&options.sweeps);
    let point_settings: Vec<Settings> = points.iter().map(|p| sweep::apply(base, p)).collect();
    for (point, settings) in points.iter().zip(&point_settings) {
        crate::cli::check_settings(settings).map_err(|e| {
            if options.sweeps.is_empty() { e } else { format!("at point {}: {e}", point.label()) }
        })?;
    }
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let folder = options.output.clone().unwrap_or_else(|| export::default_folder(options.experiment, &started_at));
    export::check_writable(&folder)?;
    export::check_export_paths([&options.exports.json, &options.exports.csv, &options.exports.markdown])?;
    // A latency request that cannot be held is refused now, not after minutes of measuring.
    if let Some(us) = point_settings.iter().find_map(|s| s.cpu_dma_latency_us) {
        crate::machine::LatencyRequest::hold(us)?;
    }
    orchestrate::install_interrupt_handler();
    let cpu_at_start = orchestrate::own_cpu_ns();
    let mut environment = Environment::capture();

    let availability: Vec<(&'static runtime::RuntimeInfo, Result<(), String>)> = base
        .runtimes
        .iter()
        .map(|id| {
            let info = runtime::find(id).expect("runtimes are checked when parsed");
            (info, driver::availability(info))
        })
        .collect();
    for (info, available) in &availability {
        if let Err(reason) = available {
            eprintln!("taskmeter: skipping {}: {reason}", info.id);
        }
    }
    let mut jobs: Vec<Job> = Vec::new();
    for (point, settings) in points.iter().zip(&point_settings) {
        for repetition in 1..=base.repeat {
            for (info, available) in &availability {
                jobs.push(Job { info, available, point, repetition, settings: settings.clone() });
            }
        }
    }
    let seed = options.shuffle.then(|| options.seed.unwrap_or_else(|| fastrand::u64(..)));
    if let Some(seed) = seed {
        // Interleaving runtimes and points keeps a slow drift of the machine from favouring one.
        fastrand::Rng::with_seed(seed).shuffle(&mut jobs);
    }
    // Together: every runtime of a point (and repetition) at once, in the (shuffled) order of
    // their first job; otherwise one job at a time.
    let batches: Vec<Vec<&Job>> = if base.together {
        let mut order: Vec<(usize, u32)> = Vec::new();
        for job in &jobs {
            if !order.contains(&(job.point.index, job.repetition)) {
                order.push((job.point.index, job.repetition));
            }
        }
        order.iter().map(|key| jobs.iter().filter(|j| (j.point.index, j.repetition) == *key).collect()).collect()
    } else {
        jobs.iter().map(|j| vec![j]).collect()
    };
    prepare_drivers(&availability);
    let expected: Duration = batches
        .iter()
        .map(|batch| {
            batch
                .iter()
                .filter(|j| j.available.is_ok())
                .map(|j| Duration::from_nanos(j.settings.warmup_ns + j.settings.duration_ns) + Duration::from_millis(300))
                .max()
                .unwrap_or_default()
                * if base.together { 1 } else { batch.len() as u32 }
        })
        .sum();
    let progress = Progress::new(expected);

    let mut rows = Vec::new();
    let mut reports: Vec<Option<WorkerReport>> = Vec::new();
    let mut latency_request: Option<crate::machine::LatencyRequest> = None;
    for batch in &batches {
        // The batch's PM QoS request, held while its workers run (one batch is one point).
        let wanted = batch.first().and_then(|job| job.settings.cpu_dma_latency_us);
        if latency_request.as_ref().map(|r| r.us) != wanted {
            latency_request = None;
            if let Some(us) = wanted {
                latency_request = Some(crate::machine::LatencyRequest::hold(us)?);
            }
        }
        let latency_in_force = crate::machine::cpu_dma_latency_us();
        let mut to_run = Vec::new();
        for job in batch {
            let sequence = rows.len() + to_run.len();
            let skipped = |reason: String| Row {
                runtime: job.info.id.to_string(),
                point: job.point.index,
                repetition: job.repetition,
                sequence,
                status: RowStatus::Skipped,
                reason: Some(reason),
                plan: None,
                worker: None,
                counts: None,
                statistics: None,
                histograms: None,
                deviation_histograms: None,
                classes: Vec::new(),
            };
            if let Err(reason) = job.available {
                rows.push(skipped(reason.clone()));
                reports.push(None);
            } else if orchestrate::interrupted() {
                rows.push(skipped("not run: the run was interrupted before it".into()));
                reports.push(None);
            } else {
                environment.toolchains.insert(job.info.id.to_string(), driver::toolchain(job.info));
                to_run.push(*job);
            }
        }
        let label_of = |job: &Job| {
            let mut label = job.info.id.to_string();
            if points.len() > 1 {
                label = format!("{label} {}", job.point.label());
            }
            if base.repeat > 1 {
                label = format!("{label} #{}", job.repetition);
            }
            label
        };
        let results: Vec<(Row, Option<WorkerReport>)> = match to_run.as_slice() {
            [] => Vec::new(),
            [job] => {
                progress.start_row(&label_of(job));
                vec![run_job(job, &environment, || progress.tick())]
            }
            many => {
                progress.start_row(&format!("{} together", many.len()));
                std::thread::scope(|scope| {
                    let handles: Vec<_> =
                        many.iter().map(|job| scope.spawn(|| run_job(job, &environment, || {}))).collect();
                    handles.into_iter().map(|h| h.join().expect("a worker thread panicked")).collect()
                })
            }
        };
        for (job, (mut row, report)) in to_run.iter().zip(results) {
            row.point = job.point.index;
            row.repetition = job.repetition;
            if let Some(worker) = row.worker.as_mut() {
                worker.cpu_dma_latency_us = latency_in_force;
            }
            row.sequence = rows.len();
            progress.finish_row(&label_of(job), &row);
            rows.push(row);
            reports.push(if options.raw { report } else { None });
        }
    }
    drop(latency_request);
    progress.clear();
    environment.load_average_after = crate::env::load_average();

    let complete = !orchestrate::interrupted();
    let record = RunRecord {
        schema: results::SCHEMA.into(),
        schema_version: results::SCHEMA_VERSION,
        taskmeter_version: env!("CARGO_PKG_VERSION").into(),
        complete,
        command_line: options.command_line.clone(),
        started_at,
        finished_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        experiment: options.experiment.into(),
        metric: options.metric,
        settings: base.clone(),
        sweeps: options.sweeps.clone(),
        points,
        order: Order { shuffled: options.shuffle, seed },
        environment,
        rows,
        taskmeter_cpu_ns: Some(orchestrate::own_cpu_ns().saturating_sub(cpu_at_start)),
    };
    export::write_folder(&folder, &record, &reports)?;
    export::write_exports(&record, &options.exports)?;
    if options.json {
        output::quiet_on_closed_stdout();
        print!("{}", export::run_json(&record));
    } else {
        print_report(&record, &folder, options.layout);
    }
    let failed = record.rows.iter().any(|r| r.status == RowStatus::Failed);
    Ok(if !complete {
        eprintln!("taskmeter: interrupted; the results folder holds what was measured and is marked incomplete");
        ExitCode::from(130)
    } else if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Builds every driver the run needs, concurrently and before anything is measured, so no
/// compiler competes with a measurement. A build that fails is reported by its rows.
fn prepare_drivers(availability: &[(&'static runtime::RuntimeInfo, Result<(), String>)]) {
    let mut seen = Vec::new();
    let to_build: Vec<&'static runtime::RuntimeInfo> = availability
        .iter()
        .filter(|(info, available)| available.is_ok() && !info.launch.in_process())
        .filter(|(info, _)| {
            let folder = match info.launch {
                runtime::Launch::Driver(d) => d.folder,
                runtime::Launch::InProcess => "",
            };
            let first = !seen.contains(&folder);
            seen.push(folder);
            first
        })
        .map(|(info, _)| *info)
        .collect();
    if to_build.is_empty() {
        return;
    }
    std::thread::scope(|scope| {
        for info in to_build {
            scope.spawn(move || driver::worker_command(info));
        }
    });
}

/// Runs one (runtime, point) job: its worker, judged, as a row.
fn run_job(job: &Job, environment: &Environment, tick: impl FnMut()) -> (Row, Option<WorkerReport>) {
    let plan = plan_for(&job.settings, job.info.id);
    let toolchain = environment.toolchains.get(job.info.id).cloned().unwrap_or_default();
    match driver::worker_command(job.info) {
        Err(reason) => (failed_row(job.info.id, &plan, reason, None), None),
        Ok(command) => {
            let grace = Duration::from_nanos(job.settings.grace_ns);
            let worker = orchestrate::run_worker(command, &plan, &job.settings.sched, grace, tick);
            row_from(job.info.id, plan, worker, toolchain)
        }
    }
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

fn row_from(runtime: &str, plan: Plan, worker: orchestrate::WorkerRun, toolchain: String) -> (Row, Option<WorkerReport>) {
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
        Outcome::Failed(reason) => {
            info.stderr = Some(worker.stderr).filter(|s| !s.is_empty());
            return (failed_row(runtime, &plan, reason, Some(info)), None);
        }
    };
    info.runtime_version = Some(report.hello.runtime_version.clone());
    info.pid = Some(report.hello.pid);
    info.priority = Some(report.hello.priority.clone());
    (info.measure_start_ns, info.end_ns) = (Some(report.done.measure_start_ns), Some(report.done.end_ns));
    let (statistics, histograms, deviations) = results::statistics(&report);
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
        counts: Some(results::counts(&plan, &report)),
        classes: results::classes(&plan, &report),
        plan: Some(plan),
        worker: Some(info),
        statistics: Some(statistics),
        histograms: Some(histograms),
        deviation_histograms: Some(deviations),
    };
    (row, Some(report))
}

fn print_report(record: &RunRecord, folder: &std::path::Path, layout: Option<crate::output::Layout>) {
    output::quiet_on_closed_stdout();
    print!("{}", output::report(record, layout));
    println!("results: {} (report: {})", folder.display(), folder.join("report.html").display());
}

/// A progress bar with ETA on a terminal; one plain line per row otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    row_started: std::cell::Cell<Instant>,
}

impl Progress {
    fn new(expected: Duration) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(expected.as_millis().max(1) as u64);
            bar.set_style(
                ProgressStyle::with_template("{msg:>20} [{elapsed_precise}] {wide_bar} {percent:>3}% ETA {eta}")
                    .expect("a valid template"),
            );
            bar
        });
        Progress { bar, started: Instant::now(), row_started: std::cell::Cell::new(Instant::now()) }
    }

    fn start_row(&self, label: &str) {
        self.row_started.set(Instant::now());
        if let Some(bar) = &self.bar {
            bar.set_message(label.to_string());
        }
        self.tick();
    }

    fn tick(&self) {
        if let Some(bar) = &self.bar {
            bar.set_position((self.started.elapsed().as_millis() as u64).min(bar.length().unwrap_or(0)));
        }
    }

    fn finish_row(&self, label: &str, row: &Row) {
        let elapsed = self.row_started.get().elapsed().as_secs_f64();
        let line = match (&row.status, &row.counts) {
            (RowStatus::Failed, _) => format!("{label}: FAILED after {elapsed:.1} s: {}", row.reason.as_deref().unwrap_or("")),
            (RowStatus::Partial, Some(c)) => {
                format!("{label}: PARTIAL, {} of {} units: {}", c.units, c.units_planned, row.reason.as_deref().unwrap_or(""))
            }
            (_, Some(c)) if c.samples_total == 0 => {
                format!("{label}: {} iterations in {elapsed:.1} s", c.iterations_measured)
            }
            (_, Some(c)) => format!("{label}: {} samples in {elapsed:.1} s", c.samples_measured),
            _ => format!("{label}: done in {elapsed:.1} s"),
        };
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("taskmeter: {line}"),
        }
    }

    fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
