//! taskmeter's own standard output and error, written so that a broken stream never panics: a
//! closed stdout (`taskmeter list | head -1`) ends the printing quietly, as it does for any Unix
//! filter, and leaves the exit status as it was; any other error (`> /dev/full`) is one line on
//! stderr, the printing stops, and the command exits non-zero ([`stdout_failed`]). stderr is
//! best effort: an error there cannot be told to anyone.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STDOUT: AtomicU8 = AtomicU8::new(OPEN);

/// Writes `text` to stdout at once (flushed).
pub fn out(text: &str) {
    if STDOUT.load(Ordering::Relaxed) != OPEN {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|_| stdout.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            STDOUT.store(CLOSED, Ordering::Relaxed);
        } else {
            STDOUT.store(FAILED, Ordering::Relaxed);
            err(&format!("taskmeter: cannot write to standard output: {e}\n"));
        }
    }
}

/// Writes `text` to stderr, ignoring errors.
pub fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes()).and_then(|_| stderr.flush());
}

static QUIET: AtomicBool = AtomicBool::new(false);

/// `-q`: no progress on stderr (the live line, a line per finished row or point); warnings,
/// errors and the results are printed as always.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A line of progress to stderr, unless `-q`.
#[macro_export]
macro_rules! progressln {
    ($($arg:tt)*) => {
        if !$crate::machine::streams::quiet() {
            $crate::machine::streams::err(&format!("{}\n", format_args!($($arg)*)))
        }
    };
}

/// Whether writing to stdout failed for a reason other than a closed pipe.
pub fn stdout_failed() -> bool {
    STDOUT.load(Ordering::Relaxed) == FAILED
}

/// `println!` to [`out`].
#[macro_export]
macro_rules! outln {
    () => { $crate::machine::streams::out("\n") };
    ($($arg:tt)*) => { $crate::machine::streams::out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to [`out`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::machine::streams::out(&format!($($arg)*)) };
}

/// `eprintln!` to [`err`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::machine::streams::err(&format!("{}\n", format_args!($($arg)*))) };
}
