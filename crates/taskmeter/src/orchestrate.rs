//! Runs one worker process: sends the plan, waits within a deadline, handles Ctrl-C, and turns
//! whatever happened into a checked report or a reason for failure.

use crate::plan::Plan;
use crate::protocol::{parse_output, OutputError, WorkerReport};
use crate::sched::SchedSettings;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

enum Event {
    Exited(std::io::Result<Exit>),
    Interrupt,
}

/// How a worker ended, and the resources it used (from wait4).
struct Exit {
    status: ExitStatus,
    peak_rss_kb: u64,
    /// User plus system CPU time of the worker and its threads.
    cpu_ns: u64,
}

fn timeval_ns(t: libc::timeval) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000
}

/// CPU time (user + system) taskmeter itself has used so far, all its threads.
pub fn own_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    timeval_ns(usage.ru_utime) + timeval_ns(usage.ru_stime)
}

/// Waits for the process like `Child::wait`, but with wait4, which also reports its peak RSS.
fn wait_with_usage(child: std::process::Child) -> std::io::Result<Exit> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; the child is ours and not yet reaped (std reaps only
    // in wait/try_wait, which are not called on it).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    drop(child);
    let cpu_ns = timeval_ns(usage.ru_utime) + timeval_ns(usage.ru_stime);
    Ok(Exit { status: ExitStatus::from_raw(status), peak_rss_kb: usage.ru_maxrss as u64, cpu_ns })
}

/// The event channels of the workers running now (several with `--together`), by id.
static EVENTS: Mutex<Vec<(u64, Sender<Event>)>> = Mutex::new(Vec::new());
static NEXT_WORKER: AtomicU64 = AtomicU64::new(0);
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);

/// Ctrl-C stops the current worker early (it keeps what it measured) and ends the run.
/// Workers run in their own process group, so the terminal's SIGINT reaches only us.
pub fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        INTERRUPTS.fetch_add(1, Ordering::SeqCst);
        for (_, tx) in EVENTS.lock().unwrap().iter() {
            let _ = tx.send(Event::Interrupt);
        }
    });
}

pub fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

/// Scheduling attributes the worker really had, read back from the kernel once it runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct SchedInfo {
    pub policy: String,
    pub priority: i32,
    pub nice: i32,
    pub timerslack_ns: Option<u64>,
    /// CPUs it may run on.
    #[serde(default)]
    pub cpus: Option<String>,
    /// Locked memory (VmLck), kB.
    #[serde(default)]
    pub locked_kb: Option<u64>,
}

impl SchedInfo {
    pub fn of(pid: i32) -> SchedInfo {
        // SAFETY: plain queries about a process we started; failures are reported as -1.
        let policy = unsafe { libc::sched_getscheduler(pid) };
        let mut param = libc::sched_param { sched_priority: 0 };
        unsafe { libc::sched_getparam(pid, &mut param) };
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t) };
        let timerslack_ns = std::fs::read_to_string(format!("/proc/{pid}/timerslack_ns"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
        let cpus = field("Cpus_allowed_list:");
        let locked_kb = field("VmLck:").and_then(|v| v.trim_end_matches("kB").trim().parse().ok());
        SchedInfo { policy: policy_name(policy), priority: param.sched_priority, nice, timerslack_ns, cpus, locked_kb }
    }
}

pub fn policy_name(policy: i32) -> String {
    match policy {
        libc::SCHED_OTHER => "SCHED_OTHER".into(),
        libc::SCHED_FIFO => "SCHED_FIFO".into(),
        libc::SCHED_RR => "SCHED_RR".into(),
        libc::SCHED_BATCH => "SCHED_BATCH".into(),
        libc::SCHED_IDLE => "SCHED_IDLE".into(),
        other => format!("policy {other}"),
    }
}

#[derive(Debug)]
pub enum Outcome {
    Completed(WorkerReport),
    /// Stopped early by Ctrl-C; the report holds what was measured until then.
    Interrupted(WorkerReport),
    Failed(String),
}

#[derive(Debug)]
pub struct WorkerRun {
    pub outcome: Outcome,
    pub sched: Option<SchedInfo>,
    pub peak_rss_kb: Option<u64>,
    pub cpu_ns: Option<u64>,
    pub wall_ns: u64,
    /// The worker's stderr (its last few kilobytes).
    pub stderr: String,
}

/// How long a worker may run: its plan's own bound plus a grace for start-up and output.
pub fn deadline(plan: &Plan, grace: Duration) -> Duration {
    // Starting the units may take the start limit, and ending as many (joining 30,000 threads)
    // about as long again.
    let planned = plan.start_limit_ns.saturating_mul(2).saturating_add(plan.warmup_ns + plan.duration_ns + plan.max_expected_ns());
    Duration::from_nanos(planned) + grace
}

