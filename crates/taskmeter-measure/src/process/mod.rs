//! One supervisor for every child process taskmeter starts (workers, receivers, bench bodies,
//! builds), written once: `child` starts, stops and reaps one; `pipe` reads its output without
//! ever waiting forever; `signals` turns SIGINT, SIGTERM and SIGHUP into an orderly stop;
//! `guard` cleans up after a taskmeter that was killed outright; `worker` speaks the worker
//! protocol on top. Whatever went wrong is a typed [`Failure`], said the same way everywhere.

pub mod child;
pub mod fold;
pub mod guard;
pub mod pipe;
pub mod samples;
pub mod signals;
pub mod spare;
pub mod worker;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::Duration;

/// Why a child's run is not a result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Failure {
    /// It could not be started: the whole sentence.
    #[error("{0}")]
    Spawn(String),
    /// It did not end in time and was killed.
    #[error("did not finish within {:.1} s and was killed{hint}{}", after.as_secs_f64(), tail(stderr))]
    TimedOut { after: Duration, hint: String, stderr: Option<String> },
    /// It ended with a status other than 0, or by a signal (`how` as [`describe`] says it).
    #[error("{who} {how}{}", tail(stderr))]
    Ended { who: String, how: String, stderr: Option<String> },
    /// It refused its job, with its own reason.
    #[error("worker error: {message}{}", tail(how))]
    Refused { message: String, how: Option<String> },
    /// What it printed breaks its protocol.
    #[error("protocol violation: {0}")]
    Invalid(String),
    /// taskmeter received a signal and stopped it (`who`: "the worker").
    #[error("interrupted by {signal}{}", killed.map(|killed| format!("; {who} {killed}")).unwrap_or_default())]
    Interrupted { signal: String, who: String, killed: Option<Killed> },
}

/// What a failure adds in parentheses (a child's last words, how it ended), if anything.
fn tail(said: &Option<String>) -> String {
    said.as_ref().map(|s| format!(" ({s})")).unwrap_or_default()
}

#[cfg(test)]
mod failure_tests {
    use super::*;

    /// Each failure in the words every report, row and refusal uses.
    #[test]
    fn every_failure_says_itself_in_one_sentence() {
        let said = |failure: Failure| failure.to_string();
        assert_eq!(said(Failure::Spawn("cannot start go: not found".into())), "cannot start go: not found");
        let after = Duration::from_millis(2500);
        assert_eq!(
            said(Failure::TimedOut { after, hint: " (its plan: 1 s)".into(), stderr: Some("stuck".into()) }),
            "did not finish within 2.5 s and was killed (its plan: 1 s) (stuck)"
        );
        assert_eq!(
            said(Failure::TimedOut { after, hint: String::new(), stderr: None }),
            "did not finish within 2.5 s and was killed"
        );
        assert_eq!(
            said(Failure::Ended {
                who: "the worker".into(),
                how: "exited with status 3".into(),
                stderr: Some("boom".into())
            }),
            "the worker exited with status 3 (boom)"
        );
        assert_eq!(
            said(Failure::Refused { message: "no fd 3".into(), how: Some("exit status 2".into()) }),
            "worker error: no fd 3 (exit status 2)"
        );
        assert_eq!(said(Failure::Refused { message: "no fd 3".into(), how: None }), "worker error: no fd 3");
        assert_eq!(said(Failure::Invalid("an unknown frame".into())), "protocol violation: an unknown frame");
        let interrupted = |killed| Failure::Interrupted { signal: "SIGINT".into(), who: "the worker".into(), killed };
        assert_eq!(
            said(interrupted(Some(Killed::AfterGrace(Duration::from_secs(2))))),
            "interrupted by SIGINT; the worker did not stop within 2.0 s and was killed"
        );
        assert_eq!(said(interrupted(None)), "interrupted by SIGINT");
    }
}

/// How a child asked to stop came to be killed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Killed {
    /// It did not stop within its grace.
    AfterGrace(Duration),
    /// A second signal came.
    SecondSignal,
    /// Its deadline came first.
    AtDeadline,
}

impl std::fmt::Display for Killed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Killed::AfterGrace(grace) => write!(f, "did not stop within {:.1} s and was killed", grace.as_secs_f64()),
            Killed::SecondSignal => f.write_str("was killed at a second signal"),
            Killed::AtDeadline => f.write_str("did not stop before its deadline and was killed"),
        }
    }
}

/// Kills a child's whole process group with `signal`.
pub fn kill_group(pid: i32, signal: i32) {
    // SAFETY: the child leads its own process group (see [`child::Spawned::start`]), so this
    // reaches it and anything it started, and nothing else.
    unsafe { libc::kill(-pid, signal) };
}

/// How a process ended, in words: "exited with status 3", "was killed by signal 6 (SIGABRT)".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal} ({})", signals::name(signal)),
        _ => "ended abnormally".into(),
    }
}

/// The last line of a child's stderr that says something, as the reason shown with a failure.
pub fn last_line(stderr: &str) -> Option<String> {
    stderr.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}

/// How a child ended, and the resources it used (from wait4).
#[derive(Debug)]
pub struct Exit {
    pub status: ExitStatus,
    pub peak_rss_kb: u64,
    /// User plus system CPU time of the child and its threads.
    pub cpu_ns: u64,
    /// When wait4 returned (CLOCK_MONOTONIC): the child had exited by then.
    pub exited_ns: u64,
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
    let exited_ns = taskmeter_clock::now_ns();
    drop(child);
    let cpu_ns = timeval_ns(usage.ru_utime) + timeval_ns(usage.ru_stime);
    Ok(Exit { status: ExitStatus::from_raw(status), peak_rss_kb: usage.ru_maxrss as u64, cpu_ns, exited_ns })
}
