//! The command line as a user meets it: runs, results folders, faults and bad input.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

mod common;
use common::{assert_refused, run, run_json, stderr, stdout, taskmeter, worker_of};
use std::time::{Duration, Instant};

fn row<'a>(record: &'a serde_json::Value, runtime: &str) -> &'a serde_json::Value {
    record["rows"].as_array().unwrap().iter().find(|r| r["runtime"] == runtime).expect("row present")
}

/// A shell script standing in for a runtime's worker.
fn fake_worker(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

const SHORT: &[&str] = &["--duration", "300ms", "--warmup", "100ms"];

#[test]
fn every_runtime_passes_its_conformance_check() {
    let recipes = common::recipes_with_reasons();
    // Three at a time: a check mostly waits on its worker's short plans (a JVM's check takes 15 s
    // of which 6 of CPU), and none of its verdicts is a bound a neighbour's load can break.
    let runtimes = common::runtimes_where(|_| true);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outputs: Vec<(usize, std::process::Output)> = std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(runtime) = runtimes.get(i) else { return done };
                        done.push((i, run(&["check-driver", runtime])));
                    }
                })
            })
            .collect();
        lanes.into_iter().flat_map(|lane| lane.join().unwrap()).collect()
    });
    let mut outputs = outputs;
    outputs.sort_by_key(|(i, _)| *i);
    for (i, output) in outputs {
        let runtime = runtimes[i].as_str();
        let said = stdout(&output);
        assert!(output.status.success(), "{runtime}:\n{said}{}", stderr(&output));
        // 20 checks, and one more for each of its wait recipes; a recipe whose optional package
        // is missing here is skipped, with the line that installs it.
        let its: Vec<_> = recipes.iter().filter(|(base, ..)| base == runtime).collect();
        let skipped = its.iter().filter(|(.., reason)| reason.is_some()).count();
        let total = 20 + its.len() - skipped;
        let summary = match skipped {
            0 => format!("{total} of {total} checks passed"),
            n => format!("{total} of {total} checks passed, {n} skipped"),
        };
        assert!(said.contains(&summary), "{said}");
        for (_, recipe, reason) in its {
            match reason {
                None => assert!(said.contains(&format!("ok   waits with its recipe {recipe}:")), "{said}"),
                Some(why) => {
                    common::skip(&format!("{runtime}/{recipe}: {why}"));
                    assert!(said.contains(&format!("skip waits with its recipe {recipe}: {why}")), "{said}");
                }
            }
        }
        assert!(!said.contains("FAIL"));
    }
}

