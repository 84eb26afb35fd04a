//! `taskmeter bench`: each scenario is a shell command run again and again as the body of a
//! benchmark; the processes it starts report units of work to a collector through the record()
//! clients (clients/README.md). Statistics and the console report are taskmeter-record's.

use crate::clock::now_ns;
use crate::env::Environment;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use taskmeter_record::analysis::analyze;
use taskmeter_record::collector::Collector;
use taskmeter_record::report::{Config, Histograms, Report, ScenarioResult, SCHEMA};
use taskmeter_record::{console, result_of, Window};

/// After SIGTERM, how long a body's processes get before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);
/// How long the collector waits for stream clients to close after the body ended.
const STREAM_GRACE: Duration = Duration::from_secs(1);

pub struct BenchOptions {
    pub scenarios: Vec<(String, String)>,
    pub inputs: Vec<(String, String)>,
    pub config: Config,
    pub show_output: bool,
    pub output: Option<PathBuf>,
    pub export_json: Option<PathBuf>,
    pub json: bool,
    pub command_line: Vec<String>,
}

/// `bench.json`: the report with what a reader needs to repeat it.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct BenchRecord {
    pub schema: u32,
    pub taskmeter_version: String,
    pub started_at: String,
    pub command_line: Vec<String>,
    pub scenarios: Vec<NamedText>,
    pub inputs: Vec<NamedText>,
    pub environment: Environment,
    pub report: Report,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NamedText {
    pub name: String,
    pub value: String,
}

