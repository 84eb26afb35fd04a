//! `taskmeter run sleep`: one worker per runtime, one row per worker, one results folder.

use crate::driver;
use crate::env::Environment;
use crate::export;
use crate::orchestrate::{self, Outcome};
use crate::output;
use crate::plan::{Experiment, Plan, PROTOCOL};
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
    pub sweeps: Vec<Sweep>,
    /// Run (runtime, point) jobs in a shuffled order; with a seed, a reproducible one.
    pub shuffle: bool,
    pub seed: Option<u64>,
    pub metric: Metric,
    pub layout: crate::output::Layout,
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

/// One worker to run: a runtime at a point.
struct Job<'a> {
    info: &'static runtime::RuntimeInfo,
    available: &'a Result<(), String>,
    point: &'a Point,
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
    let folder = options.output.clone().unwrap_or_else(|| export::default_folder("sleep", &started_at));
    export::check_writable(&folder)?;
    for path in [&options.exports.json, &options.exports.csv, &options.exports.markdown].into_iter().flatten() {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() {
            return Err(format!("cannot export to {}: folder {} does not exist", path.display(), parent.display()));
        }
    }
    orchestrate::install_interrupt_handler();
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
        for (info, available) in &availability {
            jobs.push(Job { info, available, point, settings: settings.clone() });
        }
    }
    let seed = options.shuffle.then(|| options.seed.unwrap_or_else(|| fastrand::u64(..)));
    if let Some(seed) = seed {
        // Interleaving runtimes and points keeps a slow drift of the machine from favouring one.
        fastrand::Rng::with_seed(seed).shuffle(&mut jobs);
    }
    prepare_drivers(&availability);
    let expected: Duration = jobs
        .iter()
        .filter(|j| j.available.is_ok())
        .map(|j| Duration::from_nanos(j.settings.warmup_ns + j.settings.duration_ns) + Duration::from_millis(300))
        .sum();
    let progress = Progress::new(expected);

    let mut rows = Vec::new();
    let mut reports: Vec<Option<WorkerReport>> = Vec::new();
    for (sequence, job) in jobs.iter().enumerate() {
        let skipped = |reason: String| Row {
            runtime: job.info.id.to_string(),
            point: job.point.index,
            sequence,
            status: RowStatus::Skipped,
            reason: Some(reason),
            plan: None,
            worker: None,
            counts: None,
            statistics: None,
            histograms: None,
        };
        if let Err(reason) = job.available {
            rows.push(skipped(reason.clone()));
            reports.push(None);
            continue;
        }
        if orchestrate::interrupted() {
            rows.push(skipped("not run: the run was interrupted before it".into()));
            reports.push(None);
            continue;
        }
        let label = if points.len() > 1 { format!("{} {}", job.info.id, job.point.label()) } else { job.info.id.to_string() };
        progress.start_row(&label);
        let plan = plan_for(&job.settings, job.info.id);
        let toolchain = driver::toolchain(job.info);
        environment.toolchains.insert(job.info.id.to_string(), toolchain.clone());
        let (mut row, report) = match driver::worker_command(job.info) {
            Err(reason) => (failed_row(job.info.id, &plan, reason, None), None),
            Ok(command) => {
                let grace = Duration::from_nanos(job.settings.grace_ns);
                let worker = orchestrate::run_worker(command, &plan, &job.settings.sched, grace, || progress.tick());
                row_from(job.info.id, plan, worker, toolchain)
            }
        };
        row.point = job.point.index;
        row.sequence = sequence;
        progress.finish_row(&label, &row);
        rows.push(row);
        reports.push(if options.raw { report } else { None });
    }
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
        experiment: "sleep".into(),
        metric: options.metric,
        settings: base.clone(),
        sweeps: options.sweeps.clone(),
        points,
        order: Order { shuffled: options.shuffle, seed },
        environment,
        rows,
    };
    export::write_folder(&folder, &record, &reports)?;
    export::write_exports(&record, &options.exports)?;
    if options.json {
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

pub fn plan_for(settings: &Settings, runtime: &str) -> Plan {
    Plan {
        protocol: PROTOCOL,
        experiment: Experiment::Sleep,
        runtime: runtime.to_string(),
        units: settings.units,
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
        sequence: 0,
        status: RowStatus::Failed,
        reason: Some(reason),
        plan: Some(plan.clone()),
        worker,
        counts: None,
        statistics: None,
        histograms: None,
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
    let (statistics, histograms) = results::statistics(&report);
    let row = Row {
        runtime: runtime.to_string(),
        point: 0,
        sequence: 0,
        status,
        reason: (status == RowStatus::Interrupted).then(|| "stopped early by Ctrl-C".to_string()),
        plan: Some(plan),
        worker: Some(info),
        counts: Some(results::counts(&report)),
        statistics: Some(statistics),
        histograms: Some(histograms),
    };
    (row, Some(report))
}

fn print_report(record: &RunRecord, folder: &std::path::Path, layout: crate::output::Layout) {
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