#[test]
fn all_runtimes_compare_in_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("all");
    // Generous limits: on a loaded 2-core machine a JVM or a Python thread may take seconds to start.
    let output = run(&[
        "run",
        "--runtimes",
        "all",
        "--quick",
        "--busy",
        "0",
        "--start-limit",
        "60s",
        "--grace",
        "60s",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let table = stdout(&output);
    for runtime in common::runtimes_where(|_| true) {
        assert_eq!(
            table.lines().filter(|l| l.starts_with(&format!("{runtime} "))).count(),
            1,
            "{runtime} has one row:\n{table}"
        );
    }
    let record = run_json(&folder);
    assert!(record["rows"].as_array().unwrap().iter().all(|r| r["status"] == "ok" || r["status"] == "skipped"));
    // Every worker's writer is found by its name and, like taskmeter's reader of its frames and
    // of its counters, runs above the units: SCHED_FIFO as root, nice -20 or unchanged (with the
    // reason) otherwise.
    let root = unsafe { libc::geteuid() } == 0;
    for row in record["rows"].as_array().unwrap().iter().filter(|r| r["status"] == "ok") {
        let harness = row["worker"]["harness_sched"].as_str().unwrap_or_default();
        assert!(harness.starts_with("reader ") && harness.contains(", writer "), "{}: {harness}", row["runtime"]);
        assert!(!harness.contains("not found"), "{}: the writer is named tm-writer: {harness}", row["runtime"]);
        if root {
            assert_eq!(
                harness, "reader SCHED_FIFO 1, writer SCHED_FIFO 1, counters SCHED_FIFO 1",
                "{}",
                row["runtime"]
            );
        }
    }
}

#[test]
fn list_names_every_runtime_and_its_availability() {
    let output = run(&["list"]);
    assert!(output.status.success());
    // A description wider than the terminal wraps under itself: joined again.
    let table = common::unwrapped(&stdout(&output));
    let runtimes = common::registry("runtimes");
    assert!(!runtimes.is_empty());
    for kind in ["runtimes", "receivers"] {
        for listed in common::registry(kind) {
            let line = table.lines().find(|l| l.starts_with(&format!("{} ", listed.id))).expect("listed in the table");
            match &listed.reason {
                None => assert!(line.ends_with(" available"), "{line}"),
                Some(reason) => assert!(line.ends_with(&format!("unavailable: {reason}")), "{line}"),
            }
        }
    }
    for listed in &runtimes {
        let unit = listed.unit.as_deref().expect("a runtime says what its unit is");
        let said = if unit == "os-thread" { "a unit is an OS thread;" } else { "a unit is a task;" };
        assert!(["os-thread", "task"].contains(&unit), "{unit}");
        let at = table.find(&format!("{} ", listed.id)).unwrap();
        assert!(table[at..].lines().nth(2).is_some_and(|l| l.trim_start().starts_with(said)), "{}", &table[at..]);
        // Its own lines, up to the next runtime's: its version where its toolchain is found, how
        // its timer works, and whether the default run leaves it out.
        let entry: Vec<&str> = table[at..].lines().skip(1).take_while(|l| l.starts_with(' ')).map(str::trim).collect();
        let timer = listed.timer.as_deref().unwrap_or_default();
        assert!(!timer.is_empty(), "{} says how its timer works", listed.id);
        assert!(entry.contains(&format!("timer: {timer}").as_str()), "{entry:?}");
        if let Some(version) = &listed.version {
            assert!(entry.contains(&format!("version: {version}").as_str()), "{entry:?}");
        } else {
            assert!(listed.reason.is_some(), "{}: a runtime that can run has a version", listed.id);
        }
        let variant = "a variant: measured by --runtimes all, not by the default run";
        assert_eq!(entry.contains(&variant), !listed.default_run, "{entry:?}");
    }
    // The table of runtimes of docs/drivers.md names the registry's, in its order.
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/drivers.md")).unwrap();
    let section =
        page.split("\n## The runtimes\n").nth(1).expect("docs/drivers.md has The runtimes").split("\n## ").next();
    let documented: Vec<&str> =
        section.unwrap().lines().filter_map(|l| l.strip_prefix("| `")?.split('`').next()).collect();
    assert_eq!(documented, runtimes.iter().map(|r| r.id.as_str()).collect::<Vec<_>>());

    let output = taskmeter().arg("list").env("CC", "/nonexistent/cc").output().unwrap();
    let line = stdout(&output).lines().find(|l| l.starts_with("c-thread")).unwrap().to_string();
    assert!(line.contains("unavailable: no cc toolchain"), "{line}");
}

/// The samples file of a run kept with --raw, decompressed.
fn samples_csv(folder: &Path) -> String {
    use std::io::Read;
    let file = std::fs::File::open(folder.join("samples.csv.gz")).expect("samples.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
    text
}

/// Statistics recomputed here, independently, from the raw samples must agree with summary.csv.
#[test]
fn summary_agrees_with_statistics_recomputed_from_the_raw_samples() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut args =
        vec!["run", "--runtimes", "thread,c-thread,smol", "--sleep", "modulo:3:1ms", "--busy", "200", "--raw"];
    args.extend_from_slice(SHORT);
    args.extend_from_slice(&["-o", folder.to_str().unwrap()]);
    let output = run(&args);
    assert!(output.status.success(), "{}", stderr(&output));

    let samples = samples_csv(&folder);
    let mut lines = samples.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    // (runtime, metric) -> (values, references)
    let mut measured: HashMap<(String, String), (Vec<i64>, Vec<i64>)> = HashMap::new();
    let mut warmup = 0;
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f[col("phase")] != "measure" {
            warmup += 1;
            continue;
        }
        let expected: i64 = f[col("expected_ns")].parse().unwrap();
        for (metric, reference) in [("lateness", 0), ("actual", expected), ("full", expected), ("busy", 0)] {
            // `full` is empty after lost samples (none are lost here: nothing is skipped).
            let value: i64 = f[col(&format!("{metric}_ns"))].parse().unwrap();
            let entry = measured.entry((f[0].to_string(), metric.to_string())).or_default();
            entry.0.push(value);
            entry.1.push(reference);
        }
    }
    assert!(warmup > 0, "the warm-up samples are in samples.csv.gz, marked as such");

    let summary = std::fs::read_to_string(folder.join("summary.csv")).unwrap();
    let mut rows = summary.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..8],
        [
            "timestamp",
            "log_type",
            "metric_name",
            "count",
            "mean_absolute_deviation",
            "std_deviation",
            "min_deviation",
            "max_deviation"
        ]
    );
    let mut checked = 0;
    for line in rows {
        let f: HashMap<&str, &str> = header.iter().copied().zip(line.split(',')).collect();
        let metric = f["metric_name"].trim_end_matches("_ns").to_string();
        let Some((values, references)) = measured.get(&(f["log_type"].to_string(), metric.clone())) else {
            // A row whose units never woke in the window (a machine loaded by other tests can
            // starve a 300 ms window): the summary must then say 0, as the raw samples do.
            assert_eq!(f["count"], "0", "{line}: samples counted that samples.csv.gz does not hold");
            checked += 1;
            continue;
        };
        let n = values.len();
        assert_eq!(f["count"].parse::<usize>().unwrap(), n);
        let deviations: Vec<f64> = values.iter().zip(references).map(|(v, r)| (v - r).abs() as f64).collect();
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = |xs: &[f64]| {
            let m = mean(xs);
            (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
        };
        let values_f: Vec<f64> = values.iter().map(|v| *v as f64).collect();
        let close = |field: &str, expected: f64| {
            let got: f64 = f[field].parse().unwrap();
            assert!(
                (got - expected).abs() <= 0.006 + 1e-9 * expected.abs(),
                "{field}: summary {got}, recomputed {expected}"
            );
        };
        close("mean_absolute_deviation", mean(&deviations));
        close("std_deviation", sd(&deviations));
        close("min_deviation", deviations.iter().cloned().fold(f64::INFINITY, f64::min));
        close("max_deviation", deviations.iter().cloned().fold(0.0, f64::max));
        close("mean", mean(&values_f));
        close("std", sd(&values_f));
        let mut sorted = values.clone();
        sorted.sort();
        let rank = |p: f64| sorted[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1] as f64;
        close("min", sorted[0] as f64);
        close("p50", rank(50.0));
        close("p90", rank(90.0));
        close("p99", rank(99.0));
        close("max", sorted[n - 1] as f64);
        checked += 1;
    }
    assert_eq!(checked, 3 * 4, "one summary line per runtime and metric");

    let record = run_json(&folder);
    assert_eq!(record["schema"], "taskmeter.run");
    assert_eq!(record["schema_version"], 6);
    assert_eq!(record["complete"], true);
    for key in [
        "kernel",
        "cpu_model",
        "cores_online",
        "clocksource",
        "timer_slack_ns",
        "load_average_before",
        "load_average_after",
    ] {
        assert!(!record["environment"][key].is_null(), "environment.{key}");
    }
    assert!(record["environment"]["toolchains"]["c-thread"].as_str().unwrap().len() > 2);
    let thread = row(&record, "thread");
    assert_eq!(thread["status"], "ok");
    assert_eq!(thread["worker"]["sched"]["policy"], "SCHED_OTHER");
    let rss = thread["worker"]["peak_rss_kb"].as_u64().unwrap();
    assert!(rss > 1_000 && rss < 10_000_000, "peak RSS of the worker, in kB: {rss}");
    assert_eq!(thread["plan"]["sleep"]["schedule"]["kind"], "modulo");
    assert_eq!(thread["basis"], "exact");
    assert_eq!(thread["counts"]["samples_lost"], 0);
    // The budget for exact percentiles is recorded: the default, as `run --help` gives it.
    assert_eq!(record["settings"]["exact_samples"], 4_000_000);
}