pub fn run(options: BenchOptions) -> Result<ExitCode, String> {
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let folder = options.output.clone().unwrap_or_else(|| crate::export::default_folder("bench", &started_at));
    crate::export::check_writable(&folder)?;
    let sockets = SocketDir::create()?;
    crate::orchestrate::install_interrupt_handler();
    let mut environment = Environment::capture();
    let line = environment.one_line(None, Ok(None));
    let without_workers: Vec<&str> = line.split(" | ").filter(|part| !part.starts_with("workers")).collect();
    eprintln!("{}", without_workers.join(" | "));
    eprintln!("{}", console::preamble(&options.config, options.scenarios.len()));

    let inputs: Vec<Option<&(String, String)>> =
        if options.inputs.is_empty() { vec![None] } else { options.inputs.iter().map(Some).collect() };
    let mut results = Vec::new();
    'jobs: for (name, command) in &options.scenarios {
        for input in &inputs {
            if crate::orchestrate::interrupted() {
                break 'jobs;
            }
            eprintln!("{}", console::progress(name, input.map(|i| i.0.as_str())));
            let job = Job { name, command, input: *input, config: &options.config, show_output: options.show_output };
            results.push(job.run(&sockets.path, results.len())?);
        }
    }
    environment.load_average_after = crate::env::load_average();
    let complete = !crate::orchestrate::interrupted();
    let report = Report {
        schema: SCHEMA,
        tool: format!("taskmeter {}", env!("CARGO_PKG_VERSION")),
        config: options.config.clone(),
        results,
        complete,
    };
    let record = BenchRecord {
        schema: 1,
        taskmeter_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        command_line: options.command_line.clone(),
        scenarios: options.scenarios.iter().map(|(n, c)| NamedText { name: n.clone(), value: c.clone() }).collect(),
        inputs: options.inputs.iter().map(|(n, v)| NamedText { name: n.clone(), value: v.clone() }).collect(),
        environment,
        report,
    };
    let json = serde_json::to_string_pretty(&record).map_err(|e| format!("cannot encode bench.json: {e}"))?;
    let text = console::render(&record.report);
    crate::export::write_atomically(&folder, |dir| {
        let io = |e: std::io::Error| format!("cannot write the results: {e}");
        std::fs::write(dir.join("bench.json"), &json).map_err(io)?;
        write_reports(dir, &record)
    })?;
    if let Some(path) = &options.export_json {
        std::fs::write(path, &json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if options.json {
        println!("{json}");
    } else {
        print!("{text}");
    }
    eprintln!("\nResults: {}{}", folder.display(), if complete { "" } else { " (incomplete: interrupted)" });
    Ok(if !complete {
        ExitCode::from(130)
    } else if record.report.results.iter().any(|r| r.error.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `report.txt` (the console report) and `report.html`, from the record alone.
pub fn write_reports(dir: &Path, record: &BenchRecord) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the report: {e}");
    std::fs::write(dir.join("report.txt"), console::render(&record.report)).map_err(io)?;
    std::fs::write(dir.join("report.html"), crate::html::render_bench(record)).map_err(io)
}

/// A private folder for the collectors' sockets, removed at the end.
struct SocketDir {
    path: PathBuf,
}

impl SocketDir {
    fn create() -> Result<SocketDir, String> {
        let path = std::env::temp_dir().join(format!("taskmeter-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
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
        let watchdog = Watchdog::start(window.end_ns + self.config.drain_ns);

        let mut invocations = 0;
        let mut error = None;
        while now_ns() < window.end_ns && !crate::orchestrate::interrupted() {
            let mut command = Command::new("sh");
            command.arg("-c").arg(self.command).envs(collector.env()).stdin(Stdio::null()).process_group(0);
            command.env(taskmeter_record::UNTIL_VAR, window.end_ns.to_string()).env("TASKMETER_SCENARIO", self.name);
            if let Some((input_name, value)) = self.input {
                command.env("TASKMETER_INPUT_NAME", input_name).env("TASKMETER_INPUT", value);
            }
            let log = File::create(&stderr_log).map_err(|e| format!("cannot create {}: {e}", stderr_log.display()))?;
            if !self.show_output {
                command.stdout(Stdio::null()).stderr(log);
            }
            let mut child = command.spawn().map_err(|e| format!("cannot run sh: {e}"))?;
            watchdog.watch(child.id() as i32);
            let status = child.wait().map_err(|e| format!("cannot wait for the scenario: {e}"))?;
            watchdog.watch(0);
            invocations += 1;
            if watchdog.stopped() {
                break;
            }
            if !status.success() {
                error = Some(failure(self.command, status, &stderr_log));
                break;
            }
        }
        let stopped = watchdog.stopped();
        watchdog.finish();
        let (events, delivery) = collector.finish(STREAM_GRACE);
        let analysis = analyze(events, window, 0, None);
        let mut result = result_of(self.name, self.input.map(|i| i.0.clone()), window, invocations, &analysis);
        if !analysis.gaps.is_empty() {
            let encode = |values: &[i64]| crate::histogram::encode(&crate::histogram::of(values));
            result.histograms = Some(Histograms {
                gap: encode(&analysis.gaps),
                latency: (!analysis.latencies.is_empty()).then(|| encode(&analysis.latencies)),
            });
        }
        result.error = error;
        result.delivery = Some(delivery);
        if stopped && crate::orchestrate::interrupted() {
            result.notes.push(format!(
                "interrupted (Ctrl-C) {} into the {} window: the body was stopped, and what it had not flushed is lost",
                console::duration(now_ns().saturating_sub(window.warmup_end_ns).min(self.config.time_ns) as f64),
                console::duration(self.config.time_ns as f64)
            ));
        } else if stopped {
            result.notes.push(format!(
                "the body's last run was still going at the end of the drain and was stopped (SIGTERM, SIGKILL after {} s); \
                 events it had not flushed are lost: loop `while running()` to end on time",
                TERM_GRACE.as_secs()
            ));
        }
        Ok(result)
    }
}

/// Why a run of the body failed: its status and the last line it wrote to stderr.
fn failure(command: &str, status: std::process::ExitStatus, stderr_log: &Path) -> String {
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "failed".into(),
    };
    let last_line = tail(stderr_log).lines().rev().find(|l| !l.trim().is_empty()).map(str::trim).map(str::to_string);
    match last_line {
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

/// Stops the body's process group once the drain ends (or at Ctrl-C): SIGTERM, then SIGKILL.
struct Watchdog {
    pgid: Arc<AtomicI32>,
    stopped: Arc<std::sync::atomic::AtomicBool>,
    done: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Watchdog {
    fn start(deadline_ns: u64) -> Watchdog {
        let pgid = Arc::new(AtomicI32::new(0));
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (done, wait) = mpsc::channel();
        let (group, flag) = (pgid.clone(), stopped.clone());
        let thread = std::thread::spawn(move || {
            let poll = Duration::from_millis(20);
            while now_ns() < deadline_ns && !crate::orchestrate::interrupted() {
                if wait.recv_timeout(poll) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
            }
            let target = group.load(Ordering::SeqCst);
            if target <= 0 {
                return;
            }
            flag.store(true, Ordering::SeqCst);
            // SAFETY: plain kill(2) on the body's own process group.
            unsafe { libc::kill(-target, libc::SIGTERM) };
            if wait.recv_timeout(TERM_GRACE).is_err() {
                unsafe { libc::kill(-target, libc::SIGKILL) };
            }
        });
        Watchdog { pgid, stopped, done, thread }
    }

    fn watch(&self, pgid: i32) {
        self.pgid.store(pgid, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn finish(self) {
        let _ = self.done.send(());
        let _ = self.thread.join();
    }
}
