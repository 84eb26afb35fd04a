//! The record() clients' contract (clients/README.md), as the tests of `taskmeter bench`
//! (bench.rs) and of the clients' installs (installs.rs) check it: each client's conformance
//! program runs once as a scenario, and its row must count exactly the contract's events.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

use super::{stderr, stdout, taskmeter};

/// Runs a build or install step; fails the test with what it printed if it fails.
pub fn build(command: &mut Command) {
    let output = command.output().expect("the build tool runs");
    assert!(
        output.status.success(),
        "{command:?}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `command` (`taskmeter bench` and its arguments), writing to `out`; returns its output
/// and record.
pub fn bench_in(mut command: Command, out: &Path) -> (Output, serde_json::Value) {
    let output = command.arg("-o").arg(out).output().unwrap();
    let text = std::fs::read_to_string(out.join("bench.json")).unwrap_or_else(|_| panic!("{}", stderr(&output)));
    (output, serde_json::from_str(&text).unwrap())
}

/// The row of `scenario` in a bench record.
pub fn result<'a>(record: &'a serde_json::Value, scenario: &str) -> &'a serde_json::Value {
    record["report"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == scenario)
        .expect("scenario present")
}

/// Runs each (name, shell command) once as a scenario of `taskmeter bench`, from `cwd`, writing
/// into `out/out-WINDOW`; returns each one's row. Every program runs in a 3 s window; on a loaded
/// machine, one that had not started within it (a VM's start) runs again alone in a longer one,
/// the others' rows kept.
pub fn contract_rows(programs: &[(&str, String)], cwd: &Path, out: &Path) -> HashMap<String, serde_json::Value> {
    let run = |window: &str, programs: &[&(&str, String)]| {
        // `--time`, bench's old name for --duration, still works.
        let mut args = vec!["--warmup", "0", "--time", window, "--drain", "100ms"];
        // One run each: the program ends, then the shell outlasts the window and is stopped.
        let scenarios: Vec<String> =
            programs.iter().map(|(name, program)| format!("{name}={program} && sleep 60")).collect();
        for scenario in &scenarios {
            args.extend(["--scenario", scenario]);
        }
        let mut command = taskmeter();
        command.current_dir(cwd).arg("bench").args(&args);
        bench_in(command, &out.join(format!("out-{window}")))
    };
    let mut pending: Vec<&(&str, String)> = programs.iter().collect();
    let mut rows = HashMap::new();
    for (i, window) in ["3s", "10s", "30s"].into_iter().enumerate() {
        let (output, record) = run(window, &pending);
        let last = i == 2;
        assert!(output.status.success() || !last, "{}{}", stdout(&output), stderr(&output));
        pending.retain(|(name, _)| {
            let found =
                record["report"]["results"].as_array().and_then(|rows| rows.iter().find(|r| r["scenario"] == *name));
            let counted = output.status.success() && found.is_some_and(|r| r["units"].as_u64() >= Some(10));
            if counted || last {
                rows.insert((*name).to_string(), result(&record, name).clone());
            }
            !(counted || last)
        });
        if pending.is_empty() {
            break;
        }
        let names: Vec<&str> = pending.iter().map(|(name, _)| *name).collect();
        eprintln!("{names:?} had not started within the {window} window: measuring them again with a longer one");
    }
    rows
}

/// The row of a conformance program: exactly the contract's events, all delivered.
pub fn assert_contract(name: &str, r: &serde_json::Value) {
    assert_eq!(r["error"], serde_json::Value::Null, "{name}: {r}");
    assert_eq!(r["invocations"], 1, "{name}");
    assert_eq!(r["units"], 10, "{name}: 3 records + record_n(5) + 2 completions");
    assert_eq!(r["latency"]["count"], 2, "{name}");
    let ids = &r["ids"];
    assert_eq!(
        (ids["unknown_ids"].as_u64(), ids["duplicate_completions"].as_u64(), ids["never_completed"].as_u64()),
        (Some(1), Some(1), Some(1)),
        "{name}: {ids}"
    );
    let d = &r["delivery"];
    assert_eq!(d["events_received"], 11, "{name}: {d}");
    assert_eq!(
        (d["events_dropped_by_clients"].as_u64(), d["malformed_batches"].as_u64(), d["batches_missing"].as_u64()),
        (Some(0), Some(0), Some(0)),
        "{name}: {d}"
    );
    assert_eq!(d["processes"], 1, "{name}");
    // Every timestamp fell inside the job: none before its start, none after the window.
    assert_eq!(
        (r["outside"]["warmup_units"].as_u64(), r["outside"]["after_units"].as_u64()),
        (Some(0), Some(0)),
        "{name}"
    );
}

/// A conformance program run without a collector: it exits 0 and says nothing.
pub fn assert_silent_without_a_collector(command: &mut Command) {
    let output = command
        .env_remove("TASKMETER_RECORD")
        .env_remove("TASKMETER_RECORD_STREAM")
        .output()
        .expect("the program runs");
    assert!(output.status.success(), "{command:?}: {}", stderr(&output));
    assert!(
        output.stderr.is_empty() && output.stdout.is_empty(),
        "{command:?} is silent: {}{}",
        stdout(&output),
        stderr(&output)
    );
}
