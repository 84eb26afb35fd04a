//! Sweeps, charts, report.html, exports and compare, as a user meets them.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{assert_refused, run, run_json as record, stderr, stdout, taskmeter};

/// A short run of `runtimes` with extra flags, written to `folder`.
fn measure(folder: &Path, runtimes: &str, extra: &[&str]) -> Output {
    measure_with(taskmeter(), folder, runtimes, extra)
}

fn measure_with(mut command: Command, folder: &Path, runtimes: &str, extra: &[&str]) -> Output {
    let mut args = vec!["run", "--runtimes", runtimes, "-o", folder.to_str().unwrap()];
    if !extra.contains(&"--duration") {
        args.extend_from_slice(&["--duration", "300ms", "--warmup", "50ms"]);
    }
    args.extend_from_slice(extra);
    let output = command.args(&args).output().expect("taskmeter runs");
    assert!(matches!(output.status.code(), Some(0)), "{}", stderr(&output));
    output
}

#[test]
fn a_sweep_draws_every_chart_and_a_self_contained_report() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("sweep");
    let out = dir.path().join("table.md");
    let csv = dir.path().join("summary.csv");
    let json = dir.path().join("run.json");
    let output = measure(
        &folder,
        "thread,smol",
        &[
            "--sweep",
            "busy=0,1000,1000000",
            "--export-markdown",
            out.to_str().unwrap(),
            "--export-csv",
            csv.to_str().unwrap(),
            "--export-json",
            json.to_str().unwrap(),
        ],
    );
    let console = stdout(&output);
    // Points are numbered from 0 everywhere: the table, the charts, summary.csv and run.json.
    for label in ["point 0: busy=0", "point 1: busy=1000", "point 2: busy=1000000"] {
        assert!(console.contains(label), "{console}");
    }
    assert!(console.contains("busy swept: 0, 1000, 1000000"));

    let mut charts: Vec<String> = std::fs::read_dir(folder.join("charts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    charts.sort();
    let mut expected: Vec<String> =
        ["mean", "p99", "samples", "ratio"].iter().map(|s| format!("sweep-busy-{s}.svg")).collect();
    for point in 0..3 {
        expected.push(format!("point-{point}-lateness-percentiles.svg"));
        expected.push(format!("point-{point}-deviation-bars.svg"));
        expected.push(format!("why-point-{point}-frontier.svg"));
    }
    expected.sort();
    assert_eq!(charts, expected);

    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    for chart in &charts {
        let svg = std::fs::read_to_string(folder.join("charts").join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.len() > 2_000, "{chart} is a real drawing");
        assert!(svg.contains("thread") && svg.contains("smol"), "{chart} has a legend or labels for both runtimes");
        assert!(report.contains(&svg), "{chart} is inlined in report.html");
        // Accessible: a title and a description (the run, what against what, the runtimes)
        // before anything drawn.
        let head = svg.split("<rect").next().unwrap();
        let title = head.split("<title>").nth(1).and_then(|t| t.split("</title>").next()).expect(chart);
        assert!(!title.is_empty() && svg.contains("role=\"img\""), "{chart}: {head}");
        let desc = head.split("<desc>").nth(1).and_then(|d| d.split("</desc>").next()).expect(chart);
        assert!(
            desc.starts_with("taskmeter sleep run of ") && (desc.contains(" against ") || desc.contains(" a row each")),
            "{chart}: {desc}"
        );
        assert!(desc.contains("thread") && desc.contains("smol"), "{chart}: {desc}");
    }
    assert!(
        !report.contains("src=\"http") && !report.contains("href=\"http") && !report.contains("<link"),
        "nothing is fetched"
    );
    assert_eq!(report.matches("<table class=\"results\">").count(), 3 + 1, "one per point, and why the rows differ");
    assert!(report.contains(&format!("{}", record(&folder)["order"]["seed"])));

    let rec = record(&folder);
    assert_eq!(rec["points"].as_array().unwrap().len(), 3);
    assert_eq!(rec["rows"].as_array().unwrap().len(), 6);
    assert_eq!(rec["order"]["shuffled"], true);
    for row in rec["rows"].as_array().unwrap() {
        assert!(row["histograms"]["lateness"].as_str().unwrap().len() > 10);
    }
    assert_eq!(std::fs::read_to_string(&json).unwrap(), std::fs::read_to_string(folder.join("run.json")).unwrap());
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), std::fs::read_to_string(folder.join("summary.csv")).unwrap());
    let summary = std::fs::read_to_string(&csv).unwrap();
    assert!(summary.lines().next().unwrap().ends_with(",status,point,repetition,busy"));
    assert_eq!(summary.lines().count(), 1 + 6 * 4);
    let markdown = std::fs::read_to_string(&out).unwrap();
    assert_eq!(markdown.matches("| runtime | samples | lateness mean ± sd |").count(), 3);

    // The report is rebuilt from run.json alone, identically.
    std::fs::remove_dir_all(folder.join("charts")).unwrap();
    std::fs::remove_file(folder.join("report.html")).unwrap();
    let rebuilt = run(&["report", folder.to_str().unwrap()]);
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert_eq!(std::fs::read_to_string(folder.join("report.html")).unwrap(), report);
    assert_eq!(std::fs::read_dir(folder.join("charts")).unwrap().count(), charts.len());

    // --figures: every figure for a paper, in the house style.
    let figures = dir.path().join("figures");
    let written = run(&["report", folder.to_str().unwrap(), "--figures", figures.to_str().unwrap()]);
    assert!(written.status.success(), "{}", stderr(&written));
    for chart in &charts {
        let svg = std::fs::read_to_string(figures.join(chart)).unwrap();
        assert_eq!(svg, std::fs::read_to_string(folder.join("charts").join(chart)).unwrap());
        assert!(svg.contains("width=\"480\""), "{chart}: one column of a paper");
        let png = figures.join(chart).with_extension("png");
        if cfg!(feature = "print") {
            let (width, per_metre) = png_size_and_density(&std::fs::read(&png).unwrap());
            assert_eq!(width, 1004, "{chart}: 8.5 cm at 300 dpi");
            assert_eq!(per_metre, 11811, "{chart}: pHYs says 300 dpi");
        } else {
            assert!(!png.exists());
        }
    }
    // The distribution is a percentile plot: its x axis is marked 50, 90, 99 %...
    let percentiles = std::fs::read_to_string(figures.join("point-0-lateness-percentiles.svg")).unwrap();
    for tick in ["50", "90", "99"] {
        assert!(percentiles.contains(&format!(">\n{tick}\n</text>")), "{tick}");
    }
    // ...and every axis names its unit in its title, its ticks plain numbers.
    let mean = std::fs::read_to_string(figures.join("sweep-busy-mean.svg")).unwrap();
    assert!(["(ns", "(µs", "(ms"].iter().any(|unit| mean.contains(&format!("mean lateness {unit}"))), "{mean}");
    assert!(!mean.contains(" µs\n</text>") && !mean.contains(" ns\n</text>"), "{mean}");
}

