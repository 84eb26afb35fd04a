//! What every command that measures shares (`run` of every experiment, `bench`), written once:
//! the results folder and its checks (before measuring and between rows), the signal handler,
//! the environment, the record's header, writing the folder (or a fallback) and the exports,
//! printing JSON or the console report, and the exit status ([`ExitStatus`]).

pub mod folder;

use crate::report::export::{exporter, Export};
use crate::report::page::Report;
use crate::report::ReportError;
use folder::{Prepared, Written};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use taskmeter_machine::env::Environment;
use taskmeter_measure::process::signals;
use taskmeter_model::header::{Header, Record};

/// The exit statuses (docs/troubleshooting.md: "When things go wrong"), and which an error
/// ends a command with: by whose it is (`cli::CliError::exit_status`).
pub mod exit {
    use crate::report::ReportError;

    /// A row, point or scenario failed (the others are kept), a check of `check-driver` failed,
    /// a comparison found a regression; or a failure that is not the input's: a history store
    /// that cannot be opened or queried, a chart that cannot be drawn, something a command needs
    /// that cannot be set up (a receiver, a collector's sockets).
    pub const FAILED: u8 = 1;
    /// Bad input (a flag, a value, a path that is not a results folder, a run the history does
    /// not hold, an unknown name), an output that cannot be used, or a flag asking for what the
    /// host refuses: nothing was measured.
    pub const USAGE: u8 = 2;
    /// The results could not be written where asked (they are in the fallback folder named on
    /// stderr), an export failed, a file asked for could not be written (a report, figures,
    /// samples, a trend, man pages), or stdout could not be written.
    pub const OUTPUT: u8 = 3;

    /// A report's error: a file that cannot be written is [`OUTPUT`], a chart that cannot be
    /// drawn is [`FAILED`] (the record is the input, and it was read).
    pub fn of_report(e: &ReportError) -> u8 {
        match e {
            ReportError::Write { .. } => OUTPUT,
            ReportError::Chart(_) => FAILED,
        }
    }
}

/// Why a session could not start or write its results.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("output folder {} already exists and is not empty", .0.display())]
    FolderNotEmpty(PathBuf),
    /// An export file (first) whose folder (second) does not exist.
    #[error("cannot export to {}: folder {} does not exist", .0.display(), .1.display())]
    NoExportFolder(PathBuf, PathBuf),
    /// A path the results cannot go to, and why.
    #[error("cannot write results to {}: {}", .0.display(), .1)]
    Unusable(PathBuf, String),
    #[error("cannot write {}: {}", .0.display(), .1)]
    Io(PathBuf, std::io::Error),
    #[error(transparent)]
    Report(#[from] ReportError),
    /// Something the machine refused before measuring (e.g. a PM QoS request).
    #[error("{0}")]
    Refused(String),
    /// The results could be written neither where asked nor to a fallback.
    #[error("the results could not be written: {0}")]
    Lost(String),
    /// A default folder name another taskmeter took first (the next is tried).
    #[error("the folder was taken by another taskmeter")]
    Taken,
}

impl SessionError {
    /// The exit status: a folder or export path that cannot be used, or what the host refuses,
    /// is found before anything is measured ([`exit::USAGE`]); results that could not be
    /// written are [`exit::OUTPUT`]; a default folder taken by another taskmeter (never said:
    /// the next is tried) is not the user's ([`exit::FAILED`]).
    pub fn exit_status(&self) -> u8 {
        match self {
            SessionError::FolderNotEmpty(_)
            | SessionError::NoExportFolder(..)
            | SessionError::Unusable(..)
            | SessionError::Refused(_) => exit::USAGE,
            SessionError::Io(..) | SessionError::Lost(_) => exit::OUTPUT,
            SessionError::Report(e) => exit::of_report(e),
            SessionError::Taken => exit::FAILED,
        }
    }
}

impl From<taskmeter_machine::idle::LatencyError> for SessionError {
    fn from(e: taskmeter_machine::idle::LatencyError) -> SessionError {
        SessionError::Refused(e.0)
    }
}

/// How a session ends its output.
pub struct Output {
    /// The results folder (default `results/<UTC time>-<kind>`).
    pub folder: Option<PathBuf>,
    pub exports: Vec<Export>,
    /// Print the record as JSON on stdout instead of the console report.
    pub json: bool,
    pub command_line: Vec<String>,
    /// Where the run is recorded at the end (`history`).
    pub history: crate::history::Target,
    /// The user's label of the run (`--label`).
    pub label: Option<String>,
}

pub struct Session {
    pub folder: PathBuf,
    pub started_at: String,
    pub environment: Environment,
    output: Output,
    /// The folder, reserved, and the hidden folder beside it that files go to until the end.
    prepared: Option<Prepared>,
    /// Why the folder can no longer take the results, once found out.
    unusable: Mutex<Option<String>>,
}

