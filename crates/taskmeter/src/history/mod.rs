//! The history: every run of every experiment, recorded where its results folder is finished
//! (`record`), in an embedded SQLite file by default or a shared PostgreSQL server (`store`),
//! with a versioned schema (`migrations`); read back as lists, series and trends, and checked
//! for change points (`check`, with `analysis::changepoint`). docs/history.md describes it. The
//! results folder stays the portable artefact: `import` loads folders, and a run is never lost to
//! the history: a store that cannot take it costs one warning line.

pub mod check;
pub mod entry;
pub mod import;
pub mod migrations;
pub mod query;
pub mod series;
pub mod store;
pub mod trend;

use std::path::Path;
pub use store::{Store, Target};

/// Opens the history at `target`, its schema migrated to the newest version.
pub fn open(target: &Target) -> Result<Store, String> {
    let mut store = Store::connect(target)?;
    migrations::migrate(&mut store)?;
    Ok(store)
}

/// Records a finished (or interrupted) run whose folder is `folder` (None: it could not be
/// written) into `target`; when the store cannot take it, says so in one warning line and
/// nothing else changes.
pub fn record(record: &dyn entry::Recorded, folder: Option<&Path>, target: &Target) {
    if *target == Target::Off {
        return;
    }
    let folder = folder.map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.to_path_buf()));
    let entry = entry::of(record, folder.as_deref(), None);
    match open(target).and_then(|mut store| entry::insert(&mut store, &entry)) {
        // Said on stderr (silent under -q): a run writes into a store the user may not know of.
        Ok(entry::Inserted::New(id)) => {
            taskmeter_console::progressln!(
                "history: recorded as run {id} in {}; --no-history to skip",
                target.describe()
            )
        }
        Ok(entry::Inserted::Already(id)) => {
            taskmeter_console::progressln!("history: already there as run {id} in {}", target.describe())
        }
        Err(why) => {
            taskmeter_console::errln!(
                "taskmeter: warning: the run was not recorded in the history ({}): {why}",
                target.describe()
            )
        }
    }
}
