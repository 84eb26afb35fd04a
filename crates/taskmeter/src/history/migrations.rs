//! The history's schema, as numbered migrations (docs/history.md describes each table). A store
//! records its version in `taskmeter_schema`; opening it applies the migrations it lacks, in one
//! transaction under a lock (SQLite's write lock, a PostgreSQL advisory lock), so two taskmeters
//! opening a new store at once create it once. A store newer than this taskmeter is refused.

use super::store::{Dialect, Store};

/// The key of the PostgreSQL advisory lock migrations hold ("tm" and 26).
const LOCK_KEY: i64 = 0x746d_0026;

/// The migrations, oldest first; `{id}` is the dialect's auto-numbered key.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    "CREATE TABLE runs (
        id {id},
        identity TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        experiment TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        complete BIGINT NOT NULL,
        incomplete_reason TEXT,
        machine TEXT NOT NULL,
        cpu_model TEXT NOT NULL,
        kernel TEXT NOT NULL,
        taskmeter_version TEXT NOT NULL,
        label TEXT,
        folder TEXT,
        command_line TEXT NOT NULL,
        settings TEXT NOT NULL,
        environment TEXT NOT NULL,
        recorded_at TEXT NOT NULL
    );
    CREATE INDEX runs_started ON runs (started_at);
    CREATE TABLE measurements (
        run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        subject TEXT NOT NULL,
        point TEXT NOT NULL,
        repetition BIGINT NOT NULL,
        status TEXT NOT NULL,
        version TEXT,
        metric TEXT NOT NULL,
        stat TEXT NOT NULL,
        value DOUBLE PRECISION
    );
    CREATE INDEX measurements_run ON measurements (run_id);
    CREATE INDEX measurements_series ON measurements (subject, metric, stat);",
)];

/// The schema version this taskmeter writes.
pub fn newest() -> i64 {
    MIGRATIONS.last().map_or(0, |(v, _)| *v)
}

/// Brings `store` to the newest version.
pub fn migrate(store: &mut Store) -> Result<(), String> {
    let dialect = store.dialect();
    // Nothing to do, the common case, without a write lock.
    if current(store).ok() == Some(newest()) {
        return Ok(());
    }
    store.transaction(|store| {
        if dialect == Dialect::Postgres {
            store.query("SELECT pg_advisory_xact_lock($1)::text", &[LOCK_KEY.into()])?;
        }
        store.batch("CREATE TABLE IF NOT EXISTS taskmeter_schema (version BIGINT NOT NULL)")?;
        let have = current(store)?;
        if have > newest() {
            return Err(format!(
                "the history has schema version {have}, newer than this taskmeter's {}: upgrade taskmeter",
                newest()
            ));
        }
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > have) {
            let id = match dialect {
                Dialect::Sqlite => "INTEGER PRIMARY KEY",
                Dialect::Postgres => "BIGSERIAL PRIMARY KEY",
            };
            store.batch(&sql.replace("{id}", id)).map_err(|e| format!("migration {version}: {e}"))?;
            store.execute("DELETE FROM taskmeter_schema", &[])?;
            store.execute("INSERT INTO taskmeter_schema (version) VALUES ($1)", &[(*version).into()])?;
        }
        Ok(())
    })
}

/// The store's version (0 when new).
fn current(store: &mut Store) -> Result<i64, String> {
    let rows = store.query("SELECT MAX(version) FROM taskmeter_schema", &[])?;
    Ok(rows.first().and_then(|r| r.first()).and_then(|v| v.int()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::super::store::Target;
    use super::*;

    fn open(target: &Target) -> Store {
        let mut store = Store::connect(target).unwrap();
        migrate(&mut store).unwrap();
        store
    }

    #[test]
    fn a_new_store_gets_the_newest_schema_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::Sqlite(dir.path().join("h.sqlite"));
        let mut store = open(&target);
        assert_eq!(current(&mut store).unwrap(), newest());
        drop(store);
        let mut again = open(&target);
        assert_eq!(again.query("SELECT COUNT(*) FROM taskmeter_schema", &[]).unwrap()[0][0].int(), Some(1));
    }

    #[test]
    fn a_newer_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target::Sqlite(dir.path().join("h.sqlite"));
        let mut store = open(&target);
        store.execute("UPDATE taskmeter_schema SET version = 99", &[]).unwrap();
        drop(store);
        let refused = Store::connect(&target).and_then(|mut s| migrate(&mut s)).err().unwrap();
        assert!(refused.contains("schema version 99, newer than"), "{refused}");
    }
}
