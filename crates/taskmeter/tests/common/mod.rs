//! What the integration tests share: the binary, run the way a user runs it.
#![allow(dead_code)]

pub mod clients;
pub mod postgres;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The taskmeter binary, with stdin closed, one C-driver cache for all tests, and a history of
/// its own (never the user's ~/.local/share; a test that reads it back sets TASKMETER_HISTORY).
pub fn taskmeter() -> Command {
    static INVOCATION: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut command = Command::new(env!("CARGO_BIN_EXE_taskmeter"));
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    command.env("TASKMETER_CACHE_DIR", tmp.join("cache"));
    let n = INVOCATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    command.env("TASKMETER_HISTORY", tmp.join("history").join(format!("{}-{n}.sqlite", std::process::id())));
    command.env("XDG_DATA_HOME", tmp.join("xdg-data"));
    // Text wraps at 100 columns, as for any output that is no terminal, whatever the shell says.
    command.env_remove("COLUMNS");
    command.stdin(Stdio::null());
    command
}

/// `text` with its wrapped lines joined again: taskmeter wraps a line too wide for the terminal
/// with a hanging indent two columns deeper than the line's own (`machine::terminal::fit`), so a
/// line indented two more than the line it follows continues it. A phrase can then be searched
/// for wherever the width broke it.
pub fn unwrapped(text: &str) -> String {
    let indent = |line: &str| line.len() - line.trim_start_matches(' ').len();
    let mut lines: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        match lines.last_mut() {
            Some((own, joined)) if !line.trim().is_empty() && indent(line) == *own + 2 => {
                joined.push(' ');
                joined.push_str(line.trim_start());
            }
            _ => lines.push((indent(line), line.to_string())),
        }
    }
    lines.into_iter().map(|(_, line)| line + "\n").collect()
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

/// Each command must fail with exit status 2 and one line on stderr (wrapped to the width)
/// containing its message.
pub fn assert_refused(cases: &[(Vec<&str>, &str)]) {
    for (args, message) in cases {
        let output = run(args);
        let err = unwrapped(&stderr(&output));
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

/// One runtime or receiver of taskmeter's registry, as `taskmeter list --format json` gives it.
#[derive(Clone, Debug)]
pub struct Listed {
    pub id: String,
    /// `os-thread` or `task` (runtimes only).
    pub unit: Option<String>,
    /// Why it cannot run here, when it cannot.
    pub reason: Option<String>,
    /// The other versions of its toolchain installed here (`java-thread@17` runs on one).
    pub other_versions: Vec<String>,
    /// Its version as `list` says it (none where its toolchain is missing).
    pub version: Option<String>,
    /// How its timer works (runtimes only).
    pub timer: Option<String>,
    /// In the default run (runtimes only; false for a variant).
    pub default_run: bool,
}

/// The registry's `runtimes` or `receivers`, in its order: the only list of them the tests use.
pub fn registry(kind: &str) -> Vec<Listed> {
    let output = run(&["list", "--format", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let list: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("list --format json is JSON");
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    list[kind]
        .as_array()
        .unwrap_or_else(|| panic!("list names its {kind}"))
        .iter()
        .map(|e| Listed {
            id: text(&e["id"]).expect("an id"),
            unit: text(&e["unit"]),
            reason: text(&e["reason"]),
            other_versions: e["other_versions"].as_array().into_iter().flatten().filter_map(text).collect(),
            version: text(&e["version"]),
            timer: text(&e["timer"]),
            default_run: e["default_run"].as_bool().unwrap_or(false),
        })
        .collect()
}

/// Every wait recipe of the registry, as (runtime, recipe), from `taskmeter list recipes`.
pub fn recipes() -> Vec<(String, String)> {
    recipes_with_reasons().into_iter().map(|(runtime, recipe, _)| (runtime, recipe)).collect()
}

/// Every wait recipe of the registry, as (runtime, recipe, why it cannot run here if it cannot:
/// an optional package missing).
pub fn recipes_with_reasons() -> Vec<(String, String, Option<String>)> {
    let output = run(&["list", "recipes", "--format", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let list: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("list recipes is JSON");
    let text = |v: &serde_json::Value| v.as_str().expect("a string").to_string();
    list["recipes"]
        .as_array()
        .expect("a list of recipes")
        .iter()
        .map(|r| (text(&r["runtime"]), text(&r["recipe"]), r["reason"].as_str().map(str::to_string)))
        .collect()
}

/// The registry's runtimes that `keep` accepts and that can run here; each other is skipped
/// with `taskmeter list`'s reason.
pub fn runtimes_where(keep: impl Fn(&Listed) -> bool) -> Vec<String> {
    registry("runtimes").into_iter().filter(|r| keep(r)).filter(usable).map(|r| r.id).collect()
}

/// The registry's receivers (of `run net`) that `keep` accepts and that can run here, the same way.
pub fn receivers_where(keep: impl Fn(&Listed) -> bool) -> Vec<String> {
    registry("receivers").into_iter().filter(|r| keep(r)).filter(usable).map(|r| r.id).collect()
}

/// Of `runtimes` (each must be in the registry), those available here, the same way.
pub fn available<'a>(runtimes: &[&'a str]) -> Vec<&'a str> {
    available_in(&registry("runtimes"), runtimes)
}

fn available_in<'a>(listed: &[Listed], ids: &[&'a str]) -> Vec<&'a str> {
    ids.iter()
        .copied()
        .filter(|id| {
            usable(listed.iter().find(|l| l.id == *id).unwrap_or_else(|| panic!("{id} is not in the registry")))
        })
        .collect()
}

