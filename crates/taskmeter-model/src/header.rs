//! The header every record begins with (`run.json`, `net.json`, `bench.json`,
//! `granularity.json`), and the one loader that reads any of them: it checks the schema's name
//! and version before anything else. Which kinds there are is the families' registry's
//! (`cli::families`): it passes their files and reads each by its schema.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use taskmeter_machine::env::Environment;

/// The fields every record starts with.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Header {
    /// `taskmeter.run`, `taskmeter.net`, `taskmeter.bench` or `taskmeter.granularity`.
    pub schema: String,
    pub schema_version: u32,
    pub taskmeter_version: String,
    /// False when the command was stopped early: the record holds what was measured until then.
    pub complete: bool,
    /// Why it was stopped early: "interrupted by SIGTERM", or the results folder became unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    pub command_line: Vec<String>,
    pub started_at: String,
    pub finished_at: String,
    pub environment: Environment,
    /// The user's label of the run (`--label`, e.g. a git commit), kept in the history too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A kind of record: its schema name, the file it is written to, and the versions this
/// taskmeter reads (it writes the newest).
pub trait Record: Serialize + DeserializeOwned {
    const SCHEMA: &'static str;
    const FILE: &'static str;
    const VERSIONS: std::ops::RangeInclusive<u32>;

    fn header(&self) -> &Header;
    fn header_mut(&mut self) -> &mut Header;

    /// The record as its file holds it: pretty JSON and a newline.
    fn to_json(&self) -> String;
    /// The record as a JSON value: what its file reads back as.
    fn to_json_value(&self) -> serde_json::Value;
    /// The record from its file's JSON (whose schema and version [`from_value`] checks first).
    fn from_json_value(value: serde_json::Value) -> Result<Self, serde_json::Error>;

    /// A header of this kind for a record being written now.
    fn new_header(command_line: Vec<String>, started_at: String, environment: Environment) -> Header {
        Header {
            schema: Self::SCHEMA.into(),
            schema_version: *Self::VERSIONS.end(),
            taskmeter_version: env!("CARGO_PKG_VERSION").into(),
            complete: true,
            incomplete_reason: None,
            command_line,
            started_at,
            finished_at: String::new(),
            environment,
            label: None,
        }
    }
}

