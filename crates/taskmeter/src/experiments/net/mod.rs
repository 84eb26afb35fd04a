//! `taskmeter run net`: TCP message throughput with 1..N senders against each receiver (the TCP
//! study, seed 003). A receiver is a process behind net protocol 2 (receivers/README.md), run
//! under the process supervisor; the senders are threads of taskmeter (`sender`, in the core).
//! `net serve` / `net send` split the two across machines with the same code. The receivers:
//! `registry` (which exist and how each starts), `handshake` (who may join a point), `native`
//! (the Rust ones, `taskmeter net-receiver`).

mod consistency;
pub mod family;
pub mod flags;
mod history;
mod report;

mod compare;
pub mod registry;
// The wire, which runs while a point measures, is built with the core (`taskmeter_measure::net`).
pub use taskmeter_measure::net::{handshake, native, sender};

use crate::session::{Output, Session};
use handshake::Secret;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use taskmeter_clock::now_ns;
use taskmeter_machine::idle::LatencyRequest;
use taskmeter_measure::process::child::{Ask, Ended, Limits, Spawned, Stop};
use taskmeter_measure::process::{describe, last_line, signals};
use taskmeter_model::net::{
    ConnectionReport, NetPlan, NetPoint, NetRecord, NetSettings, SkippedReceiver, Stranger, STRANGERS_KEPT,
};
use taskmeter_stats::Summary;

/// The net family, as the registry (`cli::families`) and the catalog name it.
pub const FAMILY: &str = "net";

pub struct NetOptions {
    pub settings: NetSettings,
    pub grace: Duration,
    /// The PM QoS CPU latency to hold while measuring (`--cpu-dma-latency`).
    pub cpu_dma_latency_us: Option<u32>,
    pub output: Output,
}

pub fn run(options: NetOptions) -> Result<ExitCode, super::ExperimentError> {
    let _latency_request = options.cpu_dma_latency_us.map(LatencyRequest::hold).transpose()?;
    let mut session = Session::start("net", options.output)?;
    // The senders are taskmeter's own threads: a secret of this run admits them.
    let (secret, _) = Secret::new_cookie().map_err(super::ExperimentError::Setup)?;
    let s = &options.settings;
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    let mut commands = Vec::new();
    for id in &s.receivers {
        if let Err(reason) = registry::availability(id) {
            taskmeter_console::errln!("taskmeter: skipping {id}: {reason}");
            skipped.push(SkippedReceiver { receiver: id.clone(), reason });
            continue;
        }
        if let Ok(version) = registry::toolchain(id) {
            session.environment.toolchains.insert(format!("net:{id}"), version);
        }
        commands.push((id, registry::command(id)));
    }
    // Repetitions outermost, so a slow drift of the machine touches every receiver alike.
    'repetitions: for repetition in 1..=s.repeat {
        for (id, command) in &commands {
            for &senders in &s.senders {
                if session.stop_reason().is_some() {
                    break 'repetitions;
                }
                let planned: u64 = s.shares(senders).iter().sum();
                let mut point = match command {
                    Ok(command) => run_point(command, s, senders, options.grace, &secret),
                    Err(reason) => NetPoint { error: Some(reason.clone()), ..Default::default() },
                };
                (point.receiver, point.senders, point.repetition, point.messages_planned) =
                    ((*id).clone(), senders, repetition, planned);
                taskmeter_console::progressln!("{}", report::progress_line(&point, s.repeat));
                points.push(point);
            }
        }
    }
    let summaries = taskmeter_analysis::net::summarise(&mut points);
    let record = NetRecord {
        header: session.header::<NetRecord>(),
        settings: options.settings.clone(),
        points,
        summaries,
        skipped,
    };
    let failed = record.points.iter().any(|p| p.error.is_some());
    Ok(session.finish(record, crate::report::page::write_folder, report::console, failed))
}

