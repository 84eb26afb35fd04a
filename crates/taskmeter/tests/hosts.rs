//! Every host as its users have it (docs/containers.md): taskmeter run as a container runs it,
//! without `CAP_SYS_NICE` (setpriv), in a cpu cgroup with no real-time runtime, under a pids
//! limit, with Go, Java and Node missing and uvloop unimportable. What the host refuses is
//! skipped with the reason and what would grant it; everything else is measured, nothing is
//! lost, and the exit status is 0. Also: a run with no place for its history.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The toolchains a container of the host lacks, hidden from PATH (and the JDKs from
/// /usr/lib/jvm, in a mount namespace of its own).
const HIDDEN: &[&str] = &["go", "gofmt", "node", "nodejs", "npm", "npx", "corepack", "java", "javac", "jar", "jshell"];

/// A container's view of this machine for the commands of one test; its cgroups go with it.
struct Container {
    dir: tempfile::TempDir,
    cgroups: Vec<PathBuf>,
}

impl Container {
    /// Made as root (cgroups, a mount namespace); None, and the test skipped, otherwise.
    fn new(pids_max: u32) -> Option<Container> {
        if !root("a container's view (cgroups, a mount namespace)") {
            return None;
        }
        let cpu = Path::new("/sys/fs/cgroup/cpu");
        if !cpu.join("cpu.rt_runtime_us").exists() {
            skip("no cgroup v1 cpu controller with real-time group scheduling (cpu.rt_runtime_us)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let name = format!("taskmeter-hosts-{}", dir.path().file_name().unwrap().to_string_lossy());
        let (cpu, pids) = (cpu.join(&name), Path::new("/sys/fs/cgroup/pids").join(&name));
        std::fs::create_dir(&cpu).unwrap();
        std::fs::create_dir(&pids).unwrap();
        // A new cpu cgroup has no real-time runtime: root is refused SCHED_FIFO there too.
        assert_eq!(std::fs::read_to_string(cpu.join("cpu.rt_runtime_us")).unwrap().trim(), "0");
        std::fs::write(pids.join("pids.max"), pids_max.to_string()).unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        for entry in std::fs::read_dir("/usr/bin").unwrap().flatten() {
            let name = entry.file_name();
            if !HIDDEN.contains(&name.to_string_lossy().as_ref()) {
                std::os::unix::fs::symlink(entry.path(), bin.join(&name)).unwrap();
            }
        }
        // `import uvloop` fails, as where it was never installed.
        let python = dir.path().join("python/uvloop");
        std::fs::create_dir_all(&python).unwrap();
        std::fs::write(python.join("__init__.py"), "raise ImportError('uvloop is hidden from this test')\n").unwrap();
        Some(Container { dir, cgroups: vec![cpu, pids] })
    }

    /// `taskmeter ARGS` inside: the cgroups joined, /usr/lib/jvm empty, CAP_SYS_NICE dropped.
    fn run(&self, args: &[&str]) -> Output {
        let join: String = self.cgroups.iter().map(|c| format!("echo $$ > {}/cgroup.procs && ", c.display())).collect();
        let script = format!(
            "mount -t tmpfs tmpfs /usr/lib/jvm && {join}exec setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice -- \"$@\""
        );
        // PATH with /usr/bin replaced by the copy without the hidden programs, and without
        // /bin (the same folder, where /usr is merged) and any other folder holding one (Go's).
        let path: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .filter_map(|p| match p.to_str() {
                Some("/usr/bin") => Some(self.dir.path().join("bin")),
                Some("/bin") => None,
                _ => Some(p).filter(|p| !HIDDEN.iter().any(|h| p.join(h).exists())),
            })
            .collect();
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "--", "sh", "-c", &script, "sh"])
            .arg(env!("CARGO_BIN_EXE_taskmeter"))
            .args(args)
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("PYTHONPATH", self.dir.path().join("python"))
            .env("TASKMETER_HISTORY", "off")
            .env("TASKMETER_CACHE_DIR", self.dir.path().join("cache"))
            .env_remove("JAVA_HOME")
            .stdin(std::process::Stdio::null());
        command.output().expect("unshare and setpriv (util-linux) run")
    }

    fn folder(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Every process inside has exited: the cgroups are empty.
        for cgroup in &self.cgroups {
            let _ = std::fs::remove_dir(cgroup);
        }
    }
}

