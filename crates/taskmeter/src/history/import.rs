//! `history import DIR...`: results folders into the history. A folder that holds a record is
//! one run; any other folder is searched for results folders (a `results/` of many). A run
//! already there (the same identity: `entry`) is counted, not added again.

use super::entry::{self, Inserted, Recorded};
use super::store::Store;
use std::path::{Path, PathBuf};
use taskmeter_model::header::{record_file, schema_of, LoadError};

/// Reads the record of a results folder, whatever its kind, as the history takes it.
pub type Load<'a> = &'a dyn Fn(&Path) -> Result<Box<dyn Recorded>, LoadError>;

/// How a results folder is read, whatever its kind: the record files there are and the reader
/// of each by its schema (the families' registry, `cli::families`, passes them down).
pub struct Reader<'a> {
    pub files: &'a [&'static str],
    pub load: Load<'a>,
}

/// What an import did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Imported {
    pub added: usize,
    pub already: usize,
    /// Folders that could not be read, each with why.
    pub failed: Vec<String>,
}

/// Why an import stopped, by whose it is.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A path given that is not a results folder, nor a folder of them (or cannot be read).
    #[error("{0}")]
    NotResults(String),
    /// The store could not take a run.
    #[error("{0}")]
    Store(String),
}

/// The results folders under `path` (itself when it is one), in name order.
fn results_folders(path: &Path, files: &[&'static str], out: &mut Vec<PathBuf>) -> Result<(), String> {
    if record_file(path, files).is_ok() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    if !path.is_dir() {
        return Err(format!("{} is neither a results folder nor a folder of them", path.display()));
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    entries.sort();
    for entry in entries {
        let _ = results_folders(&entry, files, out);
    }
    Ok(())
}

/// Imports every results folder under `paths`; a path that holds none is an error.
pub fn import(store: &mut Store, paths: &[PathBuf], reader: &Reader) -> Result<Imported, ImportError> {
    let mut imported = Imported::default();
    for path in paths {
        let mut folders = Vec::new();
        results_folders(path, reader.files, &mut folders).map_err(ImportError::NotResults)?;
        if folders.is_empty() {
            return Err(ImportError::NotResults(format!("{} holds no results folder", path.display())));
        }
        for folder in folders {
            let read = schema_of(&folder, reader.files)
                .and_then(|(_, _, value)| Ok((entry::identity(&value), (reader.load)(&folder)?)));
            let (identity, record) = match read {
                Ok(read) => read,
                Err(e) => {
                    imported.failed.push(e.to_string().lines().next().unwrap_or_default().to_string());
                    continue;
                }
            };
            let at = std::fs::canonicalize(&folder).unwrap_or(folder);
            match entry::insert(store, &entry::of(record.as_ref(), Some(&at), Some(identity)))
                .map_err(ImportError::Store)?
            {
                Inserted::New(_) => imported.added += 1,
                Inserted::Already(_) => imported.already += 1,
            }
        }
    }
    Ok(imported)
}
