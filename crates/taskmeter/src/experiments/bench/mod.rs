//! `taskmeter bench`: each scenario is a shell command run again and again as the body of a
//! benchmark; the processes it starts report units of work to a collector through the record()
//! clients (clients/README.md). Statistics and the console report are taskmeter-record's.

mod compare;
mod consistency;
pub mod family;
pub mod flags;
mod history;
mod report;

use crate::session::{Output, Session};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use taskmeter_clock::now_ns;
use taskmeter_measure::process::child::{Ask, Limits, Spawned, Stop};
use taskmeter_measure::process::{describe, last_line, signals};
use taskmeter_model::bench::{BenchRecord, NamedText};
use taskmeter_record::analysis::analyze;
use taskmeter_record::collector::Collector;
use taskmeter_record::report::{Config, Histograms, Report, ScenarioResult, SCHEMA};
use taskmeter_record::{console, result_of, Window};

/// The bench family (`taskmeter bench`), as the registry (`cli::families`) names it.
pub const FAMILY: &str = "bench";

/// After SIGTERM, how long a body's processes get before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);
/// How long the collector waits for stream clients to close after the body ended.
const STREAM_GRACE: Duration = Duration::from_secs(1);

pub struct BenchOptions {
    pub scenarios: Vec<(String, String)>,
    pub inputs: Vec<(String, String)>,
    pub config: Config,
    pub show_output: bool,
    pub output: Output,
}

pub fn run(options: BenchOptions) -> Result<ExitCode, super::ExperimentError> {
    let session = Session::start("bench", options.output)?;
    let sockets = SocketDir::create()?;
    let line = crate::report::console::env_line(&session.environment, None, Ok(None));
    let without_workers: Vec<&str> = line.split(" | ").filter(|part| !part.starts_with("workers")).collect();
    taskmeter_console::errln!("{}", without_workers.join(" | "));
    taskmeter_console::errln!("{}", console::preamble(&options.config, options.scenarios.len()));

    let inputs: Vec<Option<&(String, String)>> =
        if options.inputs.is_empty() { vec![None] } else { options.inputs.iter().map(Some).collect() };
    let mut results = Vec::new();
    'jobs: for (name, command) in &options.scenarios {
        for input in &inputs {
            if session.stop_reason().is_some() {
                break 'jobs;
            }
            taskmeter_console::errln!("{}", console::progress(name, input.map(|i| i.0.as_str())));
            let job = Job { name, command, input: *input, config: &options.config, show_output: options.show_output };
            results.push(job.run(&sockets.path, results.len()).map_err(super::ExperimentError::Setup)?);
        }
    }
    let report = Report {
        schema: SCHEMA,
        tool: format!("taskmeter {}", env!("CARGO_PKG_VERSION")),
        config: options.config.clone(),
        results,
        complete: session.stop_reason().is_none(),
    };
    let record = BenchRecord {
        header: session.header::<BenchRecord>(),
        scenarios: options.scenarios.iter().map(|(n, c)| NamedText { name: n.clone(), value: c.clone() }).collect(),
        inputs: options.inputs.iter().map(|(n, v)| NamedText { name: n.clone(), value: v.clone() }).collect(),
        report,
    };
    let failed = record.report.results.iter().any(|r| r.error.is_some());
    Ok(session.finish(record, crate::report::page::write_folder, report::console, failed))
}

/// A private folder for the collectors' sockets, removed at the end.
struct SocketDir {
    path: PathBuf,
}

