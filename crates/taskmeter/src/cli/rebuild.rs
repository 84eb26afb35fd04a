//! `taskmeter report RESULTS`: rebuilds the charts and report.html of a results folder from its
//! record alone (run.json, net.json, bench.json or granularity.json, by the schema its header names); with
//! `--samples-csv FILE`, also writes the samples a `--raw` run kept as plain CSV; with
//! `--table LAYOUT`, also prints a run's console report in that layout; with `--figures FOLDER`,
//! also writes every figure there, for a paper (`report::print`). A record that does not
//! hold together (`model::consistency`) is refused, one line per problem, and nothing is written.

use super::families::load_checked;
use super::CliError;
use std::path::Path;
use std::process::ExitCode;

pub fn rebuild(
    path: &Path,
    samples_csv: Option<&Path>,
    table: Option<crate::report::tables::Layout>,
    figures: Option<&Path>,
) -> Result<ExitCode, CliError> {
    let (file, record) = load_checked(path)?;
    let folder = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Some(out) = samples_csv {
        samples_to_csv(folder, out)?;
        taskmeter_console::outln!("{}", out.display());
    }
    if let Some(layout) = table {
        match record.console_table(layout) {
            Some(text) => taskmeter_console::text!("{text}"),
            None => {
                return Err(CliError::Usage(format!(
                    "--table applies to a run's record ({} is not one)",
                    file.display()
                )))
            }
        }
    }
    let report: &dyn crate::report::page::Report = &*record;
    crate::report::page::write_report(folder, report)?;
    taskmeter_console::outln!("{}", folder.join("report.html").display());
    if let Some(out) = figures {
        let charts = crate::report::page::described_figures(report).map_err(crate::report::ReportError::Chart)?;
        for file in crate::report::print::write_figures(out, &charts)? {
            taskmeter_console::outln!("{}", file.display());
        }
        if !cfg!(feature = "print") {
            taskmeter_console::outln!("(SVG only: PNGs at 300 dpi need taskmeter built with --features print)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--samples-csv OUT`: the samples of the results folder as plain CSV. A samples file that
/// cannot be read is the input's ([`CliError::Usage`]), as a record that cannot be read is;
/// `OUT` that cannot be written is [`CliError::Output`].
fn samples_to_csv(folder: &Path, out: &Path) -> Result<(), CliError> {
    let (source, mut reader) = taskmeter_model::samples::open(folder).map_err(CliError::Usage)?.ok_or_else(|| {
        CliError::Usage(format!("{} holds no samples (a run keeps them with --raw)", folder.display()))
    })?;
    let cannot_write = |e: std::io::Error| CliError::Output(format!("cannot write {}: {e}", out.display()));
    let file = std::fs::File::create(out).map_err(cannot_write)?;
    // Which side of the copy failed decides whose the error is.
    let mut writer = Written { file, failed: false };
    match std::io::copy(&mut reader, &mut writer) {
        Ok(_) => Ok(()),
        Err(e) if writer.failed => Err(cannot_write(e)),
        Err(e) => Err(CliError::Usage(format!("cannot read {}: {e}", source.display()))),
    }
}

/// A file that remembers whether a write to it failed.
struct Written {
    file: std::fs::File,
    failed: bool,
}

impl std::io::Write for Written {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes);
        self.failed |= written.is_err();
        written
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let flushed = self.file.flush();
        self.failed |= flushed.is_err();
        flushed
    }
}
