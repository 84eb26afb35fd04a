//! The results folder: its default name, the checks made before anything is measured, and the
//! atomic write (under a temporary name, then renamed: a folder is complete or absent).

use super::SessionError;
use std::path::{Path, PathBuf};

/// The default folder: `results/<UTC timestamp>-<kind>`, made unique if taken.
pub fn default_folder(kind: &str, started_at: &str) -> PathBuf {
    let stamp: String = started_at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let base = PathBuf::from("results").join(format!("{stamp}-{kind}"));
    let mut candidate = base.clone();
    let mut n = 2;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    candidate
}

/// Refuses a folder that already holds something, before any time is spent measuring.
pub fn check_writable(folder: &Path) -> Result<(), SessionError> {
    if folder.exists() && std::fs::read_dir(folder).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(SessionError::FolderNotEmpty(folder.to_path_buf()));
    }
    Ok(())
}

/// Refuses an export file whose folder does not exist.
pub fn check_export_path(path: &Path) -> Result<(), SessionError> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(SessionError::NoExportFolder(path.to_path_buf(), parent.to_path_buf()));
    }
    Ok(())
}

/// The hidden temporary folder next to `folder` that becomes it (see [`write_atomically`]).
pub fn create_staging(folder: &Path) -> Result<PathBuf, SessionError> {
    let parent = folder.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
    let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|source| SessionError::Io(staging.clone(), source))?;
    Ok(staging)
}

/// Has `write` fill a hidden temporary folder next to `folder` (`staging`, when files were
/// already written there while measuring), then renames it.
pub fn write_atomically<E: Into<SessionError>>(
    folder: &Path,
    staging: Option<&Path>,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), SessionError> {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
        move |source| SessionError::Io(path.to_path_buf(), source)
    }
    let partial = match staging {
        Some(staging) => staging.to_path_buf(),
        None => create_staging(folder)?,
    };
    let result = write(&partial).map_err(Into::into).and_then(|_| {
        if folder.exists() {
            std::fs::remove_dir(folder).map_err(io(folder))?;
        }
        std::fs::rename(&partial, folder).map_err(io(folder))
    });
    if result.is_err() && staging.is_none() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    result
}
