//! The history (docs/history.md) on its default engine, SQLite: every experiment's runs are
//! recorded, listed, shown, imported again without duplicates; a store that cannot take a run
//! costs one warning line and nothing else; trends, comparisons and change points on
//! synthetic series with a known shift.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{assert_refused, stderr, stdout, taskmeter};

/// taskmeter with its history at `history`.
fn with_history(history: &Path, args: &[&str]) -> Output {
    taskmeter().env("TASKMETER_HISTORY", history).args(args).output().expect("taskmeter runs")
}

fn ok(output: Output) -> Output {
    assert_eq!(output.status.code(), Some(0), "{}{}", stdout(&output), stderr(&output));
    output
}

fn list(history: &Path, extra: &[&str]) -> Vec<Value> {
    let output = ok(with_history(history, &[&["history", "list", "--format", "json"], extra].concat()));
    serde_json::from_str::<Value>(&stdout(&output)).unwrap().as_array().unwrap().clone()
}

fn quick_run(history: &Path, folder: &Path, extra: &[&str]) -> Output {
    let args = [&["run", "--quick", "--runtimes", "thread", "-o", folder.to_str().unwrap()], extra].concat();
    with_history(history, &args)
}

#[test]
fn a_run_is_listed_shown_and_not_imported_twice() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    let folder = dir.path().join("results").join("one");
    let said = stderr(&ok(quick_run(&history, &folder, &["--label", "abc123"])));
    assert!(
        said.contains(&format!("history: recorded as run 1 in {}; --no-history to skip", history.display())),
        "a run says where it was recorded: {said}"
    );
    let quiet = ok(quick_run(&dir.path().join("quiet.sqlite"), &dir.path().join("quiet"), &["-q"]));
    assert!(!stderr(&quiet).contains("history:"), "-q silences it: {}", stderr(&quiet));
    let runs = list(&history, &[]);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!((run["experiment"].as_str(), run["label"].as_str()), (Some("sleep"), Some("abc123")));
    assert_eq!(run["runtimes"], serde_json::json!(["thread"]));
    assert_eq!(run["folder"].as_str().unwrap(), std::fs::canonicalize(&folder).unwrap().to_str().unwrap());
    // The label is in the record too, so an imported folder keeps it.
    assert_eq!(common::run_json(&folder)["label"], "abc123");

    let table = stdout(&ok(with_history(&history, &["history", "list"])));
    assert!(table.contains("abc123") && table.contains("sleep"), "{table}");
    let id = run["id"].as_i64().unwrap().to_string();
    let shown = stdout(&ok(with_history(&history, &["history", "show", &id])));
    assert!(shown.contains("label: abc123") && shown.contains("lateness"), "{shown}");
    let detail: Value =
        serde_json::from_str(&stdout(&ok(with_history(&history, &["history", "show", &id, "--format", "json"]))))
            .unwrap();
    let p99 = detail["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "lateness" && m["stat"] == "p99")
        .expect("the lateness p99 of the row");
    let row = &common::run_json(&folder)["rows"][0];
    assert_eq!(p99["value"].as_f64(), row["statistics"]["lateness"]["p99"].as_f64());

    // Imported again, from the folder and from its parent: nothing new.
    let results = dir.path().join("results");
    for from in [&folder, &results] {
        let said = stdout(&ok(with_history(&history, &["history", "import", from.to_str().unwrap()])));
        assert!(said.contains("imported 0 run(s)") && said.contains("1 already there"), "{said}");
    }
    // Into a new history, once.
    let other = dir.path().join("other.sqlite");
    let said = stdout(&ok(with_history(&other, &["history", "import", results.to_str().unwrap()])));
    assert!(said.contains("imported 1 run(s)"), "{said}");
    assert_eq!(list(&other, &[]).len(), 1);

    // Filters.
    assert_eq!(list(&history, &["--label", "abc123", "--experiment", "sleep", "--runtime", "thread"]).len(), 1);
    assert_eq!(list(&history, &["--label", "other"]).len(), 0);
    assert_eq!(list(&history, &["--runtime", "smol"]).len(), 0);
    assert_eq!(list(&history, &["--since", "2000-01", "--until", "2999"]).len(), 1);
    assert_eq!(list(&history, &["--since", "2999-01-01"]).len(), 0);
}

