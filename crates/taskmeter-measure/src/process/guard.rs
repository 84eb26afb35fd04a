//! The guard: a small process (`taskmeter guard`, in a process group of its own) that outlives
//! taskmeter just long enough to kill the process groups of the children it was running when
//! it died without cleaning up (`kill -9`, the out-of-memory killer). Each child itself gets
//! PR_SET_PDEATHSIG; the guard reaches what a child started (a helper holding a pipe, the
//! processes of a bench body's shell). taskmeter tells it, on its stdin, each group it starts
//! (`+PGID`) and reaps (`-PGID`); end of file there means taskmeter is gone.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::Mutex;

/// The guard's stdin, once started; `None` inside when it could not start (the children's
/// PR_SET_PDEATHSIG still holds).
static GUARD: Mutex<Option<Option<ChildStdin>>> = Mutex::new(None);

fn tell(line: &str) {
    let mut guard = GUARD.lock().unwrap_or_else(|e| e.into_inner());
    let pipe = guard.get_or_insert_with(start);
    if let Some(stdin) = pipe.as_mut() {
        if stdin.write_all(line.as_bytes()).is_err() {
            *pipe = None;
        }
    }
}

fn start() -> Option<ChildStdin> {
    let exe = std::env::current_exe().ok()?;
    let mut command = Command::new("/proc/self/exe");
    command.arg0(exe).arg("guard").stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    // The guard is reaped by no one while taskmeter lives; it exits when taskmeter does, and
    // init reaps it then.
    command.spawn().ok()?.stdin.take()
}

/// A child's process group has started.
pub fn watch(pgid: i32) {
    tell(&format!("+{pgid}\n"));
}

/// A child's process group is gone.
pub fn release(pgid: i32) {
    tell(&format!("-{pgid}\n"));
}

/// `taskmeter guard`: kills, at end of file on stdin, every group still watched.
pub fn main() -> ExitCode {
    // The signals that stop taskmeter (`killall taskmeter` reaches the guard too) must not end
    // the guard before taskmeter: it exits at end of file whatever happens.
    for signal in super::signals::CAUGHT {
        // SAFETY: sets a signal's disposition to ignore; no handler runs.
        unsafe { libc::signal(signal, libc::SIG_IGN) };
    }
    let mut groups = BTreeSet::new();
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        match (line.chars().next(), line.get(1..).unwrap_or("").parse::<i32>()) {
            (Some('+'), Ok(pgid)) if pgid > 1 => groups.insert(pgid),
            (Some('-'), Ok(pgid)) => groups.remove(&pgid),
            _ => false,
        };
    }
    for pgid in groups {
        super::kill_group(pgid, libc::SIGKILL);
    }
    ExitCode::SUCCESS
}
