//! The dashboards' exports (docs/outputs.md): each holds the figures the table shows, with
//! taskmeter's own 95 % range only where the run has repetitions, and an unknown export format
//! names the known ones. Their real consumers' parsers and schemas read them in
//! tests/exports/test_exports.py (pytest).

mod common;

use common::{assert_refused, run, run_json, stderr, taskmeter};
use serde_json::Value;
use std::path::Path;

/// A quick run of one runtime with every dashboard export, `repeat` repetitions.
fn exported(dir: &Path, name: &str, repeat: &str) -> (Value, Value, Value, String) {
    let out = dir.join(name);
    let file = |ext: &str| dir.join(format!("{name}.{ext}"));
    let output = taskmeter()
        .args(["run", "--runtimes", "thread", "--quick", "--repeat", repeat, "-o"])
        .arg(&out)
        .arg("--export-github-benchmark-smaller")
        .arg(file("smaller.json"))
        .arg("--export-github-benchmark-bigger")
        .arg(file("bigger.json"))
        .arg("--export-bmf")
        .arg(file("bmf.json"))
        .arg("--export-openmetrics")
        .arg(file("om.txt"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let json = |ext: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(file(ext)).unwrap()).unwrap() };
    (json("smaller.json"), json("bigger.json"), json("bmf.json"), std::fs::read_to_string(file("om.txt")).unwrap())
}