#[test]
fn no_history_and_the_default_place() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let run_in = |extra: &[&str], folder: &str| {
        let mut command = taskmeter();
        command.env_remove("TASKMETER_HISTORY").env("XDG_DATA_HOME", &data);
        let folder = dir.path().join(folder);
        let args = [&["run", "--quick", "--runtimes", "thread", "-o", folder.to_str().unwrap()], extra].concat();
        ok(command.args(&args).output().unwrap())
    };
    run_in(&["--no-history"], "a");
    assert!(!data.exists(), "--no-history writes nothing");
    run_in(&[], "b");
    let default = data.join("taskmeter").join("history.sqlite");
    assert!(default.is_file(), "the default history is under XDG_DATA_HOME");
    assert_eq!(list(&default, &[]).len(), 1);
}

#[test]
fn a_history_that_cannot_take_the_run_costs_one_warning_line() {
    let dir = tempfile::tempdir().unwrap();
    // Unwritable: its folder would be inside a file.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let folder = dir.path().join("unwritable");
    let output = quick_run(&file.join("history.sqlite"), &folder, &["-q"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // One line, wrapped to the width of stderr.
    let err = common::unwrapped(&stderr(&output));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("taskmeter: warning: the run was not recorded in the history"), "{err}");
    assert!(folder.join("run.json").is_file());

    // Locked: another writer holds the database for longer than taskmeter waits.
    let history = dir.path().join("locked.sqlite");
    ok(with_history(&history, &["history", "list"]));
    let holder = rusqlite::Connection::open(&history).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE; INSERT INTO taskmeter_schema (version) VALUES (0);").unwrap();
    let folder = dir.path().join("locked");
    let output = quick_run(&history, &folder, &["-q"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // One line, wrapped to the width of stderr.
    let err = common::unwrapped(&stderr(&output));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not recorded") && err.contains("locked"), "{err}");
    assert!(folder.join("run.json").is_file());
    holder.execute_batch("ROLLBACK").unwrap();
    // The run is not lost: its folder imports.
    let said = stdout(&ok(with_history(&history, &["history", "import", folder.to_str().unwrap()])));
    assert!(said.contains("imported 1 run(s)"), "{said}");
}

#[test]
fn every_experiment_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let runs: [Vec<String>; 3] = [
        ["run", "net", "--receivers", "thread", "--senders", "1", "--messages", "200", "-o", &out("net")]
            .map(String::from)
            .to_vec(),
        ["run", "granularity", "--runtimes", "thread", "--quick", "--steps", "3", "-o", &out("grain")]
            .map(String::from)
            .to_vec(),
        ["bench", "--scenario", "t=true", "--warmup", "0", "--duration", "200ms", "-o", &out("bench")]
            .map(String::from)
            .to_vec(),
    ];
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = with_history(&history, &args);
        assert!(matches!(output.status.code(), Some(0 | 1)), "{args:?}: {}", stderr(&output));
        assert!(!stderr(&output).contains("not recorded"), "{}", stderr(&output));
    }
    let experiments: Vec<String> =
        list(&history, &[]).iter().map(|r| r["experiment"].as_str().unwrap().to_string()).collect();
    assert_eq!(experiments, ["net", "granularity", "bench"]);
    let net = stdout(&ok(with_history(&history, &["history", "show", "1"])));
    assert!(net.contains("throughput"), "{net}");
}

/// A history of synthetic runs: `values[i]` is run i's lateness p50 (one repetition each, or
/// several), on `machine`, labelled `c{i}`.
fn synthetic(history: &Path, series: &[(&str, &str, Vec<Vec<f64>>)]) {
    let with: Vec<Synthetic> = series.iter().map(|(m, r, v)| (*m, *r, v.clone(), vec!["{}"; v.len()])).collect();
    synthetic_with(history, &with);
}

/// A synthetic series: its machine, runtime, each run's repetitions and each run's settings.
type Synthetic<'a> = (&'a str, &'a str, Vec<Vec<f64>>, Vec<&'a str>);

