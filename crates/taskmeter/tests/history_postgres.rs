//! The history on a real PostgreSQL server (never a mock): a throw-away cluster made with
//! initdb and started with pg_ctl under a temporary folder, listening only on a Unix socket in
//! that folder, stopped at the end. tests/setup.sh installs Debian's `postgresql` when missing;
//! as root, the cluster runs as `nobody` (initdb refuses root). Without PostgreSQL the tests
//! say `SKIPPED: why`, and fail under CI=true.

use serde_json::Value;
use std::process::Output;
use std::time::Duration;

mod common;
use common::postgres::{cluster, path};
use common::{stderr, stdout, taskmeter, Background};

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
    let said = common::unwrapped(&stdout(&history(&url, &["history", "import", path(&dir.path().join("results"))])));
    assert!(said.contains("imported 0 run(s)") && said.contains("4 already there"), "{said}");
    assert_eq!(listed(&url).len(), 4);
    // The same statistics as SQLite keeps: show, trend and compare read them.
    let shown = stdout(&history(&url, &["history", "show", "1"]));
    assert!(shown.contains("lateness") && shown.contains("p99"), "{shown}");
    let compared = history(&url, &["history", "compare", "--by", "label", "w0", "w1"]);
    assert!(matches!(compared.status.code(), Some(0 | 1)), "{}", stderr(&compared));
    assert!(stdout(&compared).contains("label w0"), "{}", stdout(&compared));
    // Trend and check read each run's workload from the server too: the four are one series,
    // too short to see a change (8 runs alone).
    let trend = history(&url, &["history", "trend", "--format", "json", "-o", path(&dir.path().join("trend"))]);
    let trend: Value = serde_json::from_str(&stdout(&trend)).unwrap();
    assert_eq!(trend["lines"].as_array().unwrap().len(), 1, "{trend}");
    let checked = history(&url, &["history", "check", "--format", "json"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    let checked: Value = serde_json::from_str(&stdout(&checked)).unwrap();
    let finding = &checked["findings"][0];
    assert_eq!((finding["verdict"].as_str(), finding["runs_needed"].as_u64()), (Some("cannot_detect"), Some(8)));
    assert_eq!(finding["series"]["workload"]["settings.runtimes"], Value::Null, "a knob, not the workload");
}

#[test]
fn a_server_that_goes_away_costs_one_warning_line() {
    let Some(cluster) = cluster() else { return };
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(listed(&url).len(), 0); // the schema exists: the run would only insert
    let folder = dir.path().join("gone");
    // A run of 2 s, during which the server goes away.
    let mut args: Vec<&str> = "run --runtimes thread --duration 2s --warmup 0 -q".split(' ').collect();
    args.extend(["--history", &url, "-o", path(&folder)]);
    let run = Background::start(&args, &[]);
    std::thread::sleep(Duration::from_millis(500));
    cluster.control("stop").unwrap();
    let done = run.finish();
    assert_eq!(done.status.code(), Some(0), "the exit status is the run's: {}", done.stderr);
    // One line, wrapped to the width of stderr: joined again.
    let said = common::unwrapped(&done.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.starts_with("taskmeter: warning: the run was not recorded in the history"), "{said}");
    assert!(said.contains("cannot connect to"), "the error is named: {said}");
    assert!(folder.join("run.json").is_file(), "the folder is written");

    // Back up: the folder imports, once.
    cluster.control("start").unwrap();
    for expected in ["imported 1 run(s)", "imported 0 run(s)"] {
        let said = common::unwrapped(&stdout(&history(&url, &["history", "import", path(&folder)])));
        assert!(said.contains(expected), "{said}");
    }
    assert_eq!(listed(&url).len(), 1);
}