fn said(output: &Output) -> String {
    format!("{}{}", stdout(output), stderr(output))
}

/// Within the container: what `list` says is available there.
fn available_inside(container: &Container) -> Vec<String> {
    let output = container.run(&["list", "--format", "json"]);
    assert!(output.status.success(), "{}", said(&output));
    let list: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let runtimes = list["runtimes"].as_array().unwrap();
    for hidden in ["go", "java-thread", "node"] {
        let row = runtimes.iter().find(|r| r["id"] == hidden).unwrap();
        assert_eq!(row["available"], false, "{hidden} is hidden: {row}");
        assert!(row["reason"].as_str().unwrap().contains("(install: "), "{hidden} says how to install it: {row}");
    }
    runtimes.iter().filter(|r| r["available"] == true).map(|r| r["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn in_a_container_the_recipes_run_whole_and_skip_what_the_host_refuses() {
    let Some(container) = Container::new(4096) else { return };
    let folder = container.folder("recipes");
    let output = container.run(&["run", "recipes", "--quick", "-o", folder.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    // The env line wraps at 100 columns: joined again.
    let table = unwrapped(&stdout(&output));
    assert!(table.contains("privileges: ") && table.contains("(refused: fifo/rr, negative nice"), "{table}");
    let record = run_json(&folder);
    let rows = record["rows"].as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["runtime"] == id).unwrap_or_else(|| panic!("no row {id}"));
    for fifo in ["thread+fifo", "c-thread+fifo", "python-thread+fifo"] {
        let reason = row(fifo)["reason"].as_str().unwrap();
        assert_eq!(row(fifo)["status"], "skipped", "{fifo}");
        assert!(reason.starts_with("the host refuses policy fifo:1"), "{fifo}: {reason}");
        // Both what is missing here and what grants each.
        assert!(reason.contains("--cap-add SYS_NICE") && reason.contains("--cpu-rt-runtime"), "{reason}");
    }
    let uvloop = row("python-asyncio/uvloop");
    assert_eq!(uvloop["status"], "skipped");
    assert!(uvloop["reason"].as_str().unwrap().contains("(install: pip install uvloop)"), "{uvloop}");
    for hidden in ["go", "java-thread", "node/hybrid"] {
        assert_eq!(row(hidden)["status"], "skipped", "{hidden}");
    }
    // Every row that could run ran whole, and the console says what was not measured.
    for r in rows.iter().filter(|r| r["status"] != "skipped") {
        assert_eq!(r["status"], "ok", "{}: {}", r["runtime"], r["reason"]);
        assert_eq!(r["counts"]["samples_lost"], 0, "{}", r["runtime"]);
    }
    assert!(table.contains("not measured at ") && table.contains("thread+fifo"), "{table}");
}

#[test]
fn in_a_container_every_runtime_present_passes_check_driver() {
    let Some(container) = Container::new(4096) else { return };
    let present = available_inside(&container);
    for expected in ["thread", "c-thread", "python-asyncio"] {
        assert!(present.iter().any(|p| p == expected), "{expected} is present: {present:?}");
    }
    // Two at a time: each check mostly waits on short plans.
    let verdicts: Vec<(String, Output)> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<String>> = present.chunks(present.len().div_ceil(2)).map(<[String]>::to_vec).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let container = &container;
                scope.spawn(move || {
                    chunk.into_iter().map(|id| (id.clone(), container.run(&["check-driver", &id]))).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    for (runtime, output) in &verdicts {
        let text = stdout(output);
        assert_eq!(output.status.code(), Some(0), "{runtime}:\n{}", said(output));
        assert!(!text.contains("FAIL"), "{runtime}:\n{text}");
        if runtime == "python-asyncio" {
            assert!(text.contains("skip waits with its recipe uvloop: needs the uvloop package"), "{text}");
            assert!(text.contains("checks passed, 1 skipped"), "{text}");
        }
    }
}

#[test]
fn in_a_container_every_preset_exits_0() {
    let Some(container) = Container::new(4096) else { return };
    let presets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    // Each preset as written, made short: what it sweeps and whom it runs stay.
    let cases: &[(&str, &[&str])] = &[
        ("nanosleep-study", &["--duration", "150ms"]),
        ("volume-study", &["--units", "1,100", "--duration", "300ms", "--warmup", "100ms"]),
        ("atomic-sum-study", &["--units", "1,100", "--duration", "300ms", "--warmup", "100ms"]),
        (
            "granularity-metg",
            &["--task-busy", "1ms,10us", "--duration", "20ms", "--warmup", "5ms", "--steps", "10", "--repeat", "1"],
        ),
        ("wasm-receiver-study", &["--receivers", "thread,c-thread", "--senders", "1,2", "--messages", "200"]),
    ];
    for (preset, short) in cases {
        let path = presets.join(format!("{preset}.toml"));
        let folder = container.folder(preset);
        let args = [&["run", path.to_str().unwrap()][..], short, &["-o", folder.to_str().unwrap()]].concat();
        let output = container.run(&args);
        assert_eq!(output.status.code(), Some(0), "{preset}:\n{}", said(&output));
        assert!(folder.exists(), "{preset}: its results folder");
        if *preset == "nanosleep-study" {
            // Its real-time points are skipped rows, with the reason under the table.
            let table = unwrapped(&stdout(&output));
            assert!(table.contains("skipped at policy=fifo:99: the host refuses policy fifo:99"), "{table}");
            assert!(table.lines().any(|l| l.starts_with("c-thread") && l.contains(" other ")), "{table}");
        }
    }
}

#[test]
fn in_a_container_rows_at_a_pids_limit_are_partial_name_it_and_lose_nothing() {
    const PIDS_MAX: u32 = 400;
    let Some(container) = Container::new(PIDS_MAX) else { return };
    let folder = container.folder("room");
    // Far more units than the limit allows, each waking every 50 µs: the writer, at normal
    // priority among them, falls behind, and units write their own rings.
    let run = ["run", "--runtimes", "thread,c-thread", "--units", "2000", "--sleep", "fixed:50us", "--busy", "0"];
    let args = [&run[..], &["--duration", "1s", "--warmup", "200ms", "-o", folder.to_str().unwrap()]].concat();
    let output = container.run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    let record = run_json(&folder);
    for row in record["rows"].as_array().unwrap() {
        let runtime = row["runtime"].as_str().unwrap();
        let reason = row["reason"].as_str().unwrap_or_default();
        assert_eq!(row["status"], "partial", "{runtime}: {row}");
        assert!(reason.contains(&format!("{runtime} stops at ")), "{runtime}: {reason}");
        assert!(reason.contains(&format!("pids.max {PIDS_MAX} with ")), "{runtime}: the limit that set it: {reason}");
        assert!(!reason.contains("os error"), "{runtime}: never a raw errno: {reason}");
        let counts = &row["counts"];
        assert!(counts["units"].as_u64().unwrap() < u64::from(PIDS_MAX), "{runtime}: {counts}");
        assert_eq!(counts["samples_lost"], 0, "{runtime}: {counts}");
        assert!(counts["samples_measured"].as_u64().unwrap() > 0, "{runtime}: {counts}");
        // What came through the units' own writes is counted, and what followed them left out.
        let (flushed, writes) =
            (counts["samples_flushed_by_units"].as_u64().unwrap(), counts["unit_flushes"].as_u64().unwrap());
        assert!(counts["samples_left_out"].as_u64().unwrap() <= writes && writes <= flushed, "{runtime}: {counts}");
    }
}

#[test]
fn a_run_with_no_place_for_its_history_measures_and_says_so_once() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("homeless");
    let output = taskmeter()
        .args(["run", "--quick", "--runtimes", "thread", "--busy", "0", "-o", folder.to_str().unwrap()])
        .env_remove("HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("TASKMETER_HISTORY")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    // Each notice one line, wrapped to the width of stderr: joined again.
    let err = unwrapped(&stderr(&output));
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("history")).collect();
    assert_eq!(warned.len(), 1, "one warning: {warned:?}");
    assert!(warned[0].contains("not recorded in the history") && warned[0].contains("neither XDG_DATA_HOME nor HOME"));
    assert_eq!(run_json(&folder)["rows"][0]["status"], "ok");
    // The history commands, whose whole point it is, refuse with the reason.
    let history = taskmeter()
        .args(["history", "list"])
        .env_remove("HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("TASKMETER_HISTORY")
        .output()
        .unwrap();
    assert_eq!(history.status.code(), Some(2), "{}", said(&history));
    assert!(
        unwrapped(&stderr(&history)).contains("no history: neither XDG_DATA_HOME nor HOME is set"),
        "{}",
        said(&history)
    );
}
