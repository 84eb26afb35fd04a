//! `taskmeter run granularity` as a user meets it: the ranked METG table, the record and its
//! figures recomputed from what the workers sent, a runtime that cannot run a plan, Ctrl-C and
//! bad input.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

mod common;
use common::{assert_refused, run, stderr, stdout, taskmeter, worker_of};

/// Small and quick: four task sizes, 40 ms each.
const QUICK: &[&str] = &[
    "--task-busy",
    "100us,10us,1us,100ns",
    "--duration",
    "40ms",
    "--warmup",
    "5ms",
    "--calibrate",
    "2ms",
    "--steps",
    "10",
];

fn record(folder: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(folder.join("granularity.json")).unwrap()).unwrap()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

#[test]
fn runtimes_are_ranked_by_metg_from_checked_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("g");
    let output = run(&[
        &["run", "granularity", "--runtimes", "thread,tokio-ct,smol", "--repeat", "2", "-o", folder.to_str().unwrap()],
        QUICK,
    ]
    .concat());
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("METG(50 %)") && table.contains("efficiency (%) at each task size"), "{table}");
    let record = record(&folder);
    assert_eq!(record["schema"], "taskmeter.granularity");
    let settings = &record["settings"];
    let per_round = settings["width"].as_u64().unwrap() * settings["steps"].as_u64().unwrap();
    let runs = record["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "three runtimes, two repetitions");
    for run in runs {
        assert!(run["error"].is_null(), "{run}");
        let points = run["points"].as_array().unwrap();
        assert_eq!(
            points.iter().map(|p| p["grain_ns"].as_u64().unwrap()).collect::<Vec<_>>(),
            [100_000, 10_000, 1_000, 100]
        );
        for p in points {
            // Every task started was completed and returned the right result.
            let tasks = p["tasks"].as_u64().unwrap();
            assert_eq!(tasks, p["rounds"].as_u64().unwrap() * per_round);
            assert_eq!((p["completed"].as_u64().unwrap(), p["wrong"].as_u64().unwrap()), (tasks, 0));
            // The figures follow their definitions from the worker's raw counts.
            // The task's work: the faster of its two serial baselines, before and after its rounds.
            let task_ns = (f(&p["serial_ns"]) / f(&p["serial_tasks"]))
                .min(f(&p["serial_after_ns"]) / f(&p["serial_after_tasks"]));
            let granularity = f(&p["wall_ns"]) * f(&p["cores"]) / tasks as f64;
            assert!((f(&p["task_ns"]) - task_ns).abs() < 1e-6 * task_ns);
            assert!((f(&p["granularity_ns"]) - granularity).abs() < 1e-6 * granularity);
            assert!((f(&p["efficiency"]) - task_ns / granularity).abs() < 1e-9);
        }
        assert!(run["metg"]["kind"].is_string(), "every complete worker has a METG or a bound: {run}");
    }
    let expected_cores = [("thread", None), ("tokio-ct", Some(1)), ("smol", Some(1))];
    let summaries = record["summaries"].as_array().unwrap();
    assert_eq!(summaries.len(), 3);
    for s in summaries {
        assert_eq!(s["repetitions"], 2);
        let cores = expected_cores.iter().find(|(r, _)| *r == s["runtime"]).unwrap().1;
        if let Some(cores) = cores {
            assert_eq!(s["cores"], cores, "one-threaded runtimes divide by one core");
        }
        // Two repetitions: a range with one degree of freedom (on a log scale), or a bound.
        assert!(
            s["metg_ns"]["degrees_of_freedom"] == 1.0 || !s["metg_bound"].is_null() || s["metg_ns"].is_null(),
            "{s}"
        );
        assert_eq!(s["efficiency"].as_array().unwrap().len(), 4);
        assert_eq!(
            table
                .lines()
                .filter(|l| !l.starts_with("warning:") && l.split_whitespace().nth(1) == s["runtime"].as_str())
                .count(),
            1,
            "{table}"
        );
    }
    let csv = std::fs::read_to_string(folder.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6 * 4, "a line per runtime, repetition and task size");
    for chart in ["efficiency", "efficiency-by-size", "overhead"] {
        assert!(folder.join(format!("charts/{chart}.svg")).is_file(), "{chart}");
    }
    assert!(std::fs::read_to_string(folder.join("report.html")).unwrap().contains("METG(50 %)"));
    // The report is rebuilt from the record alone.
    std::fs::remove_dir_all(folder.join("charts")).unwrap();
    let rebuilt = run(&["report", folder.to_str().unwrap()]);
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert!(folder.join("charts/efficiency.svg").is_file());
}

