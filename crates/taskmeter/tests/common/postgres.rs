//! A throw-away PostgreSQL cluster for the history's tests (never a mock): made with initdb
//! and started with pg_ctl under a temporary folder, listening only on a Unix socket in that
//! folder, stopped when dropped. As root, the cluster runs as `nobody` (initdb refuses root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A PostgreSQL cluster of one test.
pub struct Cluster {
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

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Cluster {
    /// Makes and starts a cluster, or says why it cannot.
    pub fn start() -> Result<Cluster, String> {
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
    pub fn url(&self) -> String {
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
            return Err(format!(
                "{} {args:?} failed: {}{}",
                program.display(),
                super::stdout(&output),
                super::stderr(&output)
            ));
        }
        Ok(output)
    }

    /// pg_ctl start or stop (immediately: a server that goes away).
    pub fn control(&self, action: &str) -> Result<(), String> {
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

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A cluster, or None after saying why the test is skipped.
pub fn cluster() -> Option<Cluster> {
    match Cluster::start() {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            super::skip(&format!("no PostgreSQL server: {why}"));
            None
        }
    }
}