/// Why a record could not be read; each is one sentence for the user.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No such path, or a folder without any of the record files (second).
    #[error("{} does not exist (expected a results folder or its {})", .0.display(), either(.1))]
    Missing(PathBuf, Vec<&'static str>),
    #[error("cannot read {}: {}", .0.display(), .1)]
    Unreadable(PathBuf, std::io::Error),
    #[error("{} is not valid JSON (truncated?): {}", .0.display(), .1)]
    NotJson(PathBuf, serde_json::Error),
    #[error("{} is not a taskmeter record", .0.display())]
    NotARecord(PathBuf),
    #[error("{} is a {found} record, not a {expected} record", path.display())]
    WrongKind { path: PathBuf, expected: String, found: String },
    #[error("{} has no schema_version", .0.display())]
    NoVersion(PathBuf),
    #[error("{}", version_said(path, *found, *oldest, *newest))]
    Version { path: PathBuf, found: u64, oldest: u32, newest: u32 },
    #[error("{} does not match the {} schema: {}", .0.display(), .1, .2)]
    Shape(PathBuf, &'static str, serde_json::Error),
    /// The record reads, but does not hold together (`consistency`): every problem, one
    /// sentence each.
    #[error("{}", problems_said(path, problems))]
    Inconsistent { path: PathBuf, problems: Vec<String> },
}

/// Problems of an inconsistent record shown one by one; the rest are counted.
pub const SHOWN_PROBLEMS: usize = 10;

/// [`LoadError::Version`]: newer than this taskmeter (upgrade it), or older than it reads.
fn version_said(path: &Path, found: u64, oldest: u32, newest: u32) -> String {
    if found > newest as u64 {
        format!(
            "{} has schema version {found}: it was written by a newer taskmeter than this one (which reads versions {oldest} to {newest}); upgrade taskmeter to read it",
            path.display()
        )
    } else {
        format!(
            "{} has schema version {found}: it is older than this taskmeter reads (versions {oldest} to {newest}); read it with the taskmeter that wrote it, or measure again",
            path.display()
        )
    }
}

/// [`LoadError::Inconsistent`]: one line per problem, each naming the file (the printer puts
/// `taskmeter: ` before each), at most [`SHOWN_PROBLEMS`], then how many more.
fn problems_said(path: &Path, problems: &[String]) -> String {
    let lines = problems.iter().take(SHOWN_PROBLEMS).map(|problem| format!("{}: {problem}", path.display()));
    let more = problems.len().saturating_sub(SHOWN_PROBLEMS);
    let more = (more > 0).then(|| format!("... and {more} more"));
    lines.chain(more).collect::<Vec<_>>().join("\n")
}

/// The JSON methods of [`Record`], for one kind: `taskmeter_model::record_json!();` in its impl
/// (the crate needs `serde_json`). Written out in each kind's impl, so that serde's code for a
/// record is compiled with the crate that defines it: the four kinds here in the core (opt-level
/// 3), where a generic serde_json call in the crate taskmeter (opt-level 0) made recording a run
/// in the history twice as slow (docs/benchmarks/structure.md, "The first build, second pass").
#[macro_export]
macro_rules! record_json {
    () => {
        #[inline(never)]
        fn to_json(&self) -> String {
            let mut text = ::serde_json::to_string_pretty(self).expect("a record always serialises");
            text.push('\n');
            text
        }
        #[inline(never)]
        fn to_json_value(&self) -> ::serde_json::Value {
            // Written and read back, as its file is: `serde_json::to_value` gives another value
            // for some records (and so another history identity than the folder's).
            let text = ::serde_json::to_string(self).expect("a record always serialises");
            ::serde_json::from_str(&text).expect("a record reads back")
        }
        #[inline(never)]
        fn from_json_value(value: ::serde_json::Value) -> Result<Self, ::serde_json::Error> {
            ::serde_json::from_value(value)
        }
    };
}

/// "a, b or c".
fn either(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The record file of `path`: the path itself, or the first of `files` (every kind's, from the
/// families' registry) inside a results folder.
pub fn record_file(path: &Path, files: &[&'static str]) -> Result<PathBuf, LoadError> {
    if !path.is_dir() {
        return if path.exists() {
            Ok(path.to_path_buf())
        } else {
            Err(LoadError::Missing(path.to_path_buf(), files.to_vec()))
        };
    }
    files
        .iter()
        .map(|name| path.join(name))
        .find(|file| file.is_file())
        .ok_or_else(|| LoadError::Missing(path.join(files.first().unwrap_or(&"run.json")), files.to_vec()))
}

/// The schema name of the record at `path` (a folder or a file), read from its header.
pub fn schema_of(path: &Path, files: &[&'static str]) -> Result<(PathBuf, String, serde_json::Value), LoadError> {
    let file = record_file(path, files)?;
    let text = std::fs::read_to_string(&file).map_err(|e| LoadError::Unreadable(file.clone(), e))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| LoadError::NotJson(file.clone(), e))?;
    let schema = value.get("schema").and_then(|s| s.as_str()).filter(|s| s.starts_with("taskmeter."));
    let schema = schema.ok_or_else(|| LoadError::NotARecord(file.clone()))?.to_string();
    Ok((file, schema, value))
}

/// A record of kind `R` from its file's JSON (`schema` read from it), checking its schema and
/// version first.
pub fn from_value<R: Record>(file: PathBuf, schema: &str, value: serde_json::Value) -> Result<R, LoadError> {
    if schema != R::SCHEMA {
        let kind = |s: &str| s.trim_start_matches("taskmeter.").to_string();
        return Err(LoadError::WrongKind { path: file, expected: kind(R::SCHEMA), found: kind(schema) });
    }
    let version =
        value.get("schema_version").and_then(|v| v.as_u64()).ok_or_else(|| LoadError::NoVersion(file.clone()))?;
    if !R::VERSIONS.contains(&(version.min(u32::MAX as u64) as u32)) {
        return Err(LoadError::Version {
            path: file,
            found: version,
            oldest: *R::VERSIONS.start(),
            newest: *R::VERSIONS.end(),
        });
    }
    R::from_json_value(value).map_err(|e| LoadError::Shape(file, R::SCHEMA, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn ten_problems_are_shown_one_line_each_and_the_rest_counted() {
        let problems: Vec<String> = (0..13).map(|i| format!("problem {i}")).collect();
        let error = LoadError::Inconsistent { path: PathBuf::from("r/run.json"), problems };
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), SHOWN_PROBLEMS + 1);
        assert_eq!(lines[0], "r/run.json: problem 0");
        assert_eq!(lines[9], "r/run.json: problem 9");
        assert_eq!(lines[10], "... and 3 more");
        let one = LoadError::Inconsistent { path: PathBuf::from("net.json"), problems: vec!["a".into()] };
        assert_eq!(one.to_string(), "net.json: a");
    }
}