#[test]
fn json_format_prints_the_run_record_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut args = vec!["run", "--runtimes", "tokio-ct", "--format", "json", "-o", folder.to_str().unwrap()];
    args.extend_from_slice(SHORT);
    let output = run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(printed, run_json(&folder));
    assert!(!folder.join("samples.csv.gz").exists(), "samples only with --raw");
}

#[test]
fn a_worker_killed_by_a_signal_fails_only_its_own_row() {
    let dir = tempfile::tempdir().unwrap();
    let killer = fake_worker(dir.path(), "killed", "kill -9 $$");
    let folder = dir.path().join("run");
    let mut args = vec!["run", "--runtimes", "thread,smol", "-o", folder.to_str().unwrap()];
    args.extend_from_slice(SHORT);
    let output = taskmeter().args(&args).env("TASKMETER_DRIVER_THREAD", &killer).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "a failed row makes the exit status 1");
    assert!(stdout(&output).contains("FAILED: the worker was killed by signal 9 (SIGKILL)"), "{}", stdout(&output));
    let record = run_json(&folder);
    assert_eq!(row(&record, "thread")["status"], "failed");
    assert!(row(&record, "thread")["reason"].as_str().unwrap().contains("signal 9"));
    assert_eq!(row(&record, "smol")["status"], "ok");
    assert!(row(&record, "smol")["counts"]["samples_measured"].as_u64().unwrap() > 0);
}

#[test]
fn a_worker_that_breaks_the_protocol_or_hangs_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("garbage", "read plan; echo 'hello world'", "protocol violation: a frame 'h' says it holds 1869376613 bytes"),
        ("unknown", "read plan; printf 'X\\002\\000\\000\\000{}'", "protocol violation: unknown frame kind 'X'"),
        // An E frame: kind, a 26-byte payload (u32 little-endian), the JSON.
        (
            "refuses",
            "read plan; printf 'E\\032\\000\\000\\000{\"message\":\"no such luck\"}'; exit 2",
            "worker error: no such luck (exited with status 2)",
        ),
        ("crashes", "read plan; echo 'segfault-ish' >&2; exit 3", "the worker exited with status 3 (segfault-ish)"),
        ("hangs", "exec sleep 60", "did not finish within"),
    ];
    for (name, body, reason) in cases {
        let script = fake_worker(dir.path(), name, body);
        let folder = dir.path().join(format!("{name}-run"));
        let started = Instant::now();
        let output = taskmeter()
            .args(["run", "--runtimes", "embassy", "--duration", "200ms", "--warmup", "0", "--grace", "1s"])
            .args(["-o", folder.to_str().unwrap()])
            .env("TASKMETER_DRIVER_EMBASSY", &script)
            .output()
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(30), "{name}: bounded by the deadline");
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        let record = run_json(&folder);
        let message = row(&record, "embassy")["reason"].as_str().unwrap().to_string();
        assert!(message.contains(reason), "{name}: got '{message}'");
    }
}

#[test]
fn an_unavailable_runtime_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut args = vec!["run", "--runtimes", "c-thread,thread", "-o", folder.to_str().unwrap()];
    args.extend_from_slice(SHORT);
    let output = taskmeter().args(&args).env("CC", "/nonexistent/cc").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("skipping c-thread: no cc toolchain"));
    let record = run_json(&folder);
    assert_eq!(row(&record, "c-thread")["status"], "skipped");
    assert_eq!(row(&record, "thread")["status"], "ok");
}

#[test]
fn bad_input_gets_one_clear_line_and_exit_status_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("taken"), "").unwrap();
    let occupied = dir.path().to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--units", "0"], "expected a number from 1 to 1000000"),
        (vec!["run", "--duration", "-1s"], "negative"),
        (vec!["run", "--duration", "soon"], "invalid duration 'soon'"),
        (vec!["run", "--duration", "0"], "--duration must be longer than 0"),
        (vec!["run", "--runtimes", "thread,fibers"], "unknown runtime 'fibers'"),
        (
            vec!["run", "--sweep", "nope=1"],
            "known: units, busy, sleep, modulo, duration, warmup, policy, timer-slack, cpu-dma-latency",
        ),
        // A typo gets the nearest name, on the same line.
        // Among the many runtimes, a few alike (the nearest first) and where to see them all.
        (
            vec!["run", "--runtimes", "tokyo-mt"],
            "unknown runtime 'tokyo-mt' (did you mean 'tokio-mt'? also alike: tokio-ct,",
        ),
        (vec!["run", "--runtimes", "tokyo-mt"], "in `taskmeter list` and `list recipes`)"),
        (vec!["run", "--duraton", "1s"], "unexpected argument '--duraton' found (did you mean '--duration'?)"),
        (vec!["run", "--table", "studdy"], "(did you mean 'study'? known: ranked, study, volume, why, recipes)"),
        (vec!["run", "--runtimes", "thread,thread"], "listed twice"),
        (vec!["run", "--sleep", "by-unit:1s", "--duration", "3s"], "longer than --duration"),
        (vec!["run", "--sleep", "sometimes"], "invalid sleep schedule 'sometimes'"),
        (vec!["run", "--sleep", "modulo:0:1ms"], "modulo M must be >= 1"),
        (vec!["run", "--sleep", "fixed:0"], "absolute mode needs a sleep longer than 0"),
        (vec!["run", "--sleep", "fixed:100ns"], "at least 1us"),
        (vec!["run", "--busy", "99999999999999999999999"], "number too large"),
        (vec!["run", "--busy", "-5"], "invalid value '-5'"),
        (vec!["run", "--mode", "sideways"], "invalid value 'sideways'"),
        (vec!["run", "juggle"], "invalid value 'juggle'"),
        (vec!["run", "-o", &occupied], "already exists and is not empty"),
        (vec!["check-driver", "fibers"], "unknown runtime 'fibers'"),
        (vec!["frobnicate"], "unrecognized subcommand"),
        // A typo of a command, at any level, gets the nearest; a missing argument, the usage line.
        (vec!["comapre", "a", "b"], "unrecognized subcommand 'comapre' (did you mean 'completions' or 'compare'?)"),
        (vec!["history", "lsit"], "unrecognized subcommand 'lsit' (did you mean 'list'?)"),
        (vec!["reprot", "x"], "(did you mean 'report'?)"),
        (vec!["compare", "r1"], "not provided: <NEW>; usage: taskmeter compare <OLD> <NEW>"),
        // A flag for another experiment is refused, naming the experiments it applies to.
        (
            vec!["run", "net", "--busy", "5"],
            "--busy does not apply to `run net` (it applies to sleep, volume, atomic-sum and recipes)",
        ),
        (vec!["run", "net", "--policy", "fifo:9"], "--policy does not apply to `run net`"),
        (vec!["run", "net", "--together"], "--together does not apply to `run net`"),
        (vec!["run", "net", "--raw"], "--raw does not apply to `run net`"),
        (vec!["run", "net", "--metric", "busy"], "--metric does not apply to `run net`"),
        (vec!["run", "net", "--runtimes", "go"], "takes --receivers"),
        (vec!["run", "sleep", "--senders", "4"], "--senders does not apply to `run sleep` (it applies to net)"),
        (vec!["run", "--receivers", "go"], "--receivers does not apply to `run sleep`"),
        (vec!["run", "volume", "--message-size", "64"], "--message-size does not apply to `run volume`"),
    ];
    assert_refused(&cases);
}

