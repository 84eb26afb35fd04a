//! examples/slurm end to end on a one-node Slurm cluster made for the test: a munged with its
//! own key and socket, a slurmctld and a slurmd on free ports with a minimal slurm.conf for
//! this host, all under a temporary folder and stopped at the end; the runs go to a throw-away
//! PostgreSQL cluster. `compare-nodes.sh 2` submits a job array of two tasks with `sbatch
//! --wait`; both runs must arrive in the history. Needs root (slurmd runs the jobs), Debian's
//! `slurm-wlm` and `munge` (tests/setup.sh installs them) and PostgreSQL; without them the test
//! says `SKIPPED: why` (a failure under CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::postgres::{cluster, is_root, path};
use common::{stderr, stdout, taskmeter};

/// munged, slurmctld and slurmd of one test, stopped (by their pid files) when dropped.
struct Slurm {
    dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn hostname() -> String {
    let output = Command::new("hostname").arg("-s").output().unwrap();
    stdout(&output).trim().to_string()
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{command:?} failed: {}{}", stdout(&output), stderr(&output)));
    }
    Ok(())
}

impl Slurm {
    fn start() -> Result<Slurm, String> {
        for program in ["/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"] {
            if !Path::new(program).is_file() {
                return Err(format!("{program} is not installed (tests/setup.sh installs slurm-wlm and munge)"));
            }
        }
        let dir = tempfile::Builder::new().prefix("taskmeter-slurm").tempdir().map_err(|e| e.to_string())?;
        let slurm = Slurm { dir };
        let at = |name: &str| slurm.dir.path().join(name);
        for folder in ["munge", "state", "spool", "results"] {
            std::fs::create_dir(at(folder)).map_err(|e| e.to_string())?;
        }
        use std::os::unix::fs::PermissionsExt;
        let key: Vec<u8> = (0..1024).map(|_| fastrand::u8(..)).collect();
        std::fs::write(at("munge/munge.key"), key).map_err(|e| e.to_string())?;
        for (file, mode) in [("munge/munge.key", 0o400), ("munge", 0o700)] {
            std::fs::set_permissions(at(file), std::fs::Permissions::from_mode(mode)).map_err(|e| e.to_string())?;
        }
        let socket = at("munge/munge.socket");
        run(Command::new("/usr/sbin/munged")
            .arg("--force")
            .arg(format!("--key-file={}", path(&at("munge/munge.key"))))
            .arg(format!("--socket={}", path(&socket)))
            .arg(format!("--pid-file={}", path(&at("munged.pid"))))
            .arg(format!("--log-file={}", path(&at("munged.log"))))
            .arg(format!("--seed-file={}", path(&at("munge/seed")))))?;
        let host = hostname();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let conf = format!(
            "ClusterName=taskmeter\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={}\nSlurmdPort={}\n\
             SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={}\n\
             StateSaveLocation={}\nSlurmdSpoolDir={}\nSlurmctldPidFile={}\nSlurmdPidFile={}\n\
             SlurmctldLogFile={}\nSlurmdLogFile={}\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nMpiDefault=none\n\
             ReturnToService=2\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
            path(&socket),
            path(&at("state")),
            path(&at("spool")),
            path(&at("slurmctld.pid")),
            path(&at("slurmd.pid")),
            path(&at("slurmctld.log")),
            path(&at("slurmd.log")),
        );
        std::fs::write(at("slurm.conf"), conf).map_err(|e| e.to_string())?;
        run(Command::new("/usr/sbin/slurmctld").arg("-f").arg(at("slurm.conf")).arg("-i"))?;
        run(Command::new("/usr/sbin/slurmd").arg("-f").arg(at("slurm.conf")))?;
        let started = Instant::now();
        loop {
            let state = slurm.command("sinfo").args(["-h", "-o", "%T"]).output().map(|o| stdout(&o));
            if state.as_deref().is_ok_and(|s| s.trim() == "idle") {
                return Ok(slurm);
            }
            if started.elapsed() > Duration::from_secs(60) {
                let log = std::fs::read_to_string(at("slurmctld.log")).unwrap_or_default();
                return Err(format!("the node did not become idle within 60 s ({state:?}); slurmctld.log:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// A Slurm client command for this cluster.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SLURM_CONF", self.dir.path().join("slurm.conf"));
        command
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for daemon in ["slurmd", "slurmctld", "munged"] {
            let file = self.dir.path().join(format!("{daemon}.pid"));
            let Some(pid) = std::fs::read_to_string(&file).ok().and_then(|p| p.trim().parse::<i32>().ok()) else {
                continue;
            };
            // SAFETY: a signal to the daemon this test started, named by its pid file.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let until = Instant::now() + Duration::from_secs(15);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn a_job_array_records_every_node_in_the_shared_history() {
    if !is_root() {
        common::skip("the Slurm test runs slurmd, which needs root");
        return;
    }
    let Some(postgres) = cluster() else { return };
    let slurm = match Slurm::start() {
        Ok(slurm) => slurm,
        Err(why) => {
            common::skip(&format!("no Slurm cluster: {why}"));
            return;
        }
    };
    let url = postgres.url();
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/slurm");
    let results = slurm.dir.path().join("results");
    let output = slurm
        .command(path(&examples.join("compare-nodes.sh")))
        .arg("2")
        .arg(format!("--chdir={}", path(slurm.dir.path())))
        .arg(format!("--output={}/taskmeter-%A_%a.out", path(slurm.dir.path())))
        .env("TASKMETER_HISTORY", &url)
        .env("TASKMETER", env!("CARGO_BIN_EXE_taskmeter"))
        .env("TASKMETER_ARGS", "run --quick --runtimes thread -q")
        .env("TASKMETER_INVOCATIONS", "2")
        .env("TASKMETER_RESULTS", &results)
        .output()
        .unwrap();
    let (out, err) = (stdout(&output), stderr(&output));
    let job = err.lines().find_map(|l| l.strip_prefix("job ")).and_then(|l| l.split(':').next()).unwrap_or_else(|| {
        let logs: Vec<String> = std::fs::read_dir(slurm.dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".out"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
            .collect();
        panic!("the array did not run: {out}{err}\njob logs: {logs:?}")
    });
    // Both tasks' runs (2 invocations each) arrived, labelled with the array's job id, from this one node.
    let listed = taskmeter()
        .args(["history", "list", "--format", "json", "--label", &format!("slurm-{job}"), "--history", &url])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 4, "2 tasks x 2 invocations: {runs}\n{out}{err}");
    assert_eq!(std::fs::read_dir(&results).unwrap().count(), 4, "four results folders");
    // One node is one machine: the comparison by machine says so rather than judging.
    assert_eq!(output.status.code(), Some(2), "{out}{err}");
    assert!(err.contains(&format!("only one machine ({})", hostname())), "{err}");
}
