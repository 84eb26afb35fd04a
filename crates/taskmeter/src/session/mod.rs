//! What every command that measures shares (`run`, `run net`, `bench`), written once: the
//! results folder and the checks before measuring, the interrupt handler, the environment, the
//! record's header, writing the folder and the exports, printing JSON or the console report,
//! and the exit status (0; 1 when a row failed; 130 when interrupted).

pub mod folder;

use crate::machine::env::Environment;
use crate::model::header::{Header, Record};
use crate::report::export::{exporter, Export, RecordRef};
use crate::report::ReportError;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Why a session could not start or write its results.
#[derive(Debug)]
pub enum SessionError {
    FolderNotEmpty(PathBuf),
    /// An export file (first) whose folder (second) does not exist.
    NoExportFolder(PathBuf, PathBuf),
    Io(PathBuf, std::io::Error),
    Report(ReportError),
    /// Something the machine refused before measuring (e.g. a PM QoS request).
    Refused(String),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::FolderNotEmpty(p) => write!(f, "output folder {} already exists and is not empty", p.display()),
            SessionError::NoExportFolder(p, parent) => {
                write!(f, "cannot export to {}: folder {} does not exist", p.display(), parent.display())
            }
            SessionError::Io(p, e) => write!(f, "cannot write {}: {e}", p.display()),
            SessionError::Report(e) => e.fmt(f),
            SessionError::Refused(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<crate::machine::idle::LatencyError> for SessionError {
    fn from(e: crate::machine::idle::LatencyError) -> SessionError {
        SessionError::Refused(e.0)
    }
}

impl From<ReportError> for SessionError {
    fn from(e: ReportError) -> SessionError {
        SessionError::Report(e)
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
}

pub struct Session {
    pub folder: PathBuf,
    pub started_at: String,
    pub environment: Environment,
    output: Output,
    /// The hidden folder next to `folder` that files written while measuring go to, once one is
    /// asked for (see [`Session::staging`]); the results are written into it at the end.
    staging: Option<PathBuf>,
}

impl Session {
    /// Checks the folder and exports, installs the interrupt handler, captures the environment.
    pub fn start(kind: &str, output: Output) -> Result<Session, SessionError> {
        let started_at = now();
        let folder = output.folder.clone().unwrap_or_else(|| folder::default_folder(kind, &started_at));
        folder::check_writable(&folder)?;
        for export in &output.exports {
            folder::check_export_path(&export.path)?;
        }
        crate::process::interrupt::install_handler();
        Ok(Session { folder, started_at, environment: Environment::capture(), output, staging: None })
    }

    /// A folder for files written while measuring (`--raw`'s samples): it becomes the results
    /// folder when the session finishes.
    pub fn staging(&mut self) -> Result<PathBuf, SessionError> {
        if self.staging.is_none() {
            self.staging = Some(folder::create_staging(&self.folder)?);
        }
        Ok(self.staging.clone().expect("just set"))
    }

    /// The header of this session's record, as of now; [`Session::finish`] completes it.
    pub fn header<R: Record>(&self) -> Header {
        R::new_header(self.output.command_line.clone(), self.started_at.clone(), self.environment.clone())
    }

    /// Completes the header, writes the folder (with `write`) and the exports, prints the
    /// record (JSON or `console`), and gives the exit status.
    pub fn finish<R: Record>(
        self,
        mut record: R,
        as_ref: fn(&R) -> RecordRef<'_>,
        write: impl FnOnce(&std::path::Path, &R) -> Result<(), ReportError>,
        console: impl FnOnce(&R) -> String,
        failed: bool,
    ) -> Result<ExitCode, SessionError> {
        let complete = !crate::process::interrupt::interrupted();
        let header = record.header_mut();
        header.finished_at = now();
        header.complete = complete;
        header.environment.load_average_after = crate::machine::env::load_average();
        folder::write_atomically(&self.folder, self.staging.as_deref(), |dir| write(dir, &record))?;
        for export in &self.output.exports {
            let text = exporter(export.format).render(as_ref(&record));
            std::fs::write(&export.path, text).map_err(|e| SessionError::Io(export.path.clone(), e))?;
        }
        crate::process::quiet_on_closed_stdout();
        if self.output.json {
            print!("{}", crate::report::json(&record));
        } else {
            print!("{}", console(&record));
            println!("results: {} (report: {})", self.folder.display(), self.folder.join("report.html").display());
        }
        Ok(if !complete {
            eprintln!("taskmeter: interrupted; the results folder holds what was measured and is marked incomplete");
            ExitCode::from(130)
        } else if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