/// What happened to a worker process, before its output is judged.
pub struct RawRun {
    pub status: std::io::Result<ExitStatus>,
    /// The worker's peak resident set size, kB.
    pub peak_rss_kb: Option<u64>,
    /// The worker's CPU time (user + system), from wait4.
    pub cpu_ns: Option<u64>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub sched: SchedInfo,
    pub wall_ns: u64,
}

/// When to ask a worker to stop early (end of file on its stdin).
pub struct StopPolicy {
    /// After this long, whatever happens (for `check-driver`).
    pub after: Option<Duration>,
    /// How long a worker asked to stop may take to finish its iteration and write.
    pub grace: Duration,
}

/// Starts `command`, sends `input` (one line) and keeps stdin open until the worker exits, the
/// user presses Ctrl-C, or `stop.after` passes; kills the worker's process group at `limit`.
pub fn spawn_and_wait(
    mut command: Command,
    input: &str,
    sched: &SchedSettings,
    limit: Duration,
    stop: StopPolicy,
    mut tick: impl FnMut(),
) -> Result<RawRun, String> {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    if !sched.is_default() {
        if sched.mlock {
            let library = crate::driver::mlock_preload()?;
            let preload = match std::env::var_os("LD_PRELOAD") {
                Some(existing) => format!("{}:{}", library.display(), existing.to_string_lossy()),
                None => library.display().to_string(),
            };
            command.env("LD_PRELOAD", preload);
        }
        let (settings, cpu_set) = (sched.clone(), sched.cpu_set());
        // SAFETY: the closure only makes system calls (no allocation, no locks) between fork and exec.
        unsafe { command.pre_exec(move || settings.apply_in_child(cpu_set.as_ref())) };
    }
    let (tx, rx) = mpsc::channel();
    let worker_id = NEXT_WORKER.fetch_add(1, Ordering::SeqCst);
    EVENTS.lock().unwrap().push((worker_id, tx.clone()));
    let unregister = || EVENTS.lock().unwrap().retain(|(id, _)| *id != worker_id);
    if interrupted() {
        unregister();
        return Err("not started: the run was interrupted".into());
    }
    // A forked child's ru_maxrss starts from its parent's peak RSS and keeps it across exec, so
    // a worker smaller than taskmeter's peak would report taskmeter's: give memory back, reset
    // taskmeter's peak to its current RSS (clear_refs 5), note that size, and follow the
    // worker's own VmHWM as well.
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let parent_rss_kb = status_kb("self", "VmRSS:").unwrap_or(u64::MAX);
    // The deadline and the read-back count from the spawn, after any preparation above.
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        unregister();
        if sched.is_default() {
            format!("could not start the worker: {e}")
        } else {
            format!("could not give the worker {}: {e}", sched.describe())
        }
    })?;
    let pid = child.id() as i32;
    // Policy, slack and affinity are set before exec and are read now; what the worker does
    // while starting (a preloaded mlockall, a runtime's own threads) is read again shortly after.
    let mut readback = SchedInfo::of(pid);
    let mut read_again = true;
    let read_at = started + Duration::from_millis(50);
    let mut stdin = child.stdin.take();
    if let Some(pipe) = stdin.as_mut() {
        // A worker that exits at once closes the pipe; its output will say why.
        let _ = pipe.write_all(format!("{}\n", input.trim_end()).as_bytes()).and_then(|_| pipe.flush());
    }
    let stdout = collect(child.stdout.take(), usize::MAX);
    let stderr = collect(child.stderr.take(), 16 * 1024);
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exited(wait_with_usage(child)));
    });

    let mut high_water_kb = 0;
    let mut deadline = started + limit;
    let mut stop_at = stop.after.map(|after| started + after);
    let mut timed_out = false;
    let status = loop {
        let now = Instant::now();
        let mut next = stop_at.map_or(deadline, |s| s.min(deadline));
        if read_again {
            next = next.min(read_at);
        }
        let wait = next.saturating_duration_since(now).min(Duration::from_millis(250));
        let event = rx.recv_timeout(wait);
        let ask_to_stop = matches!(event, Ok(Event::Interrupt)) || stop_at.is_some_and(|s| Instant::now() >= s);
        match event {
            Ok(Event::Exited(status)) => break status,
            Ok(Event::Interrupt) if stdin.is_none() => kill_group(pid),
            Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline && !timed_out => {
                timed_out = true;
                kill_group(pid);
            }
            Err(RecvTimeoutError::Disconnected) => unreachable!("the waiter thread holds a sender"),
            _ if ask_to_stop && stdin.is_some() => {
                // End of file on stdin: the worker finishes its current iteration and writes.
                stdin = None;
                stop_at = None;
                deadline = deadline.min(Instant::now() + stop.grace);
            }
            _ => {
                // Read the attributes again once the worker has exec'd and started its runtime.
                if read_again && Instant::now() >= read_at {
                    read_again = false;
                    let now = SchedInfo::of(pid);
                    if !now.policy.starts_with("policy -") {
                        readback = now;
                    }
                }
                high_water_kb = high_water_kb.max(status_kb(&pid.to_string(), "VmHWM:").unwrap_or(0));
                tick()
            }
        }
    };
    unregister();
    drop(stdin);
    let stdout = stdout.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    let cpu_ns = status.as_ref().ok().map(|exit| exit.cpu_ns);
    let (status, peak_rss_kb) = match status {
        // Clearly above taskmeter's size at the fork (1 MiB for what taskmeter allocated since),
        // ru_maxrss is the worker's; below, it may be taskmeter's, and the last VmHWM read
        // (every 250 ms at most) is the worker's.
        Ok(exit) if exit.peak_rss_kb > parent_rss_kb + 1024 => (Ok(exit.status), Some(exit.peak_rss_kb)),
        Ok(exit) => (Ok(exit.status), Some(high_water_kb).filter(|kb| *kb > 0)),
        Err(e) => (Err(e), None),
    };
    Ok(RawRun { status, peak_rss_kb, cpu_ns, timed_out, stdout, stderr, sched: readback, wall_ns: started.elapsed().as_nanos() as u64 })
}