impl Session {
    /// Catches the signals, checks the exports, reserves and tries the folder (so a folder that
    /// cannot be used is found out now), captures the environment.
    pub fn start(kind: &str, output: Output) -> Result<Session, SessionError> {
        signals::install();
        let started_at = now();
        for export in &output.exports {
            folder::check_export_path(&export.path)?;
        }
        let prepared = match &output.folder {
            Some(folder) => folder::prepare(folder)?,
            None => folder::prepare_default(kind, &started_at)?,
        };
        Ok(Session {
            folder: prepared.folder.clone(),
            started_at,
            environment: Environment::capture(),
            output,
            prepared: Some(prepared),
            unusable: Mutex::new(None),
        })
    }

    /// The folder files written while measuring go to (`--raw`'s samples): it becomes the
    /// results folder when the session finishes.
    pub fn staging(&self) -> &Path {
        &self.prepared.as_ref().expect("a session holds its folder until it finishes").staging
    }

    /// Whether to start no more rows, and why: a signal came, or the results folder can no
    /// longer take the results (checked now; said once on stderr).
    pub fn stop_reason(&self) -> Option<String> {
        if let Some(reason) = signals::reason() {
            return Some(reason);
        }
        let mut unusable = self.unusable.lock().unwrap_or_else(|e| e.into_inner());
        if unusable.is_none() {
            if let Err(why) = self.prepared.as_ref().map_or(Ok(()), |p| p.health()) {
                taskmeter_console::errln!(
                    "taskmeter: {why}: no further rows are started, and the results will go to a fallback folder"
                );
                *unusable = Some(format!("the results folder became unusable: {why}"));
            }
        }
        unusable.clone()
    }

    /// The header of this session's record, as of now; [`Session::finish`] completes it.
    pub fn header<R: Record>(&self) -> Header {
        let mut header =
            R::new_header(self.output.command_line.clone(), self.started_at.clone(), self.environment.clone());
        header.label = self.output.label.clone();
        header
    }

    /// Completes the header, writes the folder (with `write`; to a fallback folder when it
    /// cannot be written) and the exports, prints the record (JSON or `console`), and gives
    /// the exit status: 128 + the signal that stopped it; [`exit::OUTPUT`] when results did not
    /// go where asked; [`exit::FAILED`] when `failed`; else 0.
    pub fn finish<R>(
        mut self,
        mut record: R,
        write: impl Fn(&Path, &R) -> Result<(), ReportError>,
        console: impl FnOnce(&R) -> String,
        failed: bool,
    ) -> ExitCode
    where
        R: Record + Report + crate::history::entry::Recorded,
    {
        let signal = signals::reason();
        let reason = signal.clone().or_else(|| self.unusable.lock().unwrap_or_else(|e| e.into_inner()).clone());
        let header = record.header_mut();
        header.finished_at = now();
        header.complete = reason.is_none();
        header.incomplete_reason = reason.clone();
        header.environment.load_average_after = taskmeter_machine::env::load_average();
        let prepared = self.prepared.take().expect("finished once");
        let mut trouble = reason.is_some() && signal.is_none();
        let written = match prepared.finish(|dir| write(dir, &record)) {
            Ok(Written::AsAsked(at)) => Some(at),
            Ok(Written::Fallback { at, why }) => {
                taskmeter_console::errln!("taskmeter: {why}; the results are in {} instead", at.display());
                trouble = true;
                Some(at)
            }
            Err(e) => {
                taskmeter_console::errln!("taskmeter: {e}");
                trouble = true;
                None
            }
        };
        // Recorded whatever happened to the folder; a store that cannot take it is one warning.
        crate::history::record(&record, written.as_deref(), &self.output.history);
        for export in &self.output.exports {
            let text = exporter(export.format).render(&record);
            if let Err(e) = std::fs::write(&export.path, text) {
                taskmeter_console::errln!("taskmeter: {}", SessionError::Io(export.path.clone(), e));
                trouble = true;
            }
        }
        if self.output.json {
            taskmeter_console::out!("{}", record.to_json());
        } else {
            // The table on stdout; its warnings on stderr, with the other notices, so that a
            // script reading the table gets the table.
            let text = console(&record);
            let (warnings, table): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with("warning: "));
            // Text for a reader: wrapped to the width of stdout (the tables already fit it).
            taskmeter_console::text!("{}", table.iter().map(|l| format!("{l}\n")).collect::<String>());
            for warning in warnings {
                taskmeter_console::errln!("taskmeter: {warning}");
            }
            if let Some(at) = &written {
                taskmeter_console::textln!("results: {} (report: {})", at.display(), at.join("report.html").display());
            }
        }
        if let Some(reason) = &reason {
            taskmeter_console::errln!(
                "taskmeter: {reason}; the results hold what was measured and are marked incomplete"
            );
        }
        match (signals::exit_status(), trouble, failed) {
            (Some(status), _, _) => ExitCode::from(status),
            (None, true, _) => ExitCode::from(exit::OUTPUT),
            (None, false, true) => ExitCode::from(exit::FAILED),
            _ => ExitCode::SUCCESS,
        }
    }
}

impl Drop for Session {
    /// A session that ends before it finishes (a refusal after it started) leaves nothing.
    fn drop(&mut self) {
        if let Some(prepared) = self.prepared.take() {
            prepared.abandon();
        }
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
