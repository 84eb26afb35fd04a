//! One supervisor for every child process taskmeter starts (workers, receivers, bench bodies):
//! each leads its own process group, so one kill reaches everything it started and the
//! terminal's Ctrl-C reaches only taskmeter; its stderr is kept (the tail) for the reason;
//! it is reaped with wait4 for its resources; how it ended is said the same way everywhere;
//! and whatever went wrong is a typed [`Failure`].

pub mod interrupt;
pub mod watchdog;
pub mod worker;

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// Why a child's run is not a result.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// It could not be started: the whole sentence.
    Spawn(String),
    /// It did not end in time and was killed.
    TimedOut { after: Duration, hint: String, stderr: Option<String> },
    /// It ended with a status other than 0, or by a signal (`how` as [`describe`] says it).
    Ended { who: String, how: String, stderr: Option<String> },
    /// It refused its job, with its own reason.
    Refused { message: String, how: Option<String> },
    /// What it printed breaks its protocol.
    Invalid(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |stderr: &Option<String>| stderr.as_ref().map(|s| format!(" ({s})")).unwrap_or_default();
        match self {
            Failure::Spawn(why) => f.write_str(why),
            Failure::TimedOut { after, hint, stderr } => {
                write!(f, "did not finish within {:.1} s and was killed{hint}{}", after.as_secs_f64(), tail(stderr))
            }
            Failure::Ended { who, how, stderr } => write!(f, "{who} {how}{}", tail(stderr)),
            Failure::Refused { message, how: Some(how) } => write!(f, "worker error: {message} ({how})"),
            Failure::Refused { message, how: None } => write!(f, "worker error: {message}"),
            Failure::Invalid(why) => write!(f, "protocol violation: {why}"),
        }
    }
}

impl std::error::Error for Failure {}

/// Prepares `command` to lead its own process group, its three streams piped.
pub fn in_own_group(command: &mut Command) -> &mut Command {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0)
}

/// Kills a child's whole process group with `signal`.
pub fn kill_group(pid: i32, signal: i32) {
    // SAFETY: the child leads its own process group (see [`in_own_group`]), so this reaches it
    // and anything it started, and nothing else.
    unsafe { libc::kill(-pid, signal) };
}

/// How a process ended, in words: "exited with status 3", "was killed by signal 6 (SIGABRT)".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signal_name(signal)),
        _ => "ended abnormally".into(),
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

/// The last line of a child's stderr that says something, as the reason shown with a failure.
pub fn last_line(stderr: &str) -> Option<String> {
    stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}

/// From here on, a closed stdout (`taskmeter list | head`) ends taskmeter quietly, as it does
/// any Unix filter, instead of a panic. Only once no child is running: while workers run, a
/// worker that exits early must not take taskmeter down through its stdin pipe.
pub fn quiet_on_closed_stdout() {
    // SAFETY: restores the default action of one signal; no handler is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// How a child ended, and the resources it used (from wait4).
pub struct Exit {
    pub status: ExitStatus,
    pub peak_rss_kb: u64,
    /// User plus system CPU time of the child and its threads.
    pub cpu_ns: u64,
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

/// Waits for the child like `Child::wait`, but with wait4, which also reports its peak RSS.
pub fn wait_with_usage(child: Child) -> std::io::Result<Exit> {
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

/// Reads a pipe to its end on a thread (so a full pipe never blocks the child), keeping at
/// most the last `keep` bytes.
pub fn collect<R: Read + Send + 'static>(pipe: Option<R>, keep: usize) -> std::thread::JoinHandle<Vec<u8>> {
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
