//! The store: one SQL schema on two engines, an embedded SQLite file (the default) or a shared
//! PostgreSQL server, chosen by where the history is (`Target`). The rest of `history` speaks
//! through [`Store::execute`] and [`Store::query`] with [`Value`]s; placeholders are `$1`,
//! `$2`..., which both engines read (SQLite as named parameters, numbered in order).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the history is kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// `--no-history` (or `TASKMETER_HISTORY=off`): nothing is recorded.
    Off,
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
    /// The default place cannot be found (no HOME): why. A run is measured all the same and
    /// says once that it was not recorded; the history commands refuse.
    Unplaced(String),
}

/// The environment variable that names the history when no flag does.
pub const ENV: &str = "TASKMETER_HISTORY";

/// How long a writer waits for another writer's lock on the SQLite file before it gives up.
const SQLITE_BUSY: Duration = Duration::from_secs(2);

/// How long a connection to PostgreSQL may take when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Target {
    /// The history a command uses: `--no-history`, else `--history`, else `TASKMETER_HISTORY`,
    /// else `$XDG_DATA_HOME/taskmeter/history.sqlite` (`~/.local/share/...`).
    pub fn choose(history: Option<&str>, no_history: bool) -> Result<Target, String> {
        if no_history {
            return Ok(Target::Off);
        }
        if let Some(given) = history {
            return Target::parse(given);
        }
        match std::env::var(ENV) {
            Ok(value) if value == "off" => Ok(Target::Off),
            Ok(value) if !value.is_empty() => Target::parse(&value),
            _ => Ok(Target::default_path().map_or_else(Target::Unplaced, Target::Sqlite)),
        }
    }

    /// A path or a PostgreSQL URL; any other URL is refused.
    pub fn parse(given: &str) -> Result<Target, String> {
        if given.starts_with("postgres://") || given.starts_with("postgresql://") {
            given.parse::<postgres::Config>().map_err(|e| format!("bad PostgreSQL URL '{}': {e}", redact(given)))?;
            return Ok(Target::Postgres(given.to_string()));
        }
        if let Some((scheme, _)) = given.split_once("://") {
            return Err(format!("unknown history URL scheme '{scheme}' (a file path, or postgres:// / postgresql://)"));
        }
        if given.is_empty() {
            return Err("--history needs a file path or a postgres:// URL".into());
        }
        Ok(Target::Sqlite(PathBuf::from(given)))
    }

    fn default_path() -> Result<PathBuf, String> {
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                Some(home) => PathBuf::from(home).join(".local/share"),
                None => {
                    return Err("neither XDG_DATA_HOME nor HOME is set, so the history has no place \
                                (give --history FILE, or --no-history)"
                        .into())
                }
            },
        };
        Ok(data.join("taskmeter").join("history.sqlite"))
    }

    /// The history as said to the user (a URL without its password).
    pub fn describe(&self) -> String {
        match self {
            Target::Off => "no history".into(),
            Target::Unplaced(_) => "no place for the history".into(),
            Target::Sqlite(path) => path.display().to_string(),
            Target::Postgres(url) => redact(url),
        }
    }
}

/// A URL with the password of its user part replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{name}:***@{host}{}", &rest[end..])
        }
        _ => url.to_string(),
    }
}

/// A value bound to or read from a statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Value {
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Real(v) => Some(*v as i64),
            _ => None,
        }
    }

    pub fn real(&self) -> Option<f64> {
        match self {
            Value::Int(v) => Some(*v as f64),
            Value::Real(v) => Some(*v),
            _ => None,
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The text, or "" for NULL.
    pub fn string(&self) -> String {
        match self {
            Value::Text(t) => t.clone(),
            Value::Int(v) => v.to_string(),
            Value::Real(v) => v.to_string(),
            Value::Null => String::new(),
        }
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        if v.is_finite() {
            Value::Real(v)
        } else {
            Value::Null
        }
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        })
    }
}

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match self {
            Value::Null => Ok(postgres::types::IsNull::Yes),
            Value::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) if *ty == Type::FLOAT8 => (*v as f64).to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(t) => t.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// Which SQL a statement is written in, where the two engines differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

