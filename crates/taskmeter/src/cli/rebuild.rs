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
        let (source, mut reader) = taskmeter_model::samples::open(folder)?
            .ok_or_else(|| format!("{} holds no samples (a run keeps them with --raw)", folder.display()))?;
        let mut file = std::fs::File::create(out).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        std::io::copy(&mut reader, &mut file)
            .map_err(|e| format!("cannot copy {} to {}: {e}", source.display(), out.display()))?;
        taskmeter_console::outln!("{}", out.display());
    }
    if let Some(layout) = table {
        match record.console_table(layout) {
            Some(text) => taskmeter_console::text!("{text}"),
            None => return Err(format!("--table applies to a run's record ({} is not one)", file.display()).into()),
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