/// As `synthetic`, run i with the settings `settings[i]` (the `runs` column: its workload).
/// Run i of every series starts on day i + 1, so series of one machine interleave.
fn synthetic_with(history: &Path, series: &[Synthetic]) {
    ok(with_history(history, &["history", "list"])); // creates the schema
    let db = rusqlite::Connection::open(history).unwrap();
    let mut n = 0;
    for (machine, runtime, runs, settings) in series {
        for (i, repetitions) in runs.iter().enumerate() {
            n += 1;
            let started = format!("2026-01-{:02}T00:00:{:02}Z", i + 1, n % 60);
            db.execute(
                "INSERT INTO runs (identity, kind, experiment, started_at, finished_at, complete, machine, cpu_model, \
                 kernel, taskmeter_version, label, command_line, settings, environment, recorded_at) \
                 VALUES (?1, 'run', 'sleep', ?2, ?2, 1, ?3, 'cpu', 'linux', '0.1.0', ?4, '[]', ?5, '{}', ?2)",
                rusqlite::params![format!("synthetic-{n}"), started, machine, format!("c{}", i + 1), settings[i]],
            )
            .unwrap();
            let id = db.last_insert_rowid();
            for (r, v) in repetitions.iter().enumerate() {
                for (stat, value) in [("p50", *v), ("p99", v * 3.0)] {
                    db.execute(
                        "INSERT INTO measurements (run_id, subject, point, repetition, status, metric, stat, value) \
                         VALUES (?1, ?2, '-', ?3, 'ok', 'lateness', ?4, ?5)",
                        rusqlite::params![id, runtime, r as i64 + 1, stat, value],
                    )
                    .unwrap();
                }
            }
        }
    }
}

/// `n` stable values around `mean` (a fixed wobble of ±1 %), then `shifted` ones `factor`
/// times higher.
fn values(n: usize, shifted: usize, mean: f64, factor: f64) -> Vec<Vec<f64>> {
    let wobble = [0.0, 0.01, -0.008, 0.004, -0.01, 0.006, -0.003, 0.009];
    (0..n + shifted)
        .map(|i| {
            let level = if i < n { mean } else { mean * factor };
            let v = level * (1.0 + wobble[i % wobble.len()]);
            vec![v, v * 1.004, v * 0.997]
        })
        .collect()
}

