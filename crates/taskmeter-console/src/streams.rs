//! taskmeter's own standard output and error, written so that a broken stream never panics: a
//! closed stdout (`taskmeter list | head -1`) ends the printing quietly, as it does for any Unix
//! filter, and leaves the exit status as it was; any other error (`> /dev/full`) is one line on
//! stderr, the printing stops, and the command exits non-zero ([`stdout_failed`]). stderr is
//! best effort: an error there cannot be told to anyone.
//!
//! Everything on stderr is text for a reader, fitted to its width ([`super::terminal`]); on
//! stdout only what is written with [`text`] (`textln!`) is, never JSON, CSV or a man page.

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
    let text = &warnings_tinted(text, COLOR_OUT.load(Ordering::Relaxed));
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

/// Writes text for a reader to stdout at once, each line wider than stdout's width wrapped.
pub fn text(text: &str) {
    out(&super::terminal::fit(text, super::terminal::width()))
}

/// Writes `text` to stderr, each line wider than stderr's width wrapped, ignoring errors.
pub fn err(text: &str) {
    let text = super::terminal::fit(text, super::terminal::stderr_width());
    let text = &warnings_tinted(&text, COLOR_ERR.load(Ordering::Relaxed));
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes()).and_then(|_| stderr.flush());
}

/// Writes `text` to stderr as it is, never wrapped: a command line for the user to copy.
pub fn err_verbatim(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes()).and_then(|_| stderr.flush());
}

static COLOR_OUT: AtomicBool = AtomicBool::new(false);
static COLOR_ERR: AtomicBool = AtomicBool::new(false);

/// `--color`: `Auto` colours a stream when it is a terminal, `NO_COLOR` is not set (or empty) and
/// `TERM` is not `dumb`; `CLICOLOR_FORCE` colours it anyway (anstream's rules, as clap's own).
/// `Always` and `Never` override them all.
pub fn set_color(choice: anstream::ColorChoice) {
    choice.write_global();
    let on = |choice| !matches!(choice, anstream::ColorChoice::Never);
    COLOR_OUT.store(on(anstream::AutoStream::choice(&std::io::stdout())), Ordering::Relaxed);
    COLOR_ERR.store(on(anstream::AutoStream::choice(&std::io::stderr())), Ordering::Relaxed);
}

/// Whether what goes to stdout is coloured.
pub fn color_stdout() -> bool {
    COLOR_OUT.load(Ordering::Relaxed)
}

/// What a coloured piece of output is.
#[derive(Clone, Copy)]
pub enum Tint {
    /// A table's header line: bold.
    Header,
    /// The best row of a ranked table: green.
    Best,
    /// A warning line: yellow.
    Warning,
    /// An error line: red.
    Error,
}

/// `text` in the colour of `tint` when `on`, else as it is.
pub fn tinted(tint: Tint, text: &str, on: bool) -> String {
    use anstyle::{AnsiColor, Style};
    if !on || text.is_empty() {
        return text.to_string();
    }
    let style = match tint {
        Tint::Header => Style::new().bold(),
        Tint::Best => AnsiColor::Green.on_default(),
        Tint::Warning => AnsiColor::Yellow.on_default(),
        Tint::Error => AnsiColor::Red.on_default().bold(),
    };
    format!("{}{text}{}", style.render(), style.render_reset())
}

/// The lines of `text` that start with `warning:` in yellow, when `on`.
fn warnings_tinted(text: &str, on: bool) -> String {
    if !on || !text.contains("warning:") {
        return text.to_string();
    }
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(body) if body.starts_with("warning:") => format!("{}\n", tinted(Tint::Warning, body, true)),
            None if line.starts_with("warning:") => tinted(Tint::Warning, line, true),
            _ => line.to_string(),
        })
        .collect()
}

/// An error line for stderr, in red when stderr is coloured.
pub fn error_line(text: &str) -> String {
    tinted(Tint::Error, text, COLOR_ERR.load(Ordering::Relaxed))
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
        if !$crate::streams::quiet() {
            $crate::streams::err(&format!("{}\n", format_args!($($arg)*)))
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
    () => { $crate::streams::out("\n") };
    ($($arg:tt)*) => { $crate::streams::out(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to [`out`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::streams::out(&format!($($arg)*)) };
}

/// `println!` to [`text`]: text for a reader, fitted to the width of stdout.
#[macro_export]
macro_rules! textln {
    () => { $crate::streams::text("\n") };
    ($($arg:tt)*) => { $crate::streams::text(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` to [`text`].
#[macro_export]
macro_rules! text {
    ($($arg:tt)*) => { $crate::streams::text(&format!($($arg)*)) };
}

/// `eprintln!` to [`err`].
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => { $crate::streams::err(&format!("{}\n", format_args!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_warning_lines_turn_yellow_and_only_when_coloured() {
        let text = "runtime x\nwarning: samples were lost\nwarning: no newline";
        assert_eq!(warnings_tinted(text, false), text);
        let yellow = warnings_tinted(text, true);
        let lines: Vec<&str> = yellow.split('\n').collect();
        assert_eq!(lines[0], "runtime x");
        assert_eq!(lines[1], "\u{1b}[33mwarning: samples were lost\u{1b}[0m");
        assert_eq!(lines[2], "\u{1b}[33mwarning: no newline\u{1b}[0m");
        assert_eq!(tinted(Tint::Error, "", true), "", "nothing to colour");
    }
}