/// A `kB` field of /proc/PID/status (`self` for taskmeter).
fn status_kb(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs a worker on a plan and judges what it did.
pub fn run_worker(command: Command, plan: &Plan, sched: &SchedSettings, grace: Duration, tick: impl FnMut()) -> WorkerRun {
    let limit = deadline(plan, grace);
    let stop = StopPolicy { after: None, grace: Duration::from_nanos(plan.max_expected_ns()) + Duration::from_secs(2) };
    match spawn_and_wait(command, &plan.to_json(), sched, limit, stop, tick) {
        Err(reason) => WorkerRun { outcome: Outcome::Failed(reason), sched: None, peak_rss_kb: None, cpu_ns: None, wall_ns: 0, stderr: String::new() },
        Ok(raw) => {
            let outcome = classify(plan, &raw, limit);
            WorkerRun { outcome, sched: Some(raw.sched), peak_rss_kb: raw.peak_rss_kb, cpu_ns: raw.cpu_ns, wall_ns: raw.wall_ns, stderr: raw.stderr }
        }
    }
}

pub fn classify(plan: &Plan, raw: &RawRun, limit: Duration) -> Outcome {
    let (stdout, stderr) = (&raw.stdout, &raw.stderr);
    let last_stderr = stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!(" ({})", l.trim()));
    let last_stderr = last_stderr.unwrap_or_default();
    if raw.timed_out {
        return Outcome::Failed(format!(
            "did not finish within {:.1} s and was killed; raise --grace if its busy work is long{last_stderr}",
            limit.as_secs_f64()
        ));
    }
    let status = match &raw.status {
        Ok(status) => *status,
        Err(e) => return Outcome::Failed(format!("could not wait for the worker: {e}")),
    };
    let parsed = parse_output(plan, stdout);
    if !status.success() {
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
            _ => "ended abnormally".into(),
        };
        return match parsed {
            Err(OutputError::Refused(message)) => Outcome::Failed(format!("worker error: {message} ({how})")),
            _ => Outcome::Failed(format!("the worker {how}{last_stderr}")),
        };
    }
    match parsed {
        Ok(report) if report.done.interrupted => Outcome::Interrupted(report),
        Ok(report) => Outcome::Completed(report),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "signal",
    }
}

fn kill_group(pid: i32) {
    // SAFETY: the worker leads its own process group (process_group(0)), so this reaches it and
    // anything it started, and nothing else.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
}

/// Reads a pipe to its end on a thread (so a full pipe never blocks the worker), keeping at
/// most the last `keep` bytes.
fn collect<R: Read + Send + 'static>(pipe: Option<R>, keep: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let Some(mut pipe) = pipe else { return kept };
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buffer[..n]);
            if kept.len() > keep.saturating_mul(2) {
                kept.drain(..kept.len() - keep);
            }
        }
        if kept.len() > keep {
            kept.drain(..kept.len() - keep);
        }
        kept
    })
}