/// A PNG's width and its pHYs density (pixels per metre).
fn png_size_and_density(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    let width = be(16);
    let mut at = 8;
    while at + 8 <= png.len() {
        let (length, kind) = (be(at) as usize, &png[at + 4..at + 8]);
        if kind == b"pHYs" {
            assert_eq!(png[at + 16], 1, "the unit is the metre");
            return (width, be(at + 8));
        }
        at += 12 + length;
    }
    panic!("no pHYs chunk");
}

#[test]
fn a_seed_repeats_the_order_and_the_order_interleaves() {
    let dir = tempfile::tempdir().unwrap();
    let order = |name: &str| -> Vec<(String, u64)> {
        let folder = dir.path().join(name);
        measure(
            &folder,
            "thread,smol,tokio-ct",
            &["--sweep", "units=1,2", "--seed", "7", "--duration", "60ms", "--warmup", "0"],
        );
        let rec = record(&folder);
        assert_eq!(rec["order"]["seed"], 7);
        rec["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["runtime"].as_str().unwrap().to_string(), r["point"].as_u64().unwrap()))
            .collect()
    };
    let first = order("a");
    assert_eq!(first, order("b"));
    assert_eq!(first.len(), 6);
    let given: Vec<(String, u64)> =
        [0, 1].iter().flat_map(|p| ["thread", "smol", "tokio-ct"].map(|r| (r.to_string(), *p))).collect();
    assert_ne!(first, given, "seed 7 shuffles runtimes and points together");
}

#[test]
fn compare_says_no_change_against_itself_and_reports_a_real_change() {
    let dir = tempfile::tempdir().unwrap();
    let (light, heavy) = (dir.path().join("busy-1000"), dir.path().join("busy-100000"));
    // Two invocations a side (each a results folder of two repetitions): a verdict rests on
    // the variation between invocations. The busy phase is the change: 100 times the
    // arithmetic, whose direction no load on the machine can hide (a sleep's lateness can swing
    // between runs more than any knob moves it). The verdicts themselves are checked against
    // hand-computed tests in analysis::compare.
    let flags =
        ["--sleep", "fixed:500us", "--duration", "300ms", "--warmup", "100ms", "--repeat", "2", "--metric", "busy"];
    for invocation in ["1", "2"] {
        measure(&light.join(invocation), "thread,c-thread", &[&flags[..], &["--busy", "1000"]].concat());
        measure(&heavy.join(invocation), "thread,c-thread", &[&flags[..], &["--busy", "100000"]].concat());
    }
    let (a, b) = (light.to_str().unwrap(), heavy.to_str().unwrap());
    let same = run(&["compare", a, a, "--metric", "all"]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    let table = stdout(&same);
    assert_eq!(table.lines().filter(|l| l.ends_with("no change")).count(), 2 * 4, "every runtime and metric: {table}");
    assert!(table.contains("0 regressed, 0 improved, 8 no change, 0 inconclusive"), "{table}");
    assert!(table.contains("2×2 vs 2×2"), "{table}");

    // Another busy work is another workload: compared when forced, and said. Whether a hundredfold
    // change is significant rests on the variation between three runs, which a loaded machine can
    // widen past any verdict; what cannot move is its direction, and the exit status that follows
    // the verdicts.
    let worse = run(&["compare", a, b, "--force"]);
    let table = stdout(&worse);
    assert!(table.contains("differs (workload): settings.busy.iters 1000 -> 100000"), "{table}");
    let busy_lines: Vec<&str> = table.lines().filter(|l| l.contains(" busy ")).collect();
    assert_eq!(busy_lines.len(), 2, "{table}");
    assert!(busy_lines.iter().all(|l| l.contains(" +") && !l.ends_with("improved")), "{table}");
    let regressed = busy_lines.iter().filter(|l| l.ends_with("regressed")).count();
    assert!(table.contains(&format!("{regressed} regressed, 0 improved")), "{table}");
    assert_eq!(
        worse.status.code(),
        Some(if regressed > 0 { 1 } else { 0 }),
        "exit 1 exactly when something regressed:\n{table}"
    );

    let better = run(&["compare", b, a, "--force"]);
    assert_eq!(better.status.code(), Some(0), "an improvement never fails: {}", stdout(&better));
    assert!(stdout(&better)
        .lines()
        .filter(|l| l.contains(" busy "))
        .all(|l| l.contains(" -") && !l.ends_with("regressed")));

    // A huge threshold turns the same change into "no change".
    let tolerant = run(&["compare", a, b, "--force", "--threshold", "1000000%"]);
    assert_eq!(tolerant.status.code(), Some(0), "{}", stdout(&tolerant));
    assert!(stdout(&tolerant).contains("0 regressed"));
}

#[test]
fn bad_results_and_comparisons_get_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    measure(&good, "smol", &["--duration", "100ms", "--warmup", "0"]);
    let json = std::fs::read_to_string(good.join("run.json")).unwrap();
    let write = |name: &str, content: &str| -> PathBuf {
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("run.json"), content).unwrap();
        folder
    };
    let truncated = write("truncated", &json[..json.len() / 2]);
    let future = write("future", &json.replacen("\"schema_version\": 6", "\"schema_version\": 7", 1));
    let other = write("other", &json.replacen("\"experiment\": \"sleep\"", "\"experiment\": \"volume\"", 1));
    let not_ours = write("not-ours", "{\"hello\": 1}");
    let missing = dir.path().join("missing");
    let g = good.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["report", missing.to_str().unwrap()], "does not exist"),
        (vec!["report", truncated.to_str().unwrap()], "is not valid JSON (truncated?)"),
        (vec!["report", future.to_str().unwrap()], "has schema version 7: it was written by a newer taskmeter than this one (which reads versions 2 to 6); upgrade taskmeter to read it"),
        (vec!["report", not_ours.to_str().unwrap()], "is not a taskmeter record"),
        (vec!["compare", g, missing.to_str().unwrap()], "does not exist"),
        (vec!["compare", g, future.to_str().unwrap()], "schema version 7"),
        (vec!["compare", g, other.to_str().unwrap()], "the two runs measured different things (experiment sleep -> volume): compare them anyway with --force"),
        (vec!["compare", g, g, "--threshold", "lots"], "is not a percentage"),
        (vec!["compare", g, g, "--metric", "speed"], "unknown metric 'speed'"),
        (vec!["compare", g, g, "--alpha", "2"], "not a probability"),
        (vec!["run", "--sweep", "busy="], "has no values"),
        (vec!["run", "--sweep", "colour=1,2"], "unknown sweep parameter 'colour'"),
        (vec!["run", "--sweep", "busy=1", "--sweep", "busy=2"], "'busy' is swept twice"),
        (vec!["run", "--sweep", "modulo=1,2"], "needs a modulo schedule"),
        (vec!["run", "--sweep", "sleep=1ms,10s"], "at point sleep=10s: the longest sleep"),
        (vec!["run", "--sweep", "units=0..10:log10"], "cannot start at 0"),
        (vec!["run", "--order", "given", "--seed", "3"], "--seed only applies to --order shuffled"),
        (vec!["run", "--export-markdown", "/nonexistent/folder/t.md"], "folder /nonexistent/folder does not exist"),
    ];
    assert_refused(&cases);
}