impl SocketDir {
    fn create() -> Result<SocketDir, super::ExperimentError> {
        let path = std::env::temp_dir().join(format!("taskmeter-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .map_err(|e| super::ExperimentError::Setup(format!("cannot create {}: {e}", path.display())))?;
        Ok(SocketDir { path })
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

struct Job<'a> {
    name: &'a str,
    command: &'a str,
    input: Option<&'a (String, String)>,
    config: &'a Config,
    show_output: bool,
}

impl Job<'_> {
    fn run(&self, socket_dir: &Path, index: usize) -> Result<ScenarioResult, String> {
        let collector = Collector::bind(socket_dir, &format!("job-{index}"))
            .map_err(|e| format!("cannot open the collector's sockets in {}: {e}", socket_dir.display()))?;
        let stderr_log = socket_dir.join(format!("job-{index}.stderr"));
        let start_ns = now_ns();
        let warmup_end_ns = start_ns + self.config.warmup_ns;
        let window = Window { start_ns, warmup_end_ns, end_ns: warmup_end_ns + self.config.time_ns };
        // At the end of the drain a body still running is asked to stop (SIGTERM to its group),
        // and killed a grace later.
        let drain_end = instant_at(window.end_ns + self.config.drain_ns);
        let limits = Limits {
            deadline: drain_end + TERM_GRACE + Duration::from_secs(1),
            ask: Ask::Signal(libc::SIGTERM),
            grace: TERM_GRACE,
            stop_at: Some(drain_end),
        };

        let mut invocations = 0;
        let mut error = None;
        let mut stopped = None;
        while now_ns() < window.end_ns && !signals::interrupted() {
            let mut command = Command::new("sh");
            command.arg("-c").arg(self.command).envs(collector.env()).stdin(Stdio::null());
            command.env(taskmeter_record::UNTIL_VAR, window.end_ns.to_string()).env("TASKMETER_SCENARIO", self.name);
            if let Some((input_name, value)) = self.input {
                command.env("TASKMETER_INPUT_NAME", input_name).env("TASKMETER_INPUT", value);
            }
            let log = File::create(&stderr_log).map_err(|e| format!("cannot create {}: {e}", stderr_log.display()))?;
            if self.show_output {
                command.stdout(Stdio::inherit()).stderr(Stdio::inherit());
            } else {
                command.stdout(Stdio::null()).stderr(log);
            }
            let body = match Spawned::start(command, "scenario") {
                Ok(body) => body,
                Err(_) if signals::interrupted() => break,
                Err(failure) => return Err(failure.to_string()),
            };
            // What the body leaves running when its shell exits is stopped with it.
            let ended = body.wait(limits, |_| {});
            invocations += 1;
            if ended.stopped.is_some() {
                stopped = ended.stopped;
                break;
            }
            match ended.exit {
                Ok(exit) if exit.status.success() => {}
                Ok(exit) => {
                    error = Some(failure(self.command, exit.status, &stderr_log));
                    break;
                }
                Err(e) => return Err(format!("cannot wait for the scenario: {e}")),
            }
        }
        let (events, delivery) = collector.finish(STREAM_GRACE);
        let analysis = analyze(events, window, 0, None);
        let mut result = result_of(self.name, self.input.map(|i| i.0.clone()), window, invocations, &analysis);
        if !analysis.gaps.is_empty() {
            let encode =
                |values: &[i64]| taskmeter_analysis::histogram::encode(&taskmeter_analysis::histogram::of(values));
            result.histograms = Some(Histograms {
                gap: encode(&analysis.gaps),
                latency: (!analysis.latencies.is_empty()).then(|| encode(&analysis.latencies)),
            });
        }
        result.error = error;
        result.delivery = Some(delivery);
        if let Some(Stop::Signal(signal)) = stopped {
            result.notes.push(format!(
                "interrupted by {} {} into the {} window: the body was stopped, and what it had not flushed is lost",
                signals::name(signal),
                taskmeter_stats::format::duration(
                    now_ns().saturating_sub(window.warmup_end_ns).min(self.config.time_ns) as f64
                ),
                taskmeter_stats::format::duration(self.config.time_ns as f64)
            ));
        } else if stopped.is_some() {
            result.notes.push(format!(
                "the body's last run was still going at the end of the drain and was stopped (SIGTERM, SIGKILL after {} s); \
                 events it had not flushed are lost: loop `while running()` to end on time",
                TERM_GRACE.as_secs()
            ));
        }
        Ok(result)
    }
}

/// The Instant of a CLOCK_MONOTONIC time (both read the same clock on Linux).
fn instant_at(ns: u64) -> Instant {
    let now = now_ns();
    if ns >= now {
        Instant::now() + Duration::from_nanos(ns - now)
    } else {
        Instant::now()
    }
}

/// Why a run of the body failed: how it ended and the last line it wrote to stderr.
fn failure(command: &str, status: std::process::ExitStatus, stderr_log: &Path) -> String {
    let how = describe(status);
    match last_line(&tail(stderr_log)) {
        Some(line) => format!("`{command}` {how}: {line}"),
        None => format!("`{command}` {how}"),
    }
}

fn tail(path: &Path) -> String {
    let Ok(mut file) = File::open(path) else { return String::new() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text
}