#[test]
fn the_worker_refuses_bad_plans_and_never_panics() {
    for plan in ["", "{}", "[1,2]", "{\"protocol\":1}", "{\"protocol\":\"1\"}"] {
        let mut child = taskmeter()
            .arg("worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(format!("{plan}\n").as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{plan}");
        // One E frame: its kind, its length (u32 little-endian), a JSON object with the reason.
        let out = &output.stdout;
        assert_eq!(out[0], b'E', "{plan}");
        let len = u32::from_le_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(out.len(), 5 + len, "{plan}: one frame and nothing else");
        let error: serde_json::Value = serde_json::from_slice(&out[5..]).expect("a JSON payload");
        assert!(error["message"].as_str().unwrap().contains("plan"), "{plan}: {error}");
        assert!(!stderr(&output).contains("panicked"));
    }
}

/// A worker killed half-way keeps every sample it had sent: its row is partial, says why and
/// how much of the window its samples cover, and the rest of the run goes on.
#[test]
fn a_worker_killed_mid_run_leaves_a_partial_row_with_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let child = taskmeter()
        .args(["run", "--runtimes", "thread,smol", "--order", "given", "--duration", "20s", "--warmup", "0", "--raw"])
        .args(["-o", folder.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let worker = worker_of(child.id());
    // However loaded the machine, units sleeping 1 ms make samples, and the writer sends them
    // five times a second.
    std::thread::sleep(Duration::from_millis(3000));
    unsafe { libc::kill(worker, libc::SIGKILL) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "a partial row is a result: {}", stderr(&output));
    let record = run_json(&folder);
    let thread = row(&record, "thread");
    assert_eq!(thread["status"], "partial");
    let reason = thread["reason"].as_str().unwrap();
    assert!(reason.contains("cut short before its D frame: the worker was killed by signal 9 (SIGKILL)"), "{reason}");
    let counts = &thread["counts"];
    let kept = counts["samples_measured"].as_u64().unwrap();
    assert!(kept > 0, "the samples sent before the kill are kept");
    let covered = counts["covered_ns"].as_u64().unwrap();
    assert!(covered > 0 && covered < 20_000_000_000, "covers part of the window: {covered}");
    assert_eq!(thread["statistics"]["lateness"]["count"].as_u64(), Some(kept));
    let samples = samples_csv(&folder);
    let in_file: Vec<Vec<u64>> = samples
        .lines()
        .filter(|l| l.starts_with("thread,"))
        .map(|l| l.split(',').skip(3).take(9).map(|v| v.parse().unwrap_or(0)).collect())
        .collect();
    assert_eq!(in_file.len() as u64, kept, "--raw has the same samples");
    // What the rings held when the worker died is bounded and said: each unit's deadlines
    // (origin + (period + 1) ms) up to the latest wake-up sent are each a sample sent, a period
    // missed, or one of those at most unsent. Columns from `unit`: unit, period, phase,
    // expected, start, busy_end, intended, wake, missed.
    let unsent = counts["samples_unsent_max"].as_u64().expect("a cut row bounds its unsent samples");
    let number = |key: &str| counts[key].as_u64().unwrap();
    let accounted = number("samples_total") + number("missed_periods") + number("missed_periods_warmup") + unsent;
    let latest_wake = in_file.iter().map(|s| s[7]).max().unwrap();
    let deadlines: u64 = (1..=5u64)
        .filter_map(|unit| {
            let first = in_file.iter().find(|s| s[0] == unit)?;
            let origin = first[6] - (first[1] + 1) * 1_000_000;
            Some((latest_wake - origin) / 1_000_000)
        })
        .sum();
    assert!(accounted >= deadlines, "{accounted} samples for {deadlines} deadlines passed: {counts}");
    assert!(reason.contains("more were made and never sent"), "{reason}");
    assert_eq!(
        thread["counters_missing"], "the worker ended before its measured window closed",
        "no counters are guessed"
    );
    assert_eq!(row(&record, "smol")["status"], "ok", "the rest of the run goes on");
}

/// The kernel's counters reach the row, per wake-up, checked on a worker whose behaviour is
/// known: one thread that blocks once per wake-up (a relative 1 ms sleep always blocks) and
/// does a fixed amount of busy work each time.
#[test]
fn the_kernels_counters_explain_a_row_per_wake_up() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let output = run(&[
        "run",
        "--runtimes",
        "thread",
        "--units",
        "1",
        "--sleep",
        "fixed:1ms",
        "--mode",
        "relative",
        "--busy",
        "100000",
        "--duration",
        "1s",
        "--warmup",
        "200ms",
        "--table",
        "why",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("CPU/wake") && table.contains("vol cs/wake") && table.contains("runq wait/wake"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("thread ")), "{table}");
    let record = run_json(&folder);
    assert_eq!(record["schema_version"], 6);
    let thread = row(&record, "thread");
    let c = &thread["counters"];
    let number = |key: &str| c[key].as_u64().unwrap_or_else(|| panic!("{key} in {c}"));
    let wakeups = number("wakeups") as f64;
    assert!(wakeups > 0.0 && wakeups <= thread["counts"]["samples_measured"].as_f64().unwrap(), "{c}");
    let worker = &thread["worker"];
    let measure_start = worker["measure_start_ns"].as_u64().unwrap();
    // The first reading is timed to end as the window begins, so it starts in the 200 ms warm-up
    // at the earliest; the last is timed for the window's second half, before its end (a loaded
    // machine may run either late: no upper bound holds by construction).
    assert!(
        number("start_ns") + 200_000_000 >= measure_start && number("end_ns") > measure_start.max(number("start_ns")),
        "{c}"
    );
    let voluntary = number("voluntary_switches") as f64 / wakeups;
    assert!((0.95..1.5).contains(&voluntary), "one blocking sleep per wake-up, plus the writer's few: {voluntary}");
    // Each wake-up does the busy work: at least about as much CPU as the fastest busy phase
    // took, and never more than two cores' worth of the window.
    let cpu = number("cpu_ns") as f64 / wakeups;
    let fastest_busy = thread["statistics"]["busy"]["min"].as_f64().unwrap();
    let window_per_wakeup = (number("end_ns") - number("start_ns")) as f64 / wakeups;
    assert!(
        cpu >= 0.5 * fastest_busy && cpu <= 2.0 * window_per_wakeup,
        "cpu {cpu} ns per wake-up, busy min {fastest_busy}"
    );
    assert!(number("threads") >= 2, "the unit and the writer at least: {c}");
    if Path::new("/proc/self/schedstat").exists() {
        assert!(c["runqueue_wait_ns"].is_u64(), "{c}");
    } else {
        assert!(c["runqueue_wait_ns"].is_null() && c["unavailable"].to_string().contains("CONFIG_SCHED_INFO"), "{c}");
    }
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(report.contains("Why the rows differ"));
    assert!(folder.join("charts/why-point-0-frontier.svg").exists());
    let again = run(&["report", folder.to_str().unwrap(), "--table", "why"]);
    assert!(again.status.success() && stdout(&again).contains("CPU/wake"), "{}", stderr(&again));
}

/// Go, Node and tokio report their own view of the window (protocol frame V); it reaches the
/// row and the why table, beside taskmeter's measurement.
#[test]
fn runtimes_that_report_their_own_view_show_it_beside_ours() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let runtimes = common::available(&["go", "node", "tokio-ct"]);
    let list = runtimes.join(",");
    let output = run(&[
        "run",
        "--runtimes",
        &list,
        "--units",
        "2",
        "--duration",
        "600ms",
        "--warmup",
        "100ms",
        "--table",
        "why",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("the runtime's own view of the same window"), "{}", stdout(&output));
    let record = run_json(&folder);
    for runtime in &runtimes {
        let view = &row(&record, runtime)["runtime_view"];
        assert!(view["source"].as_str().is_some_and(|s| !s.is_empty()), "{runtime}: {view}");
        if *runtime == "tokio-ct" {
            let busy = view["busy_ratio"].as_f64().unwrap();
            assert!((0.0..=1.5).contains(&busy) && view["parks"].is_u64(), "{view}");
        } else {
            let delay = &view["delay"];
            let at = |key: &str| delay[key].as_u64().unwrap_or_else(|| panic!("{runtime}: {key} in {view}"));
            assert!(at("count") > 0, "{runtime}: the runtime saw the window: {view}");
            assert!(at("p50_ns") <= at("p99_ns") && at("p99_ns") <= at("max_ns"), "{runtime}: {view}");
        }
    }
}

/// The memory the row will keep its values in is written before its worker starts, as much as
/// its plan fills if every unit wakes on time: 3 metrics kept (sleeps of 300 us: lateness, actual
/// and full are past 262 us when late), 4 bytes a value; so are its tables of one entry per unit;
/// `run.json` says so.
#[test]
fn memory_for_the_kept_values_is_written_before_the_first_worker() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut args = vec!["run", "--runtimes", "thread", "--units", "100", "--sleep", "fixed:300us"];
    args.extend_from_slice(SHORT);
    args.extend_from_slice(&["--format", "json", "-o", folder.to_str().unwrap()]);
    let output = run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let record = run_json(&folder);
    let plan: taskmeter_protocol::Plan = serde_json::from_value(row(&record, "thread")["plan"].clone()).unwrap();
    // 100 units, a period every 300 us for 300 ms: 1,000 each.
    assert_eq!(plan.measured_on_time(), 100_000);
    let prepared = &record["taskmeter_prepared"];
    // 3 lists of 100,000 values (whole pages of 1,024), 4 bytes each; the units' states (64
    // bytes each: 2 pages), their `U` frames (40: a page) and their sums (32: a page).
    assert_eq!(prepared["bytes"], 3 * 100_352 * 4 + 4 * 4096, "{prepared}");
    assert!(prepared["cpu_ns"].as_u64().is_some(), "{prepared}");
}