enum Engine {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

/// An open history, its schema migrated to the newest version.
pub struct Store {
    engine: Engine,
    target: Target,
}

/// An engine's error as one line.
fn line(e: impl std::fmt::Display) -> String {
    e.to_string().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

impl Store {
    /// Connects (creating a SQLite file and its folder when missing); `history::open` also
    /// migrates.
    pub fn connect(target: &Target) -> Result<Store, String> {
        let engine = match target {
            Target::Off => return Err("the history is off (--no-history or TASKMETER_HISTORY=off)".into()),
            Target::Unplaced(why) => return Err(why.clone()),
            Target::Sqlite(path) => Engine::Sqlite(open_sqlite(path)?),
            Target::Postgres(url) => {
                let mut config: postgres::Config = url.parse().map_err(line)?;
                if config.get_connect_timeout().is_none() {
                    config.connect_timeout(CONNECT_TIMEOUT);
                }
                let client = config.connect(postgres::NoTls).map_err(|e| {
                    let cause = std::error::Error::source(&e).map(|c| format!(": {}", line(c))).unwrap_or_default();
                    format!("cannot connect to {}: {}{cause}", target.describe(), line(&e))
                })?;
                let mut client = client;
                // A commit need not wait for the server's disk: a server crash may lose the
                // last runs, whose folders are the artefact (`history import`).
                client.batch_execute("SET synchronous_commit = off").map_err(|e| pg_error(&e))?;
                Engine::Postgres(Box::new(client))
            }
        };
        Ok(Store { engine, target: target.clone() })
    }

    pub fn dialect(&self) -> Dialect {
        match self.engine {
            Engine::Sqlite(_) => Dialect::Sqlite,
            Engine::Postgres(_) => Dialect::Postgres,
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs statements without parameters (`;`-separated).
    pub fn batch(&mut self, sql: &str) -> Result<(), String> {
        match &mut self.engine {
            Engine::Sqlite(c) => c.execute_batch(sql).map_err(line),
            Engine::Postgres(c) => c.batch_execute(sql).map_err(|e| pg_error(&e)),
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, String> {
        match &mut self.engine {
            Engine::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql).map_err(line)?;
                statement.execute(rusqlite::params_from_iter(params)).map(|n| n as u64).map_err(line)
            }
            Engine::Postgres(c) => c.execute(sql, &pg_params(params)).map_err(|e| pg_error(&e)),
        }
    }

    /// Runs one query; its rows, each a value per column.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, String> {
        match &mut self.engine {
            Engine::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql).map_err(line)?;
                let columns = statement.column_count();
                let rows = statement
                    .query_map(rusqlite::params_from_iter(params), |row| {
                        (0..columns).map(|i| row.get_ref(i).map(sqlite_value)).collect::<Result<Vec<_>, _>>()
                    })
                    .map_err(line)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(line)
            }
            Engine::Postgres(c) => {
                let rows = c.query(sql, &pg_params(params)).map_err(|e| pg_error(&e))?;
                rows.iter().map(pg_row).collect()
            }
        }
    }

    /// Runs `work` in a transaction: committed when it succeeds, rolled back when it fails. On
    /// SQLite the write lock is taken at the start, so two writers queue instead of failing.
    pub fn transaction<T>(&mut self, work: impl FnOnce(&mut Store) -> Result<T, String>) -> Result<T, String> {
        self.batch(match self.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        })?;
        match work(self) {
            Ok(value) => {
                self.batch("COMMIT")?;
                Ok(value)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let connection =
        rusqlite::Connection::open(path).map_err(|e| format!("cannot open {}: {}", path.display(), line(e)))?;
    connection.busy_timeout(SQLITE_BUSY).map_err(line)?;
    // No checkpoint when the last connection closes: its fsyncs would cost most of what
    // recording a run costs. The write-ahead log stays beside the file and is checkpointed by
    // SQLite's automatic checkpoint (every 1000 pages) in some later commit.
    connection.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true).map_err(line)?;
    // WAL lets readers go on while a run is recorded; NORMAL sync is durable enough for a
    // history whose results folders are the artefact.
    connection
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(|e| format!("cannot use {}: {}", path.display(), line(e)))?;
    Ok(connection)
}

fn sqlite_value(v: rusqlite::types::ValueRef) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

fn pg_params(params: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn postgres::types::ToSql + Sync)).collect()
}

/// A PostgreSQL error as one line, with the server's message when there is one.
fn pg_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {}", line(db.message())),
        None => {
            let cause = std::error::Error::source(e).map(|c| format!(": {}", line(c))).unwrap_or_default();
            format!("PostgreSQL: {}{cause}", line(e))
        }
    }
}

fn pg_row(row: &postgres::Row) -> Result<Vec<Value>, String> {
    use postgres::types::Type;
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_().clone();
            let got = if ty == Type::INT8 {
                row.try_get::<_, Option<i64>>(i).map(|v| v.map(Value::Int))
            } else if ty == Type::INT4 {
                row.try_get::<_, Option<i32>>(i).map(|v| v.map(|v| Value::Int(v.into())))
            } else if ty == Type::INT2 {
                row.try_get::<_, Option<i16>>(i).map(|v| v.map(|v| Value::Int(v.into())))
            } else if ty == Type::FLOAT8 {
                row.try_get::<_, Option<f64>>(i).map(|v| v.map(Value::Real))
            } else if ty == Type::FLOAT4 {
                row.try_get::<_, Option<f32>>(i).map(|v| v.map(|v| Value::Real(v.into())))
            } else if ty == Type::NUMERIC {
                return Err(format!("column {} is NUMERIC: cast it to DOUBLE PRECISION", row.columns()[i].name()));
            } else {
                row.try_get::<_, Option<String>>(i).map(|v| v.map(Value::Text))
            };
            got.map(|v| v.unwrap_or(Value::Null)).map_err(|e| pg_error(&e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_chosen_by_what_is_given() {
        assert_eq!(Target::choose(Some("/x/h.sqlite"), true).unwrap(), Target::Off);
        assert_eq!(Target::parse("h.sqlite").unwrap(), Target::Sqlite("h.sqlite".into()));
        assert!(matches!(Target::parse("postgresql://u@localhost/db").unwrap(), Target::Postgres(_)));
        assert!(Target::parse("mysql://x").unwrap_err().contains("unknown history URL scheme 'mysql'"));
        assert!(Target::parse("postgres://u@h:notaport/db").unwrap_err().starts_with("bad PostgreSQL URL"));
    }

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(redact("postgres://u:secret@h:5432/db?x=1"), "postgres://u:***@h:5432/db?x=1");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn sqlite_answers_numbered_placeholders_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::connect(&Target::Sqlite(dir.path().join("a/b.sqlite"))).unwrap();
        let rows = store.query("SELECT $1, $2, $3, $4", &["x".into(), Value::Int(3), Value::Real(1.5), Value::Null]);
        assert_eq!(rows.unwrap(), vec![vec![Value::Text("x".into()), Value::Int(3), Value::Real(1.5), Value::Null]]);
    }
}