#[test]
fn check_finds_an_injected_shift_and_not_a_stable_series() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    synthetic(
        &history,
        &[("shifted", "thread", values(10, 4, 50_000.0, 1.6)), ("stable", "thread", values(14, 0, 50_000.0, 1.0))],
    );
    let output = with_history(&history, &["history", "check", "--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "a regression fails the check: {}", stderr(&output));
    let found: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let findings = found["findings"].as_array().unwrap();
    let of = |machine: &str| findings.iter().find(|f| f["series"]["machine"] == machine).unwrap();
    assert_eq!(of("shifted")["verdict"], "regression");
    assert_eq!(of("shifted")["change"]["label"], "c11", "the change starts at the first shifted run");
    assert!((of("shifted")["change"]["change"].as_f64().unwrap() - 0.6).abs() < 0.02);
    assert!(of("shifted")["change"]["p_value"].as_f64().unwrap() <= 0.05);
    assert_eq!(of("stable")["verdict"], "no_change");
    // The stable machine alone passes.
    let output = ok(with_history(&history, &["history", "check", "--machine", "stable"]));
    assert!(stdout(&output).contains("0 regression(s) in 1 series"), "{}", stdout(&output));
    // The console names the change.
    let console = stdout(&with_history(&history, &["history", "check"]));
    assert!(console.contains("regression") && console.contains("(c11)"), "{console}");
}

/// The settings column of a `--quick` run (1 s) and of a full one (10 s): two workloads.
const QUICK: &str = r#"{"settings": {"duration_ns": 1000000000, "sleep": "fixed:1ms"}, "order": "shuffled"}"#;
const FULL: &str = r#"{"settings": {"duration_ns": 10000000000, "sleep": "fixed:1ms"}, "order": "shuffled"}"#;

/// `--quick` and full runs interleaved on one machine (28 runs, every other one full) are two
/// series: the full ones doubling at their newest 4 runs is a regression of the full series
/// alone, named by its duration; the quick ones, whose lateness is lower, are judged apart.
#[test]
fn check_and_trend_judge_each_workload_apart() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    let (quick, full) = (values(14, 0, 50_000.0, 1.0), values(10, 4, 80_000.0, 2.0));
    let runs: Vec<Vec<f64>> = quick.into_iter().zip(full).flat_map(|(q, f)| [q, f]).collect();
    let settings: Vec<&str> = (0..28).map(|i| if i % 2 == 0 { QUICK } else { FULL }).collect();
    synthetic_with(&history, &[("m", "thread", runs, settings)]);
    let output = with_history(&history, &["history", "check", "--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "the full runs regressed: {}", stdout(&output));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let findings = json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "one series per workload: {json}");
    let of = |duration: &str| findings.iter().find(|f| f["series"]["workload"]["settings.duration_ns"] == duration);
    let (quick, full) = (of("1000000000").unwrap(), of("10000000000").unwrap());
    assert_eq!((full["verdict"].as_str(), full["runs"].as_u64()), (Some("regression"), Some(14)), "{json}");
    assert_eq!(full["change"]["label"], "c22", "the first doubled full run, the 22nd of all: {json}");
    assert!((full["change"]["change"].as_f64().unwrap() - 1.0).abs() < 0.03, "{json}");
    assert_eq!((quick["verdict"].as_str(), quick["runs"].as_u64()), (Some("no_change"), Some(14)), "{json}");
    let wide = taskmeter().env("TASKMETER_HISTORY", &history).env("COLUMNS", "200").args(["history", "check"]).output();
    let console = stdout(&wide.unwrap());
    assert!(console.contains("sleep thread on m [settings.duration_ns=10000000000]"), "{console}");
    // The trend draws them apart, each line named by its duration.
    let out = dir.path().join("trend");
    let trend: Value = serde_json::from_str(&stdout(&ok(with_history(
        &history,
        &["history", "trend", "--format", "json", "-o", out.to_str().unwrap()],
    ))))
    .unwrap();
    let names: Vec<&str> = trend["lines"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["m [settings.duration_ns=1000000000]", "m [settings.duration_ns=10000000000]"], "{trend}");
}

/// A history that moves from `--quick` to full runs, whose lateness is 80 % higher, has no
/// regression: the full runs are another series, whose 6 runs cannot show a change yet (in a
/// check of 2 series a step needs 9: `check::runs_needed`). Not judged is not a failure, and
/// never "no change".
#[test]
fn another_workload_is_not_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    let mut runs = values(14, 0, 50_000.0, 1.0);
    runs.extend(values(6, 0, 90_000.0, 1.0));
    let settings: Vec<&str> = (0..20).map(|i| if i < 14 { QUICK } else { FULL }).collect();
    synthetic_with(&history, &[("m", "thread", runs, settings)]);
    let output = ok(with_history(&history, &["history", "check", "--format", "json"]));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let verdicts: Vec<(&str, u64)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["verdict"].as_str().unwrap(), f["runs"].as_u64().unwrap()))
        .collect();
    assert_eq!(verdicts, [("no_change", 14), ("cannot_detect", 6)], "{json}");
    assert_eq!((json["findings"][1]["runs_needed"].as_u64(), json["cannot_detect"].as_u64()), (Some(9), Some(1)));
    let step = json["findings"][0]["detectable_step"].as_f64().unwrap();
    assert!(step > 1.05 && step < 1.2, "a ±1 % series sees a small step: {json}");
    let wide = taskmeter().env("TASKMETER_HISTORY", &history).env("COLUMNS", "200").args(["history", "check"]).output();
    let console = stdout(&ok(wide.unwrap()));
    assert!(
        console.contains("cannot detect: needs 9 runs")
            && console.contains(&format!("no change; could detect x{step:.2}")),
        "{console}"
    );
    assert!(console.contains("0 regression(s) in 2 series; 1 cannot detect a change yet"), "{console}");
    println!("{console}");
}