/// Past --exact-samples, percentiles come from HdrHistograms, within their stated precision of
/// the exact ones, and the row says so; counts, means and extremes stay exact.
#[test]
fn past_the_exact_budget_percentiles_come_from_histograms_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("run");
    let mut args = vec!["run", "--runtimes", "thread", "--sleep", "fixed:200us", "--raw", "--exact-samples", "100"];
    args.extend_from_slice(SHORT);
    args.extend_from_slice(&["-o", folder.to_str().unwrap()]);
    let output = run(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("come from HdrHistograms"), "{}", stdout(&output));
    let record = run_json(&folder);
    assert_eq!(record["settings"]["exact_samples"], 100);
    let thread = row(&record, "thread");
    assert_eq!(thread["basis"], "histogram");
    let samples = samples_csv(&folder);
    let mut lines = samples.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut actual: Vec<i64> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[col("phase")] == "measure")
        .map(|f| f[col("actual_ns")].parse().unwrap())
        .collect();
    actual.sort();
    let stats = &thread["statistics"]["actual"];
    let n = actual.len();
    assert!(n > 100, "more samples than the budget");
    assert_eq!(stats["count"].as_u64(), Some(n as u64));
    assert_eq!(stats["min"].as_i64(), Some(actual[0]));
    assert_eq!(stats["max"].as_i64(), Some(actual[n - 1]));
    for (name, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)] {
        let exact = actual[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        let got = stats[name].as_i64().unwrap();
        // 5 significant digits: the bucket's top, never below the exact value.
        assert!(got >= exact && (got - exact) as f64 <= exact as f64 * 1e-5 + 1.0, "{name}: {got} vs exact {exact}");
    }
    // The plain CSV stays available.
    let plain = dir.path().join("samples.csv");
    let output = run(&["report", folder.to_str().unwrap(), "--samples-csv", plain.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), samples);
}