#[test]
fn repetitions_are_interleaved_workers_and_give_intervals_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("repeated");
    let output = measure(&folder, "thread,smol", &["--repeat", "3", "--seed", "7", "--sweep", "busy=0,1000"]);
    let run = record(&folder);
    assert_eq!(run["settings"]["repeat"], 3);
    let rows = run["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2 * 3, "one worker per runtime, point and repetition");
    for runtime in ["thread", "smol"] {
        for point in 0..2 {
            let mut repetitions: Vec<u64> = rows
                .iter()
                .filter(|r| r["runtime"] == runtime && r["point"] == point)
                .map(|r| r["repetition"].as_u64().unwrap())
                .collect();
            repetitions.sort();
            assert_eq!(repetitions, [1, 2, 3], "{runtime} at point {point}");
        }
    }
    // Shuffled: a runtime's three repetitions of a point do not all run back to back.
    let order: Vec<(String, u64)> =
        rows.iter().map(|r| (r["runtime"].as_str().unwrap().to_string(), r["point"].as_u64().unwrap())).collect();
    assert!(order.windows(3).any(|w| w[0] != w[1] || w[1] != w[2]));
    // The settings line and the note wrap at 100 columns: joined again.
    let table = common::unwrapped(&stdout(&output));
    assert!(table.contains("| 3 repetitions"), "{table}");
    assert!(
        table.contains("95 % range") && table.contains("95 % range for another invocation's mean, from 3 repetitions"),
        "{table}"
    );
    // Each runtime has one line per point, whatever the repetitions.
    assert_eq!(table.lines().filter(|l| l.starts_with("thread ")).count(), 2, "{table}");
    // Charts draw error bars from the repetitions.
    let chart = std::fs::read_to_string(folder.join("charts/sweep-busy-mean.svg")).unwrap();
    assert!(chart.matches("<polyline").count() > 2, "lines and error bars");

    // compare tests repetitions against repetitions; against itself nothing changes.
    let f = folder.to_str().unwrap();
    let same = run_compare(&["compare", f, f]);
    assert!(same.contains("1×3 vs 1×3") && same.contains("no change") && same.contains("0 regressed"), "{same}");
}

