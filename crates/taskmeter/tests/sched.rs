//! Scheduling settings applied to every worker, read back from the kernel, and presets.

mod common;
use common::{assert_refused, run, run_json, stderr, stdout, taskmeter};
use std::path::Path;

fn sched_of<'a>(record: &'a serde_json::Value, runtime: &str, point: u64) -> &'a serde_json::Value {
    let row =
        record["rows"].as_array().unwrap().iter().find(|r| r["runtime"] == runtime && r["point"] == point).unwrap();
    assert_eq!(row["status"], "ok", "{row}");
    &row["worker"]["sched"]
}

#[test]
fn policies_are_applied_before_exec_and_read_back() {
    if !common::root("SCHED_FIFO and SCHED_RR") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("policies");
    let output = run(&[
        "run",
        "--runtimes",
        "thread,c-thread",
        "--busy",
        "0",
        "--sleep",
        "fixed:250us",
        "--mode",
        "relative",
        "--sweep",
        "policy=other,fifo:99,rr:50,batch,idle",
        "--duration",
        "200ms",
        "--warmup",
        "0",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = run_json(&folder);
    let expected = [("SCHED_OTHER", 0), ("SCHED_FIFO", 99), ("SCHED_RR", 50), ("SCHED_BATCH", 0), ("SCHED_IDLE", 0)];
    for (point, (policy, priority)) in expected.iter().enumerate() {
        for runtime in ["thread", "c-thread"] {
            let sched = sched_of(&record, runtime, point as u64);
            assert_eq!(sched["policy"], *policy, "{runtime} at point {point}");
            assert_eq!(sched["priority"], *priority);
        }
    }
    // Real-time threads get no timer slack from the kernel: the read-back says so.
    assert_eq!(sched_of(&record, "thread", 1)["timerslack_ns"], 0);
    assert!(std::fs::read_dir(folder.join("charts"))
        .unwrap()
        .any(|e| e.unwrap().file_name() == "sweep-policy-mean.svg"));
}

#[test]
fn slack_affinity_and_memory_locking_are_read_back() {
    if !common::root("locking a worker's memory (mlockall beyond RLIMIT_MEMLOCK)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("knobs");
    let output = run(&[
        "run",
        "--runtimes",
        "thread,c-thread",
        "--timer-slack",
        "1",
        "--cpus",
        "0",
        "--mlock",
        "--duration",
        "200ms",
        "--warmup",
        "0",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let record = run_json(&folder);
    assert_eq!(record["settings"]["sched"]["timer_slack_ns"], 1);
    for runtime in ["thread", "c-thread"] {
        let sched = sched_of(&record, runtime, 0);
        assert_eq!(sched["timerslack_ns"], 1, "{runtime}");
        assert_eq!(sched["cpus"], "0", "{runtime}");
        assert!(sched["locked_kb"].as_u64().unwrap() > 0, "{runtime}: memory locked");
    }
}

#[test]
fn a_policy_flag_the_host_refuses_is_an_error_before_anything_is_measured() {
    if !common::root("running taskmeter as another user (setpriv)") {
        return;
    }
    // An unprivileged user may not ask for SCHED_FIFO: the same EPERM a cgroup without a
    // real-time budget gives.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("refused");
    let run = ["run", "--runtimes", "thread,smol", "--policy", "fifo:10", "--busy", "0", "--duration", "100ms"];
    let args = [&run[..], &["--warmup", "0", "-o", folder.to_str().unwrap()]].concat();
    let output = common::as_user(dir.path(), 65534, None, &args);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // One line, wrapped to the width of stderr: joined again.
    let said = common::unwrapped(&stderr(&output));
    assert!(said.contains("--policy: the host refuses policy fifo:10: real-time scheduling is refused"), "{said}");
    assert!(said.contains("CAP_SYS_NICE") && said.lines().count() == 1, "one line, with what grants it: {said}");
    assert!(!folder.exists(), "nothing was measured");
}

#[test]
fn the_nanosleep_preset_prints_the_study_table() {
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/nanosleep-study.toml");
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("study");
    let output = taskmeter()
        .args([
            "run",
            preset.to_str().unwrap(),
            "--runtimes",
            "c-thread",
            "--duration",
            "150ms",
            "-o",
            folder.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("runtime    policy  samples  min (µs)  mean (µs)  max (µs)  p50 (µs)  p99 (µs)"), "{table}");
    for policy in ["other", "fifo:99", "rr:99", "batch", "idle"] {
        assert!(
            table.lines().any(|l| l.starts_with("c-thread") && l.contains(&format!(" {policy} "))),
            "{policy}: {table}"
        );
    }
    let record = run_json(&folder);
    assert_eq!(record["metric"], "actual");
    assert_eq!(record["settings"]["sleep_spec"], "fixed:250us");
    assert_eq!(record["points"].as_array().unwrap().len(), 5);
}

#[test]
fn bad_scheduling_input_gets_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_preset = dir.path().join("bad.toml");
    std::fs::write(&bad_preset, "colour = \"blue\"\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--policy", "sometimes"], "unknown policy 'sometimes'"),
        (vec!["run", "--cpu-dma-latency", "2000000001"], "expected microseconds from 0 to 2000000000"),
        (vec!["run", "--sweep", "cpu-dma-latency=0,soon"], "invalid cpu_dma_latency 'soon'"),
        (vec!["run", "--policy", "fifo:100"], "out of range for fifo (1 to 99)"),
        (vec!["run", "--policy", "other:3"], "takes no priority"),
        (vec!["run", "--cpus", "4096"], "CPU 4096 does not exist"),
        (vec!["run", "--timer-slack", "-5"], "cannot be negative"),
        (vec!["run", "--timer-slack", "0"], "use 1 (ns) for the smallest"),
        (vec!["run", "--policy", "fifo:99"], "pass --allow-rt-spin"),
        (vec!["run", "--sweep", "policy=other,fifo:99"], "at point policy=fifo:99: policy fifo:99 with busy work"),
        (vec!["run", bad_preset.to_str().unwrap()], "unknown key 'colour'"),
        (vec!["run", "/nonexistent/study.toml"], "cannot read preset"),
    ];
    assert_refused(&cases);
}

#[test]
fn a_cpu_latency_request_is_held_while_measuring_and_recorded() {
    if !common::root("writing /dev/cpu_dma_latency") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("held");
    let output = run(&[
        "run",
        "--runtimes",
        "thread",
        "--sweep",
        "cpu-dma-latency=0,none",
        "--duration",
        "200ms",
        "--warmup",
        "0",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let record = run_json(&folder);
    let machine = &record["environment"]["machine"];
    let before = machine["cpu_dma_latency_us"].as_i64().expect("the request in force before the run is recorded");
    let in_force = |point: u64| {
        let row = record["rows"].as_array().unwrap().iter().find(|r| r["point"] == point).unwrap();
        row["worker"]["cpu_dma_latency_us"].as_i64().unwrap()
    };
    assert_eq!(in_force(0), 0, "held at 0 while point 0 ran");
    assert_eq!(in_force(1), before, "released for the point that holds none");
    assert!(stdout(&output).contains("cpu_dma_latency per point"), "{}", stdout(&output));
    let folder = dir.path().join("once");
    let output = run(&[
        "run",
        "--runtimes",
        "thread",
        "--cpu-dma-latency",
        "0",
        "--duration",
        "200ms",
        "--warmup",
        "0",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(stdout(&output).contains("cpu_dma_latency 0 µs held by taskmeter"), "{}", stdout(&output));
    assert_eq!(run_json(&folder)["settings"]["cpu_dma_latency_us"], 0);
}

/// No driver asks its timer to wake before the intended time: without timer slack and at a
/// real-time priority, over thousands of samples, no runtime wakes early, but node, whose
/// setTimeout starts from a loop clock truncated to the millisecond (drivers/node/README.md).
#[test]
fn no_runtime_but_node_wakes_before_its_deadline() {
    if !common::root("SCHED_FIFO") {
        return;
    }
    let runtimes = common::runtimes_where(|r| r.id != "node");
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("early");
    let output = run(&[
        "run",
        "--runtimes",
        &runtimes.join(","),
        "--policy",
        "fifo:99",
        "--timer-slack",
        "1",
        "--busy",
        "0",
        // Four units: a runtime whose timer rounds to whole ms (deno's wakes 2-2.5 ms after
        // each deadline) still gives well over 1,000 samples in the second.
        "--units",
        "4",
        "--sleep",
        "fixed:200us",
        "--duration",
        "1s",
        "--warmup",
        "100ms",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    for row in run_json(&folder)["rows"].as_array().unwrap() {
        let counts = &row["counts"];
        assert!(counts["samples_measured"].as_u64().unwrap() >= 1000, "{}: {counts}", row["runtime"]);
        assert_eq!(counts["early_wakeups"], 0, "{} woke before its deadline", row["runtime"]);
    }
}
