//! `taskmeter report RESULTS`: rebuilds the charts and report.html of a results folder from its
//! record alone (run.json, net.json or bench.json, by the schema its header names).

use super::CliError;
use crate::model::any::{load_any, AnyRecord};
use std::path::Path;
use std::process::ExitCode;

pub fn rebuild(path: &Path) -> Result<ExitCode, CliError> {
    let (file, record) = load_any(path)?;
    let folder = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match &record {
        AnyRecord::Run(r) => crate::report::run::write_report(folder, r)?,
        AnyRecord::Net(r) => crate::report::net::write_report(folder, r)?,
        AnyRecord::Bench(r) => crate::report::bench::write_report(folder, r)?,
    }
    println!("{}", folder.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}