fn run_compare(args: &[&str]) -> String {
    let output = run(args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn one_repetition_prints_no_interval_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("once");
    let output = measure(&folder, "thread,smol", &[]);
    let table = stdout(&output);
    assert!(table.contains("one repetition: no range"), "{table}");
    let header = table.lines().find(|l| l.starts_with("runtime ")).unwrap();
    assert!(!header.contains("95 % range") && !table.contains(" ± 0."), "no within-run ± anywhere: {table}");
    let run = record(&folder);
    assert_eq!((run["settings"]["repeat"].as_u64(), run["rows"][0]["repetition"].as_u64()), (Some(1), Some(1)));
}

#[test]
fn every_record_kind_loads_through_one_versioned_header() {
    let dir = tempfile::tempdir().unwrap();
    let (bench, net) = (dir.path().join("bench"), dir.path().join("net"));
    let file = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let ran = run(&[
        "bench",
        "--scenario",
        "a=true",
        "--warmup",
        "0",
        "--time",
        "100ms",
        "-o",
        bench.to_str().unwrap(),
        "--export-csv",
        &file("bench.csv"),
        "--export-markdown",
        &file("bench.md"),
    ]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let ran = run(&[
        "run",
        "net",
        "--receivers",
        "thread",
        "--senders",
        "1",
        "--messages",
        "20",
        "-o",
        net.to_str().unwrap(),
        "--export-csv",
        &file("net.csv"),
        "--export-markdown",
        &file("net.md"),
    ]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    // Every exporter works for every record kind.
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert!(
        read("bench.csv").starts_with("scenario,input,ips,")
            && read("bench.csv").lines().nth(1).unwrap().starts_with("a,")
    );
    assert!(read("bench.md").contains("| scenario | input | ips |") && read("bench.md").contains("| a |"));
    assert!(read("net.csv").starts_with("receiver,senders,repetition,") && read("net.csv").contains("\nthread,1,1,"));
    assert!(read("net.md").contains("| receiver | senders |") && read("net.md").contains("| thread | 1 |"));
    let kinds = [(&bench, "bench.json", "taskmeter.bench", 2), (&net, "net.json", "taskmeter.net", 3)];
    for (folder, file, schema, version) in kinds {
        let text = std::fs::read_to_string(folder.join(file)).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (json["schema"].as_str(), json["schema_version"].as_u64(), json["complete"].as_bool()),
            (Some(schema), Some(version), Some(true))
        );
        for key in ["taskmeter_version", "command_line", "started_at", "finished_at", "environment"] {
            assert!(!json[key].is_null(), "{file}: {key}");
        }
        // `report` finds the kind by its header and redraws it.
        std::fs::remove_file(folder.join("report.html")).unwrap();
        let redrawn = run(&["report", folder.to_str().unwrap()]);
        assert!(redrawn.status.success() && folder.join("report.html").is_file(), "{}", stderr(&redrawn));
        let version = format!("\"schema_version\": {version}");
        if schema == "taskmeter.net" {
            // A net.json of version 2 still reads, and says its intervals are of the mean.
            std::fs::write(folder.join(file), text.replacen(&version, "\"schema_version\": 2", 1)).unwrap();
            assert!(run(&["report", folder.to_str().unwrap()]).status.success());
            let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
            assert!(html.contains("Student-t confidence interval of the mean over 3 repetitions"), "{html}");
        }
        std::fs::write(folder.join(file), text.replacen(&version, "\"schema_version\": 9", 1)).unwrap();
    }
    assert_refused(&[
        (
            vec!["report", bench.to_str().unwrap()],
            "has schema version 9: it was written by a newer taskmeter than this one (which reads versions 2 to 2)",
        ),
        (vec!["report", net.to_str().unwrap()], "has schema version 9"),
    ]);
}

/// Runs taskmeter with `args`, which must succeed.
fn run_ok(args: &[&str]) -> Output {
    let ran = run(args);
    assert_eq!(ran.status.code(), Some(0), "{args:?}: {}", stderr(&ran));
    ran
}

/// Writes `record` as `file` in a new folder `name` of `dir`, as a results folder whose record
/// was edited.
fn edited_folder(dir: &Path, name: &str, file: &str, record: &Value) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join(file), serde_json::to_string_pretty(record).unwrap()).unwrap();
    folder
}

