//! What the integration tests share: the binary, run the way a user runs it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The taskmeter binary, with stdin closed and one C-driver cache for all tests.
pub fn taskmeter() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_taskmeter"));
    command.env("TASKMETER_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("cache"));
    command.stdin(Stdio::null());
    command
}

pub fn run(args: &[&str]) -> Output {
    taskmeter().args(args).output().expect("taskmeter runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn run_json(folder: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(folder.join("run.json")).unwrap()).unwrap()
}

/// Each command must fail with exit status 2 and one line on stderr containing its message.
pub fn assert_refused(cases: &[(Vec<&str>, &str)]) {
    for (args, message) in cases {
        let output = run(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got:\n{err}");
        assert!(err.starts_with("taskmeter: "), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: wanted '{message}', got: {err}");
        assert!(!err.contains("panicked"), "{args:?}");
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
}

/// Whether the suite runs in CI, where every test must run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A test (or part of one) that cannot run on this machine, for a reason a user would accept
/// (no JDK 21+, not root), says so on stderr and is skipped; under `CI=true`, where everything
/// must run, it fails instead.
pub fn skip(reason: &str) {
    assert!(!in_ci(), "cannot run under CI=true: {reason}");
    eprintln!("SKIPPED: {reason}");
}

/// Of `runtimes`, those available here; each unavailable one is skipped with `taskmeter list`'s reason.
pub fn available<'a>(runtimes: &[&'a str]) -> Vec<&'a str> {
    let list = stdout(&run(&["list"]));
    runtimes
        .iter()
        .copied()
        .filter(|id| {
            let line = list.lines().find(|l| l.split_whitespace().next() == Some(id)).unwrap_or_default();
            match line.split_once("unavailable: ") {
                Some((_, reason)) => {
                    skip(&format!("{id}: {reason}"));
                    false
                }
                None => true,
            }
        })
        .collect()
}

/// Of `receivers` (of `run net`), those available here; each unavailable one is skipped with
/// `taskmeter list`'s reason.
pub fn available_receivers<'a>(receivers: &[&'a str]) -> Vec<&'a str> {
    let list = stdout(&run(&["list"]));
    let section = list.split("receivers of `taskmeter run net`:").nth(1).expect("list names the receivers");
    receivers
        .iter()
        .copied()
        .filter(|id| {
            let line = section.lines().find(|l| l.split_whitespace().next() == Some(id)).unwrap_or_default();
            match line.split_once("unavailable: ") {
                Some((_, reason)) => {
                    skip(&format!("{id}: {reason}"));
                    false
                }
                None => true,
            }
        })
        .collect()
}

/// True when running as root; otherwise the test is skipped with the reason.
pub fn root(why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(&format!("{why} needs root"));
    }
    root
}

/// A copy of the taskmeter binary in `dir` that any user may run: tests that run taskmeter as
/// another user (setpriv) cannot reach the build's own, under a folder only its owner may enter
/// (a fresh clone in a private temporary folder). `dir` is made open to all.
pub fn binary_for_any_user(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let copy = dir.join("taskmeter");
    std::fs::copy(env!("CARGO_BIN_EXE_taskmeter"), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// The pid of `parent`'s in-process worker (`taskmeter worker`), once there is one.
pub fn worker_of(parent: u32) -> i32 {
    let children = format!("/proc/{parent}/task/{parent}/children");
    let waited = Instant::now();
    loop {
        let pids = std::fs::read_to_string(&children).unwrap_or_default();
        for pid in pids.split_whitespace() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if cmdline.split(|b| *b == 0).any(|arg| arg == b"worker") {
                return pid.parse().unwrap();
            }
        }
        assert!(waited.elapsed() < Duration::from_secs(60), "no worker started");
        std::thread::sleep(Duration::from_millis(20));
    }
}