/// One receiver process, `senders` connections, every message checked.
fn run_point(
    command: &std::process::Command,
    s: &NetSettings,
    senders: u32,
    grace: Duration,
    secret: &Secret,
) -> NetPoint {
    let mut point = NetPoint::default();
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(listener) => deep_backlog(listener),
        Err(e) => return NetPoint { error: Some(format!("cannot listen on 127.0.0.1: {e}")), ..point },
    };
    let address = listener.local_addr().expect("a bound listener has an address");
    let receiver = match handshake::plan(secret, senders, s.message_size)
        .and_then(|plan| Receiver::start(command, &listener, plan, grace))
    {
        Ok(receiver) => receiver,
        Err(e) => return NetPoint { error: Some(e), ..point },
    };
    drop(listener); // the receiver holds it now
    point.receiver_version = receiver.version.clone();
    let results = sender::send_all(address, &s.shares(senders), s.message_size, grace, secret);
    let (reports, strangers, failure) = receiver.finish(grace, |_| {});
    (point.strangers, point.stranger_reports) = (strangers.count, strangers.kept);
    point.messages_sent = results.iter().map(|r| r.sent).sum();
    point.messages_acked = results.iter().map(|r| r.acked).sum();
    point.messages_received = reports.iter().map(|r| r.messages).sum();
    point.round_trip = round_trips(&results);
    point.window_ns = receive_window(&reports);
    point.throughput = point.window_ns.filter(|w| *w > 0).map(|w| point.messages_received as f64 * 1e9 / w as f64);
    let planned: u64 = s.shares(senders).iter().sum();
    // The receiver's own failure first: it is usually why the senders failed.
    let mut problems: Vec<String> = failure.into_iter().collect();
    problems.extend(
        reports.iter().filter_map(|r| r.error.as_ref().map(|e| format!("receiver connection {}: {e}", r.index))),
    );
    problems.extend(results.iter().filter_map(|r| r.error.clone()));
    if problems.is_empty() && !(point.messages_acked == planned && point.messages_received == planned) {
        problems.push(format!(
            "messages planned {planned}, sent {}, acknowledged {}, received {}",
            point.messages_sent, point.messages_acked, point.messages_received
        ));
    }
    if !problems.is_empty() {
        let more = if problems.len() > 3 { format!("; and {} more", problems.len() - 3) } else { String::new() };
        point.error = Some(format!(
            "{}{more}; {} of {planned} messages acknowledged",
            problems[..problems.len().min(3)].join("; "),
            point.messages_acked
        ));
    }
    point.connections = reports;
    point
}

/// The listener with room in its accept queue for a thousand senders arriving at once (std
/// listens with 128; the kernel caps this at net.core.somaxconn).
fn deep_backlog(listener: TcpListener) -> TcpListener {
    // SAFETY: listen() again on a listening socket we own only changes its backlog.
    unsafe { libc::listen(listener.as_raw_fd(), 4096) };
    listener
}

/// Every message's round trip, over all senders.
fn round_trips(results: &[sender::SenderResult]) -> Option<Summary> {
    let all: Vec<i64> = results.iter().flat_map(|r| r.round_trips_ns.iter().copied()).collect();
    (!all.is_empty()).then(|| Summary::of(&all, &vec![0; all.len()]))
}

/// Last receive - first receive over every connection (the study's throughput window).
fn receive_window(reports: &[ConnectionReport]) -> Option<u64> {
    let first = reports.iter().filter_map(|r| r.first_ns).min()?;
    let last = reports.iter().filter_map(|r| r.last_ns).max()?;
    Some(last.saturating_sub(first))
}

/// A receiver process, its listener on fd 3, its protocol lines read by a thread.
struct Receiver {
    process: Spawned,
    lines: mpsc::Receiver<String>,
    /// Collects stderr until the receiver ends.
    stderr: taskmeter_measure::process::spare::Running<Vec<u8>>,
    version: Option<String>,
}

/// The connections a receiver refused during a point: how many, and the first few.
#[derive(Default)]
struct Strangers {
    count: u64,
    kept: Vec<Stranger>,
}