/// `taskmeter ARGS` refuses the record in `folder`: exit status 2, exactly `lines` on stderr
/// (each after `taskmeter: `), nothing on stdout, and no report written.
fn assert_refused_lines(args: &[&str], folder: &Path, lines: &[String]) {
    let output = run(args);
    // Each problem one line, wrapped to the width of stderr: joined again.
    let err = common::unwrapped(&stderr(&output));
    assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
    let expected: Vec<String> = lines.iter().map(|l| format!("taskmeter: {l}")).collect();
    assert_eq!(err.lines().collect::<Vec<_>>(), expected, "{args:?}");
    assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
    assert!(!folder.join("report.html").exists() && !folder.join("charts").exists(), "{args:?}: nothing is written");
}

/// Problem lines as `report` and `compare` print them: each names the record file, except the
/// count of those not shown.
fn in_file(folder: &Path, file: &str, problems: &[String]) -> Vec<String> {
    let path = folder.join(file);
    problems
        .iter()
        .map(|p| if p.starts_with("... and ") { p.clone() } else { format!("{}: {p}", path.display()) })
        .collect()
}

#[test]
fn a_run_record_that_does_not_hold_together_is_refused_one_line_per_problem() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    measure(&good, "thread,smol", &["--duration", "100ms", "--warmup", "0"]);
    let g = good.to_str().unwrap();
    // What taskmeter wrote holds together: report and compare take it.
    std::fs::remove_file(good.join("report.html")).unwrap();
    let redrawn = run(&["report", g]);
    assert!(redrawn.status.success() && good.join("report.html").is_file(), "{}", stderr(&redrawn));
    let same = run(&["compare", g, g]);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));

    let original = record(&good);
    let runtime = |i: usize| original["rows"][i]["runtime"].as_str().unwrap().to_string();
    let (first, second) = (runtime(0), runtime(1));
    let measured = original["rows"][0]["counts"]["samples_measured"].as_u64().unwrap();
    assert!(measured > 0);
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut copy = original.clone();
        edit(&mut copy);
        copy
    };
    fn rows(record: &mut Value) -> &mut Vec<Value> {
        record["rows"].as_array_mut().unwrap()
    }
    // A file that claims a billion repetitions: the first ten missing rows, and a count.
    let mut billion: Vec<String> = (2..=6)
        .flat_map(|repetition| {
            ["thread", "smol"].map(|r| format!("{r} at point 0, repetition {repetition} has no row"))
        })
        .collect();
    billion.push("... and 91 more".into());
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        (
            "missing-point",
            edited(&|r| r["rows"][0]["point"] = 5.into()),
            vec![format!("row 0 ({first}, point 5, repetition 1): there is no point 5 (the record has 1)"), format!("{first} at point 0, repetition 1 has no row")],
        ),
        (
            "duplicated-row",
            edited(&|r| {
                let row = r["rows"][0].clone();
                rows(r).extend([row.clone(), row]);
            }),
            vec![format!("{first} at point 0, repetition 1 has 3 rows (rows 0, 2 and 3)")],
        ),
        (
            "missing-row",
            edited(&|r| {
                rows(r).remove(1);
            }),
            vec![format!("{second} at point 0, repetition 1 has no row")],
        ),
        (
            "counts-disagree",
            edited(&|r| r["rows"][0]["statistics"]["lateness"]["count"] = (measured - 1).into()),
            vec![format!("row 0 ({first}, point 0, repetition 1): statistics.lateness.count is {}, but counts.samples_measured is {measured}", measured - 1)],
        ),
        ("billion-repetitions", edited(&|r| r["settings"]["repeat"] = 1_000_000_000.into()), billion),
    ];
    for (name, value, problems) in &cases {
        let bad = edited_folder(dir.path(), name, "run.json", value);
        let lines = in_file(&bad, "run.json", problems);
        let b = bad.to_str().unwrap();
        for args in [vec!["report", b], vec!["compare", g, b], vec!["compare", b, g]] {
            assert_refused_lines(&args, &bad, &lines);
        }
    }

    // A record from a newer (or an older) format says which, in one line.
    let newer = edited_folder(dir.path(), "newer", "run.json", &edited(&|r| r["schema_version"] = 7.into()));
    let older = edited_folder(dir.path(), "older", "run.json", &edited(&|r| r["schema_version"] = 1.into()));
    let newer_line = format!(
        "{} has schema version 7: it was written by a newer taskmeter than this one (which reads versions 2 to 6); upgrade taskmeter to read it",
        newer.join("run.json").display()
    );
    let older_line = format!(
        "{} has schema version 1: it is older than this taskmeter reads (versions 2 to 6); read it with the taskmeter that wrote it, or measure again",
        older.join("run.json").display()
    );
    let (n, o) = (newer.to_str().unwrap(), older.to_str().unwrap());
    assert_refused_lines(&["report", n], &newer, std::slice::from_ref(&newer_line));
    assert_refused_lines(&["compare", g, n], &newer, std::slice::from_ref(&newer_line));
    assert_refused_lines(&["report", o], &older, std::slice::from_ref(&older_line));
    assert_refused_lines(&["compare", o, g], &older, std::slice::from_ref(&older_line));
}