#[test]
fn a_trend_is_drawn_from_labelled_runs() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    synthetic(&history, &[("a", "thread", values(8, 2, 50_000.0, 1.3)), ("b", "thread", values(10, 0, 70_000.0, 1.0))]);
    let out = dir.path().join("trend");
    let said = stdout(&ok(with_history(
        &history,
        &[
            "history",
            "trend",
            "--runtime",
            "thread",
            "--metric",
            "lateness",
            "--stat",
            "p99",
            "-o",
            out.to_str().unwrap(),
        ],
    )));
    assert!(said.contains("20 run(s), 2 line(s)"), "{said}");
    let svg = std::fs::read_to_string(out.join("trend.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("c10") && svg.contains("\na\n") && svg.contains("\nb\n"), "{svg}");
    let html = std::fs::read_to_string(out.join("trend.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("lateness p99 over runs") && html.contains(" ± "), "{html}");
    // Both say what the bars and the ± are: the range a run's own report gives, in its words.
    let bars = "error bars and ±: 95 % range for another invocation's mean, from 3 repetitions (of each run): \
                mean ± t(0.975, 2) · s · √(2/3), s between them (none for a run of one repetition)";
    assert!(svg.contains(&format!("<title>thread: lateness p99 over runs; {bars}</title>")), "{svg}");
    assert!(html.contains(&format!("<p>{bars}</p>")), "{html}");
    let json: Value = serde_json::from_str(&stdout(&ok(with_history(
        &history,
        &["history", "trend", "--by", "runtime", "--machine", "a", "--format", "json", "-o", out.to_str().unwrap()],
    ))))
    .unwrap();
    let points = json["lines"][0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 10);
    assert_eq!(json["bars"], bars, "{json}");
    assert!(points[0]["half_width"].as_f64().unwrap() > 0.0, "repetitions give an interval");
}

#[test]
fn compare_judges_labels_and_machines_as_compare_does() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    synthetic(&history, &[("a", "thread", values(4, 0, 50_000.0, 1.0)), ("b", "thread", values(4, 0, 80_000.0, 1.0))]);
    let output = with_history(&history, &["history", "compare", "--by", "machine", "--format", "json"]);
    assert_eq!(output.status.code(), Some(1), "b is 60 % later than a: {}", stderr(&output));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let line = &json["lines"][0];
    assert_eq!(
        (line["baseline"].as_str(), line["judged"].as_str(), line["verdict"].as_str()),
        (Some("a"), Some("b"), Some("regressed"))
    );
    assert_eq!(
        (line["old_invocations"].as_u64(), line["old_repetitions"].as_u64(), line["level"].as_str()),
        (Some(4), Some(12), Some("invocations")),
        "a run is one invocation, its 3 repetitions averaged"
    );
    // Two runs: one repetition set a side, judged the same way.
    let output = ok(with_history(&history, &["history", "compare", "1", "2"]));
    assert!(stdout(&output).contains("no change"), "{}", stdout(&output));
    // By label: c1 (on a and b) against c2.
    let output = with_history(&history, &["history", "compare", "--by", "label", "c1", "c2"]);
    assert!(matches!(output.status.code(), Some(0 | 1)), "{}", stderr(&output));
    assert!(stdout(&output).contains("label c1"), "{}", stdout(&output));
}

#[test]
fn bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let history: PathBuf = dir.path().join("h.sqlite");
    let h = history.to_str().unwrap();
    assert_refused(&[
        (vec!["history", "show", "42", "--history", h], "no run 42 in the history"),
        (vec!["history", "list", "--history", "mysql://x/y"], "unknown history URL scheme 'mysql'"),
        (vec!["history", "list", "--history", "postgres://u@h:port/db"], "bad PostgreSQL URL"),
        (vec!["history", "trend", "--history", h, "--metric", "speed"], "unknown metric 'speed'"),
        (vec!["history", "check", "--history", h, "--stat", "p42"], "unknown stat 'p42'"),
        (vec!["history", "compare", "1", "x", "--history", h], "'x' is not a run id"),
        (vec!["history", "compare", "1", "2", "--history", h], "no run 1 in the history"),
        (vec!["history", "import", "/nonexistent/folder", "--history", h], "is neither a results folder"),
        (vec!["run", "--quick", "--history", "ftp://x"], "unknown history URL scheme 'ftp'"),
        (vec!["run", "--quick", "--history", "x", "--no-history"], "cannot be used with"),
    ]);
}

#[test]
fn an_interrupted_run_is_recorded_as_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    let folder = dir.path().join("stopped");
    let run = common::Background::start(
        &["run", "--runtimes", "thread", "--duration", "20s", "--warmup", "0", "-q", "-o", folder.to_str().unwrap()],
        &[("TASKMETER_HISTORY", &history)],
    );
    run.wait_for_child("worker");
    std::thread::sleep(std::time::Duration::from_millis(500));
    run.signal(libc::SIGINT);
    let done = run.finish();
    assert_eq!(done.status.code(), Some(130), "{}", done.stderr);
    assert!(!done.stderr.contains("not recorded"), "{}", done.stderr);
    let runs = list(&history, &[]);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["complete"], false);
    assert!(folder.join("run.json").is_file());
}