/// The mean over the rows of a statistic of lateness, from run.json.
fn mean_of_rows(record: &Value, statistic: &str) -> f64 {
    let values: Vec<f64> = record["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["statistics"]["lateness"][statistic].as_f64().unwrap())
        .collect();
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn a_run_s_exports_hold_the_table_s_figures_with_a_range_only_from_repetitions() {
    let dir = tempfile::tempdir().unwrap();
    let (smaller, bigger, bmf, om) = exported(dir.path(), "two", "2");
    let record = run_json(&dir.path().join("two"));
    let entries = smaller.as_array().unwrap();
    let find = |name: &str| entries.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{name}: {smaller}"));
    // The p50 is the mean of the repetitions' p50s, as the table shows it, in ns.
    let p50 = find("sleep / thread / lateness p50");
    assert_eq!(p50["unit"], "ns");
    assert!((p50["value"].as_f64().unwrap() - mean_of_rows(&record, "p50")).abs() < 1e-6, "{p50}");
    assert!(p50["range"].as_str().unwrap().starts_with("± "), "{p50}");
    for term in ["machine: ", "kernel: ", "cpu: ", "taskmeter_version: ", "repetitions: 2"] {
        assert!(p50["extra"].as_str().unwrap().contains(term), "{term}: {p50}");
    }
    assert!(find("sleep / thread / lateness p99")["value"].as_f64().unwrap() >= p50["value"].as_f64().unwrap());
    assert_eq!(bigger, Value::Array(Vec::new()), "a sleep run has no figure where higher is better");
    // BMF: the same value, its bounds around it.
    let metric = &bmf["sleep / thread"]["lateness-p50"];
    assert_eq!(metric["value"], p50["value"]);
    assert!(metric["lower_value"].as_f64().unwrap() < metric["upper_value"].as_f64().unwrap(), "{bmf}");
    // OpenMetrics: the value in seconds, a histogram per row whose +Inf bucket counts its samples.
    let seconds = p50["value"].as_f64().unwrap() * 1e-9;
    let gauge = om.lines().find(|l| l.starts_with("taskmeter_lateness_p50_seconds{")).unwrap();
    let written: f64 = gauge.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((written - seconds).abs() < 1e-15, "{gauge}");
    for row in record["rows"].as_array().unwrap() {
        let repetition = format!("repetition=\"{}\"", row["repetition"]);
        let inf = om
            .lines()
            .find(|l| {
                l.starts_with("taskmeter_lateness_seconds_bucket{") && l.contains(&repetition) && l.contains("+Inf")
            })
            .unwrap();
        assert!(inf.ends_with(&format!(" {}", row["statistics"]["lateness"]["count"])), "{inf}");
    }
    assert!(om.ends_with("# EOF\n"));

    // One repetition: no range anywhere.
    let (smaller, _, bmf, om) = exported(dir.path(), "one", "1");
    assert!(smaller.as_array().unwrap().iter().all(|e| e.get("range").is_none()), "{smaller}");
    assert_eq!(bmf["sleep / thread"]["lateness-p50"].get("lower_value"), None, "{bmf}");
    assert!(!om.contains("_low_seconds") && !om.contains("_high_seconds"));

    // compare: each line's new / old, as the comparison judged it.
    let file = dir.path().join("compare.json");
    let output = taskmeter()
        .args(["compare", "--format", "json"])
        .args([dir.path().join("one"), dir.path().join("two")])
        .arg("--export-github-benchmark-smaller")
        .arg(&file)
        .output()
        .unwrap();
    assert!(output.status.code().is_some_and(|c| c <= 1), "{}", stderr(&output));
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    let line = &comparison["lines"][0];
    let entries: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let entry = &entries[0];
    assert_eq!(entry["name"], "compare sleep / thread / lateness / new/old ratio", "{entry}");
    let ratio = line["new"].as_f64().unwrap() / line["old"].as_f64().unwrap();
    assert!((entry["value"].as_f64().unwrap() - ratio).abs() < 1e-12, "{entry}");
    assert!(entry["extra"].as_str().unwrap().contains(&format!("verdict: {}", line["verdict"].as_str().unwrap())));
    assert_eq!(entry.get("range"), None, "one invocation a side: no range of new / old");
    assert_eq!(line.get("ratio_range"), None, "compare's JSON is unchanged");
}

#[test]
fn an_unknown_export_format_names_the_nearest_and_every_known_one() {
    let all = "known: json, csv, markdown, github-benchmark-smaller, github-benchmark-bigger, bmf, openmetrics)";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--export-bmff", "x"], "unknown export format 'bmff' (did you mean 'bmf'?"),
        (vec!["run", "--export-bmff", "x"], all),
        (vec!["bench", "--export-opnmetrics", "x"], "(did you mean 'openmetrics'?"),
        (vec!["run", "--export", "jsn", "x"], "unknown export format 'jsn' (did you mean 'json'?"),
        (vec!["run", "--export=markdwn"], "write one with --export-FORMAT FILE"),
        // compare writes only the dashboards' formats.
        (
            vec!["compare", "a", "b", "--export-json", "x"],
            "unknown export format 'json' (known: github-benchmark-smaller, github-benchmark-bigger, bmf, openmetrics)",
        ),
        (vec!["history", "compare", "1", "2", "--export-bmf-json", "x"], "(did you mean 'bmf'?"),
    ];
    assert_refused(&cases);
    // At most 3 lines at 100 columns, as written.
    for (args, _) in &cases {
        let err = stderr(&run(args));
        assert!(err.lines().count() <= 3 && err.lines().all(|l| l.chars().count() <= 100), "{args:?}:\n{err}");
    }
    // An export file whose folder does not exist is refused before anything is measured or read.
    let output = run(&["compare", "a", "b", "--export-bmf", "/nonexistent/folder/bmf.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("folder /nonexistent/folder does not exist"), "{}", stderr(&output));
}

/// history compare of two labels, two runs each: each line's new / old with the 95 % range of
/// its test between invocations, around the ratio, and its verdict.
#[test]
fn history_compare_exports_each_line_s_ratio_with_its_range_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.sqlite");
    for (i, label) in ["a", "a", "b", "b"].iter().enumerate() {
        let output = taskmeter()
            .env("TASKMETER_HISTORY", &history)
            .args(["run", "--runtimes", "thread", "--quick", "--repeat", "2", "--label", label, "-o"])
            .arg(dir.path().join(format!("run-{i}")))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let (bmf, om) = (dir.path().join("bmf.json"), dir.path().join("judged.prom"));
    let output = taskmeter()
        .env("TASKMETER_HISTORY", &history)
        .args(["history", "compare", "a", "b", "--by", "label", "--format", "json", "--export-bmf"])
        .arg(&bmf)
        .arg("--export-openmetrics")
        .arg(&om)
        .output()
        .unwrap();
    assert!(output.status.code().is_some_and(|c| c <= 1), "{}", stderr(&output));
    let judged: Value = serde_json::from_slice(&output.stdout).unwrap();
    let line = &judged["lines"][0];
    let bmf: Value = serde_json::from_str(&std::fs::read_to_string(&bmf).unwrap()).unwrap();
    let metric = &bmf["history compare / sleep / thread / lateness p50"]["new-old-ratio"];
    let value = metric["value"].as_f64().unwrap();
    assert!((value - line["new"].as_f64().unwrap() / line["old"].as_f64().unwrap()).abs() < 1e-12, "{metric}");
    let (low, high) = (metric["lower_value"].as_f64().unwrap(), metric["upper_value"].as_f64().unwrap());
    assert!(0.0 < low && low < value && value < high, "{metric}");
    let om = std::fs::read_to_string(&om).unwrap();
    let verdict = format!("verdict=\"{}\"", line["verdict"].as_str().unwrap());
    assert!(om.lines().any(|l| l.starts_with("taskmeter_compare_new_old_verdict{") && l.contains(&verdict)), "{om}");
    assert!(om.contains("label=\"b\""), "the environment of the newest run judged");
}