#[test]
fn net_granularity_and_bench_records_with_a_duplicated_entry_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (net, grain, bench) = (folder("net"), folder("granularity"), folder("bench"));
    for args in [
        vec!["run", "net", "--receivers", "thread", "--senders", "1", "--messages", "100", "--repeat", "1", "-o", &net],
        vec![
            "run",
            "granularity",
            "--runtimes",
            "smol",
            "--quick",
            "--task-busy",
            "100us,10us",
            "--steps",
            "2",
            "--repeat",
            "1",
            "-o",
            &grain,
        ],
        vec!["bench", "--scenario", "a=true", "--warmup", "0", "--time", "100ms", "-o", &bench],
    ] {
        run_ok(&args);
    }
    let cases = [
        (
            &net,
            "net.json",
            "points",
            vec![
                "thread with 1 sender, repetition 1 has 2 points (points 0 and 1)".to_string(),
                "the summary of thread with 1 sender: repetitions is 1, but 2 of its points measured a throughput"
                    .to_string(),
            ],
        ),
        (
            &grain,
            "granularity.json",
            "runs",
            vec![
                "smol repetition 1 has 2 runs (runs 0 and 1)".to_string(),
                "the summary of smol: repetitions is 1, but 2 of its runs measured every grain".to_string(),
            ],
        ),
        (&bench, "bench.json", "results", vec!["scenario a has 2 results (results 0 and 1)".to_string()]),
    ];
    for (good, file, entries, problems) in cases {
        // What taskmeter wrote holds together.
        let good = Path::new(good);
        std::fs::remove_file(good.join("report.html")).unwrap();
        let redrawn = run(&["report", good.to_str().unwrap()]);
        assert!(redrawn.status.success() && good.join("report.html").is_file(), "{file}: {}", stderr(&redrawn));

        let mut value: Value = serde_json::from_str(&std::fs::read_to_string(good.join(file)).unwrap()).unwrap();
        let list = if entries == "results" { &mut value["report"]["results"] } else { &mut value[entries] };
        let list = list.as_array_mut().unwrap();
        assert_eq!(list.len(), 1, "{file}");
        list.push(list[0].clone());
        let bad = edited_folder(dir.path(), &format!("duplicated-{file}"), file, &value);
        let b = bad.to_str().unwrap();
        let lines = in_file(&bad, file, &problems);
        // compare checks a record before it asks whether it can compare that kind.
        for args in [vec!["report", b], vec!["compare", b, b]] {
            assert_refused_lines(&args, &bad, &lines);
        }
    }
}