#[test]
fn compare_refuses_different_workloads_as_compare_does() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    ok(quick_run(&history, &dir.path().join("a"), &["-q"]));
    ok(quick_run(&history, &dir.path().join("b"), &["-q", "--busy", "5000", "--timer-slack", "1us"]));
    let refused = with_history(&history, &["history", "compare", "1", "2"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = stderr(&refused);
    assert!(err.contains("measured different things (settings.busy.iters 1000 -> 5000)"), "{err}");
    assert!(err.contains("--force"), "{err}");
    let forced = ok(with_history(&history, &["history", "compare", "1", "2", "--force"]));
    let out = stdout(&forced);
    assert!(out.contains("differs (knob, run 1 -> run 2): settings.sched.timer_slack_ns (none) -> 1000"), "{out}");
    assert!(out.contains("inconclusive"), "one run a side: {out}");
    // history trend draws the two workloads as two lines, each named by its busy work.
    let trend = dir.path().join("trend");
    let drawn = ok(with_history(&history, &["history", "trend", "--format", "json", "-o", trend.to_str().unwrap()]));
    let drawn: Value = serde_json::from_str(&stdout(&drawn)).unwrap();
    let names: Vec<&str> = drawn["lines"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{drawn}");
    assert!(
        names[0].contains("settings.busy.iters=1000") && names[1].contains("settings.busy.iters=5000"),
        "{names:?}"
    );
}

/// One notion of a run: repetitions share their invocation's offset (its machine state), so
/// `compare` of results folders and `history compare` of the same runs give the same line: the
/// invocations' means judged, not 12 repetitions taken as independent (which would call the
/// offsets a change). An interrupted run is left out by both, and said.
#[test]
fn compare_and_history_compare_nest_repetitions_in_their_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    let template = dir.path().join("template");
    ok(with_history(
        &history,
        &[
            "run",
            "--runtimes",
            "thread",
            "--duration",
            "100ms",
            "--warmup",
            "0",
            "--repeat",
            "3",
            "--no-history",
            "-o",
            template.to_str().unwrap(),
        ],
    ));
    let record = common::run_json(&template);
    // Each side 4 invocations; the invocation offsets spread them by ±6 %, the repetitions by
    // ±0.1 %: the new side's mean is 7 % higher, inside the invocations' spread.
    let offsets = [[1.06, 0.94, 1.04, 0.96], [1.13, 1.01, 1.11, 1.03]];
    for (side, label) in ["old", "new"].iter().enumerate().map(|(i, l)| (i, *l)) {
        for (i, offset) in offsets[side].iter().enumerate() {
            let mut r = record.clone();
            r["label"] = label.into();
            r["started_at"] = format!("2026-11-2{}T10:0{i}:00Z", side + 1).into();
            for row in r["rows"].as_array_mut().unwrap() {
                let rep = row["repetition"].as_f64().unwrap();
                row["statistics"]["lateness"]["p50"] =
                    ((50_000.0 * offset * (1.0 + (rep - 2.0) * 0.001)) as i64).into();
            }
            let folder = dir.path().join(label).join(format!("run-{i}"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("run.json"), serde_json::to_string_pretty(&r).unwrap()).unwrap();
        }
    }
    // An interrupted run on the new side, far off: left out, or it would be a change.
    let mut interrupted = record.clone();
    interrupted["label"] = "new".into();
    interrupted["complete"] = false.into();
    interrupted["started_at"] = "2026-11-22T11:00:00Z".into();
    for row in interrupted["rows"].as_array_mut().unwrap() {
        row["statistics"]["lateness"]["p50"] = 500_000.into();
    }
    let folder = dir.path().join("new").join("run-9");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("run.json"), serde_json::to_string_pretty(&interrupted).unwrap()).unwrap();

    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    let folders =
        ok(with_history(&history, &["compare", old.to_str().unwrap(), new.to_str().unwrap(), "--format", "json"]));
    let folders: Value = serde_json::from_str(&stdout(&folders)).unwrap();
    let line = &folders["lines"][0];
    assert_eq!(
        (
            line["verdict"].as_str(),
            line["level"].as_str(),
            line["old_invocations"].as_u64(),
            line["new_invocations"].as_u64()
        ),
        (Some("no_change"), Some("invocations"), Some(4), Some(4)),
        "{line}"
    );
    // Welch on the means (1.06 0.94 1.04 0.96) x 50 µs against (1.13 1.01 1.11 1.03) x 50 µs:
    // t = 0.07 / sqrt(2 x 0.0034667 / 4) = 1.6813, df 6, p = 0.1437 (numerical integration).
    let p = line["p_value"].as_f64().unwrap();
    assert!((p - 0.1437).abs() < 5e-4, "{line}");
    assert_eq!(folders["left_out"]["incomplete_runs"].as_array().unwrap().len(), 1, "{folders}");

    let mut imported = vec!["history", "import"];
    let all: Vec<String> = ["old", "new"]
        .iter()
        .flat_map(|l| std::fs::read_dir(dir.path().join(l)).unwrap().map(|e| e.unwrap().path().display().to_string()))
        .collect();
    imported.extend(all.iter().map(String::as_str));
    ok(with_history(&history, &imported));
    let stored = ok(with_history(&history, &["history", "compare", "--by", "label", "old", "new", "--format", "json"]));
    let stored: Value = serde_json::from_str(&stdout(&stored)).unwrap();
    let same = &stored["lines"][0];
    assert_eq!((same["verdict"].as_str(), same["level"].as_str()), (Some("no_change"), Some("invocations")), "{same}");
    assert!((same["p_value"].as_f64().unwrap() - p).abs() < 1e-9, "the same p from the store: {same}");
    assert_eq!(stored["left_out"]["incomplete_runs"].as_array().unwrap().len(), 1, "{stored}");
    // With the interrupted run, both see its offset.
    let all_runs = ok(with_history(
        &history,
        &["history", "compare", "--by", "label", "old", "new", "--include-incomplete", "--format", "json"],
    ));
    let all_runs: Value = serde_json::from_str(&stdout(&all_runs)).unwrap();
    assert_eq!(all_runs["lines"][0]["new_invocations"], 5, "{all_runs}");
}

/// Only whole measurements: an interrupted run and failed repetitions, however far off, change
/// neither `history check` nor `trend`; they are counted, and `--include-incomplete` uses them.
#[test]
fn check_and_trend_leave_out_what_is_not_whole_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("h.sqlite");
    synthetic(&history, &[("m", "thread", values(14, 0, 50_000.0, 1.0))]);
    // The newest 4 runs: one interrupted and three with a failed repetition, all 10 times later.
    let db = rusqlite::Connection::open(&history).unwrap();
    db.execute("UPDATE runs SET complete = 0 WHERE label = 'c14'", []).unwrap();
    db.execute(
        "UPDATE measurements SET status = 'failed', value = value * 10 WHERE repetition = 1 AND run_id IN \
         (SELECT id FROM runs WHERE label IN ('c11', 'c12', 'c13'))",
        [],
    )
    .unwrap();
    db.execute(
        "UPDATE measurements SET value = value * 10 WHERE run_id IN (SELECT id FROM runs WHERE label = 'c14')",
        [],
    )
    .unwrap();
    drop(db);
    let checked = ok(with_history(&history, &["history", "check", "--format", "json"]));
    let json: Value = serde_json::from_str(&stdout(&checked)).unwrap();
    assert_eq!(json["findings"][0]["verdict"], "no_change", "{json}");
    assert_eq!(json["findings"][0]["runs"], 13, "the interrupted run is not one of the series' runs: {json}");
    assert_eq!(json["left_out"]["incomplete_runs"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["left_out"]["repetitions"]["failed"], 3, "one p50 in each of 3 runs: {json}");
    let console = stdout(&ok(with_history(&history, &["history", "check"])));
    assert!(
        console.contains("left out: 1 interrupted run(s)") && console.contains("failed repetition(s)"),
        "{console}"
    );
    // With them, the tenfold values are a regression.
    let all = with_history(&history, &["history", "check", "--include-incomplete", "--format", "json"]);
    assert_eq!(all.status.code(), Some(1), "{}", stdout(&all));
    let out = dir.path().join("trend");
    let trend: Value = serde_json::from_str(&stdout(&ok(with_history(
        &history,
        &["history", "trend", "--format", "json", "-o", out.to_str().unwrap()],
    ))))
    .unwrap();
    assert_eq!(trend["lines"][0]["points"].as_array().unwrap().len(), 13, "{trend}");
    assert_eq!(trend["left_out"]["incomplete_runs"].as_array().unwrap().len(), 1, "{trend}");
}