#[test]
fn every_pattern_runs_in_every_rust_runtime() {
    for pattern in ["chain", "stencil"] {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(pattern);
        let output = run(&[
            &[
                "run",
                "granularity",
                "--pattern",
                pattern,
                "--runtimes",
                "thread,tokio-ct,tokio-mt,smol,embassy",
                "--repeat",
                "1",
                "-o",
                folder.to_str().unwrap(),
            ],
            QUICK,
        ]
        .concat());
        assert!(output.status.success(), "{pattern}: {}{}", stdout(&output), stderr(&output));
        let record = record(&folder);
        assert_eq!(record["settings"]["pattern"], pattern);
        assert!(record["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["error"].is_null() && r["points"].as_array().unwrap().len() == 4));
    }
}

#[test]
fn a_runtime_that_cannot_hold_the_tasks_fails_its_own_row_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("pool");
    // embassy's static pool holds 4,096 tasks; trivial starts width x steps at once.
    let args = [
        "run",
        "granularity",
        "--runtimes",
        "embassy,tokio-ct",
        "--width",
        "100",
        "--steps",
        "41",
        "--task-busy",
        "1us,100ns",
        "--repeat",
        "1",
    ];
    let output = run(&[
        &args[..],
        &["--duration", "20ms", "--warmup", "0", "--calibrate", "2ms", "-o", folder.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let record = record(&folder);
    let runs = record["runs"].as_array().unwrap();
    let embassy = runs.iter().find(|r| r["runtime"] == "embassy").unwrap();
    assert!(embassy["error"].as_str().unwrap().contains("holds at most 4096 tasks in flight"), "{embassy}");
    let tokio = runs.iter().find(|r| r["runtime"] == "tokio-ct").unwrap();
    assert!(tokio["error"].is_null() && tokio["points"].as_array().unwrap().len() == 2, "{tokio}");
    assert!(stdout(&output).contains("embassy (repetition 1) failed"));
}

#[test]
fn ctrl_c_keeps_the_task_sizes_measured() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("g");
    let child = taskmeter()
        .args([
            "run",
            "granularity",
            "--runtimes",
            "tokio-ct,smol",
            "--task-busy",
            "10us,1us",
            "--duration",
            "300ms",
            "--warmup",
            "0",
            "--calibrate",
            "2ms",
        ])
        .args(["--repeat", "50", "-o", folder.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    worker_of(child.id());
    std::thread::sleep(Duration::from_millis(2500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    let record = record(&folder);
    assert_eq!(record["complete"], false);
    let runs = record["runs"].as_array().unwrap();
    assert!(runs.len() < 100, "stopped early");
    assert!(
        runs.iter().any(|r| r["error"].is_null() && r["points"].as_array().unwrap().len() == 2),
        "workers that ended before Ctrl-C are kept"
    );
}

#[test]
fn bad_granularity_input_gets_one_clear_line() {
    assert_refused(&[
        (vec!["run", "granularity", "--task-busy", "10ns..1ms"], "from the largest size down to the smallest"),
        (vec!["run", "granularity", "--task-busy", "1ms,1ms"], "each smaller"),
        (vec!["run", "granularity", "--task-busy", "1ms..1us:0"], "K sizes per decade"),
        (vec!["run", "granularity", "--task-busy", "0"], "longer than 0"),
        (vec!["run", "granularity", "--width", "0"], "invalid value '0'"),
        (vec!["run", "granularity", "--pattern", "tree"], "invalid value 'tree'"),
        (vec!["run", "granularity", "--calibrate", "10us"], "calibrate_ns must be at least 1 ms"),
        (vec!["run", "granularity", "--units", "5"], "--units does not apply to `run granularity`"),
        (vec!["run", "granularity", "--sleep", "fixed:1ms"], "--sleep does not apply to `run granularity`"),
        (
            vec!["run", "sleep", "--pattern", "chain"],
            "--pattern does not apply to `run sleep` (it applies to granularity)",
        ),
        (vec!["run", "net", "--task-busy", "1ms"], "--task-busy does not apply to `run net`"),
    ]);
}

#[test]
fn every_runtime_runs_the_preset_in_one_table() {
    // The preset, made quick: every runtime available here measures every size, or says why not.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("all");
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/granularity-metg.toml");
    let output = run(&[
        &["run", preset.to_str().unwrap()],
        QUICK,
        &["--repeat", "1", "--runtimes", "all", "--grace", "60s", "-o", folder.to_str().unwrap()],
    ]
    .concat());
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
    let record = record(&folder);
    let runs = record["runs"].as_array().unwrap();
    let skipped = record["skipped"].as_array().unwrap().len();
    // Every runtime of the registry but python-abs, whose tasks are python-thread's.
    let runtimes = common::registry("runtimes").into_iter().filter(|r| r.id != "python-abs").count();
    assert_eq!(runs.len() + skipped, runtimes, "every runtime ran or was skipped with its reason");
    for run in runs {
        assert!(run["error"].is_null() && run["points"].as_array().unwrap().len() == 4, "{run}");
    }
}

#[test]
fn three_workers_per_runtime_give_intervals_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("default");
    let output = run(&[
        "run",
        "granularity",
        "--runtimes",
        "tokio-ct",
        "--task-busy",
        "10us,100ns",
        "--duration",
        "10ms",
        "--warmup",
        "0",
        "--calibrate",
        "1ms",
        "-o",
        folder.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let record = record(&folder);
    assert_eq!(record["settings"]["repeat"], 3);
    assert_eq!(record["runs"].as_array().unwrap().len(), 3);
    let text = common::unwrapped(&stdout(&output));
    assert!(text.contains("95 % range for another invocation's mean, from 3 repetitions"), "{text}");
}