#[test]
fn compare_needs_runs_to_judge_refuses_another_workload_and_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    let flags = ["--duration", "200ms", "--warmup", "50ms"];
    measure(&a, "thread", &flags);
    measure(&b, "thread", &flags);
    measure(&c, "thread", &[&flags[..], &["--busy", "1300"]].concat());
    let (a, b, c) = (a.to_str().unwrap(), b.to_str().unwrap(), c.to_str().unwrap());
    // One run a side: nothing says how much two runs differ when nothing changed.
    let once = run(&["compare", a, b]);
    assert_eq!(once.status.code(), Some(0), "{}", stderr(&once));
    let table = stdout(&once);
    assert!(table.contains("1×1 vs 1×1") && table.lines().any(|l| l.ends_with("inconclusive")), "{table}");
    assert!(table.contains("a verdict needs a measure of the noise: 2 or more results folders a side"), "{table}");
    // Another busy work is another measurement: refused, unless forced.
    assert_refused(&[(vec!["compare", a, c], "measured different things (settings.busy.iters 1000 -> 1300)")]);
    let forced = run(&["compare", a, c, "--force"]);
    assert_eq!(forced.status.code(), Some(0));
    assert!(stdout(&forced).contains("differs (workload): settings.busy.iters 1000 -> 1300"), "{}", stdout(&forced));
    // The same as JSON, in a stable schema.
    let json = run(&["compare", a, b, "--format", "json"]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON and nothing else");
    assert_eq!(
        (value["schema"].as_str(), value["schema_version"].as_u64(), value["kind"].as_str()),
        (Some("taskmeter.compare"), Some(3), Some("run"))
    );
    let line = &value["lines"][0];
    assert_eq!(line["subject"]["runtime"], "thread");
    assert_eq!(
        (
            line["verdict"].as_str(),
            line["old_invocations"].as_u64(),
            line["p_value"].is_null(),
            line["p_adjusted"].is_null()
        ),
        (Some("inconclusive"), Some(1), true, true)
    );
    assert_eq!(value["counts"]["inconclusive"], 1);
}

