//! The results folder: its default name; the checks made before anything is measured (the
//! folder is reserved, and a file is written and removed next to it, so a folder that cannot be
//! used costs a second, not a run); the checks between rows (removed, replaced, filled by
//! someone else, disk full); and the write at the end, under a temporary name then renamed (a
//! folder is complete or absent), with a fallback folder when the one asked for cannot be had.

use super::SessionError;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How much a probe writes: enough to fail on a full disk, little enough to cost nothing.
const PROBE_BYTES: usize = 64 * 1024;

/// The default folder, `results/<UTC timestamp>-<kind>` (with `-2`, `-3`... when taken),
/// reserved as [`prepare`] does; another taskmeter starting in the same second takes the next.
pub fn prepare_default(kind: &str, started_at: &str) -> Result<Prepared, SessionError> {
    let stamp: String = started_at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let base = PathBuf::from("results").join(format!("{stamp}-{kind}"));
    let mut n = 1;
    loop {
        let candidate = if n == 1 { base.clone() } else { PathBuf::from(format!("{}-{n}", base.display())) };
        n += 1;
        if candidate.symlink_metadata().is_ok() {
            continue;
        }
        match prepare_as(&candidate, true) {
            Err(SessionError::Taken) => continue,
            result => return result,
        }
    }
}

/// A results folder made ready: the folder itself (reserved, empty) and the hidden folder next
/// to it that files are written to until the end.
#[derive(Debug)]
pub struct Prepared {
    pub folder: PathBuf,
    pub staging: PathBuf,
    /// The staging folder's identity, to see it replaced.
    staging_id: (u64, u64),
    /// Whether taskmeter created the (empty) folder, and so may remove it if it is not used.
    created: bool,
}

fn parent_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn unusable(path: &Path, why: impl std::fmt::Display) -> SessionError {
    SessionError::Unusable(path.to_path_buf(), why.to_string())
}

/// Checks and reserves `folder` before anything is measured; every way it cannot be used is
/// one [`SessionError`].
pub fn prepare(folder: &Path) -> Result<Prepared, SessionError> {
    prepare_as(folder, false)
}

/// [`prepare`]; `fresh`: the folder must be made now ([`SessionError::Taken`] if it exists).
fn prepare_as(folder: &Path, fresh: bool) -> Result<Prepared, SessionError> {
    let parent = parent_of(folder);
    match folder.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(folder).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
            return Err(unusable(folder, format!("is a symbolic link (to {target}); give the folder itself")));
        }
        Ok(meta) if !meta.is_dir() => return Err(unusable(folder, "is a file, not a folder")),
        Ok(meta) => {
            if std::fs::read_dir(folder).map(|mut d| d.next().is_some()).map_err(|e| unusable(folder, e))? {
                return Err(SessionError::FolderNotEmpty(folder.to_path_buf()));
            }
            // A folder on another device than its parent is a mount point: the rename at the
            // end cannot replace it.
            if parent.metadata().is_ok_and(|p| p.dev() != meta.dev()) {
                return Err(unusable(
                    folder,
                    "is a mount point, which the finished folder cannot be renamed onto; give a folder inside it",
                ));
            }
        }
        Err(_) => {}
    }
    std::fs::create_dir_all(parent).map_err(|e| unusable(parent, format!("the folder cannot be created ({e})")))?;
    let created = match std::fs::create_dir(folder) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && fresh => return Err(SessionError::Taken),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && folder.is_dir() => false,
        Err(e) => return Err(unusable(folder, format!("the folder cannot be created ({e})"))),
    };
    let staging = parent.join(format!(".{}.partial-{}", name_of(folder), std::process::id()));
    let made = std::fs::create_dir(&staging).map_err(|e| unusable(&staging, e)).and_then(|_| {
        probe(&staging).map_err(|e| unusable(folder, format!("a test file could not be written next to it: {e}")))?;
        let meta = staging.metadata().map_err(|e| unusable(&staging, e))?;
        Ok((meta.dev(), meta.ino()))
    });
    match made {
        Ok(staging_id) => Ok(Prepared { folder: folder.to_path_buf(), staging, staging_id, created }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            if created {
                let _ = std::fs::remove_dir(folder);
            }
            Err(e)
        }
    }
}

fn name_of(folder: &Path) -> String {
    folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into())
}

/// Writes and removes a file in `dir`.
fn probe(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(".probe");
    let result = std::fs::File::create(&path).and_then(|mut file| {
        file.write_all(&[0u8; PROBE_BYTES])?;
        file.sync_data()
    });
    let removed = std::fs::remove_file(&path);
    result.and(removed)
}