#[test]
fn help_for_sweep_names_every_parameter_that_can_be_swept() {
    // The parameters, as the error for an unknown one lists them.
    let refused = run(&["run", "--sweep", "nope=1"]);
    let error = common::unwrapped(&stderr(&refused));
    let known = error.split("known: ").nth(1).expect("the known names").trim().trim_end_matches(')');
    let help = stdout(&run(&["run", "--help"]));
    let paragraph = help.split("--sweep <NAME=VALUES>").nth(1).expect("--sweep in the help");
    let paragraph = &paragraph[..paragraph.find("\n\n").unwrap_or(paragraph.len())];
    for name in known.split(", ") {
        assert!(paragraph.contains(name), "--sweep's help names '{name}':{paragraph}");
    }
}

#[test]
fn selftest_prints_json_that_holds_together() {
    let output = run(&["selftest", "--duration", "20ms", "--repeat", "2", "--format", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON and nothing else");
    assert_eq!(report["schema"], "taskmeter.selftest");
    assert_eq!(report["repeat"], 2);
    let known = common::registry("runtimes");
    let runtimes = report["runtimes"].as_array().unwrap();
    assert!(!runtimes.is_empty());
    let target = report["target_ratio"].as_f64().unwrap();
    for r in runtimes {
        assert!(known.iter().any(|k| k.id == r["runtime"].as_str().unwrap()), "{r}");
        for figure in ["loop_overhead_ns", "ratio", "with_zero_sleep_ns"] {
            let (lo, mid, hi) = (r[figure]["min"].as_f64(), r[figure]["median"].as_f64(), r[figure]["max"].as_f64());
            assert!(lo <= mid && mid <= hi && lo.unwrap() > 0.0, "{figure} of {r}");
        }
    }
    let met = runtimes.iter().all(|r| r["ratio"]["median"].as_f64().unwrap() <= target);
    assert_eq!(report["target_met"], met);
}

#[test]
fn quiet_leaves_the_results_and_drops_the_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for (name, quiet) in [("loud", false), ("quiet", true)] {
        let folder = dir.path().join(name);
        let mut args = vec!["run", "--runtimes", "thread,smol", "--quick", "-o", folder.to_str().unwrap()];
        if quiet {
            args.insert(1, "-q");
        }
        let output = run(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        let table = stdout(&output);
        assert!(["thread ", "smol "].iter().all(|r| table.lines().any(|l| l.starts_with(r))), "{table}");
        seen.push(stderr(&output).lines().filter(|l| l.contains(" samples in ")).count());
    }
    assert_eq!(seen, [2, 0], "a progress line per row, none with -q");
}

#[test]
fn completions_and_the_man_page_are_generated_from_the_flags() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = run(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", stderr(&output));
        let script = stdout(&output);
        for word in ["check-driver", "runtimes", "quiet"] {
            assert!(script.contains(word), "{shell} completes '{word}'");
        }
        assert!(!script.contains("net-receiver"), "{shell} offers no hidden subcommand");
    }
    let man = run(&["man"]);
    assert!(man.status.success(), "{}", stderr(&man));
    let page = stdout(&man);
    assert!(page.contains(".TH taskmeter 1") && page.contains("compare"), "{page}");
}

#[test]
fn run_short_help_fits_one_screen_and_the_long_help_has_every_heading_and_value() {
    let short = stdout(&run(&["run", "-h"]));
    assert!(short.lines().count() <= 50, "`run -h` has {} lines:\n{short}", short.lines().count());
    let long = stdout(&run(&["run", "--help"]));
    for heading in [
        "What to measure:",
        "How long:",
        "Sweeps and order:",
        "Scheduling and the machine:",
        "Outputs:",
        "run net:",
        "run granularity:",
    ] {
        assert!(short.contains(heading) && long.contains(heading), "{heading}");
    }
    // Every flag is in the long help; the short help leaves the advanced ones out.
    for flag in ["--start-limit", "--exact-samples", "--allow-rt-spin", "--export-markdown", "--calibrate"] {
        assert!(long.contains(flag) && !short.contains(flag), "{flag}");
    }
    // Every value list is complete, in the help of its flag: the experiments, as the catalog has them.
    let experiments: Vec<&str> = taskmeter::experiments::catalog::EXPERIMENTS.iter().map(|e| e.name).collect();
    let values: &[(&str, &[&str])] = &[
        ("[EXPERIMENT]", &experiments),
        ("--mode", &["absolute", "relative"]),
        ("--table", &["ranked", "study", "volume", "why"]),
        ("--metric", &["lateness", "actual", "full", "busy"]),
        ("--format", &["table", "json"]),
        ("--order", &["shuffled", "given"]),
        ("--pattern", &["trivial", "chain", "stencil"]),
        ("--policy", &["other", "batch", "idle", "fifo:PRIO", "rr:PRIO"]),
        ("--sleep", &["fixed:D", "by-unit:D", "modulo:M:D", "none"]),
        ("--color", &["auto", "always", "never"]),
    ];
    for (flag, names) in values {
        let lines: Vec<&str> = long.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("  ") && l.trim_start().starts_with(flag)).expect(flag);
        // The flag's help: its lines indented under it, up to the next flag or heading.
        let help = lines[at + 1..].iter().take_while(|l| l.is_empty() || l.starts_with("          "));
        let paragraph = help.copied().collect::<Vec<_>>().join("\n");
        for name in *names {
            assert!(paragraph.contains(name), "{flag}'s help names '{name}':\n{paragraph}");
        }
    }
}