#[test]
fn compare_judges_net_granularity_and_bench_between_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    for side in ["net-a", "net-b"] {
        let out = run(&[
            "run",
            "net",
            "--receivers",
            "thread",
            "--senders",
            "1,2",
            "--messages",
            "400",
            "--repeat",
            "2",
            "-o",
            path(side).to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let net = run(&["compare", path("net-a").to_str().unwrap(), path("net-b").to_str().unwrap()]);
    assert!(net.status.code().is_some_and(|c| c <= 1), "{}", stderr(&net));
    let table = stdout(&net);
    assert_eq!(
        table.lines().filter(|l| l.starts_with("thread ") && l.contains("msg/s") && l.contains("1×2 vs 1×2")).count(),
        2,
        "{table}"
    );

    for side in ["grain-a", "grain-b"] {
        let out = run(&[
            "run",
            "granularity",
            "--runtimes",
            "smol",
            "--quick",
            "--repeat",
            "2",
            "-o",
            path(side).to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let grain = run(&["compare", path("grain-a").to_str().unwrap(), path("grain-b").to_str().unwrap()]);
    let table = stdout(&grain);
    if grain.status.code() == Some(2) {
        // A loaded machine can leave --quick's few task sizes all invalid, or all on one side of
        // 50 %: nothing to judge, and the error says why (one line, however stderr wrapped it).
        let why = common::unwrapped(&stderr(&grain));
        assert!(
            why.contains("smol METG(50 %): no run has a METG") || why.contains("smol METG(50 %): METG is a bound"),
            "{why}"
        );
    } else {
        assert!(matches!(grain.status.code(), Some(0 | 1)), "{}", stderr(&grain));
        assert!(table.contains("METG(50 %)"), "{table}");
    }

    // bench has no repetitions: a folder of results folders is a set of runs. Each measures
    // for 2 s: on a loaded machine Python's start takes a large share of a shorter window, and
    // a run of fewer than two units has no gap to compare.
    for side in ["bench-a", "bench-b"] {
        for n in 0..2 {
            let out = taskmeter()
                .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
                .args([
                    "bench",
                    "--scenario",
                    "nap=python3 clients/python/examples/sleeper.py 20",
                    "--warmup",
                    "0",
                    "--time",
                    "2s",
                    "-o",
                ])
                .arg(path(side).join(format!("run-{n}")))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
    }
    let bench = run(&["compare", path("bench-a").to_str().unwrap(), path("bench-b").to_str().unwrap()]);
    let table = stdout(&bench);
    assert!(bench.status.code().is_some_and(|c| c <= 1), "{}", stderr(&bench));
    assert!(
        table.lines().any(|l| l.starts_with("nap ") && l.contains("mean gap") && l.contains("2×1 vs 2×1")),
        "{table}"
    );
    assert!(table.contains("2 results folders"), "{table}");
}

#[test]
fn every_kind_gets_a_page_of_tables_figures_settings_and_warnings_on_top() {
    let dir = tempfile::tempdir().unwrap();
    let folder = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    // The C client's sleeper completes a unit every N ms: every 60 ms gives a handful in the
    // window, and a warning.
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/c");
    let made = Command::new("make").arg("-s").arg("-C").arg(&clients).output().expect("make runs");
    assert!(made.status.success(), "{}", stderr(&made));
    let scenario = |name: &str, ms: u32| format!("{name}='{}' {ms}", clients.join("build/sleeper").display());
    let (net, grain, bench, sleep) = (folder("net"), folder("granularity"), folder("bench"), folder("sleep"));
    let (slow, fast) = (scenario("slow", 60), scenario("fast", 2));
    for args in [
        vec!["run", "net", "--receivers", "thread,tokio-mt", "--senders", "1,2", "--messages", "100", "-o", &net],
        vec![
            "run",
            "granularity",
            "--runtimes",
            "smol,thread",
            "--quick",
            "--task-busy",
            "100us,10us",
            "--steps",
            "2",
            "-o",
            &grain,
        ],
        vec![
            "bench",
            "--scenario",
            &slow,
            "--scenario",
            &fast,
            "--warmup",
            "100ms",
            "--duration",
            "500ms",
            "-o",
            &bench,
        ],
        vec!["run", "--runtimes", "thread,smol", "--duration", "300ms", "--warmup", "50ms", "-o", &sleep],
    ] {
        let ran = run_ok(&args);
        if args[0] == "bench" {
            assert!(stderr(&ran).contains("taskmeter: warning: slow: only"), "the console warns too: {}", stderr(&ran));
            assert!(!stdout(&ran).contains("warning:"), "warnings on stderr, the table on stdout: {}", stdout(&ran));
        }
    }
    for (kind, dir) in [("net", &net), ("granularity", &grain), ("bench", &bench), ("run", &sleep)] {
        let page = std::fs::read_to_string(Path::new(dir).join("report.html")).unwrap();
        assert!(page.contains("<table class=\"results\">"), "{kind}: its tables are tables");
        assert!(!page.contains("<pre class=\"results\">"), "{kind}: no text dump");
        assert!(page.contains("<figure class=\"chart\""), "{kind}: its figures are inline");
        assert!(page.contains("<dl class=\"settings\">") && page.contains("<dl class=\"environment\">"), "{kind}");
        assert!(!page.contains("> ?<") && !page.contains("-> ?"), "{kind}: nothing unknown is shown as ?");
        if let Some(warnings) = page.find("id=\"warnings\"") {
            assert!(warnings < page.find("id=\"settings\"").unwrap(), "{kind}: warnings come first");
        }
    }
    let page = std::fs::read_to_string(Path::new(&bench).join("report.html")).unwrap();
    let warnings = page.find("id=\"warnings\"").expect("a scenario with a few units is flagged");
    let few = page.find("slow: only").expect("the slow scenario is named");
    assert!(warnings < few && few < page.find("<table").unwrap(), "the warning is at the top");
    assert!(
        page.contains("--scenario &#x27;slow=") || page.contains("--scenario 'slow="),
        "the command keeps its quotes"
    );
    assert!(Path::new(&bench).join("charts/gap.svg").is_file());
    assert!(Path::new(&grain).join("charts/efficiency.svg").is_file());
}