impl Strangers {
    fn add(&mut self, stranger: Stranger) {
        self.count += 1;
        if self.kept.len() < STRANGERS_KEPT {
            self.kept.push(stranger);
        }
    }
}

/// What waiting for a receiver's line gave instead of a line.
enum NoLine {
    Ended,
    TimedOut,
    Interrupted(String),
}

impl Receiver {
    fn start(
        command: &std::process::Command,
        listener: &TcpListener,
        plan: NetPlan,
        grace: Duration,
    ) -> Result<Receiver, String> {
        let mut command = clone_command(command);
        let fd = listener.as_raw_fd();
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec: dup2 and fcntl on fd 3.
        unsafe {
            command.pre_exec(move || {
                if fd != 3 && libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut process = Spawned::start(command, "receiver").map_err(|e| e.to_string())?;
        process.send(&format!("{}\n", serde_json::to_string(&plan).expect("a plan serialises")));
        let stdout = process.stdout().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = process.stderr_tail(16 * 1024);
        let mut receiver = Receiver { process, lines, stderr, version: None };
        match receiver.next_line(Instant::now() + grace) {
            Ok(line) => {
                let hello: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if hello["type"] != "hello" {
                    let reason = hello["message"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("expected a hello line, got {line:?}"));
                    receiver.end(false);
                    return Err(format!("the receiver did not start: {reason}"));
                }
                receiver.version = hello["runtime_version"].as_str().map(str::to_string);
                Ok(receiver)
            }
            Err(NoLine::Ended) => Err(format!("the receiver ended before its hello{}", receiver.end(false))),
            Err(NoLine::TimedOut) => {
                Err(format!("the receiver did not say hello within {} s{}", grace.as_secs(), receiver.end(false)))
            }
            Err(NoLine::Interrupted(why)) => {
                receiver.end(false);
                Err(why)
            }
        }
    }

    /// The receiver's next line, by `deadline`; a signal to taskmeter ends the wait.
    fn next_line(&self, deadline: Instant) -> Result<String, NoLine> {
        loop {
            if let Some(reason) = signals::reason() {
                return Err(NoLine::Interrupted(reason));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(NoLine::TimedOut);
            }
            match self.lines.recv_timeout(deadline.saturating_duration_since(now).min(Duration::from_millis(100))) {
                Ok(line) => return Ok(line),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(NoLine::Ended),
            }
        }
    }

    /// Reads the connection reports and `done` (waiting at most `grace`), and the strangers it
    /// refused (each handed to `refused` as it comes), then reaps the process; a receiver that
    /// is late or dies is killed, and said so.
    fn finish(
        self,
        grace: Duration,
        mut refused: impl FnMut(&Stranger),
    ) -> (Vec<ConnectionReport>, Strangers, Option<String>) {
        let deadline = Instant::now() + grace;
        let mut reports = Vec::new();
        let mut strangers = Strangers::default();
        let failure = loop {
            match self.next_line(deadline) {
                Ok(line) => {
                    let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                    match value["type"].as_str() {
                        Some("connection") => match serde_json::from_value::<ConnectionReport>(value) {
                            Ok(report) => reports.push(report),
                            Err(e) => break Some(format!("the receiver printed a bad connection line: {e}")),
                        },
                        Some("stranger") => match serde_json::from_value::<Stranger>(value) {
                            Ok(stranger) => {
                                refused(&stranger);
                                strangers.add(stranger);
                            }
                            Err(e) => break Some(format!("the receiver printed a bad stranger line: {e}")),
                        },
                        Some("done") => break None,
                        Some("error") => {
                            break Some(format!("the receiver failed: {}", value["message"].as_str().unwrap_or("?")))
                        }
                        _ => break Some(format!("the receiver printed an unexpected line: {line:?}")),
                    }
                }
                Err(NoLine::TimedOut) => {
                    break Some(format!("the receiver did not finish within {} s", grace.as_secs()))
                }
                Err(NoLine::Ended) => break Some("the receiver ended without its report".to_string()),
                Err(NoLine::Interrupted(why)) => break Some(why),
            }
        };
        let why = self.end(failure.is_none());
        (
            reports,
            strangers,
            failure
                .map(|f| format!("{f}{why}"))
                .or_else(|| (!why.is_empty()).then(|| why.trim_start_matches("; ").to_string())),
        )
    }

    /// Ends the process: after its report, end of file on its stdin and a grace to exit;
    /// otherwise at once. "" when it ended well or was killed by us, else how it ended.
    fn end(self, reported: bool) -> String {
        let now = Instant::now();
        let limits = match reported {
            true => Limits {
                deadline: now + Duration::from_secs(5),
                ask: Ask::CloseStdin,
                grace: Duration::from_secs(4),
                stop_at: Some(now),
            },
            false => Limits { deadline: now, ask: Ask::CloseStdin, grace: Duration::ZERO, stop_at: None },
        };
        let ended: Ended = self.process.wait(limits, |_| {});
        let stderr = last_line(&String::from_utf8_lossy(&self.stderr.join().unwrap_or_default()))
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        match ended.status() {
            Some(status) if status.success() => String::new(),
            Some(status) if ended.stopped == Some(Stop::Deadline) && status.signal() == Some(libc::SIGKILL) => {
                String::new()
            }
            Some(status) => format!("; the receiver {}{stderr}", describe(status)),
            None => String::new(),
        }
    }
}

/// `Command` is not Clone: rebuild it from its parts.
fn clone_command(command: &std::process::Command) -> std::process::Command {
    let mut copy = std::process::Command::new(command.get_program());
    copy.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => copy.env(key, value),
            None => copy.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        copy.current_dir(dir);
    }
    copy
}

/// `net send`: the senders alone against a receiver somewhere else, admitted by the cookie
/// `net serve` printed or by a key both sides hold.
pub fn send_only(to: SocketAddr, settings: &NetSettings, secret: &Secret) -> Result<ExitCode, super::ExperimentError> {
    signals::install();
    for &senders in &settings.senders {
        if let Some(status) = signals::exit_status() {
            return Ok(ExitCode::from(status));
        }
        let shares = settings.shares(senders);
        let started = now_ns();
        let results = sender::send_all(to, &shares, settings.message_size, Duration::from_secs(10), secret);
        let seconds = (now_ns() - started) as f64 / 1e9;
        let acked: u64 = results.iter().map(|r| r.acked).sum();
        let planned: u64 = shares.iter().sum();
        let summary = round_trips(&results);
        taskmeter_console::textln!(
            "{senders:>3} senders: {acked} of {planned} messages acknowledged in {seconds:.3} s = {:.0} msg/s at the senders; round trip p50 {} p99 {}",
            acked as f64 / seconds,
            summary.as_ref().and_then(|s| s.p50).map_or("-".into(), |v| crate::report::format::format_ns(v as f64)),
            summary.as_ref().and_then(|s| s.p99).map_or("-".into(), |v| crate::report::format::format_ns(v as f64)),
        );
        // One line per distinct problem: every sender refused for the same reason says it once.
        let mut said: Vec<&String> = Vec::new();
        for error in results.iter().filter_map(|r| r.error.as_ref()) {
            if !said.contains(&error) {
                taskmeter_console::textln!("    {error}");
                said.push(error);
            }
        }
        if let Some(status) = signals::exit_status() {
            return Ok(ExitCode::from(status));
        }
        if acked != planned {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `net serve`: per sender count, one receiver on ADDR for that many senders, then its
/// throughput; `net send` on the other machine must be given the same sender counts and the
/// cookie printed here (or the same key). Every connection refused is said, with its peer.
pub fn serve_only(
    receiver: &str,
    listen: &str,
    settings: &NetSettings,
    key_file: Option<&Path>,
) -> Result<ExitCode, super::ExperimentError> {
    signals::install();
    let command = registry::command(receiver).map_err(super::ExperimentError::Setup)?;
    // The cookie is said once, on a line of its own; the command to type takes it from a file
    // (or from the environment), never from its command line, where `ps` shows it.
    let (secret, cookie, admission) = match key_file {
        Some(path) => (
            Secret::key_file(path).map_err(super::ExperimentError::Settings)?,
            None,
            format!("--key-file {}", path.display()),
        ),
        None => {
            let (secret, cookie) = Secret::new_cookie().map_err(super::ExperimentError::Setup)?;
            (secret, Some(cookie), "--cookie-file FILE".to_string())
        }
    };
    let mut status = ExitCode::SUCCESS;
    for (n, &connections) in settings.senders.iter().enumerate() {
        if let Some(signal) = signals::exit_status() {
            return Ok(ExitCode::from(signal));
        }
        // The address is the user's (--listen): one that cannot be listened on here is refused.
        let listener = deep_backlog(
            TcpListener::bind(listen)
                .map_err(|e| super::ExperimentError::Settings(format!("cannot listen on {listen}: {e}")))?,
        );
        let address = listener.local_addr().map_err(|e| super::ExperimentError::Setup(e.to_string()))?;
        if n == 0 {
            let everywhere = if address.ip().is_unspecified() { " (every interface)" } else { "" };
            let key =
                if key_file.is_some() { "a key is required" } else { "no key: the session cookie admits senders" };
            taskmeter_console::errln!("taskmeter net serve: listening on {address}{everywhere}; {key}");
            if let Some(cookie) = &cookie {
                taskmeter_console::errln!(
                    "session cookie: {cookie} (on the sending machine, put it in a file only you can read, `umask 077; echo COOKIE > FILE`, or in the environment variable {}: not on net send's command line, where ps shows it)",
                    handshake::COOKIE_ENV
                );
            }
            let senders: Vec<String> = settings.senders.iter().map(u32::to_string).collect();
            // The command on a line of its own, unwrapped, so that it can be copied whole.
            taskmeter_console::errln!("on the sending machine:");
            taskmeter_console::streams::err_verbatim(&format!(
                "  taskmeter net send --to THIS-HOST:{} {admission} --senders {} --messages {}{} --message-size {}\n",
                address.port(),
                senders.join(","),
                settings.messages,
                if settings.per_sender { " --per-sender" } else { "" },
                settings.message_size
            ));
        }
        let process = match handshake::plan(&secret, connections, settings.message_size)
            .and_then(|plan| Receiver::start(&command, &listener, plan, Duration::from_secs(30)))
        {
            Ok(process) => process,
            Err(_) if signals::interrupted() => return Ok(ExitCode::from(signals::exit_status().unwrap_or(130))),
            Err(e) => return Err(super::ExperimentError::Setup(e)),
        };
        drop(listener);
        taskmeter_console::errln!(
            "{receiver} receiver on {address}: waiting for {connections} sender(s) of {}-byte messages",
            settings.message_size
        );
        let (reports, strangers, failure) = process.finish(Duration::from_secs(24 * 3600), |s| {
            taskmeter_console::errln!("taskmeter: refused a connection from {}: {}", s.peer, s.reason);
        });
        let received: u64 = reports.iter().map(|r| r.messages).sum();
        let refused = match strangers.count {
            0 => String::new(),
            n => format!("; {n} connection(s) refused"),
        };
        match receive_window(&reports).filter(|w| *w > 0) {
            Some(w) => taskmeter_console::textln!(
                "{connections:>3} senders: {received} messages in {:.3} s = {:.0} msg/s at the receiver{refused}",
                w as f64 / 1e9,
                received as f64 * 1e9 / w as f64
            ),
            _ => taskmeter_console::textln!("{connections:>3} senders: {received} messages{refused}"),
        }
        for problem in reports
            .iter()
            .filter_map(|r| r.error.as_ref().map(|e| format!("connection {}: {e}", r.index)))
            .chain(failure)
        {
            taskmeter_console::textln!("    {problem}");
            status = ExitCode::from(1);
        }
    }
    Ok(signals::exit_status().map_or(status, ExitCode::from))
}