#[test]
fn old_flag_names_still_work_and_are_not_shown() {
    // bench --time is --duration, net serve --runtime is --receiver: hidden aliases.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b");
    let old = run(&["bench", "--scenario", "a=true", "--warmup", "0", "--time", "100ms", "-o", out.to_str().unwrap()]);
    assert!(old.status.success(), "{}", stderr(&old));
    assert!(out.join("bench.json").exists());
    let serve = run(&["net", "serve", "--runtime", "thread", "--senders", "1", "--dry-run"]);
    assert!(serve.status.success(), "{}", stderr(&serve));
    let bench_help = stdout(&run(&["bench", "-h"]));
    assert!(bench_help.contains("--duration <DURATION>") && !bench_help.contains("--time <"), "{bench_help}");
    let serve_help = stdout(&run(&["net", "serve", "-h"]));
    assert!(serve_help.contains("--receiver <RECEIVER>") && !serve_help.contains("--runtime <"), "{serve_help}");
}

#[test]
fn color_follows_the_flag_no_color_and_clicolor_force() {
    const ESC: char = '\u{1b}';
    let error_of = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = taskmeter();
        command.args(args).env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE").env_remove("CLICOLOR");
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(2));
        stderr(&output)
    };
    let bad = ["run", "--units", "0"];
    // stderr is a pipe here: auto means no colour.
    assert!(!error_of(&bad, &[]).contains(ESC));
    assert!(error_of(&[&bad[..], &["--color", "always"]].concat(), &[]).contains(ESC));
    assert!(error_of(&[&["--color=always"], &bad[..]].concat(), &[]).contains(ESC));
    assert!(error_of(&bad, &[("CLICOLOR_FORCE", "1")]).contains(ESC));
    // NO_COLOR wins over CLICOLOR_FORCE; --color always wins over both.
    assert!(!error_of(&bad, &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]).contains(ESC));
    assert!(error_of(&[&bad[..], &["--color", "always"]].concat(), &[("NO_COLOR", "1")]).contains(ESC));
    assert!(!error_of(&[&bad[..], &["--color", "never"]].concat(), &[("CLICOLOR_FORCE", "1")]).contains(ESC));
    let line = error_of(&[&bad[..], &["--color", "always"]].concat(), &[]);
    assert!(line.contains("taskmeter: invalid value '0' for '--units'"), "the words are the same: {line}");
}

#[test]
fn dry_run_checks_the_settings_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let output = taskmeter().current_dir(dir.path()).args(["run", "--quick", "--dry-run"]).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).is_empty() && std::fs::read_dir(dir.path()).unwrap().next().is_none());
    assert_refused(&[
        (vec!["run", "--sleep", "by-unit:1s", "--duration", "2s", "--dry-run"], "longer than --duration"),
        (vec!["run", "net", "--busy", "5", "--dry-run"], "--busy does not apply to `run net`"),
        (vec!["run", "granularity", "--task-busy", "10ns..1ms", "--dry-run"], "from the largest size down"),
        (vec!["bench", "--scenario", "a=x", "--scenario", "a=y", "--dry-run"], "given twice"),
    ]);
}

#[test]
fn a_coloured_table_has_a_bold_header_and_a_green_best_row_and_the_same_words() {
    let dir = tempfile::tempdir().unwrap();
    let mut tables = Vec::new();
    for color in ["always", "never"] {
        let folder = dir.path().join(color);
        let args =
            ["run", "--runtimes", "thread,smol", "--quick", "-q", "--color", color, "-o", folder.to_str().unwrap()];
        let output = run(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        tables.push(stdout(&output));
    }
    let (coloured, plain) = (&tables[0], &tables[1]);
    assert!(!plain.contains('\u{1b}'), "{plain}");
    let header = coloured.lines().find(|l| l.contains("runtime ")).expect("the table's header");
    assert!(header.starts_with("\u{1b}[1m"), "bold: {header:?}");
    let best = coloured.lines().skip_while(|l| !l.contains("runtime ")).nth(1).unwrap();
    assert!(best.starts_with("\u{1b}[32m"), "green: {best:?}");
    // Without the escapes, the same lines as without colour (the figures differ from run to run).
    let strip = |text: &str| {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                chars.by_ref().find(|&c| c == 'm');
            } else {
                out.push(c);
            }
        }
        out
    };
    let shape =
        |text: &str| text.lines().map(|l| l.split_whitespace().next().unwrap_or("").to_string()).collect::<Vec<_>>();
    let stripped = strip(coloured);
    assert_eq!(stripped.lines().count(), plain.lines().count());
    assert!(stripped.lines().any(|l| l.starts_with("runtime ")), "{stripped}");
    assert_eq!(shape(&stripped)[..3], shape(plain)[..3]);
}