impl Prepared {
    /// Whether the folder can still take the results, checked between rows: why not, if not.
    pub fn health(&self) -> Result<(), String> {
        let staging = self.staging.display();
        match self.staging.metadata() {
            Ok(meta) if meta.is_dir() && (meta.dev(), meta.ino()) == self.staging_id => {}
            Ok(_) => return Err(format!("{staging}, where the results are written until the end, was replaced")),
            Err(e) => return Err(format!("{staging}, where the results are written until the end, is gone ({e})")),
        }
        let folder = self.folder.display();
        match self.folder.symlink_metadata() {
            Err(_) => {} // removed: the rename at the end makes it again
            Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {
                if std::fs::read_dir(&self.folder).map(|mut d| d.next().is_some()).unwrap_or(true) {
                    return Err(format!("{folder} was filled by something else during the run"));
                }
            }
            Ok(_) => return Err(format!("{folder} was replaced by something that is not a folder")),
        }
        probe(&self.staging).map_err(|e| format!("{staging} can no longer be written ({e})"))
    }

    /// Has `write` fill the staging folder, then renames it to the folder. When that fails,
    /// writes to a fallback folder instead and says where and why.
    pub fn finish<E: Into<SessionError>>(
        self,
        write: impl Fn(&Path) -> Result<(), E>,
    ) -> Result<Written, SessionError> {
        let write = |dir: &Path| write(dir).map_err(Into::into);
        // Files written while measuring (--raw's samples) are not written again by `write`.
        let measured_files =
            self.health_of_staging() && std::fs::read_dir(&self.staging).is_ok_and(|mut d| d.next().is_some());
        let written = self.health_of_staging().then(|| write(&self.staging));
        let why = match written {
            Some(Ok(())) => match std::fs::rename(&self.staging, &self.folder) {
                Ok(()) => return Ok(Written::AsAsked(self.folder.clone())),
                Err(e) => {
                    let why = unusable(&self.folder, e).to_string();
                    // Written but not renamed: the staging folder becomes the fallback, beside it.
                    let beside = parent_of(&self.folder).join(format!(
                        "{}-fallback-{}",
                        name_of(&self.folder),
                        std::process::id()
                    ));
                    if std::fs::rename(&self.staging, &beside).is_ok() {
                        self.remove_reserved();
                        return Ok(Written::Fallback { at: beside, why });
                    }
                    why
                }
            },
            Some(Err(e)) if measured_files => {
                format!("{e} (the files written while measuring stay in {})", self.staging.display())
            }
            Some(Err(e)) => e.to_string(),
            None => format!("{} was removed or replaced during the run", self.staging.display()),
        };
        self.remove_reserved();
        if !measured_files {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
        let elsewhere =
            std::env::temp_dir().join(format!("taskmeter-{}-{}", name_of(&self.folder), std::process::id()));
        let _ = std::fs::remove_dir_all(&elsewhere);
        match std::fs::create_dir_all(&elsewhere).map_err(|e| unusable(&elsewhere, e)).and_then(|_| write(&elsewhere)) {
            Ok(()) => Ok(Written::Fallback { at: elsewhere, why }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&elsewhere);
                Err(SessionError::Lost(format!("{why}; the fallback failed too: {e}")))
            }
        }
    }

    /// Removes the folder taskmeter reserved, if it is still empty.
    fn remove_reserved(&self) {
        if self.created {
            let _ = std::fs::remove_dir(&self.folder);
        }
    }

    fn health_of_staging(&self) -> bool {
        self.staging.metadata().is_ok_and(|m| m.is_dir() && (m.dev(), m.ino()) == self.staging_id)
    }

    /// Gives up on the folder (a session that ends before measuring): removes what was made.
    pub fn abandon(self) {
        let _ = std::fs::remove_dir_all(&self.staging);
        self.remove_reserved();
    }
}

/// Where the results went.
#[derive(Debug)]
pub enum Written {
    AsAsked(PathBuf),
    /// The folder asked for could not be written (`why`); the results are at `at`.
    Fallback {
        at: PathBuf,
        why: String,
    },
}

/// Refuses an export file whose folder does not exist.
pub fn check_export_path(path: &Path) -> Result<(), SessionError> {
    let parent = parent_of(path);
    if !parent.is_dir() {
        return Err(SessionError::NoExportFolder(path.to_path_buf(), parent.to_path_buf()));
    }
    Ok(())
}