fn usable(listed: &Listed) -> bool {
    match &listed.reason {
        Some(reason) => {
            skip(&format!("{}: {reason}", listed.id));
            false
        }
        None => true,
    }
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
/// (a fresh clone in a private temporary folder). `dir` is made open to all. Copied once per
/// `dir`: a worker of the run before (this same binary) may still be exiting, and writing over a
/// file being executed fails with "Text file busy" (seen on a loaded machine).
pub fn binary_for_any_user(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let copy = dir.join("taskmeter");
    if !copy.exists() {
        std::fs::copy(env!("CARGO_BIN_EXE_taskmeter"), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    copy
}

/// `taskmeter ARGS` as user and group `uid` (setpriv), with at most `nproc` processes and threads
/// (prlimit) if given, in `dir` (made readable by anyone: [`binary_for_any_user`]), with no
/// history and a driver cache of its own.
pub fn as_user(dir: &Path, uid: u32, nproc: Option<u32>, args: &[&str]) -> Output {
    let taskmeter = binary_for_any_user(dir);
    let uid = uid.to_string();
    let mut command = Command::new(if nproc.is_some() { "prlimit" } else { "setpriv" });
    if let Some(n) = nproc {
        command.arg(format!("--nproc={n}:{n}")).arg("setpriv");
    }
    command
        .args(["--reuid", &uid, "--regid", &uid, "--clear-groups"])
        .arg(&taskmeter)
        .args(args)
        .env("TASKMETER_HISTORY", "off") // another user: no history of the tests'
        .env("TASKMETER_CACHE_DIR", dir.join("cache"))
        .current_dir(dir)
        .output()
        .expect("prlimit and setpriv (util-linux) run")
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

/// A mark every process of one test inherits (in its environment), to find what is left.
fn new_token() -> String {
    format!("fault-{}-{}", std::process::id(), fastish_id())
}

fn fastish_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

/// The processes that carry `token` in their environment.
fn marked(token: &str) -> Vec<(i32, String)> {
    let needle = format!("TASKMETER_FAULT_TOKEN={token}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // A zombie is gone for our purpose (its parent will reap it).
            if stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')) {
                continue;
            }
            found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// No process of the test is left (those being killed get a generous while to go).
fn assert_nothing_left(token: &str) {
    let since = Instant::now();
    loop {
        let left = marked(token);
        if left.is_empty() {
            return;
        }
        assert!(since.elapsed() < Duration::from_secs(30), "processes left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A taskmeter command running in the background, its output read as it comes, every process
/// it starts marked (in its environment) so that `finish` can check none is left.
pub struct Background {
    child: Child,
    token: String,
    stderr: Arc<Mutex<String>>,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Background {
    pub fn start(args: &[&str], env: &[(&str, &Path)]) -> Background {
        let token = new_token();
        let mut command = taskmeter();
        command.args(args).env("TASKMETER_FAULT_TOKEN", &token).stdout(Stdio::piped()).stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (err, collected) = (child.stderr.take().unwrap(), stderr.clone());
        let stderr_reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut text = collected.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Background { child, token, stderr, stdout: Some(stdout), stderr_reader: Some(stderr_reader) }
    }

    /// Waits (a minute at most) until stderr holds `needle`.
    pub fn wait_for_stderr(&self, needle: &str) {
        self.wait_for_stderr_up_to(needle, Duration::from_secs(60));
    }

    pub fn wait_for_stderr_up_to(&self, needle: &str, limit: Duration) {
        let since = Instant::now();
        while !self.stderr.lock().unwrap().contains(needle) {
            assert!(since.elapsed() < limit, "never saw '{needle}' on stderr:\n{}", self.stderr.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What it has written on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until a child of taskmeter's runs a program whose command line holds `needle`.
    pub fn wait_for_child(&self, needle: &str) -> i32 {
        let parent = self.child.id();
        let since = Instant::now();
        loop {
            let children =
                std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).unwrap_or_default();
            for pid in children.split_whitespace() {
                let cmdline =
                    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
                        .replace('\0', " ");
                if cmdline.contains(needle) {
                    return pid.parse().unwrap();
                }
            }
            assert!(since.elapsed() < Duration::from_secs(60), "no child running '{needle}'");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The session cookie `net serve` printed: once its receiver is built, which takes minutes
    /// the first time for the WebAssembly hosts.
    pub fn cookie(&self) -> String {
        self.wait_for_stderr_up_to("session cookie: ", Duration::from_secs(30 * 60));
        let text = self.stderr.lock().unwrap().clone();
        text.split("session cookie: ").nth(1).unwrap().chars().take(32).collect()
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: a signal to the child we started.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Waits for the exit (two minutes at most), then checks nothing is left.
    pub fn finish(mut self) -> Finished {
        let since = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if since.elapsed() > Duration::from_secs(120) {
                let _ = self.child.kill();
                panic!("taskmeter did not end within 2 minutes:\n{}", self.stderr.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.stdout.take().unwrap().join().unwrap();
        self.stderr_reader.take().unwrap().join().unwrap();
        assert_nothing_left(&self.token);
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(!stderr.contains("panicked") && !stdout.contains("panicked"), "a panic:\n{stderr}");
        Finished { status, stdout, stderr }
    }
}