/// Samples that came through their units' own writes are a warning that names each row, its
/// harness's scheduling and, for a runtime that schedules the writer among its units (the row's
/// `writer`, from the registry), that; lost samples (an own write that failed) are warned apart.
#[test]
fn units_own_writes_and_lost_samples_are_warned_with_each_row() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("lost");
    let args = ["run", "--runtimes", "thread", "--units", "1", "--duration", "100ms", "--warmup", "0"];
    let out = run(&[&args[..], &["--no-history", "-o", folder.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let mut record = run_json(&folder);
    assert!(record["rows"][0]["worker"].get("writer").is_none(), "thread's writer is a thread of its own");
    let counts = &mut record["rows"][0]["counts"];
    counts["samples_lost"] = 3.into();
    counts["samples_flushed_by_units"] = 7.into();
    counts["unit_flushes"] = 1.into();
    counts["samples_left_out"] = 1.into();
    counts["samples_total"] = (counts["samples_total"].as_u64().unwrap() + 1).into();
    record["rows"][0]["worker"]["harness_sched"] = "reader nice -20, writer nice -20, counters nice -20".into();
    let go_writer =
        taskmeter_measure::runtimes::find("go").and_then(|go| go.writer).expect("go's writer is a goroutine");
    for (runtime, writer, said) in [
        ("thread", None, "(reader nice -20, writer nice -20, counters nice -20)".to_string()),
        ("go", Some(go_writer), format!("its writer is {go_writer}: a limit of the runtime")),
    ] {
        record["rows"][0]["runtime"] = runtime.into();
        record["rows"][0]["worker"]["writer"] = writer.into();
        record["settings"]["runtimes"] = serde_json::json!([runtime]);
        std::fs::write(folder.join("run.json"), record.to_string()).unwrap();
        let again = run(&["report", folder.to_str().unwrap()]);
        assert!(again.status.success(), "{}", stderr(&again));
        let page = std::fs::read_to_string(folder.join("report.html")).unwrap();
        let own = format!("{runtime} at 1 units: 7 samples in 1 writes, 1 left out");
        let lost = "3 samples were lost: a unit's own write of its full ring to the sample file failed";
        for said in ["7 samples reached taskmeter through their units' own writes", &own, &said, lost] {
            assert!(page.contains(said), "report.html of a {runtime} row says '{said}'");
        }
        if runtime == "thread" {
            assert!(!page.contains("its writer is"), "report.html of a thread row has no writer of the runtime's");
        }
    }
}

/// A row records where its runtime schedules the writer, from the registry: go's and its
/// recipes' rows (a goroutine), and no other.
#[test]
fn rows_record_a_writer_their_runtime_schedules_among_its_units() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("writers");
    let args =
        ["run", "--runtimes", "go,go-locked/timer,thread", "--units", "1", "--duration", "100ms", "--warmup", "0"];
    let out = run(&[&args[..], &["--no-history", "-o", folder.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let record = run_json(&folder);
    let rows = record["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let runtime = row["runtime"].as_str().unwrap();
        let registry = taskmeter_measure::runtimes::find(runtime).unwrap().writer;
        assert_eq!(registry.is_some(), runtime.starts_with("go"), "{runtime}");
        assert_eq!(row["worker"]["writer"].as_str(), registry, "{runtime}");
    }
}

/// A bare command or command group answers with its short help on stderr and exit status 2, as
/// git and cargo do; the top level also names the two commands to start with.
#[test]
fn a_bare_command_shows_its_commands() {
    for (args, commands) in [
        (vec![], vec!["run ", "compare ", "history ", "list "]),
        (vec!["history"], vec!["list ", "trend ", "check "]),
        (vec!["net"], vec!["serve ", "send "]),
    ] {
        let output = run(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stdout(&output).is_empty(), "{args:?}: help on stderr, not in a pipe's data");
        let help = stderr(&output);
        assert!(help.contains("Commands:"), "{args:?}: {help}");
        for command in commands {
            assert!(help.lines().any(|l| l.trim_start().starts_with(command)), "{args:?} lists {command}: {help}");
        }
        assert_eq!(help.contains("Start with: taskmeter run --quick"), args.is_empty(), "{help}");
    }
}

/// The widest line of `text` in columns (Unicode scalar values; the test runs with NO_COLOR).
fn widest(text: &str) -> (usize, String) {
    text.lines().map(|l| (l.chars().count(), l.to_string())).max_by_key(|(n, _)| *n).unwrap_or_default()
}

#[test]
fn every_output_fits_80_and_100_columns() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    let at = |width: usize, args: &[&str]| {
        let output = taskmeter()
            .args(args)
            .env("COLUMNS", width.to_string())
            .env("NO_COLOR", "1")
            .env("TASKMETER_HISTORY", &history)
            .output()
            .expect("taskmeter runs");
        (output.status.code(), stdout(&output), stderr(&output))
    };
    let label = "a label long enough to need cutting in any table of runs, as a user may well give one to say what \
                 the run was for";
    // A run of many runtimes with a long label, for `history list`.
    let many =
        "thread,smol,tokio-ct,tokio-mt,embassy,thread/nanosleep,thread/timerfd,tokio-ct/timerfd,tokio-mt/timerfd";
    let folder = dir.path().join("many");
    let (code, _, err) =
        at(100, &["run", "--quick", "--runtimes", many, "--label", label, "-o", folder.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    for width in [80, 100] {
        let folder = dir.path().join(format!("r{width}"));
        let mut outputs = vec![(
            "run --quick",
            at(width, &["run", "--quick", "--runtimes", "thread,smol", "-o", folder.to_str().unwrap()]),
        )];
        assert_eq!(outputs[0].1 .0, Some(0), "{}", outputs[0].1 .2);
        outputs.push(("history list", at(width, &["history", "list"])));
        outputs.push(("list", at(width, &["list"])));
        let (r80, r100) = (dir.path().join("r80"), dir.path().join("r100"));
        if width == 100 {
            outputs.push(("compare", at(width, &["compare", r80.to_str().unwrap(), r100.to_str().unwrap()])));
        }
        outputs.push(("an unknown runtime", at(width, &["run", "--runtimes", "tokyo-mt"])));
        for (what, (_, out, err)) in &outputs {
            for (stream, text) in [("stdout", out), ("stderr", err)] {
                let (columns, line) = widest(text);
                assert!(columns <= width, "{what} at {width} columns: a {stream} line of {columns}:\n{line}\n\n{text}");
            }
        }
        let report = &outputs[0].1 .1;
        // Prose wraps between words: joined again, its phrases are whole.
        let joined = common::unwrapped(report);
        for phrase in ["busy phase per loop (median):", "lateness = wake-up time - intended wake-up time", "env: "] {
            assert!(joined.contains(phrase), "{phrase}: {report}");
        }
        assert!(report.lines().count() > joined.lines().count(), "the env line wraps at {width}:\n{report}");
        // The history's table cuts the label, and says so with "…".
        let list = &outputs[1].1 .1;
        assert!(list.contains('…') && !list.contains(label), "{list}");
        // The error: the nearest names, and where to see all, in about 200 characters.
        let error = common::unwrapped(&outputs.last().unwrap().1 .2);
        assert_eq!(error.lines().count(), 1, "{error}");
        assert!(error.chars().count() <= 220, "{} characters: {error}", error.chars().count());
        assert!(error.contains("did you mean 'tokio-mt'?") && error.contains("`taskmeter list`"), "{error}");
    }
    // compare at 80 columns, once both folders are there.
    let (r80, r100) = (dir.path().join("r80"), dir.path().join("r100"));
    let (code, out, err) = at(80, &["compare", r80.to_str().unwrap(), r100.to_str().unwrap()]);
    assert!(code.is_some(), "{err}");
    for text in [&out, &err] {
        let (columns, line) = widest(text);
        assert!(columns <= 80, "compare at 80 columns: a line of {columns}:\n{line}\n\n{text}");
    }
    assert!(out.contains("verdict"), "the verdict column stays: {out}");
}
