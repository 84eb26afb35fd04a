//! The history on a real PostgreSQL server (never a mock): a throw-away cluster made with
//! initdb and started with pg_ctl under a temporary folder, listening only on a Unix socket in
//! that folder, stopped at the end. tests/setup.sh installs Debian's `postgresql` when missing;
//! as root, the cluster runs as `nobody` (initdb refuses root). Without PostgreSQL the tests
//! say `SKIPPED: why`, and fail under CI=true.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::{stderr, stdout, taskmeter, Background};

/// A PostgreSQL cluster of one test.
struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

/// The folder of initdb and pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql/N/bin.
fn postgres_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file());
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> =
            std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        versions.into_iter().rev().find(|d| d.join("initdb").is_file())
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Cluster {
    /// Makes and starts a cluster, or says why it cannot.
    fn start() -> Result<Cluster, String> {
        let bin =
            postgres_bin().ok_or("PostgreSQL's initdb and pg_ctl are not installed (tests/setup.sh installs them)")?;
        let dir = tempfile::Builder::new().prefix("taskmeter-pg").tempdir().map_err(|e| e.to_string())?;
        let cluster = Cluster { dir, bin };
        std::fs::create_dir(cluster.data()).map_err(|e| e.to_string())?;
        if is_root() {
            // initdb refuses root: the cluster's files belong to nobody, who must reach them.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(cluster.dir.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
            let chown = Command::new("chown").arg("nobody").arg(cluster.data()).arg(cluster.dir.path()).status();
            if !chown.is_ok_and(|s| s.success()) {
                return Err("cannot give the cluster's folder to the user nobody".into());
            }
        }
        cluster.pg(
            "initdb",
            &["-D", path(&cluster.data()), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"],
        )?;
        cluster.control("start")?;
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The URL of its `postgres` database, through the socket in the folder.
    fn url(&self) -> String {
        format!("postgresql://postgres@/postgres?host={}", self.dir.path().display())
    }

    /// Runs a PostgreSQL program (as nobody when root).
    fn pg(&self, program: &str, args: &[&str]) -> Result<Output, String> {
        let program = self.bin.join(program);
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "nobody", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let output = command.args(args).current_dir("/").output().map_err(|e| format!("{}: {e}", program.display()))?;
        if !output.status.success() {
            return Err(format!("{} {args:?} failed: {}{}", program.display(), stdout(&output), stderr(&output)));
        }
        Ok(output)
    }

    /// pg_ctl start or stop (immediately: a server that goes away).
    fn control(&self, action: &str) -> Result<(), String> {
        let options = format!("-k {} -c listen_addresses='' -c fsync=off", self.dir.path().display());
        let log = self.dir.path().join("server.log");
        let data = self.data();
        let args = match action {
            "start" => vec!["-D", path(&data), "-l", path(&log), "-w", "-t", "60", "-o", &options, "start"],
            _ => vec!["-D", path(&data), "-m", "immediate", "-w", "stop"],
        };
        self.pg("pg_ctl", &args).map(|_| ())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.control("stop");
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A cluster, or None after saying why the test is skipped.
fn cluster() -> Option<Cluster> {
    match Cluster::start() {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            common::skip(&format!("no PostgreSQL server: {why}"));
            None
        }
    }
}

fn history(url: &str, args: &[&str]) -> Output {
    taskmeter().args(args).arg("--history").arg(url).output().unwrap()
}

fn listed(url: &str) -> Vec<Value> {
    let output = history(url, &["history", "list", "--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_str::<Value>(&stdout(&output)).unwrap().as_array().unwrap().clone()
}

#[test]
fn concurrent_writers_all_arrive_once() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    // Four runs at once on a new database: the schema is made once, every run arrives.
    let runs: Vec<_> = (0..4)
        .map(|i| {
            let folder = dir.path().join("results").join(format!("run{i}"));
            taskmeter()
                .args(["run", "--quick", "--runtimes", "thread", "-q", "--label", &format!("w{i}"), "--history", &url])
                .arg("-o")
                .arg(&folder)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let output = run.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(stderr(&output).is_empty(), "{}", stderr(&output));
    }
    let mut labels: Vec<String> = listed(&url).iter().map(|r| r["label"].as_str().unwrap().to_string()).collect();
    labels.sort();
    assert_eq!(labels, ["w0", "w1", "w2", "w3"]);
    // Imported again: nothing new.
    let said = stdout(&history(&url, &["history", "import", path(&dir.path().join("results"))]));
    assert!(said.contains("imported 0 run(s)") && said.contains("4 already there"), "{said}");
    assert_eq!(listed(&url).len(), 4);
    // The same statistics as SQLite keeps: show, trend and compare read them.
    let shown = stdout(&history(&url, &["history", "show", "1"]));
    assert!(shown.contains("lateness") && shown.contains("p99"), "{shown}");
    let compared = history(&url, &["history", "compare", "--by", "label", "w0", "w1"]);
    assert!(matches!(compared.status.code(), Some(0 | 1)), "{}", stderr(&compared));
    assert!(stdout(&compared).contains("label w0"), "{}", stdout(&compared));
}

#[test]
fn a_server_that_goes_away_costs_one_warning_line() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(listed(&url).len(), 0); // the schema exists: the run would only insert
    let folder = dir.path().join("gone");
    let run = Background::start(
        &[
            "run",
            "--runtimes",
            "thread",
            "--duration",
            "2s",
            "--warmup",
            "0",
            "-q",
            "--history",
            &url,
            "-o",
            path(&folder),
        ],
        &[],
    );
    std::thread::sleep(Duration::from_millis(500));
    cluster.control("stop").unwrap();
    let done = run.finish();
    assert_eq!(done.status.code(), Some(0), "the exit status is the run's: {}", done.stderr);
    assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
    assert!(done.stderr.starts_with("taskmeter: warning: the run was not recorded in the history"), "{}", done.stderr);
    assert!(done.stderr.contains("cannot connect to"), "the error is named: {}", done.stderr);
    assert!(folder.join("run.json").is_file(), "the folder is written");

    // Back up: the folder imports, once.
    cluster.control("start").unwrap();
    for expected in ["imported 1 run(s)", "imported 0 run(s)"] {
        let said = stdout(&history(&url, &["history", "import", path(&folder)]));
        assert!(said.contains(expected), "{said}");
    }
    assert_eq!(listed(&url).len(), 1);
}
